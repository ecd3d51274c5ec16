"""Closed or full standard streams, and text safety on the terminal (issue 16, classes 5 and 6),
as real processes.

Standard output on /dev/full or closed (``>&-``): one line on stderr, exit 1. The reader of a
pipe leaving (``| head``): exit 0, no BrokenPipeError. Names from files and the command line
are shown escaped (control characters, ESC, bidi controls) by one function,
gpuscope.textsafe.safe_text. An ASCII terminal (``LC_ALL=C``, ``PYTHONIOENCODING=ascii``) gets
ASCII spellings instead of a UnicodeEncodeError. ``--redact`` removes the host name in any
letter case and inside identifiers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.roofline import h200_results
from support.samples import make_sample

from gpuscope.telemetry.logfile import open_log_writer
from gpuscope.textsafe import safe_text

REPO = Path(__file__).resolve().parent.parent
RAW_UNSAFE = set("\x1b\x07\x00\r\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("GPUSCOPE_FAKE_NVML", None)
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("streams")
    (folder / "a.json").write_text(json.dumps(h200_results()))
    other = h200_results()
    other["workloads"][0]["time_s"] *= 2
    (folder / "b.json").write_text(json.dumps(other))
    evil = h200_results()
    evil["workloads"][0]["name"] = "evil\u202e\x1b]0;pwned\x07\x1b[2J\nsecond line\u2066x\u2069"
    evil["devices"][0]["name"] = "GPU\x1b[31m\u202eRED"
    evil["system"]["hostname"] = "zz-secret-77"
    (folder / "evil.json").write_text(json.dumps(evil))
    with open_log_writer(folder / "run.jsonl") as writer:
        for tick in range(3):
            writer.write(make_sample(tick, gpus=1, cores=2))
    return folder


COMMANDS = {
    "roofline": ["roofline", "--probes", "a.json", "--no-color", "--width", "100"],
    "roofline-json": ["roofline", "--probes", "a.json", "--json"],
    "compare": ["compare", "a.json", "b.json"],
    "compare-json": ["compare", "a.json", "b.json", "--format", "json"],
    "doctor": ["doctor", "--no-torch"],
    "report-stdout": ["report", "--probes", "a.json", "--format", "md", "-o", "-"],
    "replay-help": ["replay", "--help"],
}


def _run(argv: list[str], cwd: Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuscope", *argv], text=True, timeout=90, env=_env(), cwd=cwd, **kwargs
    )  # type: ignore[call-overload]


@pytest.mark.parametrize("name", [name for name in COMMANDS if name != "replay-help"])
def test_stdout_on_dev_full_is_one_line_and_exit_1(work: Path, name: str) -> None:
    with open("/dev/full", "w") as full:
        result = _run(COMMANDS[name], work, stdout=full, stderr=subprocess.PIPE)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, result.stderr
    assert lines == ["gpuscope: error: cannot write standard output: No space left on device"], result.stderr


@pytest.mark.parametrize("name", [name for name in COMMANDS if name != "replay-help"])
def test_closed_stdout_is_one_line_and_exit_1(work: Path, name: str) -> None:
    """``gpuscope ... >&-``: the first write fails; nothing is written to a file that happens to
    get file descriptor 1."""
    command = " ".join(["exec", sys.executable, "-m", "gpuscope", *COMMANDS[name], ">&-"])
    result = subprocess.run(["sh", "-c", command], stderr=subprocess.PIPE, text=True, timeout=90, env=_env(), cwd=work)
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines() == [
        "gpuscope: error: cannot write standard output: standard output is closed"
    ]


@pytest.mark.parametrize("name", [*COMMANDS, "log"])
def test_reader_leaving_the_pipe_is_a_clean_exit(work: Path, name: str) -> None:
    """``| head`` with the reader already gone: exit 0, no BrokenPipeError, nothing on stderr
    but gpuscope's own lines."""
    argv = COMMANDS.get(name, ["log", "--no-gpu", "--interval", "0.1", "--duration", "0.5"])
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuscope", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=work,
    )
    assert process.stdout is not None
    process.stdout.close()  # the reader left before the first byte
    _, stderr = process.communicate(timeout=90)
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr and "Exception ignored" not in stderr
    assert all(line.startswith("gpuscope: ") for line in stderr.splitlines()), stderr


