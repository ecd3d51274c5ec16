"""History charts: a fixed-scale block chart (cheap, one column per sample) with a title line,
and a Static that shows plotext output."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from gpuscope.tui.widgets.lines import LineWidget, Run

__all__ = ["ChartStyles", "HistoryChart", "PlotextView", "chart_lines", "chart_styles", "downsample_minmax"]

_LEVELS = " ▁▂▃▄▅▆▇█"


class ChartStyles(NamedTuple):
    """The styles of a chart's title, its bars and its quiet text ("no data", scale, axis); None: plain."""

    title: Style | None = None
    bar: Style | None = None
    empty: Style | None = None


#: No styles: plain text (tests, and charts drawn outside a widget).
PLAIN = ChartStyles()


def chart_styles(widget: LineWidget, colour: str | None) -> ChartStyles:
    """A chart widget's styles from its ``chart--*`` component classes; ``colour`` overrides the bars'."""
    bar = _colour_style(colour) if colour else widget.component_style("chart--bar")
    return ChartStyles(widget.component_style("chart--title"), bar, widget.component_style("chart--empty"))


@functools.lru_cache(maxsize=64)
def _colour_style(colour: str) -> Style:
    """``Style(color=colour)``, one object per colour: a line widget keeps a line whose runs (and
    their styles) are unchanged, and resolves each style once, so a new equal Style every sample
    cost a hash and a comparison per run and line."""
    return Style(color=colour)


def downsample_minmax(values: Sequence[float | None], buckets: int) -> list[float | None]:
    """Reduce ``values`` to at most ``buckets`` points keeping each bucket's max (peaks stay
    visible); a bucket with only gaps stays a gap."""
    if len(values) <= buckets or buckets <= 0:
        return list(values)
    out: list[float | None] = []
    size = len(values) / buckets
    for bucket in range(buckets):
        chunk = [v for v in values[int(bucket * size) : int((bucket + 1) * size)] if v is not None]
        out.append(max(chunk) if chunk else None)
    return out


