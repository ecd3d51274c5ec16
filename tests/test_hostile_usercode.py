"""The command line's edges and the user's own code, as real processes (issues 24.3, 24.4, 36.4, 36.5).

- A working directory deleted under gpuscope: a relative path is one line, exit 4; absolute
  paths (torch included) keep working.
- ``--help`` and ``--version`` to a full or closed standard output: exit 1, one line.
- The code given to ``measure`` and ``profile`` exits, raises anything (``SystemExit``,
  ``KeyboardInterrupt``, ``GeneratorExit``, ``BaseException`` subclasses, hostile messages,
  a ``__str__`` that raises): one escaped line, exit 1; a real Ctrl-C is exit 130; the results
  file is kept as it was. From Python, ``gpuscope.measure`` lets the user's exception through.
- A full file system under every command that writes an output: exit 1, one line, the
  existing file byte-identical, no temporary file left.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.roofline import h200_results
from support.suites import TINY_SUITE

from gpuscope.cli import COMMANDS

REPO = Path(__file__).resolve().parent.parent
#: Characters that must never reach the terminal raw from a hostile message.
RAW_UNSAFE = set("\x1b\x07\r\u202e\u2066")
FAST = ["--flops", "1", "--bytes", "1", "--max-time", "0.05", "--samples", "3", "--warmup-max", "0"]
PROFILE_KWARGS = json.dumps({"kwargs": {"d_model": 32, "heads": 2, "seq": 8, "batch": 2, "device": "cpu"}})

#: A module of hostile functions, written next to each test.
HOSTILE_MODULE = r"""
import asyncio, os, sys, time
import gpuscope.errors

class BadStr(Exception):
    def __str__(self):
        raise RuntimeError("no message for you")

class NonStr(Exception):
    def __str__(self):
        return 42

class Custom(BaseException):
    pass

Hostile = type("Evil\x1b]0;pwned\x07", (Exception,), {})

class Del:
    def __del__(self):
        raise ValueError("in __del__\x1b[31m")

def exit0(): sys.exit(0)
def exit3(): sys.exit(3)
def exit_text(): sys.exit("bye\x1b]0;pwned\x07\nsecond line")
def cancelled(): raise asyncio.CancelledError()
def bad_str(): raise BadStr()
def non_str(): raise NonStr()
def keyboard(): raise KeyboardInterrupt
def generator_exit(): raise GeneratorExit("closed")
def custom(): raise Custom("\u202eevil\x1b[2J\nline two")
def hostile_type(): raise Hostile("x")
def huge(): raise ValueError("\x1b" * 1_000_000)
def gpuscope_error(): raise gpuscope.errors.GpuscopeError("mine\x1b]0;x\x07", exit_code=77)
def ok(): return 1

def warns():
    import warnings
    warnings.warn("every call\x1b[2J")
    return 1

def deleter_and_chdir():
    Del()
    os.chdir("/")
    return 1

def close_stdout():
    sys.stdout.close()

def no_stdout():
    sys.stdout = None

def close_stderr_and_raise():
    sys.stderr.close()
    raise ValueError("after closing stderr")

def thread_raises():
    def fail():
        raise ValueError("in a thread\x1b[2J")
    worker = __import__("threading").Thread(target=fail, name="w\x1b]0;x\x07")
    worker.start()
    worker.join()
    return 1

def slow():
    # long enough that the test's SIGINT lands inside the user's call even on a loaded machine
    open(os.environ["GPUSCOPE_TEST_MARK"], "w").close()
    time.sleep(5)
