"""Several history charts side by side in one widget (the charts of a GPU card), wrapping onto
more rows when the width does not fit them all. Each chart has a value scale (``0–100%`` on its
title line) and a time axis (``-1m ... now``); see :mod:`history_plot`."""

from __future__ import annotations

import math
from collections.abc import Sequence

from textual.geometry import Size

from gpuscope.tui.widgets.chart import chart_styles
from gpuscope.tui.widgets.history_plot import ChartData, plot_lines
from gpuscope.tui.widgets.lines import LineWidget, Run

__all__ = ["ChartRow", "ChartData"]


class ChartRow(LineWidget):
    """``charts`` across the width, at least ``min_width`` cells each, ``chart_height`` rows each
    (title line included; set by the ``-tall`` class of an ancestor through :attr:`chart_height`)."""

    DEFAULT_CSS = """
    ChartRow { height: auto; width: 1fr; }
    ChartRow > .chart--title { color: $text-muted; }
    ChartRow > .chart--bar { color: $primary; }
    ChartRow > .chart--empty { color: $text-disabled; }
    """
    COMPONENT_CLASSES = {"chart--title", "chart--bar", "chart--empty"}

    def __init__(
        self, titles: Sequence[str], *, min_width: int = 14, chart_height: int = 3, id: str | None = None
    ) -> None:
        super().__init__(id=id)
        self.charts = [ChartData(title) for title in titles]
        self.min_width = min_width
        self._chart_height = chart_height
        self.colour: str | None = None
        #: Seconds the charts span (the time axis reads ``-1m ... now``).
        self.window_s = 60.0

    @property
    def chart_height(self) -> int:
        return self._chart_height

    @chart_height.setter
    def chart_height(self, rows: int) -> None:
        if rows != self._chart_height:
            self._chart_height = rows
            self.invalidate(layout=True)

    def set_charts(self, charts: Sequence[ChartData], colour: str | None = None, window_s: float | None = None) -> None:
        """Replace every chart's data (values cover ``window_s`` seconds); redraws when anything changed."""
        charts = list(charts)
        window_s = window_s or self.window_s
        if charts == self.charts and colour == self.colour and window_s == self.window_s:
            return
        relayout = len(charts) != len(self.charts)
        self.charts, self.colour, self.window_s = charts, colour, window_s
        self.invalidate(layout=relayout)

    def columns(self, width: int) -> int:
        return max(1, min(len(self.charts), (width + 1) // (self.min_width + 1)))

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, math.ceil(len(self.charts) / self.columns(width))) * self._chart_height

    def build_lines(self, width: int, height: int) -> list[list[Run]]:
        columns = self.columns(width)
        chart_width = max(1, (width - (columns - 1)) // columns)
        styles = chart_styles(self, self.colour)
        lines: list[list[Run]] = []
        for start in range(0, len(self.charts), columns):
            blocks = [
                plot_lines(chart, chart_width, self._chart_height, self.window_s, styles)
                for chart in self.charts[start : start + columns]
            ]
            for row in range(self._chart_height):
                runs: list[Run] = []
                for position, block in enumerate(blocks):
                    line = block[row] if row < len(block) else []
                    used = sum(len(text) for text, _ in line)
                    runs.extend(line)
                    if position < len(blocks) - 1:
                        runs.append((" " * (chart_width - used + 1), None))
                lines.append(runs)
        return lines
