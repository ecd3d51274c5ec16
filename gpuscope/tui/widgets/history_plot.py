"""History charts with a value scale and a time axis (drawn as line runs, no Textual widgets).

A chart block is ``rows`` lines: ``title current ... 0–scale`` on top (shorter forms when the
line is short, or the bound ``≤scale`` moved to the time axis when none fits), bars in the
middle (the newest sample on the right, the window spread over the full width, gaps blank), and
a time axis ``-1m ... now`` at the bottom. The bars come from :func:`chart.chart_lines`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

from gpuscope.tui.widgets.chart import PLAIN, ChartStyles, chart_lines
from gpuscope.tui.widgets.lines import Run

__all__ = ["ChartData", "resample_max", "plot_lines", "axis_label"]


def resample_max(values: Sequence[float | None], width: int) -> list[float | None]:
    """``values`` spread over exactly ``width`` columns: each column holds the largest value of
    its share of the points (peaks stay visible), or None when its share has only gaps; with
    fewer points than columns a point covers several columns."""
    count = len(values)
    if width <= 0:
        return []
    if count == 0:
        return [None] * width
    if count == width:
        return list(values)
    if count < width:  # each column's share is one point
        return [values[column * count // width] for column in range(width)]
    if None not in values:  # no gaps (the common case): each share's largest value, taken in C
        numbers = cast("Sequence[float]", values)
        return [
            max(numbers[column * count // width : max(column * count // width + 1, (column + 1) * count // width)])
            for column in range(width)
        ]
    out: list[float | None] = []
    for column in range(width):
        start = column * count // width
        end = max(start + 1, (column + 1) * count // width)
        present = [v for v in values[start:end] if v is not None]
        out.append(max(present) if present else None)
    return out


def axis_label(window_s: float) -> str:
    """The left end of the time axis: ``-1m``, ``-15m``, ``-30s``."""
    return f"-{window_s / 60:g}m" if window_s >= 60 else f"-{window_s:g}s"


def _scale_labels(top: str) -> tuple[str, ...]:
    """The title line's scale for a chart topped at ``top`` (formatted with its unit), widest
    first: the range ``0–126GB/s``, the bound ``≤126GB/s`` (one cell narrower), then the same
    without "B/s" (``0–126G``, ``≤126G``: the current value beside it carries the unit). Never
    the bare top: in plain text (copies, screen readers, SVG) it reads as a second current value.
    When none fits, the chart has no scale."""
    if top.endswith("B/s"):
        return f"0–{top}", f"≤{top}", f"0–{top[:-3]}", f"≤{top[:-3]}"
    return f"0–{top}", f"≤{top}"


def _plain(value: float) -> str:
    return f"{value:.3g}"


def scale_percent(value: float) -> str:
    """``70%``: a percentage chart's current value and scale."""
    return f"{value:.0f}%"


@dataclass(frozen=True)
class ChartData:
    """One chart: its title, the current value as text, the values (None: a gap) and its scale."""

    title: str
    current: str = ""
    values: tuple[float | None, ...] = field(default_factory=tuple)
    maximum: float | None = None
    #: Formats the scale (the top of the chart) with its unit: ``100%``, ``4.8TB/s``.
    scale_fmt: Callable[[float], str] = _plain


def plot_lines(
    chart: ChartData, width: int, rows: int, window_s: float, styles: ChartStyles = PLAIN
) -> list[list[Run]]:
    """``rows`` lines (at least 3: title, bars, axis) ``width`` cells wide. The scale is
    ``chart.maximum`` when given, else the window's largest value; the range ``0–scale`` (or a
    shorter form where the line is short; see :func:`_scale_labels`) is written at the right of
    the title line, or, where that line has no room, as a bound in the middle of the time axis."""
    title, current, values, maximum = chart.title, chart.current, chart.values, chart.maximum
    bar_rows = max(1, rows - 2)
    shown = resample_max(values, width)
    if maximum:
        top: float | None = maximum
    else:
        top = max((v for v in shown if v is not None and math.isfinite(v)), default=None)
    if top is not None and top <= 0:
        top = 1.0
    block = chart_lines(title, current, shown, width, bar_rows, top, styles)
    head = block[0]
    used = sum(len(text) for text, _ in head)
    labels = _scale_labels(chart.scale_fmt(top)) if top is not None else ()
    on_axis: tuple[str, ...] = ()  # the scale's bounds, widest first, when the title line has no room
    room = width - 1 - used
    for scale in labels:
        if room >= len(scale) + 1:
            head = head + [(" " * (room - len(scale)), None), (scale, styles.empty)]
            break
    else:
        bounds = [scale for scale in labels if scale.startswith("≤")]
        on_axis = tuple(bounds + [_one_digit_fewer(bound) for bound in bounds])
    lines = [head] + block[1:]
    while len(lines) < 1 + bar_rows:
        lines.append([])
    lines.append([(_axis_text(axis_label(window_s), on_axis, width - 1), styles.empty)])
    return lines


def _axis_text(left: str, bounds: tuple[str, ...], width: int) -> str:
    """The time axis ``-1m ... now`` in ``width`` cells, with the widest of ``bounds`` (the scale
    as ``≤4.92TB/s``, ``≤4.92T``, ...) that fits in its middle: a chart too narrow for the scale
    on its title line still tells 5% from 95% of it."""
    right = "now"
    if width < len(left) + len(right) + 1:
        return right.rjust(width) if width >= len(right) else ""
    for bound in bounds:
        gap = width - len(left) - len(right) - len(bound)
        if gap >= 2:
            return left + " " * (gap // 2) + bound + " " * (gap - gap // 2) + right
    return left + " " * (width - len(left) - len(right)) + right


def _one_digit_fewer(bound: str) -> str:
    """``≤4.92T`` -> ``≤4.9T``; ``bound`` itself where it has no digit after a point."""
    digits = bound.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ%/")
    if "." not in digits or digits.endswith("."):
        return bound
    return digits[:-1].rstrip(".") + bound[len(digits) :]
