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


def test_probes_idle(tui_env: Path, snap_compare, tmp_path: Path) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text("# placeholder\n")
    assert snap_compare(_app(extra_suites=[suite]), press=["3"], terminal_size=(100, 30), run_before=_ready)
