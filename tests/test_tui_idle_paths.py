"""The shortcuts a dashboard sample takes (issue 15's idle cost) give what the general paths
give: the same alerts, history, chart rows, cell widths, dirty regions and terminal output; and a
frame leaves nothing for the garbage collector."""

from __future__ import annotations

import dataclasses
import gc
import math

import pytest
from rich.cells import cell_len
from textual.geometry import Region
from textual.strip import Strip
from tui_samples import T0, make_app, make_many_gpu_app, run_async, sample, shown, tui_env  # noqa: F401

from gpuscope.schema.core import finite_or_none
from gpuscope.telemetry.alerts import evaluate
from gpuscope.tui.history import GPU_SERIES, History, gpu_key
from gpuscope.tui.widgets.chart import _bar_column, chart_lines
from gpuscope.tui.widgets.history_plot import resample_max
from gpuscope.tui.widgets.lines import _cells


def test_every_alert_kind_keeps_its_message() -> None:
    s = sample(3)
    s.gpus[0] = dataclasses.replace(
        s.gpus[0],
        temperature_gpu_c=91.0,
        temperature_memory_c=96.0,
        power_w=720.0,
        power_limit_w=700.0,
        memory_used_bytes=140 * 2**30,
        memory_total_bytes=141 * 2**30,
        ecc_uncorrected_errors=2,
        ecc_corrected_errors=150,
    )
    messages = {(a.kind, a.level): (a.message, a.value) for a in evaluate(s) if a.gpu == 0}
    assert messages[("temperature", "critical")] == ("GPU 0: 91°C (slowdown at 90°C)", 91.0)
    assert messages[("memory_temperature", "critical")] == ("GPU 0: memory 96°C (HBM max 95°C)", 96.0)
    assert messages[("power", "warning")] == ("GPU 0: 720 W of its 700 W cap", 720.0 / 700.0)
    assert messages[("memory_full", "critical")] == ("GPU 0: memory 99% full (1.0 GiB free)", 140 / 141)
    assert messages[("ecc_uncorrected", "critical")] == ("GPU 0: 2 uncorrected ECC errors", 2.0)
    assert messages[("ecc_corrected", "warning")] == ("GPU 0: 150 corrected ECC errors", 150.0)
    order = [a.kind for a in evaluate(s) if a.gpu == 0 and a.level == "critical"]
    assert order == ["temperature", "memory_temperature", "memory_full", "ecc_uncorrected"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1.5, 1.5), (-0.0, -0.0), (math.inf, None), (-math.inf, None), (math.nan, None), (3, 3.0), (True, None)],
)
def test_finite_or_none_takes_floats_first_with_the_same_rule(value: object, expected: float | None) -> None:
    got = finite_or_none(value)
    assert got == expected and (got is None) == (expected is None)


def test_history_rows_per_gpu_are_the_series_it_reports() -> None:
    history = History(capacity=10)
    first = sample(0)
    history.push(first)
    later = sample(1)
    added = dataclasses.replace(later.gpus[0], uuid="GPU-hot-added", index=7)
    history.push(dataclasses.replace(later, gpus=[*later.gpus, added]))  # a GPU appears late
    for gpu in later.gpus:
        for name in GPU_SERIES:
            expected = [finite_or_none(getattr(g, name)) for g in (first.gpus[gpu.index], gpu)]
            assert history.series("gpu", gpu_key(gpu), name) == expected
    assert history.series("gpu", "GPU-hot-added", "power_w") == [None, finite_or_none(added.power_w)]
    history.clear()
    history.push(first)
    assert history.series("gpu", gpu_key(first.gpus[0]), "power_w") == [finite_or_none(first.gpus[0].power_w)]


