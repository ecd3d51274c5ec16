"""The fleet screen: SVG snapshots of the grid (64 GPUs at 160x48, 32 at 80x24) and of one
node's drill-down, and its keys (select, sort, problems only, name filter, back) on a made-up
fleet (tests/support/fleet_data.py; fixed clock, no network).

Update after an intended change: ``pytest tests/test_fleet_tui.py --snapshot-update``, then look
at the SVGs in tests/__snapshots__/test_fleet_tui/."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from support.fleet_data import StaticSource, fleet_snapshot
from tui_samples import tui_env  # noqa: F401

from gpuscope.fleet.http import FetchError
from gpuscope.tui.screens.fleet import FleetNodeScreen, FleetScreen
from gpuscope.tui.screens.fleet_app import FleetApp


def _app(nodes: int) -> FleetApp:
    return FleetApp(StaticSource(fleet_snapshot(nodes)), live=False)


async def _shown(pilot) -> None:  # type: ignore[no-untyped-def]
    app = pilot.app
    app.show_snapshot(app.source.refresh())
    await pilot.pause(0.1)


async def _node_view_shown(pilot) -> None:  # type: ignore[no-untyped-def]
    """Wait (up to 10 s, for a loaded machine) until the node view is mounted, then let it settle."""
    for _ in range(100):
        if isinstance(pilot.app.screen, FleetNodeScreen) and pilot.app.screen.is_mounted:
            break
        await pilot.pause(0.1)
    await pilot.pause(0.2)
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


def test_grid_64_gpus_160x48(tui_env: Path, snap_compare) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    assert snap_compare(_app(9), terminal_size=(160, 48), run_before=_shown)  # 8 nodes x 8 GPUs up, 1 down


def test_grid_32_gpus_80x24(tui_env: Path, snap_compare) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    assert snap_compare(_app(4), terminal_size=(80, 24), run_before=_shown)


def test_node_drill_down_160x48(tui_env: Path, snap_compare) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _shown(pilot)
        for key in ("down", "down", "down", "enter"):  # node03: the straggler's node
            await pilot.press(key)
        await _node_view_shown(pilot)

    assert snap_compare(_app(8), terminal_size=(160, 48), run_before=run_before)


def test_node_drill_down_80x24(tui_env: Path, snap_compare) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _shown(pilot)
        for key in ("down", "down", "down", "enter"):
            await pilot.press(key)
        await _node_view_shown(pilot)

    assert snap_compare(_app(4), terminal_size=(80, 24), run_before=run_before)


def test_keys_sort_filter_and_drill_down(tui_env: Path) -> None:  # noqa: F811
    asyncio.run(_keys())


async def _keys() -> None:
    app = _app(8)
    async with app.run_test(size=(160, 48)) as pilot:
        await _shown(pilot)
        screen = app.screen
        assert isinstance(screen, FleetScreen) and len(screen.view_nodes) == 8
        await pilot.press("o")  # SM activity, lowest first: the down node, then the straggler's
        assert screen.sort == "sm" and screen.view_nodes[1].hostname == "node03"
        await pilot.press("f")
        assert {node.hostname or node.instance for node in screen.view_nodes} == {
            "10.0.0.8:9842", "node03", "node05", "node06",
        }  # fmt: skip
        await pilot.press("f", "slash")
        await pilot.press(*"node07", "enter")
        assert [node.hostname for node in screen.view_nodes] == ["node07"]
        await pilot.press("enter")
        await pilot.pause(0.1)
        assert isinstance(app.screen, FleetNodeScreen) and app.screen.instance == "10.0.0.7:9842"
        await pilot.press("escape")
        await pilot.pause(0.1)
        back: object = app.screen
        assert back is screen
        await pilot.press("escape")  # clears the name filter
        assert len(screen.view_nodes) == 8


def test_refreshes_run_in_a_worker_and_failures_are_shown(tui_env: Path) -> None:  # noqa: F811
    asyncio.run(_refreshes())


async def _refreshes() -> None:
    class Failing(StaticSource):
        def refresh(self):  # type: ignore[no-untyped-def]
            raise FetchError("http://p:9090: connection refused (nothing listens there)")

    app = FleetApp(Failing(fleet_snapshot(2)), interval_s=0.5)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause(0.1)
        assert app.error and "connection refused" in app.error and app.snapshot is None
    live = FleetApp(StaticSource(fleet_snapshot(2)), interval_s=0.5)
    async with live.run_test(size=(100, 30)) as pilot:
        for _ in range(40):
            if live.refreshes >= 2:
                break
            await pilot.pause(0.1)
        assert live.refreshes >= 2 and live.snapshot is not None


@pytest.mark.parametrize("path", ["gpuscope/fleet"])
def test_the_fleet_package_imports_no_textual(path: str) -> None:
    root = Path(__file__).resolve().parent.parent / path
    for source in root.glob("*.py"):
        assert "textual" not in source.read_text(), source
