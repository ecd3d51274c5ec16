"""SVG snapshots of the topology screen (key 5): the fake 8 x H200 NVSwitch node at 80x24 (the
compact drawing) and 160x50 (NUMA nodes side by side), the 4-GPU PCIe node at 100x30; topology
reads scripted on a fixed clock, samples from the fake NVML, UTC.

Update after an intended change: ``pytest tests/test_topo_view_snapshots.py --snapshot-update``
and look at the SVGs in tests/__snapshots__/test_topo_view_snapshots/.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.topo_view import make_topology_app
from tui_samples import tui_env, wait_for_sample  # noqa: F401


async def _topology_shown(pilot) -> None:  # type: ignore[no-untyped-def]
    """Wait for the first sample and two topology reads, then show the screen and wait until it
    is mounted and drawn (no sleeping for a guessed time)."""
    app = pilot.app
    await wait_for_sample(pilot, app)
    for _ in range(200):
        if app.topology_feed.watch.reads >= 2:
            break
        await pilot.pause(0.02)
    app.topology_feed.period_s = app.topology_feed.idle_period_s = 3600.0
    await pilot.press("5")
    for _ in range(100):
        if app.screen.is_mounted and getattr(app.screen, "MODE", "") == "topology" and app.screen.detail:
            break
        await pilot.pause(0.02)
    assert app.screen.detail, "the topology screen was not drawn"
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (160, 50)], ids=["80x24", "160x50"])
def test_topology_hgx8(tui_env: Path, tmp_path: Path, snap_compare, size) -> None:  # type: ignore[no-untyped-def]
    app = make_topology_app("hgx8", tmp_path / "sys")
    assert snap_compare(app, terminal_size=size, run_before=_topology_shown)


def test_topology_pcie4(tui_env: Path, tmp_path: Path, snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = make_topology_app("pcie4", tmp_path / "sys")
    assert snap_compare(app, terminal_size=(100, 30), run_before=_topology_shown)
