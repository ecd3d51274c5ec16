"""Outputs that must not destroy what they replace (issue 16, class 3), as real processes.

``-o``/``--output`` of report, compare, probe, measure and log: ``-`` is standard output; a FIFO,
a character device, a symlink to either (except for log, which writes streams) and the command's
own input files (same inode, through any name) are refused with one line (exit 2) and left
exactly as they were; an existing file keeps its permission bits; a legal 250-byte file name
can be written (the temporary name fits the name limit); a symlink to a regular file stays a
symlink and its target gets the content.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.roofline import h200_results
from support.samples import make_sample

from gpuscope.telemetry.logfile import open_log_writer

REPO = Path(__file__).resolve().parent.parent
FAST_SUITE = (
    '[suite]\nname = "tiny"\nsamples = 2\ntarget_sample_s = 0.001\nwarmup_max_s = 0.01\ncontention_retries = 0\n\n'
    '[[probe]]\nkind = "matmul"\nlibraries = ["numpy"]\ndtypes = ["fp32"]\nshapes = [[16, 16, 16]]\n'
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("GPUSCOPE_FAKE_NVML", None)
    return env


def gpuscope(argv: list[str], cwd: Path, timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuscope", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("gpuscope: error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "a.json").write_text(json.dumps(h200_results()))
    other = h200_results()
    other["workloads"][0]["time_s"] *= 2
    (tmp_path / "b.json").write_text(json.dumps(other))
    with open_log_writer(tmp_path / "run.jsonl") as writer:
        for tick in range(3):
            writer.write(make_sample(tick, gpus=1, cores=2))
    (tmp_path / "suite.toml").write_text(FAST_SUITE)
    return tmp_path


@dataclass
class Target:
    """How to make the --output target: ``fifo``, ``symlink-devnull``, ``devnull``, ``input``,
    ``hardlink-input``, ``symlink-input``."""

    kind: str
    fragment: str
    needs: list[str] = field(default_factory=list)


COMMANDS: dict[str, list[str]] = {
    "report": ["report", "--probes", "a.json", "--log", "run.jsonl", "--format", "md", "--force", "-o", "{out}"],
    "compare": ["compare", "a.json", "b.json", "-o", "{out}"],
    "probe": ["probe", "--suite", "suite.toml", "--no-telemetry", "--quiet", "--force", "-o", "{out}"],
    "measure": [
        "measure",
        "os:getpid",
        "--flops",
        "1",
        "--bytes",
        "1",
        "--max-time",
        "0.05",
        "--samples",
        "3",
        "-o",
        "{out}",
    ],
    "log": ["log", "--no-gpu", "--interval", "0.1", "--duration", "0.3", "-o", "{out}"],
}
#: what each command reads, so "its own input" has a meaning
INPUTS = {"report": "a.json", "compare": "b.json", "probe": "suite.toml", "log": None, "measure": None}


def _make(work: Path, kind: str, command: str) -> Path:
    out = work / "out.target"
    if kind == "fifo":
        os.mkfifo(out)
    elif kind == "symlink-fifo":
        os.mkfifo(work / "pipe")
        out.symlink_to(work / "pipe")
    elif kind == "symlink-devnull":
        out.symlink_to("/dev/null")
    elif kind == "devnull":
        return Path("/dev/null")
    elif kind == "input":
        return work / INPUTS[command]
    elif kind == "hardlink-input":
        os.link(work / INPUTS[command], out)
    elif kind == "symlink-input":
        out.symlink_to(work / INPUTS[command])
    return out


def _snapshot(path: Path) -> tuple[int, bytes | None, str | None]:
    info = os.lstat(path)
    content = path.read_bytes() if stat.S_ISREG(info.st_mode) else None
    link = os.readlink(path) if stat.S_ISLNK(info.st_mode) else None
    return (stat.S_IFMT(info.st_mode), content, link)


CASES = []
for name in COMMANDS:
    for kind in ("fifo", "symlink-fifo", "symlink-devnull", "devnull"):
        if name != "log":  # a log is a stream: written into a FIFO or device (test_hostile_logfiles.py)
            CASES.append(pytest.param(name, kind, id=f"{name}-{kind}"))
    if INPUTS[name]:
        for kind in ("input", "hardlink-input", "symlink-input"):
            CASES.append(pytest.param(name, kind, id=f"{name}-{kind}"))


@pytest.mark.parametrize(("command", "kind"), CASES)
def test_special_or_input_outputs_are_refused_and_kept(work: Path, command: str, kind: str) -> None:
    """A FIFO, /dev/null, a symlink to either, or the command's own input (by any name) as
    ``-o``: one line, exit 2, and the target is exactly what it was (type, content, link)."""
    target = _make(work, kind, command)
    before = _snapshot(target)
    inputs_before = {
        path.name: path.read_bytes() for path in work.iterdir() if path.is_file() and not path.is_symlink()
    }
    result = gpuscope([arg.replace("{out}", str(target)) for arg in COMMANDS[command]], cwd=work)
    line = _one_error_line(result)
    assert result.returncode == 2, result.stderr
    if kind in ("input", "hardlink-input", "symlink-input"):
        assert "is also an input of this command" in line
    else:
        assert "gpuscope writes regular files only" in line and ("FIFO" in line or "character device" in line)
    assert _snapshot(target) == before
    assert {
        path.name: path.read_bytes() for path in work.iterdir() if path.is_file() and not path.is_symlink()
    } == inputs_before
    assert not [path.name for path in work.iterdir() if path.name.startswith(".")]


@pytest.mark.parametrize("command", ["report", "compare", "log", "probe"])
def test_dash_is_standard_output(work: Path, command: str) -> None:
    """``-o -`` writes to standard output and creates no file named ``-``."""
    result = gpuscope([arg.replace("{out}", "-") for arg in COMMANDS[command]], cwd=work)
    assert result.returncode == 0, result.stderr
    assert not (work / "-").exists()
    if command == "probe":
        assert json.loads(result.stdout)["schema"] == "gpuscope.results"  # one document, the summary on stderr
    elif command == "log":
        assert json.loads(result.stdout.splitlines()[0])["schema_version"] == 1
    else:
        assert result.stdout.strip()


@pytest.mark.parametrize("command", ["report", "compare", "probe", "measure", "log"])
def test_existing_file_keeps_its_mode(work: Path, command: str) -> None:
    """An existing 0600 output is still 0600 after it is rewritten (never widened to 0644)."""
    out = work / ("out.json" if command in ("probe", "measure") else "out.txt")
    if command in ("probe", "measure"):
        out.write_text(json.dumps(h200_results()))
    else:
        out.write_text("old\n")
    os.chmod(out, 0o600)
    argv = [arg.replace("{out}", str(out)) for arg in COMMANDS[command]]
    if command == "log":
        argv.append("--force")  # log, report and probe refuse to replace an existing file without it
    result = gpuscope(argv, cwd=work)
    assert result.returncode == 0, result.stderr
    assert out.read_text() != "old\n"
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600


@pytest.mark.parametrize("command", ["report", "compare", "measure", "log"])
def test_a_250_byte_file_name_can_be_written(work: Path, command: str) -> None:
    """The longest legal names work: the temporary name (and the lock) fit NAME_MAX."""
    suffix = ".json" if command == "measure" else ".md"
    out = work / ("r" * (250 - len(suffix)) + suffix)
    result = gpuscope([arg.replace("{out}", out.name) for arg in COMMANDS[command]], cwd=work)
    assert result.returncode == 0, result.stderr
    assert out.stat().st_size > 0
    assert not [path.name for path in work.iterdir() if path.name.startswith(".")]


def test_symlink_to_a_regular_file_stays_a_symlink(work: Path) -> None:
    real = work / "real.md"
    real.write_text("old\n")
    link = work / "link.md"
    link.symlink_to(real)
    result = gpuscope(["compare", "a.json", "b.json", "--format", "md", "-o", str(link)], cwd=work)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text().startswith("#") or "|" in real.read_text()


def test_library_writer_refuses_devices_and_fits_long_names(tmp_path: Path) -> None:
    """gpuscope.fileio directly: /dev/null and a FIFO are refused (UsageError), a 255-byte name
    (the limit itself) is written, ``-`` goes to standard output."""
    from gpuscope.errors import UsageError
    from gpuscope.fileio import write_text_atomic

    with pytest.raises(UsageError, match="character device"):
        write_text_atomic("/dev/null", "x")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UsageError, match="FIFO"):
        write_text_atomic(tmp_path / "fifo", "x")
    longest = tmp_path / ("é" * 127 + "x")  # 255 bytes in UTF-8: multibyte names are cut by bytes
    write_text_atomic(longest, "ok\n")
    assert longest.read_text() == "ok\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(["fifo", longest.name])
