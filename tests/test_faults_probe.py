"""Faults during ``gpuscope probe``: out of memory at every size, and the process stopped midway
by SIGINT, SIGTERM or SIGKILL. The results file must always load and say ``partial`` when the
suite did not finish; an allocation that fails is a skipped measurement, not a dead run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from results_files import results_json

from gpuscope.results import to_results
from gpuscope.schema.core import encode_json
from gpuscope.schema.results import RunSummary

REPO = Path(__file__).resolve().parent.parent

LONG_SUITE = (
    '[suite]\nname = "long"\nsamples = 20\ntarget_sample_s = 0.02\ncontention_retries = 0\n\n'
    '[[probe]]\nkind = "matmul"\nlibraries = ["numpy"]\ndtypes = ["fp32", "fp64"]\n'
    "shapes = [[64, 64, 64], [96, 96, 96], [128, 128, 128], [160, 160, 160], [192, 192, 192]]\n"
)

OOM_SUITE = """
[suite]
name = "oom"
samples = 2
target_sample_s = 0.001
warmup_max_s = 0.05
contention_retries = 0

[[probe]]
kind = "matmul"
dtypes = ["fp32", "fp64"]
libraries = ["torch", "numpy"]
shapes = [[32, 32, 32], [64, 64, 64]]

[[probe]]
kind = "matmul"
role = "workload"
dtypes = ["fp32"]
shapes = [[16, 32, 8]]

[[probe]]
kind = "memory"
kernels = ["copy", "triad", "read"]
working_sets = ["16KiB", "64KiB"]
"""


def _written(path: Path) -> bool:
    """True once the probe wrote its first measurement (its lock holds the file empty until then)."""
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:
        return False


def _start_probe(tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    suite = tmp_path / "long.toml"
    suite.write_text(LONG_SUITE)
    output = tmp_path / "results.json"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("GPUSCOPE_FAKE_NVML", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuscope", "probe", "--suite", str(suite), "--output", str(output),
         "--no-telemetry", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while not _written(output) and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    if not _written(output):
        process.kill()
        raise AssertionError(f"no measurement was written: {process.communicate()[1]}")
    return process, output


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_probe_stopped_midway_leaves_a_results_file_marked_partial(tmp_path: Path, signum: int) -> None:
    """SIGINT is tests/test_probe_cli.py; SIGTERM and SIGKILL give no chance to clean up: the file
    written after the last measurement must already say partial."""
    process, output = _start_probe(tmp_path)
    try:
        process.send_signal(signum)
        process.wait(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == -signum
    results = results_json(output)  # whole, valid JSON: written atomically
    assert results["partial"] is True and results["partial_reason"]
    assert 1 <= len(results["measurements"]) < 10
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".")] == []  # no temp file left


# --- out of memory at every size --------------------------------------------------------------------


def _oom_factory(kind: str) -> Callable[..., Any]:
    import torch

    def boom(*args: Any, **kwargs: Any) -> Any:
        if kind == "cuda":
            raise torch.OutOfMemoryError(
                "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.11 GiB total capacity)"
            )
        if kind == "host":
            raise MemoryError()
        # torch's own message when the CPU allocator fails (seen with a 4e15-byte tensor)
        raise RuntimeError(
            "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
            "you tried to allocate 4000000 bytes. Error code 12 (Cannot allocate memory)"
        )

    return boom


_ALLOCATORS = {
    "torch": [
        "empty",
        "randn",
        "rand",
        "zeros",
        "ones",
        "full",
        "empty_like",
        "randn_like",
        "zeros_like",
        "ones_like",
        "rand_like",
        "empty_strided",
        "arange",
        "tensor",
        "from_numpy",
    ],
    "numpy.random": ["rand", "randn", "random", "standard_normal"],
    "numpy": ["empty", "zeros", "ones", "full"],
}


@pytest.mark.parametrize(
    "kind",
    [
        "cuda",
        "host",
        "cpu-allocator",  # torch's own CPU message: "DefaultCPUAllocator: can't allocate memory"
    ],
)
def test_out_of_memory_at_every_size_is_a_skipped_measurement(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    import importlib

    from gpuscope.probing.runner import ProbeRunner
    from gpuscope.probing.suite import parse_suite

    boom = _oom_factory(kind)
    for module_name, names in _ALLOCATORS.items():
        module = importlib.import_module(module_name)
        for name in names:
            if hasattr(module, name):
                monkeypatch.setattr(module, name, boom)
    runner = ProbeRunner(parse_suite(OOM_SUITE, "oom.toml"), "cpu", telemetry=False)
    results = to_results(json.loads(encode_json(runner.run(threading.Event()))), "oom")  # as the file holds it
    measurements = results.measurements
    assert len(measurements) >= 10  # every size was tried, none ended the run
    for measurement in measurements:
        assert measurement.status == "skipped", measurement
        assert measurement.error is not None and "out of memory" in measurement.error
    assert results.partial is False and results.ceilings == [] and results.workloads == []
    assert results.summary == RunSummary(ok=0, failed=0, skipped=len(measurements))


# --- Ctrl-C at any moment (issue 16, class 8) ----------------------------------------------------

#: Seconds after the first progress line ("[1/N] ...") at which SIGINT is sent: during the first
#: GEMM ceiling (torch's thread pool busy), between steps and early in the second step.
SIGINT_DELAYS_S = [0.0, 0.4, 1.0, 1.7, 2.5, 3.5]


@pytest.mark.slow
@pytest.mark.parametrize("delay_s", SIGINT_DELAYS_S, ids=[f"{delay:g}s" for delay in SIGINT_DELAYS_S])
def test_ctrl_c_during_the_quick_suite_exits_130_with_a_partial_file(tmp_path: Path, delay_s: float) -> None:
    """``gpuscope probe --device cpu --suite quick`` interrupted by SIGINT while torch runs: exit
    130 (never SIGABRT: "terminate called without an active exception"), one results file that
    loads and says partial, no traceback, no temporary file."""
    output = tmp_path / "results.json"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("GPUSCOPE_FAKE_NVML", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuscope", "probe", "--device", "cpu", "--suite", "quick", "--output", str(output)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert process.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        seen.append(line)
        if line.startswith("[1/"):
            break
    assert any(line.startswith("[1/") for line in seen), "".join(seen)
    time.sleep(delay_s)
    process.send_signal(signal.SIGINT)
    try:
        _, rest = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stderr = "".join(seen) + rest
    assert process.returncode == 130, stderr[-2000:]
    assert "terminate called" not in stderr and "Traceback" not in stderr and "Fatal Python error" not in stderr
    results = results_json(output)
    assert results["partial"] is True and "Ctrl-C" in results["partial_reason"]
    assert [path.name for path in tmp_path.iterdir()] == ["results.json"]
