"""The roofline as a terminal chart (plotext): log-log, x = arithmetic intensity (FLOP/byte),
y = FLOP/s with SI-prefixed ticks. GPU and CPU roofs share the axes and differ in colour (and, in
monochrome, in marker); measured roofs are solid, datasheet roofs dotted and dimmer; every
workload is a labelled point.

Two entry points:

- :func:`render_roofline` returns the chart as a string (``plotext.build()``), for the CLI, the
  tests and anything that prints;
- :func:`draw_roofline` issues the drawing calls on a plotext-like object (the ``plotext`` module
  or a ``textual_plotext.PlotextPlot``'s ``plt``), so the TUI draws the same chart in a widget.

No Textual import here.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable, Literal, Sequence

from gpuscope.roofline.chart_style import (
    DEFAULT_PALETTE,
    MONOCHROME_PALETTE,
    ChartPalette,
    NARROW_CHART_WIDTH,
    ChartRoof,
    Color,
    chart_footnotes,
    plotext_color,
    roof_label,
    select_chart_roofs,
    style_roofs,
)
from gpuscope.roofline.chart_labels import LabelMark, PlacedLabel, place_labels, point_tag
from gpuscope.roofline.model import DeviceRoofs, Placement, Roof, RooflineModel, is_finite_positive, memory_roof_for
from gpuscope.roofline.units import format_si

__all__ = [
    "Color",
    "ChartPalette",
    "DEFAULT_PALETTE",
    "MONOCHROME_PALETTE",
    "ChartRoof",
    "MIN_CHART_WIDTH",
    "NARROW_CHART_WIDTH",
    "select_chart_roofs",
    "chart_footnotes",
    "style_roofs",
    "draw_roofline",
    "render_roofline",
    "render_roofline_labelled",
    "RenderedRoofline",
    "point_tag",
    "legend_lines",
    "strip_ansi",
    "roof_label",
]

MIN_CHART_WIDTH = 60

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences."""
    return _ANSI.sub("", text)


# --- geometry ----------------------------------------------------------------------------------


@dataclass
class _Frame:
    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float


def _frame(roofs: Sequence[ChartRoof], placements: Sequence[Placement]) -> _Frame:
    """Axis limits (whole decades): every compute/memory ridge and every point, one decade of
    margin; transfer and collective roofs do not widen the frame (their ridges lie far right)."""
    xs: list[float] = []
    ys: list[float] = []
    for chart_roof in roofs:
        roof = chart_roof.roof
        if roof.kind == "compute":
            ys.append(roof.value)
            memory = memory_roof_for(chart_roof.device) or _top(chart_roof.device, bandwidth=True)
            if memory is not None:
                xs.append(roof.value / memory.value)
        elif roof.kind == "memory":
            compute = _top(chart_roof.device, bandwidth=False)
            if compute is not None:
                xs.append(compute.value / roof.value)
    for placement in placements:
        point = placement.point
        for x in (point.intensity_flop_per_byte, point.dram_intensity_flop_per_byte):
            if is_finite_positive(x) and is_finite_positive(point.flop_per_s):
                xs.append(x)  # type: ignore[arg-type]
                ys.append(point.flop_per_s)  # type: ignore[arg-type]
    if not xs:
        xs = [0.1, 100.0]
    if not ys:
        ys = [1e9, 1e12]
    x_lo = min(xs) / 5
    x_hi = max(xs) * 5
    # Bandwidth lines start at the left edge, but the frame goes at most two decades below the
    # lowest compute roof or point, so the interesting part keeps its height.
    y_lo = min(ys) / 100
    bandwidths = [chart_roof.roof.value for chart_roof in roofs if chart_roof.roof.kind == "memory"]
    if bandwidths:
        y_lo = max(y_lo, min(bandwidths) * x_lo)
    y_lo = min(y_lo, min(ys) / 3)
    y_hi = max(ys) * 3
    return _Frame(x_lo, x_hi, y_lo, y_hi)


def _top(device: DeviceRoofs, bandwidth: bool) -> Roof | None:
    if bandwidth:
        roofs = device.memory or device.transfer or device.collective
    else:
        roofs = device.compute
    return max(roofs, key=lambda roof: roof.value) if roofs else None


