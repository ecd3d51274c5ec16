"""SVG snapshots of every screen at fixed terminal sizes, from the real collector against the
fake NVML with two GPUs (an H200 with GPM and NVLink, an A100 without GPM), fixed clock, UTC.

Update after an intended change: ``pytest tests/test_tui_snapshots.py --snapshot-update`` and
look at the SVGs in tests/__snapshots__/test_tui_snapshots/.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_samples import fixed_cpu_info, make_app, make_fake_nvml_app, results_document, tui_env, wait_for_sample  # noqa: F401


def _app(**kwargs):
    app = make_fake_nvml_app(persist_settings=False, **kwargs)
    app.local_cpu_info = fixed_cpu_info()
    return app


async def _ready(pilot) -> None:
    await wait_for_sample(pilot, pilot.app)
    await pilot.pause(0.1)


def test_dashboard_two_gpus(tui_env: Path, snap_compare) -> None:
    assert snap_compare(_app(), terminal_size=(120, 40), run_before=_ready)


def test_dashboard_80x24(tui_env: Path, snap_compare) -> None:
    assert snap_compare(_app(), terminal_size=(80, 24), run_before=_ready)


def test_dashboard_no_gpu(tui_env: Path, snap_compare) -> None:
    app = make_app(gpus=False, persist_settings=False)
    assert snap_compare(app, terminal_size=(100, 30), run_before=_ready)


@pytest.mark.parametrize("theme", ["gpuscope-light", "gpuscope-high-contrast"])
def test_dashboard_themes(tui_env: Path, snap_compare, theme: str) -> None:
    assert snap_compare(_app(theme=theme), terminal_size=(100, 30), run_before=_ready)


def test_roofline_with_results_and_highlight(tui_env: Path, snap_compare) -> None:
    async def run_before(pilot) -> None:
        await _ready(pilot)
        await pilot.press("2")
        await pilot.pause(0.2)
        await pilot.press("down")  # select the second point: it is highlighted on the chart
        await pilot.pause(0.2)

    assert snap_compare(_app(probe_results=[results_document()]), terminal_size=(120, 40), run_before=run_before)


def test_processes(tui_env: Path, snap_compare) -> None:
    assert snap_compare(_app(), press=["4"], terminal_size=(100, 24), run_before=_ready)


def test_probes_idle(tui_env: Path, snap_compare, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuscope.tui import torch_check

    monkeypatch.setattr(
        torch_check, "cuda_unavailable_reason", lambda: "torch 2.13.0+cpu is built without CUDA"
    )  # whatever torch is here
    suite = tmp_path / "tiny.toml"
    suite.write_text("# placeholder\n")
    assert snap_compare(_app(extra_suites=[suite]), press=["3"], terminal_size=(100, 30), run_before=_ready)


# --- the monitor's states (issue 15), each at 80x24 and 160x48 ------------------------------------

SIZES = [(80, 24), (160, 48)]


def _signal_app():
    import dataclasses

    from gpuscope.tui.screens.processes import ProcessesScreen

    app = _app()
    own = [dataclasses.replace(p, uid=1001) if p.user == "alice" else p for p in app.source._processes]
    app.source._processes = own
    ProcessesScreen.effective_uid = staticmethod(lambda: 1001)  # type: ignore[assignment]
    return app


def _many_app():
    from tui_samples import make_many_gpu_app

    app = make_many_gpu_app(8, persist_settings=False)
    app.local_cpu_info = fixed_cpu_info()
    return app


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_monitor_dashboard(tui_env: Path, snap_compare, size) -> None:
    assert snap_compare(_app(), terminal_size=size, run_before=_ready)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_monitor_eight_gpus(tui_env: Path, snap_compare, size) -> None:
    assert snap_compare(_many_app(), terminal_size=size, run_before=_ready)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_monitor_all_panels_hidden(tui_env: Path, snap_compare, size) -> None:
    async def run_before(pilot) -> None:
        await _ready(pilot)
        await pilot.press(*"gcmndp")
        await pilot.pause(3.0)  # the toggle notifications expire

    assert snap_compare(_app(), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_monitor_window_15_min(tui_env: Path, snap_compare, size) -> None:
    async def run_before(pilot) -> None:
        await _ready(pilot)
        await pilot.press("w", "w")
        await pilot.pause(2.5)

    assert snap_compare(_app(), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_monitor_processes_tree_all(tui_env: Path, snap_compare, size) -> None:
    async def run_before(pilot) -> None:
        await _ready(pilot)
        await pilot.press("4", "a", "t")
        await pilot.pause(0.3)

    assert snap_compare(_app(), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_monitor_signal_dialog(tui_env: Path, snap_compare, size) -> None:
    from gpuscope.tui.screens.processes import ProcessesScreen

    async def run_before(pilot) -> None:
        await _ready(pilot)
        await pilot.press("4")
        await pilot.pause(0.3)
        await pilot.press("k")
        await pilot.pause(0.3)

    try:
        assert snap_compare(_signal_app(), terminal_size=size, run_before=run_before)
    finally:
        import os

        ProcessesScreen.effective_uid = staticmethod(os.geteuid)  # type: ignore[assignment]


def _roofline_screen(pilot_keys: tuple[str, ...] = ()):
    async def run_before(pilot) -> None:
        await _ready(pilot)
        await pilot.press("2")
        await pilot.pause(0.3)
        for key in pilot_keys:
            await pilot.press(key)
            await pilot.pause(0.2)

    return run_before


def test_roofline_cpu_only(tui_env: Path, snap_compare) -> None:
    from support.roofline import ceiling, workload
    from support.roofline import results_document as roofline_results

    document = roofline_results(
        "node01",
        devices=[{"device": "cpu", "type": "cpu", "name": "AMD EPYC 7B13", "host": "node01"}],
        ceilings=[
            ceiling("cpu", "compute", "fp32", 204e9),
            ceiling("cpu", "compute", "fp64", 107e9),
            ceiling("cpu", "memory", "dram.triad", 23e9),
        ],
        workloads=[
            workload("axpy 8M fp32", "cpu", 16.8e6, 100.7e6, 0.0075, dtype="fp32"),
            workload("matmul 2048 fp32", "cpu", 17.2e9, 50.3e6, 0.094, dtype="fp32"),
        ],
    )
    app = make_app(gpus=False, persist_settings=False, probe_results=[document])
    app.local_cpu_info = fixed_cpu_info()
    assert snap_compare(app, terminal_size=(120, 40), run_before=_roofline_screen())


def test_roofline_dozen_workloads_light_theme(tui_env: Path, snap_compare) -> None:
    from support.roofline import fleet_results

    document = fleet_results("node01")
    document["devices"][2]["name"] = "AMD EPYC 7B13"  # the fake host's CPU
    assert snap_compare(
        _app(probe_results=[document], theme="gpuscope-light"), terminal_size=(120, 40), run_before=_roofline_screen()
    )
