"""LineWidget (gpuscope/tui/widgets/lines.py): a line is made as Textual's own steps would make
it, and a data change refreshes only the lines that changed."""

from __future__ import annotations

from dataclasses import replace

from textual.geometry import Region
from textual.widget import Widget
from tui_samples import make_app, run_async, shown, tui_env  # noqa: F401

from gpuscope.tui.widgets.host_panels import CoreBars
from gpuscope.tui.widgets.metric import MetricCell


def _record_refreshes(widget: Widget) -> list[tuple[Region, ...]]:
    """The regions of each ``widget.refresh(...)`` from now on (the refresh still happens)."""
    calls: list[tuple[Region, ...]] = []
    refresh = widget.refresh

    def recording(*regions: Region, **options: bool) -> Widget:
        calls.append(regions)
        return refresh(*regions, **options)

    widget.refresh = recording  # type: ignore[method-assign]
    return calls


def test_a_change_repaints_only_the_changed_lines(tui_env) -> None:  # noqa: ANN001, F811 - fixture
    @run_async
    async def check() -> None:
        app = make_app(persist_settings=False)
        async with shown(app, (120, 40)) as pilot:
            bars = app.screen.query_one(CoreBars)
            cell = app.screen.query_one("#cpu-total", MetricCell)
            assert bars.region.height == 2  # eight cores in four columns
            await pilot.pause()
            asked = {bars: _record_refreshes(bars), cell: _record_refreshes(cell)}
            host = app.latest_sample.host
            cores = list(host.cores)
            cores[1] = replace(cores[1], utilization_percent=3.0)  # core 1 sits on the second line
            bars.set_levels(replace(host, cores=cores))
            assert [[(r.y, r.height) for r in regions] for regions in asked[bars]] == [[(1, 1)]]
            assert "   3% " in bars.render_lines(bars.region.size.region)[1].text
            cell.set_text(cell.value_text)  # same text: nothing to repaint
            assert asked[cell] == []

    check()


def test_a_line_is_made_as_textual_would_make_it() -> None:
    """``_strip`` (one Strip per line, padded or cut as it is made) gives the segments of
    Textual's own steps: Strip, adjust_cell_length; a name's control characters are escaped
    before the line is measured."""
    from rich.segment import Segment
    from rich.style import Style
    from textual.strip import Strip

    from gpuscope.textsafe import safe_text
    from gpuscope.tui.widgets.lines import _strip

    base = Style(color="#c0c0c0", bgcolor="#101010")
    for name in ("gpu0", "evil\x1b]0;title\x07"):
        runs = [
            ("cpu ", Style(color="red", dim=True)),
            ("42%", None),
            ("", Style(bold=True)),
            (" ▂▄█ ", Style(color="blue")),
            (name, None),
        ]
        for width in (5, 11, 20, 40):
            theirs = Strip([Segment(safe_text(text), base + style if style else base) for text, style in runs if text])
            theirs = theirs.adjust_cell_length(width, base)
            ours = _strip(runs, base, width)
            assert list(ours) == list(theirs) and ours.cell_length == width, (name, width)
