"""Concurrent writers and restarts (issue 16, class 4), as real processes.

Every output file is locked while a gpuscope process writes it (gpuscope.fileio.OutputLock): a
second writer refuses with one line and exit 4. ``gpuscope log -o FILE`` on a file holding
data refuses unless ``--append`` (continue it: a killed run's cut last line is dropped) or
``--force``. Adding workloads to one results file from several processes at once keeps every
one of them (read, change and write happen under the lock).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest
from support.roofline import h200_results

from gpuscope.telemetry.logfile import TruncatedLogWarning, read_log, read_log_dicts

REPO = Path(__file__).resolve().parent.parent


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("GPUSCOPE_FAKE_NVML", None)
    return env


def gpuscope(argv: list[str], cwd: Path, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuscope", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def _errors(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr[-2000:]
    return [line for line in stderr.splitlines() if line.startswith("gpuscope: error:")]


def _start_log(output: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpuscope", "log", "--no-gpu", "--interval", "0.1", "-o", str(output), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=output.parent,
    )  # fmt: skip


def _wait_lines(path: Path, count: int, process: subprocess.Popen[str], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        if process.poll() is not None:
            raise AssertionError(f"gpuscope log exited early: {process.communicate()[1]}")
        time.sleep(0.05)
    process.kill()
    raise AssertionError(f"{path}: fewer than {count} lines")


@pytest.fixture
def holder(tmp_path: Path):  # noqa: ANN201 - yields a function
    """Start a process that holds the lock of a path (as a running gpuscope writer would)."""
    started: list[subprocess.Popen[str]] = []

    def hold(path: Path) -> subprocess.Popen[str]:
        code = textwrap.dedent(
            f"""
            import sys, time
            from gpuscope.fileio import OutputLock
            with OutputLock({str(path)!r}):
                print("held", flush=True)
                time.sleep(120)
            """
        )
        process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=_env())
        assert process.stdout is not None and process.stdout.readline().strip() == "held"
        started.append(process)
        return process

    yield hold
    for process in started:
        process.kill()
        process.wait()


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["compare", "a.json", "b.json", "-o", "{out}"], id="compare"),
        pytest.param(["report", "--probes", "a.json", "--format", "md", "--force", "-o", "{out}"], id="report"),
        pytest.param(["log", "--no-gpu", "--duration", "0.3", "--interval", "0.1", "--force", "-o", "{out}"], id="log"),
        pytest.param(["probe", "--suite", "quick", "--quiet", "--force", "-o", "{out}"], id="probe"),
    ],
)
def test_second_writer_of_a_locked_output_refuses_with_exit_4(tmp_path: Path, holder, argv: list[str]) -> None:  # noqa: ANN001
    """While another process holds an output, a second writer says so in one line (exit 4) and
    leaves the file as it was."""
    (tmp_path / "a.json").write_text(json.dumps(h200_results()))
    other = h200_results()
    other["workloads"][0]["time_s"] *= 2
    (tmp_path / "b.json").write_text(json.dumps(other))
    out = tmp_path / "out.json"
    out.write_text(json.dumps(h200_results()))  # a results file: probe may replace it
    previous = out.read_bytes()
    holder(out)
    result = gpuscope([arg.replace("{out}", str(out)) for arg in argv], cwd=tmp_path)
    errors = _errors(result.stderr)
    assert result.returncode == 4, result.stderr
    assert len(errors) == 1 and "is writing this file" in errors[0] and str(out) in errors[0]
    assert out.read_bytes() == previous


def test_two_loggers_on_one_file_the_second_refuses(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    first = _start_log(out)
    try:
        _wait_lines(out, 2, first)
        second = gpuscope(
            ["log", "--no-gpu", "--interval", "0.1", "--duration", "1", "--append", "-o", str(out)], cwd=tmp_path
        )
        assert second.returncode == 4, second.stderr
        assert len(_errors(second.stderr)) == 1 and "is writing this file" in second.stderr
        _wait_lines(out, 4, first)
    finally:
        first.send_signal(signal.SIGINT)
        first.wait(timeout=30)
    assert first.returncode == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no cut or corrupt line anywhere
        records = list(read_log(out))
    assert len(records) >= 4


def test_log_does_not_truncate_an_existing_file_without_append_or_force(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    out.write_text('{"schema_version":1}\n')
    before = out.read_bytes()
    result = gpuscope(["log", "--no-gpu", "--duration", "0.3", "-o", str(out)], cwd=tmp_path)
    assert result.returncode == 2
    errors = _errors(result.stderr)
    assert len(errors) == 1 and "already exists" in errors[0] and "--append" in errors[0] and "--force" in errors[0]
    assert out.read_bytes() == before


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_append_continues_a_killed_run(tmp_path: Path, fmt: str) -> None:
    """kill -9 a logger, cut its last line as a crash would, then ``--append``: every complete
    record of the killed run is kept, the cut line is dropped, CSV keeps one header."""
    out = tmp_path / f"run.{fmt}"
    first = _start_log(out, "--format", fmt)
    _wait_lines(out, 4, first)
    first.kill()
    first.wait()
    complete = out.read_bytes()
    with open(out, "ab") as handle:
        handle.write(complete.splitlines(keepends=True)[-1][:25])  # a half-written last line
    kept = len(complete.splitlines()) - (1 if fmt == "csv" else 0)
    result = gpuscope(
        ["log", "--no-gpu", "--interval", "0.1", "--duration", "0.5", "--format", fmt, "--append", "-o", str(out)],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert out.read_bytes().startswith(complete)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncatedLogWarning)
        records = list(read_log_dicts(out))
    assert len(records) > kept
    if fmt == "csv":
        assert out.read_text().count("schema_version,") == 1


def test_append_refuses_a_file_of_another_format(tmp_path: Path) -> None:
    out = tmp_path / "run.log"
    out.write_text("hello, not a log\n")
    result = gpuscope(["log", "--no-gpu", "--duration", "0.3", "--append", "-o", str(out)], cwd=tmp_path)
    assert result.returncode == 2 and "not a gpuscope telemetry log" in result.stderr
    assert out.read_text() == "hello, not a log\n"


def test_force_replaces(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    out.write_text("old junk\n")
    result = gpuscope(
        ["log", "--no-gpu", "--interval", "0.1", "--duration", "0.3", "--force", "-o", str(out)], cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "old junk" not in out.read_text() and list(read_log(out))


_APPENDER = """
import sys
import gpuscope
path, tag = sys.argv[1], sys.argv[2]
for i in range(12):
    gpuscope.measure(lambda: None, name=f"{tag}-{i}", results=path, flops=1, bytes_moved=1,
                     samples=1, max_time_s=0.05, warmup_max_s=0.0, telemetry=False)
"""


@pytest.mark.slow
def test_three_processes_appending_twelve_workloads_each_keep_all_36(tmp_path: Path) -> None:
    """gpuscope.measure(results=...) from three processes at once: the read-modify-write of the
    results file happens under its lock, so no process loses another's workloads."""
    results = tmp_path / "shared.json"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _APPENDER, str(results), tag],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
            cwd=tmp_path,
        )
        for tag in ("a", "b", "c")
    ]
    for process in processes:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr[-2000:]
    from results_files import results_json

    names = sorted(workload["name"] for workload in results_json(results)["workloads"])
    assert names == sorted(f"{tag}-{i}" for tag in "abc" for i in range(12))
    assert [path.name for path in tmp_path.iterdir()] == ["shared.json"]  # no temporary or lock file left here
