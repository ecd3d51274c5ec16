"""What ``gpuscope log`` does to the files, locks, streams and signals around it (issue 24, classes
1, 2, 4 and 9), tried as real processes.

- ``--append`` continues only a file whose first record reads back as a gpuscope log; any other
  file is refused and left byte for byte as it was. A file cut under a running logger
  (logrotate's copytruncate, ``: > file``) goes on from its new end, readable.
- The output lock is a ``flock`` on the file itself: a second writer reaching it by any name (a
  hard link, a bind mount) or with any environment gets exit 4.
- A full or failing standard error loses the warnings, never the records.
- ``--output`` may be a FIFO, a pipe or a character device: written as a stream.
- After SIGSTOP and SIGCONT the schedule skips the missed ticks: no catch-up sample.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest
from support.roofline import h200_results
from support.samples import make_sample

from gpuscope.telemetry.logfile import open_log_writer, read_log, read_log_dicts
from gpuscope.telemetry.sampler import MIN_INTERVAL_S, Sampler

REPO = Path(__file__).resolve().parent.parent
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000") + b"\x1f\x15\xc4\x89\n\x00IEND"


def _env(**changes: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("GPUSCOPE_FAKE_NVML", None)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def gpuscope(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuscope", *argv], capture_output=True, stdin=subprocess.DEVNULL, text=True,
        timeout=90, env=env or _env(), cwd=cwd,
    )  # fmt: skip


def _log_argv(output: str, *extra: str, interval: str = "0.1") -> list[str]:
    return [sys.executable, "-m", "gpuscope", "log", "--no-gpu", "--no-processes", "--interval", interval,
            "-o", output, *extra]  # fmt: skip


def _start(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        env=env or _env(), cwd=cwd,
    )  # fmt: skip


def _wait_lines(path: Path, count: int, process: subprocess.Popen[str], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        if process.poll() is not None:
            raise AssertionError(f"gpuscope log exited early: {process.communicate()[1]}")
        time.sleep(0.02)
    process.kill()
    raise AssertionError(f"{path}: fewer than {count} lines")


def _stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    return stderr


def _errors(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr[-2000:]
    return [line for line in stderr.splitlines() if line.startswith("gpuscope: error:")]


def _clean_records(path: Path) -> list[dict[str, object]]:
    """Every record of ``path``, with any warning (a cut or NUL line) an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return list(read_log_dicts(path))


def _real_log(path: Path, fmt: str = "jsonl", count: int = 3) -> bytes:
    with open_log_writer(path, fmt) as writer:
        for tick in range(count):
            writer.write(make_sample(tick, gpus=1, cores=2, timestamp=1.7e9 + tick))
    return path.read_bytes()


# --- 24.1: --append never destroys what it is pointed at ------------------------------------------


