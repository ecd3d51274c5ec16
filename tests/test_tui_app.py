"""Pilot-driven behaviour of the app: screens, unavailable metrics, panels, themes, screenshots,
processes. Data comes from hand-made samples (tests/tui_samples.py); no hardware."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from gpuscope.tui import config
from gpuscope.tui.screens.dashboard import DashboardScreen
from gpuscope.tui.screens.processes import ProcessesScreen
from gpuscope.tui.screens.roofline import RooflineScreen
from gpuscope.tui.widgets.gpu_card import GpuCard
from gpuscope.tui.widgets.metric import MetricCell
from gpuscope.tui.widgets.topbar import TopBar
from tui_samples import make_app, run_async, tui_env, wait_for_sample  # noqa: F401 - tui_env is a fixture

SIZE = (120, 40)


@run_async
async def test_screens_switch_by_key_and_palette(tui_env: Path) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_sample(pilot, app)
        assert isinstance(app.screen, DashboardScreen)
        await pilot.press("2")
        assert isinstance(app.screen, RooflineScreen)
        await pilot.press("4")
        assert isinstance(app.screen, ProcessesScreen)
        await pilot.press("1")
        assert isinstance(app.screen, DashboardScreen)
        # command palette: "Screen: Processes"
        await pilot.press("ctrl+p")
        await pilot.pause()
        for key in "screen: processes":
            await pilot.press(key if key != " " else "space")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert isinstance(app.screen, ProcessesScreen)


@run_async
async def test_dashboard_shows_values_and_never_zero_for_unavailable(tui_env: Path) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_sample(pilot, app)
        cards = list(app.screen.query(GpuCard))
        assert len(cards) == 2
        h200, a100 = cards
        assert "H200" in str(h200.border_title) and "A100" in str(a100.border_title)
        assert h200.query_one("#cell-dram", MetricCell).value_text.startswith("3.")  # TB/s
        dram = a100.query_one("#cell-dram", MetricCell)
        assert dram.value_text == "n/a"
        assert dram.reason is not None and "GPM needs Hopper" in dram.reason
        assert dram.can_focus and "GPM needs Hopper" in str(dram.tooltip)
        nvlink = a100.query_one("#cell-nvlink_tx", MetricCell)
        assert nvlink.value_text == "n/a" and "no active NVLink" in (nvlink.reason or "")
        # focusing an n/a cell explains it in the hint line
        dram.focus()
        await pilot.pause()
        hint = app.screen.query_one("#hint", Static)
        assert "GPM needs Hopper" in str(hint.render())
        # a value cell is not focusable (tab only visits the n/a ones)
        assert not h200.query_one("#cell-dram", MetricCell).can_focus
        assert "node01" in str(app.screen.query_one(TopBar).render())
        assert "22:13:49" in str(app.screen.query_one(TopBar).render())  # sample time, UTC


@run_async
async def test_no_gpu_shows_cpu_side_and_one_line_why(tui_env: Path) -> None:
    app = make_app(gpus=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_sample(pilot, app)
        line = app.screen.query_one("#no-gpu", Static)
        assert line.display
        assert "No NVIDIA GPU side" in str(line.render()) and "libnvidia-ml.so.1 not found" in str(line.render())
        assert not list(app.screen.query(GpuCard))
        assert app.screen.query_one("#cpu").display
        await pilot.press("4")
        status = str(app.screen.query_one("#proc-status", Static).render())
        assert "No GPU processes" in status and "libnvidia-ml" in status


@run_async
async def test_panels_hide_and_stay_hidden_across_runs(tui_env: Path) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.press("c")
        assert not app.screen.query_one("#cpu").display
        await pilot.press("n")
        assert not app.screen.query_one("#network").display
        await pilot.press("n")
        assert app.screen.query_one("#network").display
    assert config.load_settings()[0].hidden_panels == ["cpu"]
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_sample(pilot, app)
        assert not app.screen.query_one("#cpu").display
        assert app.screen.query_one("#gpus").display


@run_async
async def test_theme_switch_from_palette_is_remembered(tui_env: Path) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_sample(pilot, app)
        assert app.theme == "gpuscope-dark"
        assert set(app.available_themes) == {"gpuscope-dark", "gpuscope-light", "gpuscope-high-contrast"}
        await pilot.press("ctrl+p")
        for key in "theme":
            await pilot.press(key)
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause(0.3)
        for key in "light":
            await pilot.press(key)
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert app.theme == "gpuscope-light"
        assert app.chart_palette.highlight == "#C2185B"
    assert config.load_settings()[0].theme == "gpuscope-light"
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_sample(pilot, app)
        assert app.theme == "gpuscope-light"


@run_async
async def test_theme_option_and_bad_theme_falls_back_with_message(tui_env: Path) -> None:
    themes = tui_env / "themes"
    themes.mkdir(parents=True)
    (themes / "neon.toml").write_text('[theme]\nname = "neon"\nprimary = "not-a-colour"\n')
    messages: list[str] = []
    app = make_app(theme="neon")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_sample(pilot, app)
        messages = [n.message for n in app._notifications]
        assert app.theme == "gpuscope-dark"
    assert any("neon.toml" in m and "not a colour" in m for m in messages)
    assert any("No usable theme named 'neon'" in m for m in messages)
    assert config.load_settings()[0].theme is None  # a failed choice is not remembered
    app = make_app(theme="gpuscope-high-contrast")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_sample(pilot, app)
        assert app.theme == "gpuscope-high-contrast"
    assert config.load_settings()[0].theme == "gpuscope-high-contrast"


@run_async
async def test_screenshot_key_saves_svg_and_report_hook(tui_env: Path, tmp_path: Path) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.press("s")
        await pilot.pause()
        shots = list((tmp_path / "shots").glob("gpuscope-dashboard-*.svg"))
        assert len(shots) == 1 and shots[0].read_text().startswith("<svg")
        await pilot.press("R")
        await app.workers.wait_for_complete()
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert any("Screenshot saved" in m for m in messages)
        assert any("Report saved" in m for m in messages), messages
        reports = list((tmp_path / "shots").glob("gpuscope-report-*.html"))
        assert len(reports) == 1 and "node01" in reports[0].read_text()


@run_async
async def test_processes_table_sorts(tui_env: Path) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.press("4")
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        pids = lambda: [str(table.get_row_at(i)[1]) for i in range(table.row_count)]  # noqa: E731
        assert pids() == ["4242", "777", "5151"]  # GPU memory, largest first
        await pilot.press("o")  # next column after GPU mem: SM %
        assert app.screen.sort_column == "sm"
        assert pids()[-1] == "5151"  # n/a sorts below real values
        await pilot.press("i")
        assert pids()[0] == "5151"
        row = table.get_row_at([r for r in range(table.row_count) if str(table.get_row_at(r)[1]) == "5151"][0])
        assert str(row[5]) == "n/a"


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
@run_async
async def test_layout_fits_small_and_large_terminals(tui_env: Path, size: tuple[int, int]) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.pause(0.2)
        for card in app.screen.query(GpuCard):
            assert card.size.width <= size[0]
            for cell in card.query(MetricCell):
                assert cell.size.width >= 20, cell.id  # labels and values stay readable
        body = app.screen.query_one("#body")
        if size == (200, 60):
            assert body.max_scroll_y == 0  # everything visible at once
            assert all("-tall" in card.classes for card in app.screen.query(GpuCard))
        else:
            assert body.max_scroll_y > 0  # reachable by scrolling
