"""Issue 12 item 8: the GPU acceptance script fails loudly, checked on the CPU with the fake
NVML (``--device cpu --fake``), and its per-ceiling DRAM agreement rules on synthetic results."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.suites import TINY_SUITE as TINY

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_acceptance.py"


def _module() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_acceptance", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_acceptance"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


acceptance = _module()


def _run(
    tmp_path: Path, fake: str, *extra: str, budget_s: float = 150, suite_text: str = TINY
) -> tuple[int, str, dict[str, Any]]:
    """The script on the tiny suite with its own budget; this side waits a minute longer and
    then kills the script's whole process group (nothing it started may outlive the test)."""
    suite = tmp_path / "tiny.toml"
    suite.write_text(suite_text)
    out = tmp_path / "out"
    command = [
        sys.executable,
        str(SCRIPT),
        str(out),
        "--device",
        "cpu",
        "--fake",
        fake,
        "--suite",
        str(suite),
        "--budget-s",
        str(budget_s),
        *extra,
    ]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        process.communicate(timeout=budget_s + 60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"the acceptance script ignored its own {budget_s:.0f} s budget")
    summary = (out / "SUMMARY.txt").read_text()
    return process.returncode, summary, json.loads((out / "summary.json").read_text())


@pytest.mark.slow
def test_healthy_fake_run_passes_with_a_one_screen_summary(tmp_path: Path) -> None:
    code, summary, data = _run(tmp_path, "gpus=1xh200", "--require", "fp32,l1.copy")
    assert code == 0, summary
    lines = summary.splitlines()
    assert lines[0].startswith("PASS") and len(lines) <= 40 and max(map(len, lines)) <= 160
    assert data["failures"] == [] and {row["name"] for row in data["ceilings"]} >= {
        "fp32",
        "l1.copy",
    }
    assert (tmp_path / "out" / "doctor.json").exists() and (tmp_path / "out" / "telemetry.jsonl").exists()


@pytest.mark.slow
def test_broken_nvml_doctor_problems_and_a_missing_ceiling_fail(tmp_path: Path) -> None:
    """Every metric an error (init and identity still work), so doctor reports problems; and a
    required ceiling the suite does not make. Before: doctor always exited 0, unread."""
    code, summary, data = _run(tmp_path, "gpus=1xh200,sick=Unknown", "--require", "fp32,fp64")
    assert code == 1
    assert summary.splitlines()[0].startswith("FAIL")
    failures = "\n".join(data["failures"])
    assert "doctor reports" in failures and "problem(s)" in failures
    assert "every metric is unavailable" in failures
    assert "no power_w, memory_used_bytes, sm_clock_mhz reading" in failures
    assert "missing ceilings fp64" in failures or "tiny.json: missing or not JSON" in failures
    assert "reason(s) it fails" in summary


@pytest.mark.slow
def test_budget_is_hard(tmp_path: Path) -> None:
    """A step that would overrun is interrupted; the summary is still written; the run fails."""
    # A suite that needs minutes (200 samples of at least 0.5 s each), so the probe step overruns
    # the 21 s budget however fast the machine is.
    slow = TINY.replace("samples = 3", "samples = 200").replace("target_sample_s = 0.002", "target_sample_s = 0.5")
    code, summary, data = _run(tmp_path, "gpus=1xh200", "--require", "fp32", budget_s=21, suite_text=slow)
    assert code == 1
    assert data["elapsed_s"] < 21 + 20  # the reserve and one 10 s grace at most
    assert any("overran" in failure or "budget is spent" in failure for failure in data["failures"]), data["failures"]


# --- the rules, on synthetic results -------------------------------------------------------------


