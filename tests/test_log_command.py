"""``gpuscope log`` as a real process: signals, pipes, full disks, bad options, imports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuscope.telemetry.logfile import read_log

REPO = Path(__file__).resolve().parent.parent


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONSTARTUP", None)
    return env


def gpuscope(*args: str, timeout: float = 60.0, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuscope", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
        cwd=REPO,
        **kwargs,
    )


def start_logging(output: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpuscope", "log", "--interval", "0.1", "--output", str(output), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=REPO,
    )


def wait_for_lines(path: Path, count: int, process: subprocess.Popen[str], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        if process.poll() is not None:
            raise AssertionError(
                f"gpuscope log exited early ({process.returncode}): {process.stderr.read() if process.stderr else ''}"
            )
        time.sleep(0.05)
    process.kill()
    raise AssertionError(f"no {count} lines in {path} after {timeout_s} s")


def assert_one_line_error(result: subprocess.CompletedProcess[str], expected: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert expected in lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_ends_the_run_cleanly_with_every_record_intact(tmp_path: Path, signum: int) -> None:
    output = tmp_path / "run.jsonl"
    process = start_logging(output)
    wait_for_lines(output, 3, process)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
    data = output.read_bytes()
    assert data.endswith(b"\n")
    lines = data.decode().splitlines()
    assert len(lines) >= 3
    for line in lines:
        assert json.loads(line)["schema_version"] == 1
    assert len(list(read_log(output))) == len(lines)


@pytest.mark.slow
def test_sigkill_leaves_at_most_the_last_line_incomplete(tmp_path: Path) -> None:
    output = tmp_path / "killed.jsonl"
    process = start_logging(output)
    wait_for_lines(output, 4, process)
    process.kill()
    process.communicate(timeout=30)
    data = output.read_bytes()
    lines = data.split(b"\n")
    for line in lines[:-1]:
        json.loads(line)  # every newline-terminated line is a whole record
    warned: list[str] = []
    records = list(read_log(output, on_warning=warned.append))
    assert len(records) == len(lines) - 1
    assert bool(warned) == (lines[-1] != b"")  # a cut last line is skipped with a warning, and only then


@pytest.mark.slow
def test_csv_output_and_duration(tmp_path: Path) -> None:
    output = tmp_path / "run.csv"
    result = gpuscope(
        "log", "--interval", "0.1", "--duration", "0.35", "--format", "csv", "--output", str(output), "--no-processes"
    )
    assert result.returncode == 0, result.stderr
    rows = output.read_text().splitlines()
    assert rows[0].startswith("schema_version,timestamp,host.hostname,")
    assert 1 <= len(rows) - 1 <= 4  # ticks at 0, 0.1, 0.2, 0.3 s (fewer if the machine stalls)
    records = list(read_log(output))
    assert len(records) == len(rows) - 1
    assert records[0].host.logical_cores >= 1


@pytest.mark.slow
def test_reader_closing_stdout_exits_quietly() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuscope", "log", "--interval", "0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
        cwd=REPO,
    )
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()
    assert json.loads(first)["schema_version"] == 1
    process.stdout.close()  # like `| head -1`
    process.wait(timeout=30)
    stderr = process.stderr.read().decode()
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr


@pytest.mark.slow
def test_full_disk_is_a_one_line_error_and_the_summary_counts_records_written() -> None:
    """Standard output is a full disk: one line of error, and the summary counts what was written
    (none), not samples seen, with the reason (it used to say "wrote 1 records")."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    # --output /dev/full is refused as a device (tests/test_hostile_cli.py); stdout may be one
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "gpuscope", "log", "--interval", "0.1", "--duration", "1", "--no-gpu"],
            stdout=full, stderr=subprocess.PIPE, text=True, timeout=60, env=_env(), cwd=REPO,
        )  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if "error" in line]  # log also prints progress lines
    assert len(errors) == 1 and "standard output: No space left on device after 0 records" in errors[0]
    summary = [line for line in result.stderr.splitlines() if line.startswith("gpuscope: wrote ")]
    assert len(summary) == 1, result.stderr
    assert summary[0].startswith("gpuscope: wrote 0 records (0 GPUs each) to stdout in ")
    assert "; 1 not written (No space left on device); no alerts" in summary[0]


