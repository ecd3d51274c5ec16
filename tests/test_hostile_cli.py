"""Hostile command lines, as real processes: every command given bad files and out-of-range
options exits with the documented code (README: 2 usage, 3 bad input, 4 missing resource, 1
failed run), prints exactly one line on stderr (``gpuscope: error: ...`` naming the option, file,
field or line), no traceback, and leaves no output looking complete: outputs that existed keep
their previous content, new ones are not created, and no temporary files are left behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.roofline import h200_results
from support.samples import make_sample

from gpuscope.telemetry.logfile import open_log_writer

REPO = Path(__file__).resolve().parent.parent
PREVIOUS = "previous content, must survive\n"
DEEP = 100_000


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONSTARTUP", None)
    env.pop("GPUSCOPE_FAKE_NVML", None)
    env.update(extra)
    return env


def gpuscope(argv: list[str], cwd: Path, timeout: float = 60.0, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuscope", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(**env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder of good and bad inputs shared by every case (cases never modify them)."""
    folder = tmp_path_factory.mktemp("inputs")
    (folder / "good.json").write_text(json.dumps(h200_results()))
    with open_log_writer(folder / "good.jsonl", "jsonl") as writer:
        for tick in range(5):
            writer.write(make_sample(tick, gpus=1, cores=2))
    (folder / "empty.json").write_bytes(b"")
    (folder / "binary.json").write_bytes(bytes(range(256)) * 4)
    (folder / "truncated.json").write_text(json.dumps(h200_results())[:300])
    (folder / "deep.json").write_bytes(b"[" * DEEP + b"]" * DEEP)
    doc = h200_results()
    doc["schema_version"] = 7
    (folder / "v7.json").write_text(json.dumps(doc))
    doc = h200_results()
    doc["ceilings"][1]["value"] = "fast"
    (folder / "wrongtype.json").write_text(json.dumps(doc))
    with open(folder / "huge.json", "wb") as handle:
        handle.truncate(1024 * 1024 * 1024)  # sparse: past every JSON kind's limit
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "binary.jsonl").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    (folder / "deep.jsonl").write_bytes(b'{"schema_version":1,"timestamp":1,"x":' + b"[" * DEEP + b"]" * DEEP + b"}\n")
    good = (folder / "good.jsonl").read_text().splitlines()
    (folder / "garbage3.jsonl").write_text(good[0] + "\n" + good[1] + "\nnot json\n" + good[2] + "\n")
    (folder / "v9.jsonl").write_text(good[0].replace('"schema_version":1', '"schema_version":9', 1) + "\n")
    (folder / "wrongtype.jsonl").write_text(good[0].replace('"timestamp":', '"timestamp":"noon","was":', 1) + "\n")
    with open(folder / "hugeline.jsonl", "wb") as handle:
        handle.truncate(40 * 1024 * 1024)  # one 40 MB line of NULs, sparse
    (folder / "empty.toml").write_bytes(b"")
    (folder / "binary.toml").write_bytes(bytes(range(256)))
    (folder / "truncated.toml").write_text('[suite]\nname = "x')
    (folder / "wrongtype.toml").write_text("[suite]\nname = 5\n[[probe]]\nkind = {}\n")
    (folder / "deep.toml").write_bytes(b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n")
    (folder / "payload.toml").write_text(
        "[suite]\nname = \"__import__('os').system('touch PWNED')\"\n[[probe]]\nkind = \"exec('x')\"\n"
    )
    (folder / "adir").mkdir()
    for suffix in ("json", "toml", "jsonl"):  # issue 16 class 2: 2 GB sparse files (no disk used)
        with open(folder / f"sparse2g.{suffix}", "wb") as handle:
            handle.truncate(2 * 1024**3)
    (folder / "empty\n\x1b[2J\u202e.json").write_bytes(b"")  # issue 16 class 6: a hostile file name
    return folder


@dataclass
class Case:
    argv: list[str]
    code: int
    fragment: str
    #: outputs (relative to the case folder) that exist with PREVIOUS before the run and must keep it
    kept: list[str] = field(default_factory=list)
    #: outputs that must not exist after the run
    absent: list[str] = field(default_factory=list)
    xfail: str | None = None
    timeout: float = 60.0
    #: more text the error line must contain (e.g. the name of the bad file)
    mentions: list[str] = field(default_factory=list)


RESULTS_FILES = [
    ("empty.json", "file is empty"),
    ("binary.json", "not UTF-8"),
    ("truncated.json", "invalid JSON"),
    ("deep.json", "expected `object`, got `array`"),  # the typed decoder checks the top level first
    ("v7.json", "schema_version 7 is not supported"),
    ("wrongtype.json", "$.ceilings[1].value"),
    ("huge.json", "too large"),
    ("missing.json", "no such file"),
    ("adir", "is a directory"),
]
LOG_FILES = [
    ("empty.jsonl", "empty telemetry log"),
    ("binary.jsonl", ":1: not a gpuscope telemetry log"),
    ("deep.jsonl", ":1: not a JSON object (nested too deeply)"),
    ("garbage3.jsonl", ":3: not a JSON object"),
    ("v9.jsonl", ":1: schema_version 9 is not supported"),
    ("wrongtype.jsonl", ":1: not a gpuscope telemetry record (expected `float`, got `str` - at `$.timestamp`"),
    ("hugeline.jsonl", ":1: line longer than"),
    ("missing.jsonl", "cannot read telemetry log"),
]
SUITE_FILES = [
    ("empty.toml", "file is empty"),
    ("binary.toml", "not UTF-8"),
    ("truncated.toml", "invalid TOML"),
    ("wrongtype.toml", "wrongtype.toml:2"),
    ("payload.toml", "payload.toml"),
    ("missing.toml", "no such suite file"),
]

CASES: dict[str, Case] = {}
for name, fragment in RESULTS_FILES:
    CASES[f"roofline-{name}"] = Case(
        ["roofline", "--probes", "{in}/good.json", f"{{in}}/{name}"], 3, fragment, mentions=[name]
    )
    CASES[f"report-probes-{name}"] = Case(
        ["report", "--probes", f"{{in}}/{name}", "-o", "out.html"], 3, fragment, kept=["out.html"], mentions=[name]
    )
    CASES[f"compare-{name}"] = Case(
        ["compare", "{in}/good.json", f"{{in}}/{name}", "-o", "cmp.md"], 3, fragment, kept=["cmp.md"], mentions=[name]
    )
    if name in ("empty.json", "deep.json", "v7.json"):  # measure imports torch: a few suffice
        CASES[f"measure-output-{name}"] = Case(
            [
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
                f"{{in}}/{name}",
            ],
            3,
            fragment,
            mentions=[name],
        )
    CASES[f"tui-probes-{name}"] = Case(["tui", "--probes", f"{{in}}/{name}"], 3, fragment, mentions=[name])
for name, fragment in LOG_FILES:
    CASES[f"report-log-{name}"] = Case(
        ["report", "--probes", "{in}/good.json", "--log", f"{{in}}/{name}", "-o", "out.md"],
        3,
        fragment,
        kept=["out.md"],
        mentions=[name],
    )
    CASES[f"replay-{name}"] = Case(["replay", f"{{in}}/{name}"], 3, fragment, mentions=[name])
for name, fragment in SUITE_FILES:
    CASES[f"probe-suite-{name}"] = Case(
        ["probe", "--suite", f"{{in}}/{name}", "--output", "res.json", "--force"],
        3,
        fragment,
        kept=["res.json"],
        mentions=[name],
    )
CASES["probe-suite-deep.toml"] = Case(
    ["probe", "--suite", "{in}/deep.toml", "--output", "res.json", "--force"],
    3,
    "nested too deeply",
    kept=["res.json"],
    mentions=["deep.toml"],
)

OPTION_CASES: dict[str, Case] = {
    # gpuscope log: intervals, durations, formats, outputs
    "log-interval-nan": Case(["log", "--interval", "nan", "-o", "log.jsonl"], 2, "interval nan", kept=["log.jsonl"]),
    "log-interval-inf": Case(["log", "--interval", "inf", "-o", "log.jsonl"], 2, "interval inf", kept=["log.jsonl"]),
    "log-interval-negative": Case(
        ["log", "--interval", "-1", "-o", "log.jsonl"], 2, "must be positive", kept=["log.jsonl"]
    ),
    "log-interval-zero": Case(["log", "--interval", "0"], 2, "must be positive"),
    "log-interval-too-small": Case(["log", "--interval", "0.05"], 2, "below the minimum 0.1 s"),
    "log-interval-text": Case(["log", "--interval", "fast"], 2, "--interval"),
    "log-interval-empty": Case(["log", "--interval", ""], 2, "--interval"),
    "log-duration-nan": Case(["log", "--duration", "nan", "-o", "log.jsonl"], 2, "duration nan", kept=["log.jsonl"]),
    "log-duration-inf": Case(["log", "--duration", "inf"], 2, "duration inf"),
    "log-duration-zero": Case(["log", "--duration", "0"], 2, "duration 0"),
    "log-duration-negative": Case(["log", "--duration", "-5"], 2, "duration -5"),
    "log-duration-huge-bad-output": Case(
        ["log", "--duration", "1e308", "-o", "/nonexistent/dir/x.jsonl"], 2, "/nonexistent/dir/x.jsonl"
    ),
    "log-format-unknown": Case(["log", "--format", "xml", "-o", "log.jsonl"], 2, "--format", kept=["log.jsonl"]),
    "log-output-directory": Case(["log", "--duration", "1", "-o", "{in}/adir"], 2, "adir: Is a directory"),
    "log-output-readonly-fs": Case(["log", "--duration", "1", "-o", "/proc/gpuscope.jsonl"], 2, "/proc/gpuscope.jsonl"),
    "log-prometheus-bad": Case(
        ["log", "--prometheus", "localhost:http", "-o", "log.jsonl"],
        2,
        "port 'http' is not a number",
        kept=["log.jsonl"],
    ),
    "log-prometheus-port-range": Case(["log", "--prometheus", "127.0.0.1:70000"], 2, "out of range"),
    "log-prometheus-foreign-address": Case(
        ["log", "--prometheus", "192.0.2.1:9842"], 2, "not an address of this machine"
    ),
    "log-unknown-option": Case(["log", "--intervall", "1"], 2, "unrecognized arguments"),
    # gpuscope roofline
    "roofline-width-negative": Case(["roofline", "--probes", "{in}/good.json", "--width", "-5"], 2, "--width -5"),
    "roofline-width-huge": Case(
        ["roofline", "--probes", "{in}/good.json", "--width", "100000000"],
        2,
        "--width 100000000 is too wide",
        timeout=20,
    ),
    "roofline-height-huge": Case(
        ["roofline", "--probes", "{in}/good.json", "--height", "100000000"],
        2,
        "--height 100000000 is too tall",
        timeout=20,
    ),
    "roofline-height-zero": Case(["roofline", "--probes", "{in}/good.json", "--height", "0"], 2, "--height 0"),
    "roofline-width-text": Case(["roofline", "--probes", "{in}/good.json", "--width", "wide"], 2, "--width"),
    "roofline-no-probes": Case(["roofline"], 2, "--probes"),
    # gpuscope measure
    "measure-samples-zero": Case(["measure", "os:getpid", "--samples", "0"], 2, "--samples 0"),
    "measure-max-time-nan": Case(["measure", "os:getpid", "--max-time", "nan"], 2, "--max-time"),
    "measure-target-inf": Case(["measure", "os:getpid", "--target-sample", "inf"], 2, "--target-sample"),
    "measure-warmup-negative": Case(["measure", "os:getpid", "--warmup-max", "-1"], 2, "--warmup-max"),
    "measure-flops-nan": Case(
        ["measure", "os:getpid", "--flops", "nan", "-o", "m.json"], 2, "--flops nan", kept=["m.json"]
    ),
    "measure-bytes-negative": Case(["measure", "os:getpid", "--bytes", "-1"], 2, "--bytes -1"),
    "measure-device-unknown": Case(["measure", "os:getpid", "--device", "tpu"], 2, "--device 'tpu'"),
    "measure-device-missing-gpu": Case(["measure", "os:getpid", "--device", "cuda:7", "--max-time", "0.05"], 4, "cuda"),
    "measure-bad-target": Case(["measure", "no_such_module_xyz:f"], 2, "no_such_module_xyz"),
    "measure-target-shape": Case(["measure", "justtext"], 2, "expected MODULE:FUNCTION"),
    "measure-args-not-json": Case(["measure", "os:getpid", "--args-json", "[1,"], 2, "--args-json is not valid JSON"),
    "measure-args-deep": Case(["measure", "os:getpid", "--args-json", "[" * 3000 + "]" * 3000], 2, "nested too deeply"),
    "measure-args-huge-tensor": Case(
        ["measure", "os:getpid", "--args-json", '[{"tensor": [100000, 100000, 100000]}]'], 4, "cannot make the tensor"
    ),
    "measure-args-negative-shape": Case(
        ["measure", "os:getpid", "--args-json", '[{"tensor": [-1]}]'], 2, "non-negative integers"
    ),
    "measure-output-missing-folder": Case(
        ["measure", "os:getpid", "--flops", "1", "--bytes", "1", "-o", "/nonexistent/m.json"], 2, "/nonexistent"
    ),
    # gpuscope probe
    "probe-device-unknown": Case(
        ["probe", "--device", "tpu", "--output", "res.json", "--force"], 2, "--device 'tpu'", kept=["res.json"]
    ),
    "probe-device-missing-gpu": Case(
        ["probe", "--device", "cuda:7", "--output", "res.json", "--force"], 4, "--device cuda:7", kept=["res.json"]
    ),
    "probe-output-missing-folder": Case(["probe", "--output", "/nonexistent/res.json"], 2, "/nonexistent"),
    # gpuscope report / compare
    "report-format-unknown": Case(
        ["report", "--probes", "{in}/good.json", "-o", "out.html", "--format", "pdf"], 2, "--format", kept=["out.html"]
    ),
    "report-extension-unknown": Case(
        ["report", "--probes", "{in}/good.json", "-o", "out.xyz"], 2, "out.xyz", absent=["out.xyz"]
    ),
    "report-output-missing-folder": Case(
        ["report", "--probes", "{in}/good.json", "-o", "/nonexistent/r.html"], 1, "/nonexistent/r.html"
    ),
    "report-output-directory": Case(
        ["report", "--probes", "{in}/good.json", "-o", "{in}/adir", "--format", "md"], 1, "adir"
    ),
    "compare-format-unknown": Case(["compare", "{in}/good.json", "{in}/good.json", "--format", "pdf"], 2, "--format"),
    # gpuscope replay / tui / serve
    "replay-speed-zero": Case(["replay", "{in}/good.jsonl", "--speed", "0"], 2, "speed 0"),
    "replay-speed-nan": Case(["replay", "{in}/good.jsonl", "--speed", "nan"], 2, "speed nan"),
    "replay-speed-inf": Case(["replay", "{in}/good.jsonl", "--speed", "inf"], 2, "speed inf"),
    "replay-speed-huge": Case(["replay", "{in}/good.jsonl", "--speed", "1e9"], 2, "speed 1e"),
    "tui-interval-nan": Case(["tui", "--interval", "nan"], 2, "interval nan"),
    "tui-interval-small": Case(["tui", "--interval", "0.01"], 2, "below the minimum"),
    "tui-suite-missing": Case(["tui", "--suite", "{in}/missing.toml"], 3, "missing.toml"),
    "serve-listen-bad": Case(["serve", "--listen", "0.0.0.0:notaport"], 2, "port 'notaport'"),
    "serve-listen-range": Case(["serve", "--listen", "127.0.0.1:-1"], 2, "127.0.0.1:-1"),
    "serve-interval-nan": Case(["serve", "--interval", "nan"], 2, "interval nan"),
    "serve-interval-small": Case(["serve", "--interval", "0.01"], 2, "below the minimum"),
    "serve-duration-negative": Case(
        ["serve", "--duration", "-1", "--listen", "127.0.0.1:0", "--no-gpu"],
        2,
        "duration -1",
    ),
    "doctor-unknown-option": Case(["doctor", "--bogus"], 2, "--bogus"),
    "unknown-command": Case(["explode"], 2, "explode"),
}
CASES.update(OPTION_CASES)

# Issue 16, class 2: unbounded input. /dev/zero and a 2 GB sparse file as every kind of input
# file: refused after at most one bounded read (a size limit per file kind), exit 3.
for source, label in (("/dev/zero", "devzero"), ("{in}/sparse2g", "sparse2g")):
    json_input = source if source.startswith("/dev") else source + ".json"
    toml_input = source if source.startswith("/dev") else source + ".toml"
    log_input = source if source.startswith("/dev") else source + ".jsonl"
    CASES[f"roofline-{label}"] = Case(["roofline", "--probes", json_input], 3, "too large for a results JSON file")
    CASES[f"report-probes-{label}"] = Case(
        ["report", "--probes", json_input, "-o", "out.md"], 3, "too large", kept=["out.md"]
    )
    CASES[f"report-from-{label}"] = Case(
        ["report", "--from", json_input, "-o", "out.md"], 3, "too large", kept=["out.md"]
    )
    CASES[f"compare-{label}"] = Case(
        ["compare", "{in}/good.json", json_input, "-o", "cmp.md"], 3, "too large", kept=["cmp.md"]
    )
    CASES[f"tui-probes-{label}"] = Case(["tui", "--probes", json_input], 3, "too large")
    CASES[f"probe-suite-{label}"] = Case(
        ["probe", "--suite", toml_input, "--output", "res.json", "--force"],
        3,
        "too large for a suite TOML file",
        kept=["res.json"],
    )
    CASES[f"report-log-{label}"] = Case(
        ["report", "--probes", "{in}/good.json", "--log", log_input, "-o", "out.md"],
        3,
        "line longer than",
        kept=["out.md"],
    )
    CASES[f"replay-{label}"] = Case(["replay", log_input], 3, "line longer than")
CASES["measure-output-sparse2g"] = Case(
    ["measure", "os:getpid", "--flops", "1", "--bytes", "1", "-o", "{in}/sparse2g.json"],
    3,
    "too large for a results JSON file",
)

# Issue 16, class 6 (text safety) and 8 (usage errors): hostile names stay on one escaped line;
# a port in non-ASCII digits is a usage error.
CASES.update(
    {
        "roofline-name-newline-esc": Case(
            ["roofline", "--probes", "{in}/no\nsuch\x1b]0;pwned\x07.json"],
            3,
            "no\\nsuch\\x1b]0;pwned\\x07.json: no such file",
        ),
        "report-name-bidi": Case(
            ["report", "--probes", "{in}/\u202egnp.json", "-o", "out.md"], 3, "\\u202egnp.json", kept=["out.md"]
        ),
        "compare-name-hostile-empty": Case(
            ["compare", "{in}/good.json", "{in}/empty\n\x1b[2J\u202e.json"],
            3,
            "empty\\n\\x1b[2J\\u202e.json: file is empty",
        ),
        "roofline-width-escape": Case(
            ["roofline", "--probes", "{in}/good.json", "--width", "\x1b[2J\u2066"], 2, "'\\x1b[2J\\u2066'"
        ),
        "serve-listen-superscript-digit": Case(
            ["serve", "--listen", "127.0.0.1:\u00b2"], 2, "port '\u00b2' is not a number"
        ),
        "serve-listen-arabic-digit": Case(
            ["serve", "--listen", "127.0.0.1:\u0663"], 2, "port '\u0663' is not a number"
        ),
        "log-prometheus-superscript-digit": Case(
            ["log", "--prometheus", "127.0.0.1:\u00b2", "-o", "log.jsonl"], 2, "is not a number", kept=["log.jsonl"]
        ),
        "replay-missing-argument": Case(["replay"], 2, "the following arguments are required"),
        "measure-output-stdout": Case(["measure", "os:getpid", "-o", "-"], 2, "use --json"),
    }
)


_RAW_UNSAFE = set("\x1b\x07\r\u202e\u2066\u2069")


def _param(name: str, case: Case) -> object:
    marks = [pytest.mark.xfail(reason=case.xfail, strict=False)] if case.xfail else []
    return pytest.param(case, id=name, marks=marks)


@pytest.mark.parametrize("case", [_param(name, case) for name, case in CASES.items()])
def test_bad_command_line_is_one_line_with_its_exit_code(files: Path, tmp_path: Path, case: Case) -> None:
    argv = [arg.replace("{in}", str(files)) for arg in case.argv]
    for name in case.kept:
        (tmp_path / name).write_text(PREVIOUS)
    before = {path.name for path in tmp_path.iterdir()}
    result = gpuscope(argv, cwd=tmp_path, timeout=case.timeout)
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr[-2000:]
    assert result.returncode == case.code, (result.returncode, result.stderr)
    assert lines[0].startswith("gpuscope: error: "), lines[0]  # subcommands too (issue 16)
    assert not set(lines[0]) & _RAW_UNSAFE, repr(lines[0])  # hostile names are shown escaped
    for text in (case.fragment, *case.mentions):
        assert text in lines[0], lines[0]
    if case.code:
        assert result.stdout.strip() == "", result.stdout[:500]  # nothing half-printed
    for name in case.kept:
        assert (tmp_path / name).read_text() == PREVIOUS, f"{name} was changed"
    for name in case.absent:
        assert not (tmp_path / name).exists()
    after = {path.name for path in tmp_path.iterdir()}
    assert after == before, f"files appeared: {sorted(after - before)}"
    assert not (tmp_path / "PWNED").exists() and not (files / "PWNED").exists()


def test_results_file_given_to_measure_keeps_its_content_when_bad(files: Path, tmp_path: Path) -> None:
    """``measure -o`` appends to a results file: a bad one is refused and left as it was."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "gpuscope.results", "schema_version": 1, "workloads": "oops"}')
    before = bad.read_bytes()
    result = gpuscope(
        ["measure", "os:getpid", "--flops", "1", "--bytes", "1", "--max-time", "0.05", "-o", str(bad)], cwd=tmp_path
    )
    assert result.returncode == 3 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "$.workloads" in result.stderr
    assert bad.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]


def test_log_to_a_full_device_is_one_line_and_exit_1(tmp_path: Path) -> None:
    """``-o /dev/full`` is written as a stream (a log is one, issue 24.9) and fails with one line,
    exit 1; standard output on /dev/full is a one-line error, exit 1."""
    result = gpuscope(["log", "--no-gpu", "--interval", "0.1", "--duration", "2", "-o", "/dev/full"], cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert [line for line in result.stderr.splitlines() if "error" in line] == [
        "gpuscope: error: /dev/full: No space left on device after 0 records; the records written are intact"
    ]
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "gpuscope", "log", "--no-gpu", "--interval", "0.1", "--duration", "2"],
            stdout=full, stderr=subprocess.PIPE, text=True, timeout=60, env=_env(), cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line]  # log also prints progress lines
    assert errors == [
        "gpuscope: error: standard output: No space left on device after 0 records; the records written are intact"
    ]


@pytest.mark.parametrize("command", sorted(__import__("gpuscope.cli", fromlist=["COMMANDS"]).COMMANDS))
def test_every_subcommand_error_line_starts_with_gpuscope_error(tmp_path: Path, command: str) -> None:
    """argparse errors of every subcommand read ``gpuscope: error: ...`` (not ``gpuscope replay: error:``)."""
    result = gpuscope([command, "--no-such-option-xyz"], cwd=tmp_path, timeout=30)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuscope: error: "), result.stderr
    assert "required" in lines[0] or "--no-such-option-xyz" in lines[0]