"""


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    # no empty entry: in a deleted directory Python itself dies making '' absolute, before gpuscope runs
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    env.pop("PYTHONSTARTUP", None)
    env.pop("GPUSCOPE_FAKE_NVML", None)
    env.update(extra)
    return env


def gpuscope(argv: list[str], cwd: Path, timeout: float = 120.0, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuscope", *argv],
        capture_output=True, text=True, timeout=timeout, env=_env(**env), cwd=cwd, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def in_deleted_directory(argv: list[str], tmp_path: Path, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """``gpuscope argv`` started in a working directory that was deleted just before."""
    gone = tmp_path / "gone"
    gone.mkdir()
    return subprocess.run(
        ["sh", "-c", 'cd "$0" && rmdir "$0" && exec "$@"', str(gone), sys.executable, "-m", "gpuscope", *argv],
        capture_output=True, text=True, timeout=timeout, env=_env(), stdin=subprocess.DEVNULL,
    )  # fmt: skip


def error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr[-3000:]
    return [line for line in stderr.splitlines() if line.startswith("gpuscope: error:")]


def one_error(result: subprocess.CompletedProcess[str], code: int, *fragments: str) -> str:
    """The one error line of ``result``, after checking its exit code, that it is the only line on
    stderr, that it carries nothing raw and names ``fragments``."""
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == code, (result.returncode, result.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("gpuscope: error: "), result.stderr[-2000:]
    assert not set(lines[0]) & RAW_UNSAFE, repr(lines[0])
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """``hostile.py`` (the functions above) and a results file ``r.json`` in ``tmp_path``."""
    (tmp_path / "hostile.py").write_text(HOSTILE_MODULE, encoding="utf-8")
    (tmp_path / "r.json").write_text(json.dumps(h200_results()), encoding="utf-8")
    return tmp_path


# --- 24.3 a deleted working directory ----------------------------------------------------------


def test_deleted_cwd_relative_log_output_is_one_line_exit_4(tmp_path: Path) -> None:
    """`log -o run.jsonl` in a deleted working directory: one line naming run.jsonl and the gone directory, exit 4."""
    result = in_deleted_directory(["log", "--no-gpu", "--duration", "0.3", "-o", "run.jsonl"], tmp_path)
    one_error(result, 4, "run.jsonl", "working directory no longer exists")


def test_deleted_cwd_default_relative_output_is_refused(tmp_path: Path) -> None:
    """`probe` with its default output (results.json) in a deleted working directory: exit 4, no MKL abort."""
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY_SUITE, encoding="utf-8")
    result = in_deleted_directory(["probe", "--suite", str(suite), "-q"], tmp_path)
    one_error(result, 4, "results.json", "working directory no longer exists")


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["report", "--probes", "r.json", "-o", "{abs}/out.md"], "r.json"),
        (["roofline", "--probes", "r.json"], "r.json"),
        (["compare", "{abs}/r.json", "r.json"], "r.json"),
        (["measure", "./bench.py:step"], "./bench.py"),
        (["replay", "run.jsonl"], "run.jsonl"),
        (["probe", "--suite", "tiny.toml", "-o", "{abs}/res.json"], "tiny.toml"),
    ],
)
def test_deleted_cwd_relative_inputs_are_one_line_exit_4(tmp_path: Path, argv: list[str], named: str) -> None:
    """Relative inputs (results, a log, the user's module file) in a deleted working directory: exit 4, one line."""
    (tmp_path / "r.json").write_text(json.dumps(h200_results()), encoding="utf-8")
    result = in_deleted_directory([arg.replace("{abs}", str(tmp_path)) for arg in argv], tmp_path)
    one_error(result, 4, named, "working directory no longer exists")
    assert not (tmp_path / "out.md").exists() and not (tmp_path / "res.json").exists()


def test_deleted_cwd_module_by_name_says_why_it_is_missing(tmp_path: Path) -> None:
    """`measure mymodule:f` in a deleted working directory: the module cannot be found, and the line says why."""
    result = in_deleted_directory(["measure", "no_such_module_xyz:f"], tmp_path)
    one_error(result, 2, "no_such_module_xyz", "working directory no longer exists")


def test_deleted_cwd_absolute_log_output_works(tmp_path: Path) -> None:
    """`log -o /abs/run.jsonl` in a deleted working directory logs as usual (exit 0, records written)."""
    output = tmp_path / "run.jsonl"
    result = in_deleted_directory(
        ["log", "--no-gpu", "--interval", "0.1", "--duration", "0.3", "-o", str(output)], tmp_path
    )
    assert result.returncode == 0 and not error_lines(result.stderr), result.stderr
    assert output.read_text().count("\n") >= 1


def test_deleted_cwd_relative_write_is_refused_not_put_in_root(tmp_path: Path) -> None:
    """Any relative path written once the working directory is gone is refused (never created in /)."""
    name = f"gpuscope-test-{os.getpid()}.txt"
    gone = tmp_path / "gone"
    gone.mkdir()
    code = (
        "from gpuscope.workdir import leave_if_deleted\n"
        "assert leave_if_deleted()\n"
        "import os\n"
        "for attempt in (lambda: open(NAME, 'w'), lambda: os.mkdir(NAME), lambda: os.rename('/nonexistent', NAME)):\n"
        "    try:\n"
        "        attempt()\n"
        "    except Exception as exc:\n"
        "        print(type(exc).__name__)\n"
        "print(os.getcwd())\n"
    ).replace("NAME", repr(name))
    result = subprocess.run(
        ["sh", "-c", 'cd "$0" && rmdir "$0" && exec "$@"', str(gone), sys.executable, "-c", code],
        capture_output=True, text=True, timeout=60, env=_env(),
    )  # fmt: skip
    assert result.stdout.split() == ["WorkingDirectoryGone"] * 3 + ["/"], result.stdout + result.stderr
    assert not os.path.exists(f"/{name}")


@pytest.mark.slow
def test_deleted_cwd_absolute_probe_and_measure_load_torch(tmp_path: Path) -> None:
    """`probe` and `measure math:sqrt` with absolute paths in a deleted working directory: torch loads, exit 0."""
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY_SUITE, encoding="utf-8")
    results = tmp_path / "res.json"
    probe = in_deleted_directory(["probe", "--suite", str(suite), "-o", str(results), "-q"], tmp_path)
    assert probe.returncode == 0 and "oneMKL" not in probe.stderr, probe.stderr[-2000:]
    assert json.loads(results.read_text())["ceilings"]
    measured = in_deleted_directory(
        ["measure", "math:sqrt", "--args-json", "[2.0]", *FAST, "-o", str(results)], tmp_path
    )
    assert measured.returncode == 0 and not error_lines(measured.stderr), measured.stderr[-2000:]
    assert [w["name"] for w in json.loads(results.read_text())["workloads"]] == ["math:sqrt"]


