"""LineWidget (gpuscope/tui/widgets/lines.py): its own render_lines gives the strips Textual's
styles cache gives, and a data change repaints only the lines that changed."""

from __future__ import annotations

from dataclasses import replace

from textual.geometry import Region
from textual.widget import Widget
from tui_samples import make_app, run_async, shown, tui_env  # noqa: F401

from gpuscope.tui.widgets.host_panels import CoreBars
from gpuscope.tui.widgets.lines import LineWidget
from gpuscope.tui.widgets.metric import MetricCell


def test_line_widgets_paint_what_textual_paints(tui_env) -> None:  # noqa: ANN001, F811 - fixture
    @run_async
    async def check() -> None:
        app = make_app(persist_settings=False)
        async with shown(app, (120, 40)):
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
        async with shown(app, (120, 40)) as pilot:
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


def test_a_line_is_made_as_textual_would_make_it() -> None:
    """``_strip`` (one Strip per line, padded, filtered and between edges as it is made) gives the
    segments of Textual's own steps: Strip, adjust_cell_length, apply_filter, join."""
    from rich.segment import Segment
    from rich.style import Style
    from rich.terminal_theme import DEFAULT_TERMINAL_THEME
    from textual.color import Color
    from textual.filter import ANSIToTruecolor, DimFilter, LineFilter
    from textual.strip import Strip

    from gpuscope.tui.widgets.lines import _strip

    class Upper(LineFilter):  # a filter that looks at the text: not mapped style by style
        def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
            return [Segment(text.upper(), style) for text, style, _ in segments]

    base = Style(color="#c0c0c0", bgcolor="#101010")
    runs = [
        ("cpu ", Style(color="red", dim=True)),
        ("42%", None),
        ("", Style(bold=True)),
        (" ▂▄█", Style(color="blue")),
    ]
    background = Color(16, 16, 16)
    edges = ((Segment("│ ", base),), (Segment(" │", base),), 2, 2)
    for filters in ((), (ANSIToTruecolor(DEFAULT_TERMINAL_THEME), DimFilter()), (Upper(),)):
        for width in (5, 11, 20):
            theirs = Strip([Segment(text, base + style if style else base) for text, style in runs if text])
            theirs = theirs.adjust_cell_length(width, base)
            for line_filter in filters:
                theirs = theirs.apply_filter(line_filter, background)
            final: dict = {}
            for _ in range(2):  # the second time from the remembered styles
                ours = _strip(runs, base, width, filters, background, final)
                assert list(ours) == list(theirs) and ours.cell_length == width, (filters, width)
                framed = _strip(runs, base, width, filters, background, {}, edges)
                joined = Strip.join([Strip(edges[0]), theirs, Strip(edges[1])])
                assert list(framed) == list(joined) and framed.cell_length == width + 4