def _resample_reference(values: list[float | None], width: int) -> list[float | None]:
    count = len(values)
    out: list[float | None] = []
    for column in range(width):
        start = column * count // width
        end = max(start + 1, (column + 1) * count // width)
        present = [v for v in values[start:end] if v is not None]
        out.append(max(present) if present else None)
    return out


def test_resampling_without_gaps_keeps_each_shares_largest_value() -> None:
    values: list[float | None] = [math.sin(k / 5) * 50 + 50 for k in range(137)]
    for width in (1, 7, 75, 136):
        assert resample_max(values, width) == _resample_reference(values, width)
    values[40] = None
    assert resample_max(values, 75) == _resample_reference(values, 75)


def test_chart_rows_are_the_columns_stacked() -> None:
    values: list[float | None] = [None, -3.0, 0.0, 12.5, 50.0, 99.9, 100.0, 250.0, math.nan, 61.0]
    rows, width, top = 4, 12, 100.0
    lines = chart_lines("CPU", "61%", values, width, rows, top)
    heights = [
        None if v is None or not math.isfinite(v) else min(rows * 8, max(0, round(v / top * rows * 8))) for v in values
    ]
    columns = [_bar_column(height, rows) for height in heights]
    pad = " " * (width - len(values))
    assert [line[0][0] for line in lines[1:]] == [pad + "".join(cells) for cells in zip(*columns)]


def test_chart_columns_looked_up_are_the_ones_worked_out() -> None:
    """``chart_lines`` remembers each value's column per (scale, rows): a window that moves by a
    point a sample (values seen before, gaps, NaN, infinities, values past the scale, a scale
    that changes, no scale) gives the rows worked out afresh, and the memory stays bounded."""
    from gpuscope.tui.widgets import chart

    series: list[float | None] = [50 + 49 * math.sin(k / 3) for k in range(90)]
    series[10:12] = [None, math.nan]
    series[30:33] = [math.inf, -5.0, 180.0]
    width, rows = 40, 6
    for start in range(0, 50):
        window = series[start : start + 45]
        for top in (100.0, 150.0, None):
            lines = chart_lines("CPU", "x", window, width, rows, top)
            shown = chart.downsample_minmax(window, width)[-width:]
            finite = [v for v in shown if v is not None and math.isfinite(v)]
            scale = top if top else max(finite)
            heights = [
                None if v is None or not math.isfinite(v) else min(rows * 8, max(0, round(v / scale * rows * 8)))
                for v in shown
            ]
            columns = [_bar_column(height, rows) for height in heights]
            assert [line[0][0] for line in lines[1:]] == ["".join(cells) for cells in zip(*columns)], (start, top)
    assert len(chart._COLUMNS) <= chart._COLUMNS_SCALES
    assert all(len(known) <= chart._COLUMNS_VALUES + 1 for known in chart._COLUMNS.values())
    assert not any(value != value for known in chart._COLUMNS.values() for value in known)  # no NaN kept


@pytest.mark.parametrize(
    "text", ["util     80%", " ▁▂▃▄▅▆▇█ ", "45°C", "90.0 GB/s ×18", "ab…", "表示", "a\tb", "\x1b[0m", "é", ""]
)
def test_cells_counts_as_rich_does(text: str) -> None:
    assert _cells(text) == cell_len(text)


def _eight_gpu_step(app, step: int):  # noqa: ANN001, ANN202 - test helper
    base = app.latest_sample
    gpus = [
        dataclasses.replace(gpu, power_w=100.0 + 7 * step + index, utilization_percent=float((step * 13 + index) % 100))
        for index, gpu in enumerate(base.gpus)
    ]
    return dataclasses.replace(base, timestamp=T0 + 100 + step, gpus=gpus)


def test_frames_leave_no_cycles_and_write_what_textual_writes(tui_env) -> None:  # noqa: ANN001, F811 - fixture
    """Painting a sample's changes makes no reference cycles (Strip.divide caches a one-piece
    strip in itself: a Strip, its caches and its segments per line, for the garbage collector);
    the terminal text is ChopsUpdate's, with each cursor move made once."""
    from textual._compositor import ChopsUpdate

    @run_async
    async def check() -> None:
        app = make_many_gpu_app(persist_settings=False)
        async with shown(app, (160, 48)) as pilot:
            screen = app.screen
            written: list[tuple[str, str]] = []
            compositor = screen._compositor
            render_update = compositor.render_update

            def spy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
                update = render_update(*args, **kwargs)
                if update is not None and type(update) is not ChopsUpdate and isinstance(update, ChopsUpdate):
                    written.append(
                        (update.render_segments(app.console), ChopsUpdate.render_segments(update, app.console))
                    )
                return update

            compositor.render_update = spy
            app._deliver(_eight_gpu_step(app, 0))
            await pilot.pause(0.1)
            gc.collect()
            gc.disable()
            try:
                for step in (1, 2, 3):
                    app._deliver(_eight_gpu_step(app, step))
                    await pilot.pause(0.1)
                gc.set_debug(gc.DEBUG_SAVEALL)
                gc.collect()
                strips = [o for o in gc.garbage if isinstance(o, Strip)]
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
                gc.enable()
            assert strips == []
            assert len(written) >= 3 and all(ours == theirs and ours for ours, theirs in written)

    check()


def test_repaint_marks_the_regions_textual_marks(tui_env) -> None:  # noqa: ANN001, F811 - fixture
    """``textual_compat.repaint`` takes the content offset from the styles' gutter: the same
    regions as ``Widget._set_dirty`` for a bordered card and for the scrolling body."""
    from textual.containers import VerticalScroll

    from gpuscope.tui.textual_compat import repaint
    from gpuscope.tui.widgets.gpu_card import DenseGpuCard

    @run_async
    async def check() -> None:
        app = make_many_gpu_app(persist_settings=False)
        async with shown(app, (160, 24)):
            card = app.screen.query(DenseGpuCard).first()
            body = app.screen.query_one("#body", VerticalScroll)
            assert body.max_scroll_y > 0, "the body should scroll at 160x24"
            for widget in (card, body):
                assert widget.content_offset == widget.styles.gutter.top_left
                regions = (Region(0, 1, 10, 2), Region(-2, 0, 20, 1))
                widget._dirty_regions.clear()
                widget._repaint_regions.clear()
                widget._set_dirty(*regions)
                theirs = (set(widget._dirty_regions), set(widget._repaint_regions))
                widget._dirty_regions.clear()
                widget._repaint_regions.clear()
                repaint(widget, *regions)
                assert (set(widget._dirty_regions), set(widget._repaint_regions)) == theirs
                assert widget in app.screen._dirty_widgets

    check()


def test_repaint_leaves_a_widget_out_of_view_to_the_scroll(tui_env) -> None:  # noqa: ANN001, F811 - fixture
    """``textual_compat.repaint`` of a widget scrolled out of the body marks its lines but does
    not hand it to the screen (Textual's compositor takes such a widget for a new one and
    rebuilds its map unmarked, behind a pending layout: stale rows, tests/test_tui_terminal_state.py);
    once scrolled into view it shows what a fresh render shows."""
    from textual.containers import VerticalScroll

    from gpuscope.tui.textual_compat import repaint
    from gpuscope.tui.widgets.host_panels import CoreBars
    from gpuscope.tui.widgets.topbar import TopBar

    @run_async
    async def check() -> None:
        app = make_app(persist_settings=False)
        async with shown(app, (80, 24)) as pilot:
            screen = app.screen
            compositor = screen._compositor
            bars, top = screen.query_one(CoreBars), screen.query_one(TopBar)
            assert bars not in compositor.visible_widgets and top in compositor.visible_widgets
            await pilot.pause(0.1)
            screen._dirty_widgets.clear()
            repaint(bars, Region(0, 0, 4, 1))
            repaint(top)
            assert bars not in screen._dirty_widgets and top in screen._dirty_widgets
            assert bars._styles_cache.is_dirty(bars.styles.gutter.top)
            for step in range(40, 43):  # the bars change while out of view
                app._deliver(sample(step))
                await pilot.pause(0.1)
                assert not compositor._full_map_invalidated
            screen.query_one("#body", VerticalScroll).scroll_end(animate=False, immediate=True)
            await pilot.pause(0.2)
            assert bars in compositor.visible_widgets
            crop = Region(0, 0, *bars.outer_size)
            shown_lines = [strip.text for strip in bars.render_lines(crop)]
            bars._styles_cache.clear()
            assert [strip.text for strip in bars.render_lines(crop)] == shown_lines

    check()
