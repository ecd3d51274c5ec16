"""LineWidget (gpuscope/tui/widgets/lines.py): its own render_lines gives the strips Textual's
styles cache gives, and a data change repaints only the lines that changed."""

from __future__ import annotations

from dataclasses import replace

from textual.geometry import Region
from textual.widget import Widget
from tui_samples import make_app, run_async, tui_env, wait_for_sample  # noqa: F401

from gpuscope.tui.widgets.host_panels import CoreBars
from gpuscope.tui.widgets.lines import LineWidget
from gpuscope.tui.widgets.metric import MetricCell


def test_line_widgets_paint_what_textual_paints(tui_env) -> None:  # noqa: ANN001, F811 - fixture
    @run_async
    async def check() -> None:
        app = make_app(persist_settings=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for_sample(pilot, app)
            await pilot.pause(0.1)
            widgets = [w for w in app.screen.query(LineWidget) if w.region.area]
            plain = [w for w in widgets if w._box is not None and w._box[0]]
            assert len(plain) >= 5, "the borderless line widgets should take the fast path"
            for widget in widgets:
                size = widget.region.size
                for crop in (size.region, Region(2, 0, max(1, size.width - 4), 1)):
                    ours = widget.render_lines(crop)
                    widget._styles_cache.clear()
                    theirs = Widget.render_lines(widget, crop)
                    assert [list(s) for s in ours] == [list(s) for s in theirs], f"{widget!r} {crop}"

    check()


def test_a_change_repaints_only_the_changed_lines(tui_env) -> None:  # noqa: ANN001, F811 - fixture
    @run_async
    async def check() -> None:
        app = make_app(persist_settings=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for_sample(pilot, app)
            await pilot.pause(0.1)
            bars = app.screen.query_one(CoreBars)
            cell = app.screen.query_one("#cpu-total", MetricCell)
            assert bars.region.height == 2  # eight cores in four columns
            await pilot.pause()
            bars._repaint_regions.clear()
            cell._repaint_regions.clear()
            host = app.latest_sample.host
            cores = list(host.cores)
            cores[1] = replace(cores[1], utilization_percent=3.0)  # core 1 sits on the second line
            bars.set_levels(replace(host, cores=cores))
            assert [(r.y, r.height) for r in bars._repaint_regions] == [(1, 1)]
            assert "   3% " in bars.render_lines(bars.region.size.region)[1].text
            cell.set_text(cell.value_text)  # same text: nothing to repaint
            assert not cell._repaint_regions

    check()