# --- 24.4 --help and --version to a full or closed standard output ----------------------------


def _with_stdout(argv: list[str], redirect: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", f'exec "$@" {redirect}', "sh", sys.executable, "-m", "gpuscope", *argv],
        capture_output=False, stderr=subprocess.PIPE, text=True, timeout=60, env=_env(), cwd=cwd,
    )  # fmt: skip


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["-h"]])
@pytest.mark.parametrize("redirect", [">/dev/full", ">&-"])
def test_help_and_version_to_full_or_closed_stdout_exit_1(tmp_path: Path, argv: list[str], redirect: str) -> None:
    """`gpuscope --help >/dev/full` and `--version >&-`: exit 1 with one line, not 0 having printed nothing."""
    result = _with_stdout(argv, redirect, tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines() == [
        "gpuscope: error: cannot write standard output: "
        + ("No space left on device" if "full" in redirect else "standard output is closed")
    ]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_subcommand_help_to_full_or_closed_stdout_exit_1(tmp_path: Path, command: str) -> None:
    """`gpuscope COMMAND --help` to /dev/full and to a closed stdout: exit 1, one line, for every subcommand."""
    for redirect in (">/dev/full", ">&-"):
        result = _with_stdout([command, "--help"], redirect, tmp_path)
        assert result.returncode == 1, (redirect, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gpuscope: error: cannot write standard output"), lines
    fine = gpuscope([command, "--help"], tmp_path, timeout=60)
    assert fine.returncode == 0 and fine.stdout.startswith("usage: gpuscope"), fine.stderr


# --- 36.4 the user's own code --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "fragments"),
    [
        ("import sys\nsys.exit(0)\n", ["importing 'mod.py' raised SystemExit: 0"]),
        ("import sys\nsys.exit(3)\n", ["raised SystemExit: 3"]),
        ("raise KeyboardInterrupt\n", ["raised KeyboardInterrupt"]),
        ("import asyncio\nraise asyncio.CancelledError()\n", ["raised CancelledError"]),
        (
            "class E(Exception):\n    def __str__(self):\n        raise SystemExit(9)\nraise E()\n",
            ["raised E: <message not printable: its __str__ raised SystemExit>"],
        ),
        ("raise RuntimeError('\\x1b]0;pwned\\x07\\u202e')\n", ["RuntimeError: \\x1b]0;pwned\\x07\\u202e"]),
        ("import no_such_dependency_xyz\n", ["raised ModuleNotFoundError", "no_such_dependency_xyz"]),
        ("def __getattr__(name):\n    raise SystemExit(4)\n", ["mod.py:f raised SystemExit: 4"]),
        ("f = 3\n", ["is not callable"]),
    ],
)
def test_user_module_exiting_or_raising_at_import_is_one_line(
    tmp_path: Path, source: str, fragments: list[str]
) -> None:
    """The user's module exits or raises (hostile messages too) at import or lookup: one escaped line, exit 1."""
    (tmp_path / "mod.py").write_text(source, encoding="utf-8")
    (tmp_path / "r.json").write_text(json.dumps(h200_results()), encoding="utf-8")
    before = (tmp_path / "r.json").read_bytes()
    for command in ("measure", "profile"):
        result = gpuscope([command, "mod.py:f", "-o", "r.json"], tmp_path, timeout=60)
        one_error(result, 2 if "is not callable" in fragments[0] else 1, *fragments)
        assert result.stdout == ""
    assert (tmp_path / "r.json").read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["mod.py", "r.json"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "function", "fragments"),
    [
        ("measure", "exit0", ["hostile.py:exit0 raised SystemExit: 0"]),
        ("profile", "exit3", ["hostile.py:exit3 raised SystemExit: 3"]),
        ("measure", "cancelled", ["raised CancelledError"]),
        ("profile", "bad_str", ["raised BadStr: <message not printable: its __str__ raised RuntimeError>"]),
        ("measure", "keyboard", ["raised KeyboardInterrupt"]),
    ],
)
def test_user_function_exits_or_raises_is_one_line_and_keeps_results(
    hostile: Path, command: str, function: str, fragments: list[str]
) -> None:
    """The measured or profiled function exits (0, 3), raises CancelledError or KeyboardInterrupt: one line, exit 1."""
    before = (hostile / "r.json").read_bytes()
    more = FAST if command == "measure" else ["--steps", "1", "--warmup", "0"]
    result = gpuscope([command, f"hostile.py:{function}", "-o", "r.json", *more], hostile)
    if command == "measure":
        one_error(result, 1, *fragments)
    else:  # torch's profiler prints its own "USDT:" lines on start; gpuscope's is one line
        assert result.returncode == 1, result.stderr[-2000:]
        (line,) = error_lines(result.stderr)
        assert all(fragment in line for fragment in fragments) and not set(line) & RAW_UNSAFE, line
    assert result.stdout == ""
    assert (hostile / "r.json").read_bytes() == before
    assert sorted(path.name for path in hostile.iterdir()) == ["hostile.py", "r.json"]