def _roof_polyline(chart_roof: ChartRoof, frame: _Frame, drawn: Sequence[ChartRoof]) -> tuple[list[float], list[float]]:
    """Points of one roof line in data coordinates (plotext draws straight segments in log space).

    A compute roof runs flat from where the device's highest drawn memory roof meets it; a
    bandwidth roof rises from the left edge until it meets the device's highest drawn compute roof."""
    roof = chart_roof.roof
    same_device = [other.roof for other in drawn if other.device.key == chart_roof.device.key]
    if roof.kind == "compute":
        bandwidths = [other.value for other in same_device if other.kind == "memory"]
        if not bandwidths:
            bandwidths = [other.value for other in same_device if other.is_bandwidth]
        start = roof.value / max(bandwidths) if bandwidths else frame.x_lo
        start = min(max(start, frame.x_lo), frame.x_hi)
        return [start, frame.x_hi], [roof.value, roof.value]
    computes = [other.value for other in same_device if other.kind == "compute"]
    ceiling = min(max(computes), frame.y_hi) if computes else frame.y_hi
    x_start = max(frame.x_lo, frame.y_lo / roof.value)
    x_end = min(ceiling / roof.value, frame.x_hi)
    if x_end <= x_start:
        return [], []
    return [x_start, x_end], [x_start * roof.value, x_end * roof.value]


def _decade_ticks(lo: float, hi: float, max_ticks: int) -> list[float]:
    first, last = math.ceil(math.log10(lo) - 1e-9), math.floor(math.log10(hi) + 1e-9)
    exponents = list(range(first, last + 1))
    step = 1
    while len(exponents[::step]) > max(2, max_ticks):
        step += 1
    return [10.0**exponent for exponent in exponents[::step]]


def _x_tick_label(value: float) -> str:
    return format_si(value, "", 3) if value >= 1000 else f"{value:g}"


# --- drawing -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _PointMark:
    x: float
    y: float
    marker: str
    color: Color
    label: str
    index: int = 0
    dram: bool = False
    highlighted: bool = False


def draw_roofline(
    plt: Any,
    model: RooflineModel,
    *,
    width: int,
    height: int,
    palette: ChartPalette = DEFAULT_PALETTE,
    highlight: str | int | None = None,
    detail: Literal["main", "all"] = "main",
    extra_placements: Sequence[Placement] = (),
    legend_inside: bool = False,
    configure_canvas: bool = True,
    title: str | None = "Roofline (log-log)",
) -> list[ChartRoof]:
    """Draw the roofline of ``model`` with the plotext-like ``plt`` (its figure must be clear).

    ``width`` and ``height`` (characters) place the point labels and ticks; they do not resize
    the figure (:func:`render_roofline` does); below :data:`NARROW_CHART_WIDTH` the default
    selection leaves out datasheet roofs whose measured twin is drawn. ``highlight`` names a point (its name, or index in
    ``model.placements``) drawn in the highlight colour. ``extra_placements`` are drawn as
    estimated points (live positions). ``legend_inside`` uses plotext's own legend; otherwise the
    caller shows :func:`legend_lines` (the returned roofs carry colour and marker).
    ``configure_canvas=False`` leaves canvas and axes colours to the caller (a Textual widget).
    Returns the roofs drawn, in legend order.
    """
    drawn, _, _ = _draw(
        plt,
        model,
        width=width,
        height=height,
        palette=palette,
        highlight=highlight,
        detail=detail,
        extra_placements=extra_placements,
        legend_inside=legend_inside,
        configure_canvas=configure_canvas,
        title=title,
        point_labels=True,
    )
    return drawn