@pytest.mark.parametrize(
    "env", [{"LC_ALL": "C", "LANG": "C"}, {"PYTHONIOENCODING": "ascii"}], ids=["LC_ALL=C", "PYTHONIOENCODING=ascii"]
)
@pytest.mark.parametrize("name", ["roofline", "compare", "doctor", "report-stdout"])
def test_ascii_terminal_gets_ascii_fallbacks(work: Path, name: str, env: dict[str, str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gpuscope", *COMMANDS[name]], capture_output=True, timeout=90, env=_env(**env), cwd=work
    )
    assert result.returncode in (0, 3 if name == "doctor" else 0), result.stderr
    assert b"Traceback" not in result.stderr and b"UnicodeEncodeError" not in result.stderr
    result.stdout.decode("ascii")  # pure ASCII: "·" became "." and "µ" became "u"
    if name == "roofline":
        assert b" . " in result.stdout


def test_names_from_a_results_file_reach_the_terminal_escaped(work: Path) -> None:
    """roofline and compare print device and workload names with ESC, BEL, newline and bidi
    controls as escapes: nothing raw reaches the terminal, nothing splits a table row."""
    for argv in (
        ["roofline", "--probes", "evil.json", "--no-color", "--width", "120"],
        ["compare", "evil.json", "b.json"],
    ):
        result = _run(argv, work, capture_output=True)
        assert result.returncode == 0, result.stderr
        assert not set(result.stdout) & RAW_UNSAFE, [c for c in result.stdout if c in RAW_UNSAFE]
        assert not set(result.stderr) & RAW_UNSAFE
        assert "second line" not in result.stdout.splitlines()[0:1]
    roofline = _run(
        ["roofline", "--probes", "evil.json", "--no-color", "--width", "120"], work, capture_output=True
    ).stdout
    assert "\\x1b]0;pwned\\x07" in roofline and "\\u202e" in roofline


@pytest.mark.parametrize(
    "text",
    [
        "a\nb",
        "\x1b]0;title\x07",
        "\x1b[2J",
        "abc\u202edef",
        "\u2066x\u2069",
        "\u200f",
        "nul\x00",
        "del\x7f",
        "c1\x9b31m",
        "\udc80",
    ],
)
def test_safe_text_escapes_every_unsafe_character(text: str) -> None:
    shown = safe_text(text)
    assert not set(shown) & (RAW_UNSAFE | {"\n", "\x7f", "\x9b", "\u200f", "\udc80"})
    assert shown.isprintable()
    assert safe_text(shown) == shown  # escaping is stable: nothing left to escape


def test_error_messages_escape_names(work: Path) -> None:
    name = "bad\nname\x1b]0;x\x07\u202e.json"
    result = _run(["roofline", "--probes", name], work, capture_output=True)
    assert result.returncode == 3
    assert result.stderr.splitlines() == [f"gpuscope: error: {safe_text(name)}: no such file"]


def test_redact_removes_the_hostname_in_any_case_and_inside_identifiers(tmp_path: Path) -> None:
    from gpuscope.report import make_report

    doc = h200_results()
    doc["system"]["hostname"] = "zz-secret-77"
    doc["workloads"][0]["name"] = "bench_zz-secret-77"
    doc["workloads"][1]["name"] = "ZZ-SECRET-77 nightly"
    doc["devices"][0]["host"] = "Zz-Secret-77"
    doc["warnings"] = [
        "copied from /data/zz-secret-77.local/run1",
        "ran on ZZ-SECRET-77:29500",
        "zz-secret-777 is another host",
    ]
    text = json.dumps(make_report([doc], redact=True))
    assert 'secret-77"' not in text.lower() and "zz-secret-77_" not in text.lower()
    lowered = text.lower().replace("zz-secret-777", "")
    assert "zz-secret-77" not in lowered, [part for part in lowered.split('"') if "zz-secret-77" in part]
    assert "zz-secret-777" in text  # a longer name is another host: left alone