@pytest.mark.parametrize(
    ("function", "fragments"),
    [
        ("exit_text", ["raised SystemExit: bye\\x1b]0;pwned\\x07"]),
        ("non_str", ["raised NonStr: <message not printable: its __str__ raised TypeError>"]),
        ("generator_exit", ["raised GeneratorExit: closed"]),
        ("custom", ["raised Custom: \\u202eevil\\x1b[2J"]),
        ("hostile_type", ["raised Evil\\x1b]0;pwned\\x07: x"]),
        ("huge", ["raised ValueError: \\x1b", "(1000000 characters)"]),
        ("gpuscope_error", ["mine\\x1b]0;x\\x07"]),
    ],
)
def test_user_function_hostile_exceptions_in_process(
    hostile: Path, capsys: pytest.CaptureFixture[str], function: str, fragments: list[str]
) -> None:
    """GeneratorExit, BaseException subclasses, hostile names and messages, exit code 77: one escaped line, exit 1."""
    pytest.importorskip("torch")
    from gpuscope.cli import main

    before = (hostile / "r.json").read_bytes()
    code = main(["measure", f"{hostile}/hostile.py:{function}", "-o", str(hostile / "r.json"), *FAST])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 1, err
    assert len(lines) == 1 and lines[0].startswith("gpuscope: error: ") and len(lines[0]) < 1000, err[:2000]
    assert not set(lines[0]) & RAW_UNSAFE, repr(lines[0])
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert (hostile / "r.json").read_bytes() == before


