"""Issue 27.4: a profile that cannot finish says so (a warning naming the steps run and the steps
needed) when it is closed, dropped or the program exits, and keeps what it has (a partial profile
marked incomplete); torch's profiler noise (kineto's ``USDT: ... profiler_start`` lines, written
from C++ to fd 2) never reaches the user's terminal, while real output does."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from gpuscope.profiling.quiet import PROFILER_NOISE, drop_profiler_noise, without_noise

USDT = b"USDT:2026-12-05 00:16:14 18008:18008 SyncActivityProfilerHandler.cpp:52] profiler_start\n"


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter as a user's program; its stdout and stderr are the terminal."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args], capture_output=True, text=True, timeout=300
    )


def test_noise_lines_are_dropped_and_nothing_else() -> None:
    assert PROFILER_NOISE.match(USDT)
    data = b"a real error\n" + USDT + b"USDT: not kineto's format\npartial line"
    assert without_noise(data) == b"a real error\nUSDT: not kineto's format\npartial line"


def test_only_noise_is_kept_off_the_descriptors_of_a_real_process() -> None:
    done = _run(
        """
        import os, sys
        from gpuscope.profiling.quiet import drop_profiler_noise
        print("before", flush=True)
        with drop_profiler_noise():
            os.write(2, USDT_LINE)
            os.write(2, b"E kineto: a real error\\n")
            os.write(1, b"C stdout\\n")
            print("python stdout")
            sys.stderr.write("python stderr\\n")
        print("after")
        """.replace("USDT_LINE", repr(USDT))
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["before", "C stdout", "python stdout", "after"]
    assert done.stderr.splitlines() == ["E kineto: a real error", "python stderr"]


def test_a_short_loop_warns_at_exit_keeps_a_partial_profile_and_prints_no_usdt(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    results = tmp_path / "r.json"
    done = _run(
        """
        import sys, torch, gpuscope
        prof = gpuscope.profile(name="short loop", device="cpu", steps=3, results=sys.argv[1])
        x = torch.randn(32, 32)
        for _ in range(3):  # 1 warm-up + 1 counting + 1 profiled: 2 profiled steps short
            with prof:
                torch.mm(x, x).relu_()
        print("result", prof.result)
        """,
        str(results),
    )
    assert done.returncode == 0, done.stderr
    terminal = done.stdout + done.stderr
    assert "USDT" not in terminal and "profiler_start" not in terminal
    assert "result None" in done.stdout
    assert "IncompleteProfileWarning" in done.stderr
    assert "3 of the 5 steps it needs ran (1 of 1 warm-up, 1 of 1 counting, 1 of 3 profiled)" in done.stderr
    assert "marked incomplete" in done.stderr
    assert "<string>:3: IncompleteProfileWarning" in done.stderr  # points at the line that made the profiler
    (workload,) = json.loads(results.read_text())["workloads"]
    profile = workload["profile"]
    assert profile["incomplete"] is True and profile["steps"] == 1 and profile["steps_requested"] == 3
    assert any(note.startswith("INCOMPLETE: 1 of 3 profiled steps") for note in workload["notes"])
    assert any(group["op"] == "aten::mm" and group["flops"] == 2 * 32**3 for group in profile["groups"])


def test_close_and_the_finaliser_warn_and_keep_what_ran() -> None:
    torch = pytest.importorskip("torch")
    from gpuscope.profiling.api import IncompleteProfileWarning, profile

    x = torch.randn(16, 16)

    def loop(blocks: int, **options: int):  # the profiler is dropped when the function returns
        prof = profile(name="loop", device="cpu", powercap_root="/nonexistent", **options)
        for _ in range(blocks):
            with prof:
                torch.mm(x, x)
        return prof.steps_run

    with pytest.warns(IncompleteProfileWarning, match=r"4 of the 5 steps it needs ran .* 2 of 3 profiled"):
        assert loop(4, steps=3) == 4
        gc.collect()
    with pytest.warns(IncompleteProfileWarning, match="no profiled step ran, nothing to keep"):
        loop(2, steps=3)
        gc.collect()

    prof = profile(name="closed", device="cpu", steps=2, warmup=0, powercap_root="/nonexistent")
    for _ in range(2):
        with prof:
            torch.mm(x, x)
    with pytest.warns(IncompleteProfileWarning, match="kept a partial profile of 1 profiled step"):
        result = prof.close()
    assert result is prof.result and result is not None
    assert result.incomplete and result.steps == 1 and result.steps_requested == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # closed once: no second warning
        assert prof.close() is result

    complete = profile(name="complete", device="cpu", steps=1, warmup=0, powercap_root="/nonexistent")
    for _ in range(2):
        with complete:
            torch.mm(x, x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert complete.close() is complete.result and not complete.result.incomplete
        del complete
        gc.collect()


def test_drop_profiler_noise_leaves_a_closed_descriptor_alone() -> None:
    with drop_profiler_noise(fds=(987,)):
        pass


def test_a_callable_that_raises_leaves_no_partial_profile_and_no_warning(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from gpuscope.profiling.api import profile

    x = torch.randn(8, 8)
    calls = []

    def step() -> None:
        calls.append(1)
        if len(calls) == 4:  # the second profiled step
            raise KeyError("boom")
        torch.mm(x, x)

    results = tmp_path / "r.json"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(KeyError, match="boom"):
            profile(step, device="cpu", steps=3, results=results, powercap_root=tmp_path / "none")
        gc.collect()
    assert not results.exists()  # what fn raised propagated; the file was left as it was