def _foreign_files(work: Path) -> dict[str, bytes]:
    results = h200_results()
    log = _real_log(work / "model.jsonl")
    csv_log = _real_log(work / "model.csv", "csv")
    first_record = log.split(b"\n")[0]
    older = json.loads(first_record)
    older["schema_version"] = 0
    report = gpuscope(["report", "--probes", "a.json", "--format", "json", "-o", "r.json"], cwd=work)
    assert report.returncode == 0, report.stderr
    return {
        "text": b"hello world\nsecond line without its newline",
        "text-one-line": b"no newline at all",
        "png": PNG,
        "results-pretty": json.dumps(results, indent=2).encode() + b"\n",
        "results-compact": json.dumps(results, separators=(",", ":")).encode(),
        "results-compact-newline": json.dumps(results, separators=(",", ":")).encode() + b"\n",
        "report": (work / "r.json").read_bytes(),
        "csv-not-ours": b"name,value\nalpha,1\nbeta,2",
        "csv-our-header-garbage-rows": b"schema_version,timestamp,unavailable\nnot,a,row,at all\npartial",
        "jsonl-not-ours": b'{"event": "start"}\n{"event": "stop"}\n{"ev',
        "log-of-another-schema-version": json.dumps(older).encode() + b"\n" + b'{"schema',
        "log-whose-first-line-is-cut": first_record[: len(first_record) // 2],
        "nul-bytes-then-records": b"\0" * 4096 + log + b'{"cut',
        "utf16-text": "h\u00e9llo\nw\u00f6rld".encode("utf-16"),
        "log-then-notes-without-newline": log + b"notes: restarted the job",
        "log-then-a-text-line": log + b"notes: restarted the job\n",
        "csv-log-then-notes": csv_log + b"notes: 1,2,3",
        "csv-log-then-a-foreign-row": csv_log + b"1,not,our,row\n",
    }


@pytest.fixture(scope="module")
def foreign(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    work = tmp_path_factory.mktemp("foreign")
    (work / "a.json").write_text(json.dumps(h200_results()))
    return _foreign_files(work)


FOREIGN = [
    "text", "text-one-line", "png", "results-pretty", "results-compact", "results-compact-newline", "report",
    "csv-not-ours", "csv-our-header-garbage-rows", "jsonl-not-ours", "log-of-another-schema-version",
    "log-whose-first-line-is-cut", "nul-bytes-then-records", "utf16-text", "log-then-notes-without-newline",
    "log-then-a-text-line", "csv-log-then-notes", "csv-log-then-a-foreign-row",
]  # fmt: skip


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
@pytest.mark.parametrize("kind", FOREIGN)
def test_refused_append_leaves_a_foreign_file_byte_identical(
    tmp_path: Path, foreign: dict[str, bytes], kind: str, fmt: str
) -> None:
    """`log --append` pointed at a file that is not a gpuscope log (text, PNG, results or report
    JSON pretty or compact, foreign CSV/JSONL, another schema version, a cut first record, NUL
    bytes, a log with other text after its records): exit 2, one line, the file byte-identical."""
    out = tmp_path / "target"
    out.write_bytes(foreign[kind])
    os.chmod(out, 0o640)
    result = gpuscope(
        ["log", "--no-gpu", "--interval", "0.1", "--duration", "0.3", "--format", fmt, "--append", "-o", str(out)],
        cwd=tmp_path,
    )
    assert out.read_bytes() == foreign[kind]
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    errors = _errors(result.stderr)
    assert result.returncode == 2, result.stderr
    assert len(errors) == 1 and "left as it was" in errors[0], result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["target"]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_append_to_a_log_of_the_other_format_is_refused_unchanged(tmp_path: Path, fmt: str) -> None:
    """`log --append --format X` on a real gpuscope log of the other format, whose last line is
    cut: exit 2 naming the format, nothing cut or added."""
    out = tmp_path / "run.log"
    other = "csv" if fmt == "jsonl" else "jsonl"
    before = _real_log(out, other) + b"1.7e9,cut"
    out.write_bytes(before)
    result = gpuscope(
        ["log", "--no-gpu", "--duration", "0.3", "--format", fmt, "--append", "-o", str(out)], cwd=tmp_path
    )
    assert result.returncode == 2 and f"--format {other}" in result.stderr, result.stderr
    assert out.read_bytes() == before


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_append_to_a_real_log_drops_only_its_cut_last_line(tmp_path: Path, fmt: str) -> None:
    """`log --append` on a real gpuscope log ending in a cut line: every complete record kept as
    written, the cut line dropped, the file reads back without a warning (CSV: one header)."""
    out = tmp_path / f"run.{fmt}"
    complete = _real_log(out, fmt)
    out.write_bytes(complete + complete.splitlines(keepends=True)[-1][:30])
    result = gpuscope(
        ["log", "--no-gpu", "--interval", "0.1", "--duration", "0.3", "--format", fmt, "--append", "-o", str(out)],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert out.read_bytes().startswith(complete)
    assert len(_clean_records(out)) >= 4
    assert out.read_bytes().count(b"schema_version,") == (1 if fmt == "csv" else 0)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_append_keeps_a_last_record_that_only_lacks_its_newline(tmp_path: Path, fmt: str) -> None:
    """`log --append` on a log whose last record is whole but lacks its newline: the record is kept
    (a newline added), not dropped as a cut line."""
    out = tmp_path / f"run.{fmt}"
    complete = _real_log(out, fmt)
    out.write_bytes(complete[:-1])
    result = gpuscope(
        ["log", "--no-gpu", "--interval", "0.1", "--duration", "0.3", "--format", fmt, "--append", "-o", str(out)],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert out.read_bytes().startswith(complete)
    assert len(_clean_records(out)) == 6


def _truncate_empty(path: Path) -> None:
    with open(path, "r+b") as handle:  # `: > file`
        handle.truncate(0)


def _copytruncate(path: Path) -> None:
    shutil.copyfile(path, path.with_name(path.name + ".1"))  # logrotate's copytruncate
    _truncate_empty(path)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
@pytest.mark.parametrize("how", ["emptied", "copytruncate"])
def test_file_truncated_under_a_running_logger_stays_readable(tmp_path: Path, fmt: str, how: str) -> None:
    """A log emptied under a running logger (`: > file`, logrotate copytruncate): no NUL bytes,
    logging goes on from the new end, the file (and the rotated copy) read back cleanly."""
    out = tmp_path / f"run.{fmt}"
    process = _start(_log_argv(str(out), "--format", fmt), tmp_path)
    try:
        _wait_lines(out, 4, process)
        (_truncate_empty if how == "emptied" else _copytruncate)(out)
        _wait_lines(out, 3, process)
    finally:
        stderr = _stop(process)
    data = out.read_bytes()
    assert b"\0" not in data
    assert len(_clean_records(out)) >= 2
    assert "truncated by another program" in stderr
    if fmt == "csv":
        assert data.startswith(b"schema_version,") and data.count(b"schema_version,") == 1
    if how == "copytruncate":
        assert len(_clean_records(out.with_name(out.name + ".1"))) >= 3


def test_standard_output_file_truncated_under_the_logger_goes_on_at_its_end(tmp_path: Path) -> None:
    """`log -o - > file` (no O_APPEND) and the file emptied under it: the logger notices its
    offset is past the end and goes on there, no NUL hole."""
    out = tmp_path / "run.jsonl"
    with open(out, "wb") as handle:
        process = subprocess.Popen(
            _log_argv("-"), stdout=handle, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            env=_env(), cwd=tmp_path,
        )  # fmt: skip
    try:
        _wait_lines(out, 4, process)
        _truncate_empty(out)
        _wait_lines(out, 3, process)
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert b"\0" not in out.read_bytes()
    assert len(_clean_records(out)) >= 2


# --- 24.2: the lock is the file's own ----------------------------------------------------------


def _second_logger_refused(first_out: Path, second_out: Path, cwd: Path, **envs: dict[str, str]) -> None:
    first = _start(_log_argv(str(first_out)), cwd, envs.get("first"))
    try:
        _wait_lines(first_out, 2, first)
        second = gpuscope(
            ["log", "--no-gpu", "--interval", "0.1", "--duration", "0.5", "--append", "-o", str(second_out)],
            cwd=cwd,
            env=envs.get("second"),
        )
        errors = _errors(second.stderr)
        assert second.returncode == 4, second.stderr
        assert len(errors) == 1 and "is writing this file" in errors[0] and f"process {first.pid}" in errors[0]
    finally:
        _stop(first)
    assert len(_clean_records(first_out)) >= 2


def test_second_logger_with_another_runtime_dir_is_refused(tmp_path: Path) -> None:
    """Two loggers on one file, one with $XDG_RUNTIME_DIR and one without (a cron job), other
    $HOME: the second gets exit 4 naming the first, the file stays clean."""
    (tmp_path / "run1").mkdir()
    (tmp_path / "home2").mkdir()
    out = tmp_path / "run.jsonl"
    _second_logger_refused(
        out,
        out,
        tmp_path,
        first=_env(XDG_RUNTIME_DIR=str(tmp_path / "run1")),
        second=_env(XDG_RUNTIME_DIR=None, XDG_DATA_HOME=None, GPUSCOPE_DATA_DIR=None, HOME=str(tmp_path / "home2")),
    )


def test_second_logger_with_an_unwritable_data_dir_is_refused(tmp_path: Path) -> None:
    """Two loggers on one file, neither with a writable lock folder ($XDG_DATA_HOME under /proc,
    no $XDG_RUNTIME_DIR): the lock is still taken, the second gets exit 4."""
    env = _env(XDG_RUNTIME_DIR=None, GPUSCOPE_DATA_DIR=None, XDG_DATA_HOME="/proc/1/gpuscope-cannot-be-here")
    out = tmp_path / "run.jsonl"
    _second_logger_refused(out, out, tmp_path, first=env, second=env)


def test_second_logger_through_a_hard_link_is_refused(tmp_path: Path) -> None:
    """A second logger on another hard link of the same file: exit 4 (the lock is the inode's)."""
    out = tmp_path / "run.jsonl"
    out.write_bytes(b"")
    os.link(out, tmp_path / "alias.jsonl")
    _second_logger_refused(out, tmp_path / "alias.jsonl", tmp_path)


def _unshare_ok() -> bool:
    try:
        return subprocess.run(["unshare", "-m", "--propagation", "private", "true"], timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


needs_unshare = pytest.mark.skipif(not _unshare_ok(), reason="needs root and unshare -m (a private mount namespace)")

_NAMESPACE_SCRIPT = """
set -u
cd "$WORK"
wait_lines() {{
    for _ in $(seq 1 600); do [ -f "$1" ] && [ "$(wc -l < "$1")" -ge "$2" ] && return 0; sleep 0.05; done; return 1
}}
{setup}
$PY -m gpuscope log --no-gpu --no-processes --interval 0.1 -o {first} 2>first.err &
first=$!
wait_lines {first} 3 || echo "first logger wrote nothing" >&2
$PY -m gpuscope log --no-gpu --interval 0.1 --duration 0.5 --append -o {second} 2>second.err </dev/null
echo $? > second.rc
$PY -m gpuscope compare a.json b.json --format md -o {second} 2>third.err </dev/null
echo $? > third.rc
kill -INT $first
wait $first
echo $? > first.rc
"""


def _in_namespace(work: Path, setup: str, first: str, second: str) -> dict[str, str]:
    (work / "a.json").write_text(json.dumps(h200_results()))
    other = h200_results()
    other["workloads"][0]["time_s"] *= 2
    (work / "b.json").write_text(json.dumps(other))
    script = _NAMESPACE_SCRIPT.format(setup=setup, first=first, second=second)
    env = _env(WORK=str(work), PY=sys.executable)
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "bash", "-c", script],
        capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {name: (work / name).read_text().strip() for name in ("first.rc", "second.rc", "third.rc", "second.err",
                                                                  "third.err", "first.err")}  # fmt: skip


@needs_unshare
def test_second_writer_through_a_bind_mount_is_refused(tmp_path: Path) -> None:
    """In a private mount namespace, a logger on A/run.jsonl and a second logger, then `compare
    -o`, on B/run.jsonl where B is a bind mount of A: both refused with exit 4."""
    (tmp_path / "A").mkdir()
    (tmp_path / "B").mkdir()
    seen = _in_namespace(tmp_path, "mount --bind A B", "A/run.jsonl", "B/run.jsonl")
    assert seen["first.rc"] == "0", seen
    assert seen["second.rc"] == "4" and "is writing this file" in seen["second.err"], seen
    assert seen["third.rc"] == "4" and "is writing this file" in seen["third.err"], seen
    assert len(_clean_records(tmp_path / "A" / "run.jsonl")) >= 3


@needs_unshare
def test_second_logger_with_a_read_only_home_is_refused(tmp_path: Path) -> None:
    """In a private mount namespace with $HOME mounted read-only and no $XDG_RUNTIME_DIR (where
    the old lock folder lived), a second logger on the same file gets exit 4."""
    (tmp_path / "home").mkdir()
    setup = (
        'mount --bind home home && mount -o remount,bind,ro home && export HOME="$WORK/home" && '
        "unset XDG_RUNTIME_DIR XDG_DATA_HOME GPUSCOPE_DATA_DIR && ! touch home/probe 2>/dev/null"
    )
    seen = _in_namespace(tmp_path, setup, "run.jsonl", "run.jsonl")
    assert seen["first.rc"] == "0", seen
    assert seen["second.rc"] == "4" and "is writing this file" in seen["second.err"], seen
    assert len(_clean_records(tmp_path / "run.jsonl")) >= 3


_ATOMIC_HOLDER = """
import sys, time
from gpuscope.fileio import OutputLock, write_text_atomic
with OutputLock(sys.argv[1]):
    write_text_atomic(sys.argv[1], "first version\\n")  # replaced by rename: the lock moves with it
    print("held", flush=True)
    time.sleep(120)
"""


@pytest.mark.parametrize("exists", [True, False])
def test_lock_moves_with_an_atomic_replace(tmp_path: Path, exists: bool) -> None:
    """A process holding an output it has just replaced by rename (new or existing file): a
    logger, then `compare -o`, on that name still get exit 4 and the file is untouched."""
    out = tmp_path / "out.md"
    if exists:
        out.write_text("old\n")
    (tmp_path / "a.json").write_text(json.dumps(h200_results()))
    holder = subprocess.Popen(
        [sys.executable, "-c", _ATOMIC_HOLDER, str(out)], stdout=subprocess.PIPE, text=True, env=_env()
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        logger = gpuscope(["log", "--no-gpu", "--duration", "0.3", "--force", "-o", str(out)], cwd=tmp_path)
        assert logger.returncode == 4 and f"process {holder.pid}" in logger.stderr, logger.stderr
        compare = gpuscope(["compare", "a.json", "a.json", "-o", str(out)], cwd=tmp_path)
        assert compare.returncode == 4 and "is writing this file" in compare.stderr, compare.stderr
        assert out.read_text() == "first version\n"
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize(
    "ending",
    ["with OutputLock(path):\n    pass", "OutputLock(path).acquire()\nraise SystemExit(3)"],
    ids=["released", "exit-while-held"],
)
def test_lock_of_a_new_output_ended_unwritten_leaves_no_file(tmp_path: Path, ending: str) -> None:
    """A writer that locks a new output (the lock creates it empty) and ends without writing it,
    released or by an exception while held, leaves no empty file behind."""
    out = tmp_path / "new.json"
    code = f"import sys\nfrom gpuscope.fileio import OutputLock\npath = {str(out)!r}\n{ending}\n"
    done = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=60)
    assert "Traceback" not in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []


# --- 24.4: a full or failing stderr does not stop a logger ---------------------------------------


def test_log_with_standard_error_full_writes_every_record(tmp_path: Path) -> None:
    """`log 2>/dev/full`: records are written (warnings lost), exit 0."""
    out = tmp_path / "run.jsonl"
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [*_log_argv(str(out), "--duration", "0.5")], stderr=full, stdout=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL, env=_env(), cwd=tmp_path, timeout=60,
        )  # fmt: skip
    assert result.returncode == 0
    assert len(_clean_records(out)) == 5


def test_log_with_standard_error_a_pipe_nobody_reads_writes_every_record(tmp_path: Path) -> None:
    """`log` whose stderr is a pipe whose reader has left (EPIPE on every warning): records go
    on, exit 0."""
    out = tmp_path / "run.jsonl"
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [*_log_argv(str(out), "--duration", "0.5")], stderr=write_end, stdout=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL, env=_env(), cwd=tmp_path, timeout=60,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert result.returncode == 0
    assert len(_clean_records(out)) == 5


def test_csv_column_warning_to_a_full_stderr_does_not_stop_the_log(tmp_path: Path) -> None:
    """The CSV writer's 'column appeared' warning, sent to a full stderr (library writer with the
    log command's warning function): the record is still written."""
    from gpuscope.commands import log as log_command

    out = tmp_path / "run.csv"
    saved = sys.stderr
    sys.stderr = open("/dev/full", "w")  # noqa: SIM115 - closed below
    try:
        with open_log_writer(out, "csv", on_warning=log_command._warn) as writer:
            writer.write(make_sample(0, gpus=1, cores=2))
            writer.write(make_sample(1, gpus=2, cores=2))  # a GPU appears: a warning
    finally:
        full, sys.stderr = sys.stderr, saved
        with contextlib.suppress(OSError):  # the lost warning is still in its buffer
            full.close()
    assert len(list(read_log(out))) == 2


# --- 24.9: streams -----------------------------------------------------------------------------


def _reader_of(path: Path, into: list[bytes], close_after_lines: int | None = None) -> threading.Thread:
    def read() -> None:
        with open(path, "rb") as handle:
            for line in handle:
                into.append(line)
                if close_after_lines is not None and len(into) >= close_after_lines:
                    return

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("extra", [[], ["--append"], ["--force"], ["--format", "csv", "--append"]])
def test_log_into_a_named_pipe_is_a_stream(tmp_path: Path, extra: list[str]) -> None:
    """`log -o FIFO` (also with --append or --force, which a stream ignores) while another
    program reads it: every record arrives, exit 0, the FIFO stays a FIFO."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    lines: list[bytes] = []
    reader = _reader_of(fifo, lines)
    result = gpuscope(["log", "--no-gpu", "--interval", "0.1", "--duration", "0.5", *extra, "-o", str(fifo)],
                      cwd=tmp_path)  # fmt: skip
    reader.join(timeout=30)
    assert result.returncode == 0, result.stderr
    copy = tmp_path / ("copy.csv" if "csv" in extra else "copy.jsonl")
    copy.write_bytes(b"".join(lines))
    assert len(_clean_records(copy)) == 5
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_log_into_dev_fd_of_a_pipe(tmp_path: Path) -> None:
    """`log -o /dev/fd/N` where N is an inherited pipe: written as a stream, every record read."""
    read_end, write_end = os.pipe()
    process = subprocess.Popen(
        [*_log_argv(f"/dev/fd/{write_end}", "--duration", "0.5")], pass_fds=(write_end,),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=_env(), cwd=tmp_path,
    )  # fmt: skip
    os.close(write_end)
    with os.fdopen(read_end, "rb") as handle:
        data = handle.read()
    assert process.wait(timeout=60) == 0
    (tmp_path / "copy.jsonl").write_bytes(data)
    assert len(_clean_records(tmp_path / "copy.jsonl")) == 5


def test_log_into_a_process_substitution(tmp_path: Path) -> None:
    """`bash -c 'gpuscope log -o >(gzip > run.jsonl.gz)'`: the gzip file holds every record."""
    script = (
        f'"{sys.executable}" -m gpuscope log --no-gpu --interval 0.1 --duration 0.5 -o >(gzip > run.jsonl.gz); '
        "code=$?; wait $!; exit $code"
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=_env(), cwd=tmp_path,
                          timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (tmp_path / "copy.jsonl").write_bytes(gzip.decompress((tmp_path / "run.jsonl.gz").read_bytes()))
    assert len(_clean_records(tmp_path / "copy.jsonl")) == 5


def test_reader_of_the_fifo_leaving_ends_the_log_quietly(tmp_path: Path) -> None:
    """The program reading `log -o FIFO` leaves after two records: the logger ends with exit 0,
    no traceback, its summary saying why the rest was not written."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    lines: list[bytes] = []
    reader = _reader_of(fifo, lines, close_after_lines=2)
    result = gpuscope(["log", "--no-gpu", "--interval", "0.1", "--duration", "30", "-o", str(fifo)], cwd=tmp_path)
    reader.join(timeout=30)
    assert result.returncode == 0, result.stderr
    assert not _errors(result.stderr)
    assert "the reader closed the pipe" in result.stderr


def test_log_into_dev_null(tmp_path: Path) -> None:
    """`log -o /dev/null` (a character device): written like standard output, exit 0, no lock
    file or other file created."""
    result = gpuscope(["log", "--no-gpu", "--interval", "0.1", "--duration", "0.3", "--force", "-o", "/dev/null"],
                      cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "wrote 3 records" in result.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert list(tmp_path.iterdir()) == []


def test_log_into_a_block_device_is_refused(tmp_path: Path) -> None:
    """`log -o` a block device node (an unassigned major, so nothing real): exit 2, one line."""
    node = tmp_path / "disk"
    try:
        os.mknod(node, 0o600 | stat.S_IFBLK, os.makedev(241, 7))
    except PermissionError:
        pytest.skip("needs root to make a device node")
    result = gpuscope(["log", "--no-gpu", "--duration", "0.3", "--force", "-o", str(node)], cwd=tmp_path)
    errors = _errors(result.stderr)
    assert result.returncode == 2 and len(errors) == 1 and "block device" in errors[0], result.stderr
    assert stat.S_ISBLK(os.stat(node).st_mode)


# --- 24.9: SIGSTOP / SIGCONT ---------------------------------------------------------------------


class _StallingTime:
    """A clock that moves only when the sampler waits or collects; wait number ``stall_at`` takes
    ``stall_s`` longer than asked (the process was stopped while it slept)."""

    def __init__(self, stall_at: int, stall_s: float) -> None:
        self.now, self.calls, self.stall_at, self.stall_s = 0.0, 0, stall_at, stall_s

    def clock(self) -> float:
        return self.now

    def wait(self, timeout_s: float) -> bool:
        self.calls += 1
        self.now += timeout_s + (self.stall_s if self.calls == self.stall_at else 0.0)
        return False


@pytest.mark.parametrize(("interval_s", "stall_s"), [(1.0, 0.94), (1.0, 2.5), (0.1, 0.094), (0.25, 0.2)])
def test_sampler_stopped_while_waiting_never_bursts(interval_s: float, stall_s: float) -> None:
    """The sampler stopped (SIGSTOP) during a wait, resumed just before the next tick: no sample
    follows the late one by less than half an interval or MIN_INTERVAL_S."""
    fake = _StallingTime(stall_at=3, stall_s=stall_s)
    starts: list[float] = []

    def collect() -> None:
        starts.append(fake.now)
        fake.now += 0.004

    Sampler(collect, interval_s, clock=fake.clock, wait=fake.wait, duration_s=12 * interval_s).run()
    gaps = [later - earlier for earlier, later in zip(starts, starts[1:])]
    assert len(starts) >= 8
    assert min(gaps) >= max(interval_s / 2, MIN_INTERVAL_S) - 1e-9, gaps


def test_sigstop_and_sigcont_give_no_catch_up_sample(tmp_path: Path) -> None:
    """A real `log` at 1 s stopped with SIGSTOP and continued 3/4 of an interval past a missed
    tick: no two records are closer than half the interval (the old schedule wrote one 0.25 s
    after the late one)."""
    out = tmp_path / "run.jsonl"
    process = _start(_log_argv(str(out), interval="1"), tmp_path)
    try:
        _wait_lines(out, 1, process)
        _wait_lines(out, 2, process)  # just written: the sampler now waits for the next tick
        process.send_signal(signal.SIGSTOP)
        first = json.loads(out.read_bytes().split(b"\n")[0])["timestamp"]
        grid = first + math.ceil(time.time() - first)  # the tick missed while stopped
        time.sleep(max(0.0, grid + 0.75 - time.time()))
        process.send_signal(signal.SIGCONT)
        _wait_lines(out, 4, process)  # the late sample and the one after it
    finally:
        process.send_signal(signal.SIGCONT)
        _stop(process)
    stamps = [float(str(record["timestamp"])) for record in _clean_records(out)]
    gaps = [later - earlier for earlier, later in zip(stamps, stamps[1:])]
    assert min(gaps) >= 0.5, gaps