@pytest.mark.parametrize(
    ("function", "code", "summary", "error", "warning"),
    [
        ("close_stdout", 0, True, None, None),
        ("no_stdout", 0, True, None, None),
        ("close_stderr_and_raise", 1, False, "raised ValueError: after closing stderr", None),
        ("thread_raises", 0, True, None, "thread w\\x1b]0;x\\x07 raised ValueError: in a thread\\x1b[2J"),
        ("warns", 0, True, None, None),
    ],
)
def test_user_function_breaking_the_standard_streams_in_process(
    hostile: Path,
    capsys: pytest.CaptureFixture[str],
    function: str,
    code: int,
    summary: bool,
    error: str | None,
    warning: str | None,
) -> None:
    """The function closes or drops stdout, closes stderr, raises in a thread, warns: gpuscope's lines still appear."""
    pytest.importorskip("torch")
    from gpuscope.cli import main

    assert main(["measure", f"{hostile}/hostile.py:{function}", *FAST]) == code
    captured = capsys.readouterr()
    assert ("not saved: add --output" in captured.out) is summary, captured
    lines = captured.err.strip().splitlines()
    assert [line for line in lines if line.startswith("gpuscope: error: ")] == (
        [] if error is None else [line for line in lines if error in line]
    ) and (error is None or len(lines) == 1), captured.err
    warnings = [line for line in lines if line.startswith("gpuscope: warning: thread")]
    assert warnings == ([] if warning is None else [f"gpuscope: warning: {warning} (repeats not shown)"]), lines
    if function == "warns":  # a warning on every call is shown once, escaped
        assert lines == ["gpuscope: warning: every call\\x1b[2J"], lines


@pytest.mark.slow
def test_user_function_del_warning_and_chdir_keep_the_results_file(hostile: Path) -> None:
    """The function raises in __del__ on every call and changes directory: one warning, exit 0, the file kept."""
    name = f"usercode-{os.getpid()}-{hostile.name}.json"  # unique: it must not appear in /, where the code goes
    (hostile / "r.json").rename(hostile / name)
    result = gpuscope(["measure", "hostile.py:deleter_and_chdir", "-o", name, *FAST], hostile)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("gpuscope: warning: ignored")]
    assert warnings == [
        "gpuscope: warning: ignored ValueError: in __del__\\x1b[31m (in Del.__del__; repeats not shown)"
    ], result.stderr[-2000:]
    assert [w["name"] for w in json.loads((hostile / name).read_text())["workloads"]][-1] == (
        "hostile.py:deleter_and_chdir"
    )
    assert not Path("/", name).exists()


