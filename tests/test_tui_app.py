"""Pilot-driven behaviour of the app: screens, unavailable metrics, panels, themes, screenshots,
processes. Data comes from hand-made samples (tests/tui_samples.py); no hardware."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static
from tui_samples import make_app, run_async, tui_env, wait_for_sample  # noqa: F401 - tui_env is a fixture

from gpuscope.tui import config
from gpuscope.tui.screens.dashboard import DashboardScreen
from gpuscope.tui.screens.processes import ProcessesScreen
from gpuscope.tui.screens.roofline import RooflineScreen
from gpuscope.tui.widgets.gpu_card import GpuCard
from gpuscope.tui.widgets.topbar import TopBar

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
async def test_a_screen_shown_again_is_reused_and_up_to_date_at_once(tui_env: Path) -> None:
    from dataclasses import replace

    from gpuscope.tui.widgets.chart import PlotextView

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_sample(pilot, app)
        dashboard = app.screen
        await pilot.press("2")
        await pilot.pause()
        roofline = app.screen
        assert isinstance(roofline, RooflineScreen)
        chart_before = str(roofline.query_one(PlotextView).render())
        await pilot.press("1")
        await pilot.pause()
        assert app.screen is dashboard  # installed once, not composed again
        # A sample while the roofline is hidden does not reach it ...
        newer = replace(app.latest_sample, timestamp=app.latest_sample.timestamp + 3600)
        app._deliver(newer)
        assert roofline._shown_sample is not newer
        # ... and a theme change while it is hidden reaches its chart when it shows again.
        app.theme = "gpuscope-light"
        await pilot.pause()
        # Switching shows the latest sample in the same step, before any frame is painted.
        app.switch_mode("roofline")
        assert app.screen is roofline and roofline._shown_sample is newer
        assert roofline.query_one(TopBar)._right.endswith(time.strftime("%H:%M:%S", time.localtime(newer.timestamp)))
        await pilot.pause()
        assert roofline._palette is app.chart_palette
        assert str(roofline.query_one(PlotextView).render()) == chart_before  # same data, new colours
        await pilot.press("1")
        await pilot.pause()
        assert app.screen is dashboard and dashboard._shown_sample is newer


@run_async
async def test_dashboard_shows_values_and_never_zero_for_unavailable(tui_env: Path) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_sample(pilot, app)
        cards = list(app.screen.query(GpuCard))
        assert len(cards) == 2
        h200, a100 = cards
        assert "H200" in str(h200.border_title) and "A100" in str(a100.border_title)
        assert h200.cells.cell("dram").value_text.startswith("3.")  # TB/s
        dram = a100.cells.cell("dram")
        assert dram.value_text == "n/a"
        assert dram.reason is not None and "GPM needs Hopper" in dram.reason
        nvlink = a100.cells.cell("nvlink_tx")
        assert nvlink.value_text == "n/a" and "no active NVLink" in (nvlink.reason or "")
        assert h200.cells.cell("fan").value_text == "n/a"  # the H200 sample's fan is unavailable too
        # tab walks through the n/a values and explains each in the hint line
        hint = app.screen.query_one("#hint", Static)
        seen = []
        for _ in range(12):
            await pilot.press("tab")
            seen.append(str(hint.render()))
        assert any(text.startswith("GPU 0 NVIDIA H200 · fan: ") and "passively cooled" in text for text in seen)
        assert any(
            text.startswith("GPU 1 NVIDIA A100-SXM4-80GB · DRAM: ") and "GPM needs Hopper" in text for text in seen
        )
        assert not any(" util:" in text for text in seen)  # values are skipped
        assert not any(text.count("not supported by this GPU or driver") > 1 for text in seen)  # said once
        # the mouse over an n/a cell shows the reason as a tooltip
        grid = a100.cells
        geometry = grid._geometry(grid.size.width)
        index = grid.keys.index("dram")
        await pilot.hover(grid, offset=(geometry.starts[index % geometry.columns] + 1, index // geometry.columns))
        assert "GPM needs Hopper" in str(grid.tooltip)
        assert "node01" in str(app.screen.query_one(TopBar).render())
        assert "22:13:49" in str(app.screen.query_one(TopBar).render())  # sample time, UTC


@run_async
async def test_no_gpu_shows_cpu_side_and_one_line_why(tui_env: Path) -> None:
    app = make_app(gpus=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_sample(pilot, app)
        line = app.screen.query_one("#no-gpu", Static)
        assert line.display
        text = str(line.render())
        assert "No NVIDIA GPUs: no driver or library" in text and "libnvidia-ml.so.1 not found" in text
        assert len(text.splitlines()) == 1 + ("No AMD GPUs:" in text)  # one line per vendor that gave none
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
        assert any("Screenshot saved" in n.message for n in app._notifications)
        await pilot.press("R")
        await app.workers.wait_for_complete()
        await pilot.pause()
        messages = [n.message for n in app._notifications]
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
            grid = card.cells
            columns, cell_width = grid._geometry(grid.size.width)[:2]
            assert cell_width >= 22 and columns >= 3  # labels and values stay readable
            lines = [strip.text for strip in grid.render_lines(grid.region.reset_offset)]
            assert len(lines) == grid.size.height and any("util" in line for line in lines)
            assert not any("…" in line for line in lines)  # no value cut short
        body = app.screen.query_one("#body")
        if size == (200, 60):
            assert body.max_scroll_y == 0  # everything visible at once
            assert all("-tall" in card.classes for card in app.screen.query(GpuCard))
        else:
            assert body.max_scroll_y > 0  # reachable by scrolling


@run_async
async def test_lost_gpu_and_mig_instances_get_their_own_cards(tui_env: Path) -> None:
    import dataclasses

    from tui_samples import a100, h200, sample

    from gpuscope.telemetry.values import Reason, Unavailable
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.sources import ScriptedSource

    lost_reason = Unavailable(Reason.GPU_LOST, "GPU 1 fell off the bus")
    lost = dataclasses.replace(a100(3), state="lost", utilization_percent=lost_reason, power_w=lost_reason)
    mig = dataclasses.replace(
        h200(3),
        name="NVIDIA H200 MIG 3g.71gb",
        uuid="MIG-1",
        mig_parent_index=0,
        mig_gpu_instance_id=1,
        mig_compute_instance_id=0,
    )
    record = dataclasses.replace(sample(3), gpus=[h200(3), mig, lost])
    app = GpuscopeApp(ScriptedSource([record]), interval_s=3600)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.pause()
        cards = list(app.screen.query(".gpu-card"))  # three GPUs at 120x40: dense cards
        assert [str(card.border_title) for card in cards] == [
            "GPU 0 · NVIDIA H200 · Hopper",
            "GPU 0 MIG 1.0 · NVIDIA H200 MIG 3g.71gb · Hopper",
            "GPU 1 · NVIDIA A100-SXM4-80GB · Ampere · LOST",
        ]
        assert "-lost" in cards[2].classes and "-lost" not in cards[0].classes
        util = cards[2].cells.cell("util")
        assert util.value_text == "n/a" and "fell off the bus" in (util.reason or "")


def test_tui_command_rejects_bad_options_in_one_line(
    tui_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuscope.cli import main

    bad = tmp_path / "results.json"
    bad.write_text("{not json")
    assert main(["--probes", str(bad)]) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpuscope: error: ") and "results.json" in err and len(err.splitlines()) == 1
    assert main(["tui", "--interval", "0.01"]) == 2
    assert "minimum" in capsys.readouterr().err
    assert main(["tui", "--suite", str(tmp_path / "nope.toml")]) == 3


@run_async
async def test_top_bar_tabs_and_key_bar_are_clickable(tui_env: Path, tmp_path: Path) -> None:
    from gpuscope.tui.widgets.keybar import KeyBar

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_sample(pilot, app)
        top = str(app.screen.query_one(TopBar).render())
        await pilot.click(TopBar, offset=(top.index("Processes") + 1, 0))
        await pilot.pause()
        assert isinstance(app.screen, ProcessesScreen)
        keys = str(app.screen.query_one(KeyBar).render())
        assert "o Sort" in keys and "k Signal" in keys and "s Screenshot" in keys and "^p palette" in keys
        await pilot.click(KeyBar, offset=(keys.index("Screenshot"), 0))
        await pilot.pause()
        assert list((tmp_path / "shots").glob("gpuscope-processes-*.svg"))