def _results(dram_reported: float | None, l2_reported: float | None) -> dict[str, Any]:
    def measurement(mid: int, bps: float, reported: float | None) -> dict[str, Any]:
        during: dict[str, Any] = {"available": True, "n": 12}
        if reported is not None:
            during["dram_bandwidth_bytes_per_s_mean"] = reported
        else:
            during["reason"] = "no_permission: profiling counters are admin-only"
        return {
            "id": mid,
            "status": "ok",
            "bytes_per_s": bps,
            "telemetry_during": during,
        }

    return {
        "devices": [{"name": "NVIDIA H200"}],
        "measurements": [
            measurement(1, 4.5e12, dram_reported),
            measurement(2, 9e12, l2_reported),
        ],
        "ceilings": [
            {"name": "dram.copy", "value": 4.5e12, "unit": "B/s", "measurement_id": 1},
            {"name": "l2.copy", "value": 9e12, "unit": "B/s", "measurement_id": 2},
        ],
    }


def test_dram_ceilings_must_agree_with_the_gpu_counter() -> None:
    rows, problems = acceptance.ceiling_rows(_results(4.6e12, 0.1e12), gpu=True)
    assert problems == [] and [row["check"].split()[-1] for row in rows] == ["ok", "ok"]
    _, problems = acceptance.ceiling_rows(_results(3.5e12, 0.1e12), gpu=True)
    assert len(problems) == 1 and problems[0].startswith("dram.copy: the GPU's DRAM counter says 3,500 GB/s")
    _, problems = acceptance.ceiling_rows(_results(4.5e12, 3e12), gpu=True)
    assert len(problems) == 1 and "spills to DRAM" in problems[0]
    rows, problems = acceptance.ceiling_rows(_results(None, None), gpu=True)
    assert len(problems) == 2 and "admin-only" in problems[0] and rows[0]["check"] == "UNCHECKED"
    assert acceptance.ceiling_rows(_results(None, None), gpu=False)[1] == []  # CPU: not applicable


def test_h200_targets_enforced_only_on_an_h200() -> None:
    results = _results(4.6e12, 0.1e12)
    missed, notes = acceptance.target_problems(results)
    assert any("bf16: missing" in line for line in missed) and notes == []
    results["devices"][0]["name"] = "NVIDIA H100 80GB HBM3"
    missed, notes = acceptance.target_problems(results)
    assert missed == [] and any("not enforced" in note for note in notes)


def test_doctor_and_results_rules() -> None:
    report = {
        "sections": [
            {
                "title": "GPU 0  NVIDIA H200  Hopper",
                "checks": [
                    {
                        "name": "profiling",
                        "status": "problem",
                        "detail": "no permission",
                    },
                    {"name": "GPM", "status": "ok", "detail": ""},
                ],
            }
        ]
    }
    assert acceptance.doctor_problems(report, 1) == ["GPU 0: profiling: no permission"]
    assert acceptance.doctor_problems({"sections": []}, 1) == ["doctor exited 1"]
    assert acceptance.doctor_problems(None, None) == ["doctor did not finish"]
    results = {
        "partial": True,
        "partial_reason": "cancelled",
        "measurements": [{"name": "x", "status": "failed", "error": "boom"}],
        "ceilings": [],
    }
    problems = acceptance.results_problems(results, "quick.json", ("bf16",))
    assert len(problems) == 3 and "partial" in problems[0] and "failed" in problems[1] and "bf16" in problems[2]


def test_probe_readings_come_from_the_probed_gpu() -> None:
    ok = {
        "measurements": [
            {
                "status": "ok",
                "telemetry_during": {
                    "power_w_mean": 500.0,
                    "memory_used_bytes_mean": 1e9,
                    "sm_clock_mhz_mean": 1980.0,
                },
            }
        ]
    }
    assert acceptance.probe_readings_problems(ok) == []
    bad = {
        "measurements": [
            {
                "status": "ok",
                "telemetry_during": {"available": True, "power_w_mean": 500.0},
            }
        ]
    }
    assert acceptance.probe_readings_problems(bad) == [
        "probed GPU: no memory_used_bytes, sm_clock_mhz reading during any measurement"
    ]