def test_summary_of_a_clean_run_has_no_not_written_part() -> None:
    from support.samples import make_sample

    from gpuscope.telemetry.alerts import AlertThresholds
    from gpuscope.telemetry.logprogress import LogProgress

    progress = LogProgress(lambda line: None, AlertThresholds())
    for tick in range(3):
        progress.observe(make_sample(tick, gpus=1))
    assert progress.summary("out.jsonl", 3, None).startswith("wrote 3 records (1 GPUs each) to out.jsonl in ")
    assert "not written" not in progress.summary("out.jsonl", 3, None)
    assert "; 1 not written (the reader closed the pipe)" in progress.summary("-", 2, "the reader closed the pipe")


@pytest.mark.parametrize(
    ("args", "expected", "code"),
    [
        (["--interval", "0.05"], "interval 0.05 s is below the minimum 0.1 s (GPM needs >100 ms between samples)", 2),
        (["--interval", "-1"], "must be positive", 2),
        (["--interval", "abc"], "invalid float value", 2),
        (["--interval", "nan"], "not a finite number", 2),
        (["--duration", "0"], "duration 0 s must be a positive number", 2),
        (["--duration", "-3"], "must be a positive number", 2),
        (["--format", "xml"], "invalid choice: 'xml'", 2),
        (["--output", "/nonexistent-dir/x/run.jsonl"], "cannot write output /nonexistent-dir/x/run.jsonl", 2),
    ],
)
def test_bad_options_are_one_line_errors(args: list[str], expected: str, code: int) -> None:
    result = gpuscope("log", "--no-gpu", *args)
    assert_one_line_error(result, expected)
    assert result.returncode == code
    assert result.stdout == ""


def test_output_that_is_a_directory(tmp_path: Path) -> None:
    result = gpuscope("log", "--no-gpu", "--output", str(tmp_path))
    assert_one_line_error(result, "cannot write output")


_IMPORT_CHECK = r"""
import json, sys
sys.argv = ["gpuscope", "log", "--interval", "0.1", "--duration", "0.25", "--output", sys.argv[1]]
from gpuscope.cli import main
code = main()
heavy = {"torch", "textual", "numpy", "rich", "plotext"}
print(json.dumps({"code": code, "heavy": sorted({m.split(".")[0] for m in sys.modules} & heavy)}))
"""

_BLOCKED = r"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("textual", "torch", "rich", "plotext"):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
        return None
sys.meta_path.insert(0, Block())
"""


def test_log_imports_neither_torch_nor_textual(tmp_path: Path) -> None:
    output = tmp_path / "run.jsonl"
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_CHECK, str(output)],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {"code": 0, "heavy": []}
    assert len(list(read_log(output))) >= 1


def test_log_runs_with_textual_and_torch_missing(tmp_path: Path) -> None:
    output = tmp_path / "run.jsonl"
    result = subprocess.run(
        [sys.executable, "-c", _BLOCKED + _IMPORT_CHECK, str(output)],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1])["code"] == 0
    assert len(list(read_log(output))) >= 1


_HANGING = r"""
import sys, time
import gpuscope.telemetry.collector as collector
def hang(self):
    print("collecting", flush=True)
    time.sleep(600)  # a driver call that never returns
collector.TelemetryCollector.sample = hang
from gpuscope.cli import main
sys.exit(main(["log", "--no-gpu", "--output", sys.argv[1]]))
"""


@pytest.mark.slow
def test_a_second_signal_ends_a_stuck_sampler(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _HANGING, str(tmp_path / "stuck.jsonl")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=REPO,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "collecting"
    process.send_signal(signal.SIGINT)  # asks politely: the sampler cannot answer
    time.sleep(2.3)  # the force window (_FORCE_AFTER_S = 2 s) must pass first
    assert process.poll() is None
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130
    assert "sampler stuck" in stderr and "Traceback" not in stderr
