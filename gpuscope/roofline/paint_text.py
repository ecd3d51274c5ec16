"""The terminal painter of the roofline layout (:mod:`gpuscope.roofline.layout`): plotext draws
the axes and the roof lines; point marks, ridge marks and every label are then written into
plotext's text at the cells :func:`~gpuscope.roofline.layout_cells.place_labels` chose, with the
cells plotext actually drew blocked, so no label covers a line. Used by ``gpuscope roofline``
and the TUI's roofline screen. No Textual import; plotext loads when a chart is drawn.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpuscope.roofline.layout import layout_roofline
from gpuscope.roofline.layout_cells import CellPlacement, cell_of, place_labels
from gpuscope.roofline.model import DATASHEET, Placement, RooflineModel
from gpuscope.roofline.shapes import LegendEntry, PointMark, RooflineLayout, Segment, device_colour
from gpuscope.roofline.units import format_si

__all__ = [
    "Color",
    "ChartPalette",
    "DEFAULT_PALETTE",
    "MONOCHROME_PALETTE",
    "MIN_CHART_WIDTH",
    "RenderedRoofline",
    "render_roofline",
    "render_roofline_labelled",
    "legend_lines",
    "compact_legend_lines",
    "strip_ansi",
]

MIN_CHART_WIDTH = 60

#: A plotext colour: a name, a 256-colour index, an RGB tuple, or "#rrggbb".
Color = str | int | tuple[int, int, int]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_SGR = re.compile(r"\x1b\[[0-9;]*m")
_RESET = "\x1b[0m"


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences."""
    return _ANSI.sub("", text)