@pytest.mark.slow
def test_real_ctrl_c_during_user_code_is_exit_130(hostile: Path) -> None:
    """A real SIGINT while the user's function runs: `gpuscope: interrupted`, exit 130, results file unchanged."""
    mark = hostile / "started"
    before = (hostile / "r.json").read_bytes()
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuscope", "measure", "hostile.py:slow", "-o", "r.json", "--flops", "1", "--bytes",
         "1", "--max-time", "60"],
        cwd=hostile, env=_env(GPUSCOPE_TEST_MARK=str(mark)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not mark.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mark.exists(), process.communicate(timeout=10)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr and stderr.strip().splitlines()[-1] == "gpuscope: interrupted"
    assert (hostile / "r.json").read_bytes() == before


def test_python_api_lets_the_users_exception_through(tmp_path: Path) -> None:
    """`gpuscope.measure`/`profile` from Python: the user's ValueError and SystemExit propagate unchanged, file kept."""
    pytest.importorskip("torch")
    import gpuscope

    results = tmp_path / "r.json"
    results.write_text(json.dumps(h200_results()), encoding="utf-8")
    before = results.read_bytes()
    mine = ValueError("mine")

    def raises() -> None:
        raise mine

    def exits() -> None:
        sys.exit(5)

    fast: dict[str, Any] = {"samples": 3, "max_time_s": 0.05, "warmup_max_s": 0.0, "flops": 1, "bytes_moved": 1}
    with pytest.raises(ValueError) as caught:
        gpuscope.measure(raises, results=results, **fast)
    assert caught.value is mine
    with pytest.raises(SystemExit) as exited:
        gpuscope.measure(exits, results=results, **fast)
    assert exited.value.code == 5
    with pytest.raises(ValueError) as profiled:
        gpuscope.profile(raises, device="cpu", steps=1, warmup=0, results=results, energy=False)
    assert profiled.value is mine
    assert results.read_bytes() == before


# --- 36.5 a full file system under every command that writes an output ----------------------

#: Runs inside a private mount namespace (``unshare -m``): mounts a small tmpfs, puts the outputs
#: there, fills it, runs each command and reports exit code, stderr and the folder afterwards.
FULL_DISK_DRIVER = r"""
import hashlib, json, os, shutil, subprocess, sys
spec = json.loads(sys.argv[1])
folder = spec["folder"]
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", folder], check=True)
for name, source in spec["copies"].items():
    shutil.copyfile(source, os.path.join(folder, name))
with open(os.path.join(folder, "fill"), "wb", buffering=0) as fill:
    try:
        while True:
            fill.write(b"\0" * 4096)
    except OSError:
        pass
def state():
    out = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as handle:
            out[name] = hashlib.sha256(handle.read()).hexdigest()
    return out
before = state()
report = []
for argv in spec["commands"]:
    done = subprocess.run([sys.executable, "-m", "gpuscope", *argv], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, cwd=folder)
    report.append({"argv": argv, "code": done.returncode, "stderr": done.stderr, "after": state()})
print(json.dumps({"before": before, "runs": report}))
"""


@pytest.mark.slow
def test_full_file_system_under_every_output_is_exit_1_and_keeps_files(tmp_path: Path) -> None:
    """report, compare, probe, measure, profile, log on a full tmpfs: exit 1, one line, files intact, no temporary."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare for a private tmpfs")
    inputs = tmp_path / "in"
    inputs.mkdir()
    good = inputs / "good.json"
    good.write_text(json.dumps(h200_results()), encoding="utf-8")
    log = inputs / "good.jsonl"
    made = gpuscope(["log", "--no-gpu", "--interval", "0.1", "--duration", "0.3", "-o", str(log)], tmp_path)
    assert made.returncode == 0, made.stderr
    suite = inputs / "tiny.toml"
    suite.write_text(TINY_SUITE, encoding="utf-8")
    text = inputs / "previous.txt"
    text.write_text("previous content, must survive\n", encoding="utf-8")
    folder = tmp_path / "full"
    folder.mkdir()
    out = str(folder)
    copies = {name: str(text) for name in ("out.html", "out.md", "cmp.md", "res.json")}
    copies.update({"m.json": str(good), "p.json": str(good), "run.jsonl": str(log)})
    commands = [
        ["report", "--probes", str(good), "-o", f"{out}/out.html", "--force"],
        ["report", "--probes", str(good), "--log", str(log), "-o", f"{out}/out.md", "--force"],
        ["report", "--probes", str(good), "-o", f"{out}/new.json"],
        ["compare", str(good), str(good), "-o", f"{out}/cmp.md"],
        ["probe", "--suite", str(suite), "-o", f"{out}/res.json", "--force", "-q"],
        ["measure", "os:getpid", *FAST, "-o", f"{out}/m.json"],
        ["measure", "os:getpid", *FAST, "-o", f"{out}/new-m.json"],
        ["profile", "gpuscope.profiling.examples:transformer_train_step", "--args-json", PROFILE_KWARGS,
         "--device", "cpu", "--steps", "1", "--warmup", "0", "--no-chart", "-o", f"{out}/p.json"],
        ["log", "--no-gpu", "--interval", "0.1", "--duration", "0.5", "--append", "-o", f"{out}/run.jsonl"],
        ["log", "--no-gpu", "--interval", "0.1", "--duration", "0.5", "-o", f"{out}/new.jsonl"],
    ]  # fmt: skip
    spec = json.dumps({"folder": out, "copies": copies, "commands": commands})
    driven = subprocess.run(
        ["unshare", "-m", sys.executable, "-c", FULL_DISK_DRIVER, spec],
        capture_output=True, text=True, timeout=900, env=_env(),
    )  # fmt: skip
    assert driven.returncode == 0, driven.stderr[-3000:]
    outcome = json.loads(driven.stdout)
    for run in outcome["runs"]:
        output = Path(run["argv"][run["argv"].index("-o") + 1]).name
        where = f"{run['argv'][0]} -o {output}"
        errors = error_lines(run["stderr"])
        assert run["code"] == 1, (where, run["stderr"][-2000:])
        assert len(errors) == 1 and "No space left on device" in errors[0], (where, run["stderr"][-2000:])
        assert output in errors[0], (where, errors[0])
        assert run["after"] == outcome["before"], (where, "files changed or left behind")