def _draw(
    plt: Any,
    model: RooflineModel,
    *,
    width: int,
    height: int,
    palette: ChartPalette,
    highlight: str | int | None,
    detail: Literal["main", "all"],
    extra_placements: Sequence[Placement],
    legend_inside: bool,
    configure_canvas: bool,
    title: str | None,
    point_labels: bool,
) -> tuple[list[ChartRoof], list[_PointMark], _Frame]:
    """:func:`draw_roofline`, also returning the point marks and the frame; with
    ``point_labels=False`` the labels are left to :func:`~gpuscope.roofline.chart_labels.place_labels`."""
    roofs = style_roofs(select_chart_roofs(model, detail, width), palette)
    placements = list(model.placements)
    frame = _frame(roofs, placements + list(extra_placements))
    if palette.use_color:
        if configure_canvas:
            plt.canvas_color(plotext_color(palette, palette.canvas))
            plt.axes_color(plotext_color(palette, palette.canvas))
            plt.ticks_color(plotext_color(palette, palette.axes))
    else:
        plt.theme("clear")
    plt.xscale("log")
    plt.yscale("log")
    plt.xlim(math.log10(frame.x_lo), math.log10(frame.x_hi))
    plt.ylim(math.log10(frame.y_lo), math.log10(frame.y_hi))

    drawn: list[ChartRoof] = []
    for chart_roof in roofs:
        xs, ys = _roof_polyline(chart_roof, frame, roofs)
        if not xs:
            continue
        drawn.append(chart_roof)
        label = chart_roof.legend if legend_inside else None
        plt.plot(xs, ys, marker=chart_roof.marker, color=plotext_color(palette, chart_roof.color), label=label)

    marks = list(_point_marks(model, placements, extra_placements, palette, highlight))
    if not drawn and not marks:
        # plotext cannot build a figure with no data: draw an invisible point and say why.
        middle_x, middle_y = math.sqrt(frame.x_lo * frame.x_hi), math.sqrt(frame.y_lo * frame.y_hi)
        plt.scatter([middle_x], [middle_y], marker=" ")
        plt.text("no roofs and no workloads to draw", frame.x_lo * 1.5, middle_y, alignment="left")
    log_x_lo = math.log10(frame.x_lo)
    log_x_span = math.log10(frame.x_hi) - log_x_lo
    plot_columns = max(10, width - 7)
    column_in_log = log_x_span / plot_columns
    for mark in marks:
        plt.scatter([mark.x], [mark.y], marker=mark.marker, color=plotext_color(palette, mark.color))
    for mark in marks if point_labels else []:
        column = int((math.log10(mark.x) - log_x_lo) / column_in_log)
        room_right = plot_columns - column - 3
        room_left = column - 2
        text = mark.label
        if len(text) > room_right and room_left > room_right:
            if len(text) > room_left:
                text = text[: max(3, room_left) - 1] + "…"
            x = 10 ** (math.log10(mark.x) - (len(text) + 1) * column_in_log)
        else:
            if len(text) > room_right:
                text = text[: max(3, room_right) - 1] + "…"
            x = 10 ** (math.log10(mark.x) + 2 * column_in_log)
        plt.text(text, x, mark.y, color=plotext_color(palette, mark.color), alignment="left")

    x_ticks = _decade_ticks(frame.x_lo, frame.x_hi, max(2, (width - 8) // 7))
    plt.xticks(x_ticks, [_x_tick_label(value) for value in x_ticks])
    y_ticks = _decade_ticks(frame.y_lo, frame.y_hi, max(2, (height - 6) // 2))
    plt.yticks(y_ticks, [format_si(value, "", 3) for value in y_ticks])
    plt.xlabel("arithmetic intensity (FLOP/byte)")
    plt.ylabel("FLOP/s")
    if title:
        plt.title(title)
    return drawn, marks, frame


def _point_marks(
    model: RooflineModel,
    placements: Sequence[Placement],
    extra: Sequence[Placement],
    palette: ChartPalette,
    highlight: str | int | None,
) -> Iterable[_PointMark]:
    with_device = len({placement.point.key for placement in list(placements) + list(extra)}) > 1
    for index, placement in enumerate(list(placements) + list(extra)):
        point = placement.point
        y = point.flop_per_s
        if not is_finite_positive(y):
            continue
        is_extra = index >= len(placements)
        highlighted = highlight is not None and not is_extra and (highlight == index or highlight == point.name)
        name = point.name
        if with_device:
            name = f"{name} [{model.device_label(point.key)}]"
        if placement.above_roof:
            name += " !above roof"
        if point.estimated or is_extra:
            marker, color = palette.estimated_marker, palette.estimated
            if "estimated" not in name:
                name += " (est.)"
        elif highlighted:
            marker, color = palette.highlight_marker, palette.highlight
        elif placement.above_roof:
            marker, color = palette.point_marker, palette.above_roof
        else:
            marker, color = palette.point_marker, palette.points
        x = point.intensity_flop_per_byte
        if is_finite_positive(x):
            yield _PointMark(x, y, marker, color, name, index, False, highlighted)  # type: ignore[arg-type]
        dram_x = point.dram_intensity_flop_per_byte
        if is_finite_positive(dram_x):
            yield _PointMark(dram_x, y, palette.dram_point_marker, color, f"{point.name} (DRAM bytes)", index, True, highlighted)  # type: ignore[arg-type]


def legend_lines(roofs: Sequence[ChartRoof], width: int, palette: ChartPalette = DEFAULT_PALETTE) -> list[str]:
    """The legend as lines no wider than ``width``: ``"── cuda:0 bf16 790TFLOP/s"`` entries in
    as many columns as fit (each column as wide as its longest entry), the sample coloured like
    its line (ANSI) unless the palette is monochrome."""
    entries = [(roof.legend_sample, roof.legend, roof.color) for roof in roofs]
    if not entries:
        return []
    cells = [len(sample) + 1 + len(text) for sample, text, _ in entries]
    columns, widths = 1, [min(width, max(cells))]
    for count in range(len(entries), 1, -1):
        trial = [max(cells[index::count]) for index in range(count)]
        if sum(trial) + 2 * (count - 1) <= width:
            columns, widths = count, trial
            break
    lines = []
    for start in range(0, len(entries), columns):
        parts = []
        for column, (sample, text, color) in enumerate(entries[start : start + columns]):
            if len(sample) + 1 + len(text) > width:
                text = text[: width - len(sample) - 2] + "…"
            painted = _paint(sample, color, palette)
            parts.append(f"{painted} {text}".ljust(widths[column] + len(painted) - len(sample)))
        lines.append("  ".join(parts).rstrip())
    return lines


def _paint(text: str, color: Color, palette: ChartPalette) -> str:
    """``text`` in ``color`` with ANSI codes (plotext's own colouriser)."""
    if not palette.use_color or color == "default":
        return text
    from plotext._utility import colorize

    return colorize(text, plotext_color(palette, color))


@dataclass(frozen=True)
class RenderedRoofline:
    """A rendered chart: ``text`` (ANSI colours unless monochrome) and ``labels``, where each
    point's label went (:class:`~gpuscope.roofline.chart_labels.PlacedLabel`: full label or
    numbered tag). ``tags`` maps a point's index (over ``model.placements`` then the extra
    placements) to the tag shown instead of its full label."""

    text: str
    labels: tuple[PlacedLabel, ...]

    @property
    def tags(self) -> dict[int, str]:
        return {label.mark.index: label.text for label in self.labels if not label.full and label.row is not None}


def render_roofline(model: RooflineModel, width: int = 100, height: int = 30, **options: Any) -> str:
    """The chart as text, ``width`` columns wide and ``height`` rows tall plus the legend below
    it (ANSI colours unless the palette is monochrome). Widths below :data:`MIN_CHART_WIDTH` are
    raised to it. Point labels never overlap: a point whose full label finds no room shows its
    number (:func:`~gpuscope.roofline.chart_labels.point_tag`, the ``#`` column of the points
    table); :func:`render_roofline_labelled` also says which. ``options`` are the keyword-only
    arguments of :func:`render_roofline_labelled` (``palette``, ``highlight``, ``detail``,
    ``extra_placements``, ``legend``, ``title``). Not thread-safe: plotext keeps one global figure."""
    return render_roofline_labelled(model, width, height, **options).text


def render_roofline_labelled(
    model: RooflineModel,
    width: int = 100,
    height: int = 30,
    *,
    palette: ChartPalette = DEFAULT_PALETTE,
    highlight: str | int | None = None,
    detail: Literal["main", "all"] = "main",
    extra_placements: Sequence[Placement] = (),
    legend: bool = True,
    title: str | None = "Roofline (log-log)",
) -> RenderedRoofline:
    """:func:`render_roofline` with where each point label went (full label or tag)."""
    import plotext

    width = max(MIN_CHART_WIDTH, int(width))
    height = max(12, int(height))
    plotext.clear_figure()
    plotext.limit_size(False, False)
    plotext.plotsize(width, height)
    try:
        roofs, marks, frame = _draw(
            plotext,
            model,
            width=width,
            height=height,
            palette=palette,
            highlight=highlight,
            detail=detail,
            extra_placements=extra_placements,
            legend_inside=False,
            configure_canvas=True,
            title=title,
            point_labels=False,
        )
        text = plotext.build()
    finally:
        plotext.clear_figure()
    if not palette.use_color:
        text = strip_ansi(text)
    label_marks = [
        LabelMark(
            mark.x,
            mark.y,
            mark.label,
            point_tag(mark.index, mark.dram),
            mark.index,
            _style(mark.color, palette),
            mark.highlighted,
        )
        for mark in marks
    ]
    log_x = (math.log10(frame.x_lo), math.log10(frame.x_hi))
    log_y = (math.log10(frame.y_lo), math.log10(frame.y_hi))
    text, placed = place_labels(text, label_marks, log_x, log_y)
    lines = [line.rstrip() for line in text.splitlines()]
    if legend:
        lines.extend(legend_lines(roofs, width, palette))
        lines.extend(chart_footnotes(model, detail, width))
    return RenderedRoofline("\n".join(lines), tuple(placed))


def _style(color: Color, palette: ChartPalette) -> str:
    """The ANSI prefix that paints text in ``color`` ('' when monochrome)."""
    painted = _paint("x", color, palette)
    return painted[: painted.index("x")] if painted != "x" else ""