@dataclass(frozen=True)
class ChartPalette:
    """Colours of the terminal roofline. Devices take ``cpu_roofs`` (the first CPU, then the
    others) and ``gpu_roofs`` (cycled) when a TUI theme sets them, else the colour-blind-safe
    colours of :mod:`~gpuscope.roofline.layout` (the dark-background set unless ``dark`` is
    False); the themes also set axes, highlight, live and above-roof colours."""

    points: Color = "default"
    highlight: Color = 201
    estimated: Color = 250
    above_roof: Color = 196
    straggler: Color = 203
    axes: Color = "default"
    use_color: bool = True
    dark: bool = True
    gpu_roofs: tuple[Color, ...] = ()
    cpu_roofs: tuple[Color, ...] = ()

    def with_colors(self, **colors: Any) -> ChartPalette:  # dataclasses.replace checks each by name
        """A copy with some colours replaced (``"#rrggbb"`` strings and RGB tuples accepted).
        A bright axes colour means a dark background."""
        palette = replace(self, **colors)
        axes = colors.get("axes")
        if isinstance(axes, tuple) and len(axes) == 3:
            palette = replace(palette, dark=(0.299 * axes[0] + 0.587 * axes[1] + 0.114 * axes[2]) > 110)
        return palette

    def device(self, index: int) -> Color | None:
        """The colour of layout colour slot ``index`` (CPUs 0 then 5, GPUs 1-4)."""
        if not self.use_color:
            return None
        cpu = index in (0, 5)
        own = self.cpu_roofs if cpu else self.gpu_roofs
        if own:
            return _rgb(own[(index // 5 if cpu else index - 1) % len(own)])
        return _rgb(device_colour(index, self.dark))

    def colour(self, value: Color) -> Color | None:
        if not self.use_color or value == "default":
            return None
        return _rgb(value) if isinstance(value, str) and value.startswith("#") else value


DEFAULT_PALETTE = ChartPalette()
#: For a non-TTY or ``NO_COLOR``: no escape codes; line styles and marks still tell roofs apart.
MONOCHROME_PALETTE = ChartPalette(use_color=False)

#: plotext markers by roof style: bold envelope, thin dtypes, dotted levels and datasheet roofs.
_MARKERS = {"envelope": "hd", "dtype": "braille", "level": "·", "datasheet": "·"}
#: Dots per cell row of each marker (plotext: half blocks 2, braille 4, a character 1).
_SUB_ROWS = {"envelope": 2, "dtype": 4, "level": 1, "datasheet": 1}
#: A datasheet envelope (a device with no measured roofs): dotted as docs/tui.md says, in bold dots.
_DATASHEET_ENVELOPE = "•"
#: Fewer rows per decade than this and the y axis drops its whole-decade margins.
_MIN_ROWS_PER_DECADE = 2
_SAMPLES = {"envelope": "━━", "dtype": "⠤⠤", "level": "··", "datasheet": "··"}
_POINT, _ESTIMATED, _ABOVE, _HIGHLIGHT, _RIDGE = "◆", "◇", "▲", "◉", "○"


def _marker(segment: Segment) -> tuple[str, int]:
    """The plotext marker of a segment and its dots per cell row: measured roofs solid (half
    blocks, braille), datasheet roofs dotted."""
    if segment.style == "envelope" and segment.roof.source == DATASHEET:
        return _DATASHEET_ENVELOPE, 1
    return _MARKERS[segment.style], _SUB_ROWS[segment.style]


def _rgb(value: Color) -> Color:
    if isinstance(value, str) and value.startswith("#") and len(value) == 7:
        return (int(value[1:3], 16), int(value[3:5], 16), int(value[5:7], 16))
    return value


def _sgr(color: Color | None, bold: bool = False) -> str:
    """The ANSI prefix for ``color`` ('' for none)."""
    codes = ["1"] if bold else []
    if isinstance(color, tuple):
        codes.append(f"38;2;{color[0]};{color[1]};{color[2]}")
    elif isinstance(color, int):
        codes.append(f"38;5;{color}")
    return f"\x1b[{';'.join(codes)}m" if codes else ""


# --- cells ---------------------------------------------------------------------------------------


def _cells(line: str) -> list[list[str]]:
    """``[style, char]`` per visible character of an ANSI-coloured line."""
    cells: list[list[str]] = []
    style = ""
    position = 0
    for match in _SGR.finditer(line):
        for char in line[position : match.start()]:
            cells.append([style, char])
        code = match.group(0)
        style = "" if code == _RESET else style + code
        position = match.end()
    for char in line[position:]:
        cells.append([style, char])
    return cells


def _join(cells: list[list[str]]) -> str:
    out: list[str] = []
    current = ""
    for style, char in cells:
        if style != current:
            if current:
                out.append(_RESET)
            out.append(style)
            current = style
        out.append(char)
    if current:
        out.append(_RESET)
    return "".join(out)


def _plot_area(grid: list[list[list[str]]]) -> tuple[int, int, int, int] | None:
    """``(top, bottom, left, right)`` inner cell bounds of plotext's frame, or None."""
    for row, cells in enumerate(grid):
        chars = "".join(char for _, char in cells)
        if "┌" in chars and "┐" in chars:
            left, right = chars.index("┌"), chars.rindex("┐")
            for bottom in range(row + 1, len(grid)):
                below = "".join(char for _, char in grid[bottom])
                if len(below) > left and below[left] == "└":
                    if bottom - row >= 3 and right - left >= 3:
                        return row + 1, bottom - 1, left + 1, right - 1
                    return None
    return None


# --- drawing -------------------------------------------------------------------------------------


def _decade_ticks(lo: int, hi: int, max_ticks: int) -> list[float]:
    exponents = list(range(lo, hi + 1))
    step = 1
    while len(exponents[::step]) > max(2, max_ticks):
        step += 1
    return [10.0**exponent for exponent in exponents[::step]]


def _x_tick(value: float) -> str:
    return format_si(value, "", 3) if value >= 1000 else f"{value:g}"


@dataclass(frozen=True)
class RenderedRoofline:
    """A rendered chart: ``text`` (ANSI unless monochrome), the ``layout`` it painted and the
    label ``placement`` (cells relative to the plot area)."""

    text: str
    layout: RooflineLayout
    placement: CellPlacement | None

    @property
    def tags(self) -> dict[int, str]:
        """0-based point index -> the tag shown next to its mark."""
        if self.placement is None:
            return {}
        return {self.layout.points[t.owner].number - 1: t.text for t in self.placement.texts if t.kind == "point"}


def render_roofline(
    model: RooflineModel,
    width: int = 100,
    height: int = 30,
    *,
    palette: ChartPalette = DEFAULT_PALETTE,
    highlight: str | int | None = None,
    all_roofs: bool = False,
    extra_placements: Sequence[Placement] = (),
    legend: bool = True,
    title: str | None = None,
    compact_legend: bool = False,
) -> str:
    """The chart as text (see :func:`render_roofline_labelled`)."""
    return render_roofline_labelled(
        model, width, height, palette=palette, highlight=highlight, all_roofs=all_roofs,
        extra_placements=extra_placements, legend=legend, title=title, compact_legend=compact_legend,
    ).text  # fmt: skip


def render_roofline_labelled(
    model: RooflineModel,
    width: int = 100,
    height: int = 30,
    *,
    palette: ChartPalette = DEFAULT_PALETTE,
    highlight: str | int | None = None,
    all_roofs: bool = False,
    extra_placements: Sequence[Placement] = (),
    legend: bool = True,
    title: str | None = None,
    compact_legend: bool = False,
) -> RenderedRoofline:
    """The roofline, ``width`` columns (at least :data:`MIN_CHART_WIDTH`) by ``height`` rows of
    chart, then (``legend=True``) the legend and notes (``compact_legend``: the devices on as few
    lines as fit, no notes), every line at most ``width`` wide. With fewer than 2 rows per decade
    the y axis hugs the roofs and points (``layout_roofline(short=True)``).
    Not thread-safe: plotext keeps one global figure."""
    import plotext

    width = max(MIN_CHART_WIDTH, int(width))
    height = max(12, int(height))
    layout = layout_roofline(model, all_roofs=all_roofs, extra_placements=extra_placements, highlight=highlight)
    plot_rows = height - 4 - (2 if title else 0)  # the frame, the x ticks and the axis title take 4 rows
    if plot_rows < _MIN_ROWS_PER_DECADE * (layout.y_range[1] - layout.y_range[0]):
        # too few rows for whole decades of margin: the y axis hugs the roofs and points
        layout = layout_roofline(
            model, all_roofs=all_roofs, extra_placements=extra_placements, highlight=highlight, short=True
        )
    plotext.clear_figure()
    plotext.limit_size(False, False)
    plotext.plotsize(width, height)
    try:
        if palette.use_color:
            axes = palette.colour(palette.axes)
            plotext.canvas_color("default")
            plotext.axes_color("default")
            plotext.ticks_color(axes if axes is not None else "default")  # plotext's own default is black
        else:
            plotext.theme("clear")
        (x_lo, x_hi), (y_lo, y_hi) = layout.x_range, layout.y_range
        plotext.xscale("log")
        plotext.yscale("log")
        plotext.xlim(x_lo, x_hi)
        plotext.ylim(y_lo, y_hi)
        # the envelope on top, a measured one over a datasheet one
        order = ("datasheet", "level", "dtype", "envelope-datasheet", "envelope")
        for style in order:
            for segment in layout.segments:
                drawn_as: str = segment.style
                if drawn_as == "envelope" and segment.roof.source == DATASHEET:
                    drawn_as = "envelope-datasheet"
                if drawn_as != style:
                    continue
                # plotext interpolates in linear space: give it points spaced evenly in log space
                steps = 2 * width
                xs = [segment.x0 * (segment.x1 / segment.x0) ** (i / steps) for i in range(steps + 1)]
                ys = [segment.y0 * (segment.y1 / segment.y0) ** (i / steps) for i in range(steps + 1)]
                plotext.plot(
                    xs, ys, marker=_marker(segment)[0], color=palette.device(layout.legend[segment.device].colour_index)
                )
        if not layout.segments:  # plotext cannot build a figure with no data (points are overlaid later)
            plotext.scatter([10.0 ** ((x_lo + x_hi) / 2)], [10.0 ** ((y_lo + y_hi) / 2)], marker=" ")
        x_ticks = _decade_ticks(int(x_lo), int(x_hi), max(2, (width - 8) // 7))
        plotext.xticks(x_ticks, [_x_tick(value) for value in x_ticks])
        y_ticks = _decade_ticks(math.ceil(y_lo - 1e-9), math.floor(y_hi + 1e-9), max(2, (height - 6) // 2))
        plotext.yticks(y_ticks, [format_si(value, "", 3) for value in y_ticks])
        plotext.xlabel("arithmetic intensity (FLOP/byte)")
        plotext.ylabel("FLOP/s")
        if title:
            plotext.title(title)
        text = plotext.build()
    finally:
        plotext.clear_figure()
    if not palette.use_color:
        text = strip_ansi(text)
    text, placement = _overlay(text, layout, palette)
    lines = [line.rstrip() for line in text.splitlines()]
    if layout.empty:
        lines.append("no roofs and no workloads to draw")
    if legend:
        painter = compact_legend_lines if compact_legend else legend_lines
        lines.extend(painter(layout, width, palette, placement))
    return RenderedRoofline("\n".join(lines), layout, placement)


def _overlay(text: str, layout: RooflineLayout, palette: ChartPalette) -> tuple[str, CellPlacement | None]:
    grid = [_cells(line) for line in text.split("\n")]
    area = _plot_area(grid)
    if area is None:
        return text, None
    top, bottom, left, right = area
    columns, rows = right - left + 1, bottom - top + 1
    blocked = {
        (row - top, column - left)
        for row in range(top, bottom + 1)
        for column in range(left, min(right + 1, len(grid[row])))
        if grid[row][column][1] != " "
    }
    placement = place_labels(
        layout, columns, rows, blocked=blocked, line_cells=blocked, on_line=True,
        dots_of=lambda segment: _marker(segment)[1], mark_dots=_SUB_ROWS["envelope"],
    )  # fmt: skip

    def put(row: int, column: int, char: str, style: str) -> None:
        style = style if palette.use_color else ""
        if 0 <= row < rows and 0 <= column < columns and column + left < len(grid[row + top]):
            grid[row + top][column + left] = [style, char]

    for ridge in layout.ridges:
        flat = next((s for s in layout.segments if s.device == ridge.device and s.y0 == s.y1 == ridge.y), None)
        dots = _marker(flat)[1] if flat is not None else _SUB_ROWS["envelope"]
        row, column = cell_of(layout, ridge.x, ridge.y, columns, rows, dots)
        if (row, column) not in blocked:  # plotext rounds its lines to a neighbouring row: sit on them
            row = next((row + dr for dr in (1, -1) if (row + dr, column) in blocked), row)
        put(row, column, _RIDGE, _sgr(palette.device(layout.legend[ridge.device].colour_index)))

    def point_style(point: PointMark, flagged: bool, flag_colour: Color) -> str:
        """Bold in the highlight colour, else in ``flag_colour`` when ``flagged``, else in the device's."""
        if point.highlighted:
            return _sgr(palette.colour(palette.highlight), bold=True)
        if flagged:
            return _sgr(palette.colour(flag_colour), bold=True)
        return _sgr(palette.device(layout.legend[point.device].colour_index), bold=True)

    for point in layout.points:
        row, column = cell_of(layout, point.x, point.y, columns, rows, _SUB_ROWS["envelope"])
        marks = ((point.highlighted, _HIGHLIGHT), (point.estimated, _ESTIMATED), (point.above_roof, _ABOVE))
        char = next((mark for flagged, mark in marks if flagged), _POINT)
        put(row, column, char, point_style(point, point.estimated, palette.estimated))
    for item in placement.texts:
        if item.kind == "point":
            point = layout.points[item.owner]
            style = point_style(point, point.above_roof, palette.above_roof)
        elif item.kind == "roof":
            style = _sgr(palette.device(layout.legend[layout.labels[item.owner].device].colour_index))
        else:
            style = _sgr(palette.device(layout.legend[layout.ridges[item.owner].device].colour_index))
        for offset, char in enumerate(item.text):
            put(item.row, item.column + offset, char, style)
    return "\n".join(_join(cells) for cells in grid), placement


def _datasheet_entry(entry: LegendEntry) -> bool:
    """True when a device's envelope is drawn from datasheet roofs only (drawn dotted)."""
    return entry.envelope_text.endswith("(datasheet)")


def _legend_sample(entry: LegendEntry, palette: ChartPalette) -> str:
    """The two-cell sample of a device's envelope in its colour: solid, or dotted for a datasheet one."""
    sample = _DATASHEET_ENVELOPE * 2 if _datasheet_entry(entry) else _SAMPLES["envelope"]
    return f"{_sgr(palette.device(entry.colour_index), bold=True)}{sample}{_RESET}" if palette.use_color else sample


def compact_legend_lines(
    layout: RooflineLayout, width: int, palette: ChartPalette = DEFAULT_PALETTE, placement: CellPlacement | None = None
) -> list[str]:
    """The legend of a short chart (the TUI at 80x24): the devices' samples and names on as few
    lines as fit ``width``, then the roofs whose lines had no room for their label."""
    entries = [(entry, f"{entry.label} {entry.name or entry.device_type}") for entry in layout.legend]
    lines: list[str] = []
    plain, painted = "", ""
    for entry, text in entries:
        text = text[: max(8, width - 3)]
        if plain and len(plain) + 2 + 3 + len(text) > width:
            lines.append(painted)
            plain, painted = "", ""
        gap = "  " if plain else ""
        plain += f"{gap}{'━━'} {text}"
        painted += f"{gap}{_legend_sample(entry, palette)} {text}"
    if plain:
        lines.append(painted)
    unlabelled = [layout.labels[owner] for kind, owner in (placement.dropped if placement else []) if kind == "roof"]
    if unlabelled:
        texts = [f"{layout.legend[label.device].label} {label.text}" for label in unlabelled]
        lines.extend(textwrap.wrap("not labelled: " + ", ".join(texts), width, subsequent_indent="  "))
    return lines


def legend_lines(
    layout: RooflineLayout, width: int, palette: ChartPalette = DEFAULT_PALETTE, placement: CellPlacement | None = None
) -> list[str]:
    """The legend under the chart, every line at most ``width`` wide: one entry per device (its
    colour sample, name and envelope, measured or datasheet), the line styles, the labels that
    had no room, and the notes (above-datasheet ceilings, devices with no DRAM roof)."""
    lines: list[str] = []
    for entry in layout.legend:
        painted = _legend_sample(entry, palette)
        wrapped = textwrap.wrap(entry.text, max(20, width - 3), subsequent_indent="   ")
        for number, line in enumerate(wrapped):
            lines.append(f"{painted} {line}" if number == 0 else line)
    styles = {segment.style for segment in layout.segments}
    key = ["━━ envelope min(peak, I x DRAM)"]
    if any(_datasheet_entry(entry) for entry in layout.legend):
        key.append(f"{_DATASHEET_ENVELOPE * 2} datasheet envelope")
    if "dtype" in styles:
        key.append("⠤⠤ other dtype")
    if "level" in styles or "datasheet" in styles:
        key.append("·· cache level / datasheet")
    key.append(f"{_RIDGE} ridge  {_POINT} point (tag = # in the table)")
    lines.extend(textwrap.wrap("   ".join(key), width))
    if placement is not None:
        missing = sorted({kind for kind, _ in placement.dropped if kind != "roof"})
        if missing:
            words = {"point": "point tags", "ridge": "ridge labels"}
            lines.extend(
                textwrap.wrap(
                    f"no room on the chart for some {', '.join(words[m] for m in missing)}: the tables below list them",
                    width,
                )
            )
        unlabelled = [layout.labels[owner] for kind, owner in placement.dropped if kind == "roof"]
        if unlabelled:  # one entry per roof whose line had no room for its label
            texts = [f"{layout.legend[label.device].label} {label.text}" for label in unlabelled]
            lines.extend(textwrap.wrap("not labelled on the chart: " + ", ".join(texts), width, subsequent_indent="  "))
    for note in layout.notes:
        lines.extend(textwrap.wrap(note, width, subsequent_indent="  "))
    return lines