class HistoryChart(LineWidget):
    """``title  current`` on the first line, then a bar chart of the history below it.

    The scale is fixed (``maximum``, e.g. 100 for percentages or the peak bandwidth) when given,
    otherwise the largest value seen in the window. Gaps (unavailable) are blank columns."""

    DEFAULT_CSS = """
    HistoryChart { height: 4; width: 1fr; min-width: 10; }
    HistoryChart > .chart--title { color: $text-muted; }
    HistoryChart > .chart--bar { color: $primary; }
    HistoryChart > .chart--empty { color: $text-disabled; }
    """
    COMPONENT_CLASSES = {"chart--title", "chart--bar", "chart--empty"}

    def __init__(
        self,
        title: str,
        formatter: Callable[[float], str] = lambda v: f"{v:.0f}",
        maximum: float | None = None,
        *,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.title = title
        self.formatter = formatter
        self.maximum = maximum
        self._values: tuple[float | None, ...] = ()
        self._current = ""
        self._colour: str | None = None

    def set_data(
        self, values: Sequence[float | None], current: str, maximum: float | None = None, colour: str | None = None
    ) -> None:
        """Replace the history (oldest first) and the current-value text; redraws if changed."""
        data = tuple(values[-512:])
        if data == self._values and current == self._current and maximum == self.maximum and colour == self._colour:
            return
        self._values, self._current, self._colour = data, current, colour
        if maximum is not None:
            self.maximum = maximum
        self.invalidate()

    @property
    def values(self) -> tuple[float | None, ...]:
        return self._values

    def build_lines(self, width: int, height: int) -> list[list[Run]]:
        return chart_lines(
            self.title,
            self._current,
            self._values,
            width,
            max(1, height - 1),
            self.maximum,
            chart_styles(self, self._colour),
        )


def chart_lines(
    title: str,
    current: str,
    values: Sequence[float | None],
    width: int,
    rows: int,
    maximum: float | None,
    styles: ChartStyles = PLAIN,
) -> list[list[Run]]:
    """A title line (``title current``) and ``rows`` lines of bars, ``width`` cells wide: one
    column per sample (downsampled keeping peaks), newest on the right, fixed scale ``maximum``
    (or the window's largest value); unavailable samples are blank columns."""
    head = f"{title} "
    room = max(0, width - 1)  # keep a gap before the next chart's title
    lines: list[list[Run]] = [[(head[:room], styles.title), (current[: max(0, room - len(head))], None)]]
    shown = downsample_minmax(values, width)[-width:] if width > 0 else []
    isfinite = math.isfinite
    if maximum:
        present = any(v is not None and isfinite(v) for v in shown)
        top = maximum
    else:
        finite = [v for v in shown if v is not None and isfinite(v)]
        present, top = bool(finite), max(finite, default=0.0)
    if not present:
        if values and not current.startswith("n/a"):
            lines.append([("no data", styles.empty)])
        return lines
    top = top if top and top > 0 else 1.0
    pad = " " * (width - len(shown))
    eighths = rows * 8
    bars, gap = _bar_columns(rows), _bar_column(None, rows)  # bars[h]: _bar_column(h, rows)
    known = _known_columns(top, rows)

    def column(value: float) -> tuple[str, ...]:
        if isfinite(value):
            ratio = value / top  # infinite for a huge value over a tiny scale: a full column
            cells = bars[eighths if ratio >= 1 else 0 if ratio <= 0 else round(ratio * eighths)]
        else:
            cells = gap
        if value == value:  # (a NaN is never found again)
            known[value] = cells
        return cells

    get = known.get
    columns = [gap if v is None else get(v) or column(v) for v in shown]  # top row first
    for row_cells in zip(*columns):
        lines.append([(pad + "".join(row_cells), styles.bar)])
    return lines


#: (scale, bar rows) -> {value: its column's cells, top row first}. A chart's window moves by
#: one point a sample, so all but the newest value were drawn at this scale before: a column is
#: looked up instead of worked out (a tall chart's bars cost most of its frame).
_COLUMNS: dict[tuple[float, int], dict[float, tuple[str, ...]]] = {}
#: Values remembered per (scale, rows), and (scale, rows) pairs remembered, before starting over.
_COLUMNS_VALUES, _COLUMNS_SCALES = 4096, 64


def _known_columns(top: float, rows: int) -> dict[float, tuple[str, ...]]:
    """The remembered columns of charts scaled to ``top`` with ``rows`` bar rows (bounded)."""
    known = _COLUMNS.get((top, rows))
    if known is None or len(known) > _COLUMNS_VALUES:
        if len(_COLUMNS) >= _COLUMNS_SCALES:
            _COLUMNS.clear()
        known = _COLUMNS[top, rows] = {}
    return known


@functools.lru_cache(maxsize=16)
def _bar_columns(rows: int) -> tuple[tuple[str, ...], ...]:
    """``_bar_column(h, rows)`` for every h from 0 to ``rows * 8``, by h."""
    return tuple(_bar_column(height, rows) for height in range(rows * 8 + 1))


@functools.lru_cache(maxsize=1024)
def _bar_column(height_eighths: int | None, rows: int) -> tuple[str, ...]:
    """One chart column's cells, top row first, for a bar ``height_eighths`` eighths of a row
    high (None: a gap, blank). A real reading, even zero, shows at least the lowest block."""
    if height_eighths is None:
        return (" ",) * rows
    cells = []
    for row in range(rows - 1, -1, -1):
        level = min(8, max(0, height_eighths - row * 8))
        cells.append(_LEVELS[max(1, level) if row == 0 else level])
    return tuple(cells)


class PlotextView(Static):
    """Shows plotext output (ANSI text) at the widget's size; ``draw`` is called with
    (width, height) and returns the chart text. Redraws on resize and on :meth:`redraw`."""

    DEFAULT_CSS = """
    PlotextView { width: 1fr; height: 1fr; min-height: 8; }
    """

    def __init__(self, draw: Callable[[int, int], str], *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__("", id=id, classes=classes)
        self._draw = draw
        self._drawn_for: tuple[int, int] | None = None

    def redraw(self) -> None:
        """Draw again at the current size (call when the data or palette changed)."""
        width, height = self.size.width, self.size.height
        if width < 10 or height < 4:
            return
        self._drawn_for = (width, height)
        try:
            chart = self._draw(width, height)
        except Exception as exc:  # noqa: BLE001 - a chart bug must not take the UI down
            self.update(Text(f"chart failed: {exc}", style="italic"), layout=False)
            return
        self.update(Text.from_ansi(chart, no_wrap=True, overflow="crop"), layout=False)

    def on_resize(self) -> None:
        if self._drawn_for != (self.size.width, self.size.height):
            self.redraw()
