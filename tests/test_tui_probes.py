"""The probes screen runs a real (tiny) CPU suite in a child process: progress, measurements in
the table, points on the roofline; cancelling keeps what was measured."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable, Static
from tui_samples import make_app, run_async, tui_env, wait_for_sample  # noqa: F401

from gpuscope.results import to_results
from gpuscope.schema.events import Exited, Failed
from gpuscope.tui.probe_job import ProbeJob
from gpuscope.tui.roofline_data import measurement_points
from gpuscope.tui.screens.probes import ProbesScreen
from gpuscope.tui.screens.roofline import RooflineScreen

pytestmark = pytest.mark.slow

TINY_SUITE = """
[suite]
name = "tiny"
description = "a few seconds on a CPU (tests)"
samples = 3
target_sample_s = 0.005
warmup_max_s = 0.2
workload_samples = 3
workload_target_sample_s = 0.005
max_call_s = 0.5

[[probe]]
kind = "matmul"
devices = ["cpu"]
dtypes = ["fp32"]
shapes = [[128, 128, 128]]
libraries = ["numpy"]

[[probe]]
kind = "matmul"
role = "workload"
devices = ["cpu"]
dtypes = ["fp32"]
shapes = [[64, 256, 256]]

[[probe]]
kind = "memory"
devices = ["cpu"]
kernels = ["triad"]
working_sets = ["256KiB"]
dtype = "fp64"
"""

SLOW_SUITE = """
[suite]
name = "slow"
description = "long enough to cancel"
samples = 200
target_sample_s = 0.05
warmup_max_s = 0.2
max_call_s = 5.0

[[probe]]
kind = "matmul"
devices = ["cpu"]
dtypes = ["fp64", "fp32"]
shapes = [[512, 512, 512]]
libraries = ["numpy"]
"""


async def _wait_until(pilot, condition, timeout_s: float = 90.0) -> None:
    waited = 0.0
    while not condition():
        assert waited < timeout_s, "timed out"
        await pilot.pause(0.1)
        waited += 0.1


@run_async
async def test_run_tiny_suite_points_land_on_roofline(tui_env: Path, tmp_path: Path) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY_SUITE)
    app = make_app(extra_suites=[suite])
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.press("3")
        screen = app.screen
        assert isinstance(screen, ProbesScreen)
        await pilot.click("#probe-run")
        await pilot.pause()
        assert screen.job is not None
        await _wait_until(pilot, lambda: screen.job is None)
        status = str(screen.query_one("#probe-status", Static).render())
        assert status.startswith("Done:"), status
        table = screen.query_one("#probe-table", DataTable)
        names = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert names[:2] == ["matmul fp32 128x128x128", "matmul fp32 64x256x256"]
        assert len(names) == 3 and names[2].startswith("memory triad 256 KiB")  # "(l2)" depends on the CPU
        assert all(str(table.get_row_at(i)[6]) == "ok" for i in range(table.row_count))
        document, written = app.probe_results[-1]
        assert document.partial is False and len(document.measurements) == 3
        assert any(c.kind == "compute" and c.name == "fp32" for c in document.ceilings)
        assert isinstance(written, bytes)  # the child's file as written, for a report
        await pilot.press("2")
        await pilot.pause(0.3)
        roof = app.screen
        assert isinstance(roof, RooflineScreen)
        rows = roof.query_one("#roof-points", DataTable)
        points = [str(rows.get_row_at(i)[0]) for i in range(rows.row_count)]
        # a workload point and the ceiling GEMM as a point on its roof (names cut to the pane:
        # at 120 columns the numbers keep their columns, gpuscope.roofline.columns)
        shown = [name.rstrip("…") for name in points]
        assert any("matmul fp32 64x256x256".startswith(name) and len(name) >= 11 for name in shown), points
        assert sum(1 for name in shown if name.startswith("matmul fp32")) == 2, points
        summary = str(roof.query_one("#roof-summary", Static).render())
        assert "measured roofs" in summary and not summary.startswith("0 devices")


@run_async
async def test_cancel_keeps_partial_results(tui_env: Path, tmp_path: Path) -> None:
    suite = tmp_path / "slow.toml"
    suite.write_text(SLOW_SUITE)
    app = make_app(extra_suites=[suite])
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.press("3")
        screen = app.screen
        await pilot.press("ctrl+r")
        await _wait_until(
            pilot, lambda: "Running" in str(screen.query_one("#probe-status", Static).render()) or screen.job is None
        )
        await pilot.pause(0.5)
        await pilot.press("escape")
        await _wait_until(pilot, lambda: screen.job is None, timeout_s=30)
        status = str(screen.query_one("#probe-status", Static).render())
        assert "partial" in status or "exited" in status, status
        if app.probe_results:
            assert app.probe_results[-1].results.partial is True
        assert not screen.query_one("#probe-run").disabled  # ready for another run


def test_probe_job_reports_failure_as_event(tmp_path: Path) -> None:
    job = ProbeJob(tmp_path / "missing.toml", "cpu", tmp_path / "out.json")
    job.start()
    events = list(job.events())
    kinds = [type(event).__name__ for event in events]
    assert "Failed" in kinds and kinds[-1] == "Exited"
    failed = next(event for event in events if isinstance(event, Failed))
    assert "missing.toml" in failed.message
    assert isinstance(events[-1], Exited) and events[-1].returncode != 0


def test_measurement_points_skip_failed_and_workload_roles() -> None:
    doc = {
        "measurements": [
            {
                "name": "a",
                "device": "cpu",
                "flops": 10.0,
                "bytes": 5.0,
                "time_s": 1.0,
                "status": "ok",
                "parameters": {"dtype": "fp32"},
            },
            {"name": "b", "device": "cpu", "flops": 10.0, "bytes": 5.0, "time_s": 1.0, "status": "failed"},
            {
                "name": "c",
                "device": "cpu",
                "flops": 10.0,
                "bytes": 5.0,
                "time_s": 1.0,
                "status": "ok",
                "parameters": {"role": "workload"},
            },
            {"name": "d", "device": "cpu", "flops": 0.0, "bytes": 5.0, "time_s": 1.0, "status": "ok"},
        ]
    }
    points = measurement_points(to_results({"schema": "gpuscope.results", "schema_version": 1, **doc}, "doc"))
    assert [p.name for p in points] == ["a"] and points[0].dtype == "fp32"


def test_device_choice_and_live_line_use_the_cuda_mapping(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVML's GPU 2 on the lowest PCI bus is CUDA's device 0: the screen names and reads it so."""
    from dataclasses import replace

    from support.samples import make_sample

    from gpuscope.tui.screens.probes import _cuda_device_names, _gpu_of

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    sample = make_sample(gpus=3)
    buses = {0: "0000:02:00.0", 1: "0000:03:00.0", 2: "0000:01:00.0"}
    sample = replace(sample, gpus=[replace(gpu, pci_bus_id=buses[gpu.index]) for gpu in sample.gpus])
    assert _cuda_device_names(sample) == ["cuda:0", "cuda:1", "cuda:2"]
    assert [_gpu_of(sample, f"cuda:{n}").index for n in range(3)] == [2, 0, 1]
    assert _gpu_of(sample, "cuda:3") is None and _gpu_of(sample, "cpu") is None and _gpu_of(None, "cuda:0") is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")  # PCI positions: NVML 1, then NVML 2
    assert _cuda_device_names(sample) == ["cuda:0", "cuda:1"]
    assert [_gpu_of(sample, f"cuda:{n}").index for n in range(2)] == [1, 2]
