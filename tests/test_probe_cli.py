"""``gpuscope probe`` end to end in a subprocess: results file, errors, Ctrl-C, no Textual."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from results_files import results_json

ROOT = Path(__file__).resolve().parents[1]

TINY = """\
[suite]
name = "tiny"
samples = 3
target_sample_s = 0.002
warmup_max_s = 0.2
contention_retries = 0

[[probe]]
kind = "matmul"
dtypes = ["fp32", "fp64"]
shapes = [[96, 96, 96]]

[[probe]]
kind = "matmul"
role = "workload"
dtypes = ["fp32"]
shapes = [[64, 128, 32]]

[[probe]]
kind = "memory"
kernels = ["copy", "triad", "read"]
working_sets = ["32KiB"]
"""

# Runs the CLI with Textual made unimportable, as on a machine without it.
RUNNER = (
    "import sys; sys.modules['textual'] = None; from gpuscope.cli import main; raise SystemExit(main(sys.argv[1:]))"
)


def _written(path: Path) -> bool:
    """True once the probe wrote its first measurement (its lock holds the file empty until then)."""
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:
        return False


def gpuscope(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-c", RUNNER, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
    )


@pytest.mark.slow
def test_tiny_suite_end_to_end_without_textual(tmp_path: Path) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY)
    output = tmp_path / "results.json"
    done = gpuscope("probe", "--device", "cpu", "--suite", str(suite), "--output", str(output), "--no-telemetry")
    assert done.returncode == 0, done.stderr
    results = results_json(output)
    assert results["partial"] is False
    names = {c["name"] for c in results["ceilings"]}
    assert {"fp32", "fp64", "l1.copy", "l1.triad", "l1.read"} <= names
    for ceiling in results["ceilings"]:
        measurement = next(m for m in results["measurements"] if m["id"] == ceiling["measurement_id"])
        assert measurement["status"] == "ok"
        assert ceiling["unit"] == ("FLOP/s" if ceiling["kind"] == "compute" else "B/s")
    fp32 = next(c for c in results["ceilings"] if c["name"] == "fp32")
    assert fp32["library"] in ("torch", "numpy")
    (workload,) = results["workloads"]
    assert workload["flops"] == 2 * 64 * 128 * 32 and workload["source"] == "probe"
    assert workload["time_p10_s"] <= workload["time_s"] <= workload["time_p90_s"]
    measurement = results["measurements"][0]
    for key in (
        "kind",
        "parameters",
        "flops",
        "bytes",
        "counting_rule",
        "samples_s",
        "statistic",
        "flop_per_s",
        "bytes_per_s",
        "validation_error",
        "versions",
        "telemetry_before",
        "telemetry_after",
    ):
        assert key in measurement
    assert measurement["versions"]["torch"] and measurement["versions"]["numpy_blas"]
    assert "fp32" in done.stdout  # the summary


@pytest.mark.slow
def test_cuda_without_a_gpu_is_one_line_resource_error(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    done = gpuscope("probe", "--device", "cuda", "--suite", "quick", "--output", str(tmp_path / "r.json"))
    assert done.returncode == 4
    assert done.stderr.count("\n") == 1 and "CUDA is not available" in done.stderr
    assert not (tmp_path / "r.json").exists()


def test_bad_suite_and_bad_device_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(TINY.replace('dtypes = ["fp32", "fp64"]', 'dtypes = ["fp99"]'))
    done = gpuscope("probe", "--suite", str(bad), "--output", str(tmp_path / "r.json"))
    assert done.returncode == 3
    assert done.stderr.strip().count("\n") == 0
    assert f"{bad}:10: invalid enum value 'fp99' - at `$.probe[0].dtypes[0]`" in done.stderr
    done = gpuscope("probe", "--device", "tpu", "--output", str(tmp_path / "r.json"))
    assert done.returncode == 2 and "expected cpu, cuda or cuda:N" in done.stderr
    done = gpuscope("probe", "--memory-fraction", "1.5", "--output", str(tmp_path / "r.json"))
    assert done.returncode == 2


def test_the_command_module_does_not_import_torch() -> None:
    code = (
        "import sys; import gpuscope.commands.probe; from gpuscope.cli import build_parser; build_parser(); "
        "print('torch' in sys.modules, 'textual' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=60,
    )
    assert done.stdout.split()[0] == "False", done.stderr


@pytest.mark.slow
def test_ctrl_c_keeps_partial_results(tmp_path: Path) -> None:
    suite = tmp_path / "long.toml"
    suite.write_text(
        '[suite]\nname = "long"\nsamples = 20\ntarget_sample_s = 0.02\ncontention_retries = 0\n\n'
        '[[probe]]\nkind = "matmul"\nlibraries = ["numpy"]\ndtypes = ["fp32", "fp64"]\n'
        "shapes = [[64, 64, 64], [96, 96, 96], [128, 128, 128], [160, 160, 160], [192, 192, 192]]\n"
    )
    output = tmp_path / "partial.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    process = subprocess.Popen(
        [sys.executable, "-c", RUNNER, "probe", "--suite", str(suite), "--output", str(output), "--no-telemetry"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not _written(output) and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert _written(output), "no measurement was written"
        process.send_signal(signal.SIGINT)
        # Liveness, not speed: the runner's own hard stop is 20 s after SIGINT.
        process.wait(timeout=40)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, process.stderr.read() if process.stderr else ""
    results = results_json(output)
    assert results["partial"] is True and "cancelled" in results["partial_reason"]
    assert results["measurements"] and len(results["measurements"]) < 10
    json.dumps(results)
