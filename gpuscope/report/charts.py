"""Report charts drawn with matplotlib (Agg, no pyplot state) as SVG text ready to inline in HTML.

Output is deterministic (fixed hash salt, no date in the metadata), ids are prefixed per chart
so several charts can share one page, and colours are CSS variables (``var(--chart-fg)``,
``var(--c0)`` ...) so the page's light and dark styles recolour them. Labels are passed with
mathtext off, so a ``$`` in a workload name is text; matplotlib escapes ``<``, ``>`` and ``&``.
"""

from __future__ import annotations

import math
import re
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypedDict

from gpuscope.paths import use_private_matplotlib_dir
from gpuscope.report.fmt import clean_text, fmt_quantity, fmt_time_utc
from gpuscope.report.model import run_in_log
from gpuscope.report.roofview import model_from_view
from gpuscope.roofline.columns import distinct_cuts
from gpuscope.roofline.layout import layout_roofline
from gpuscope.roofline.layout_cells import cell_of, place_labels
from gpuscope.roofline.model import Placement, RooflineModel
from gpuscope.schema.report import MeasurementRow, Roofline, Telemetry
from gpuscope.textsafe import safe_text

if TYPE_CHECKING:  # matplotlib loads only to draw
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import Formatter


class LineStyle(TypedDict):
    """How a roof style's lines are drawn (keyword arguments of ``Axes.plot``)."""

    linewidth: float
    linestyle: str | tuple[float, tuple[float, ...]]
    alpha: float


__all__ = ["roofline_svg", "roofline_key", "telemetry_svg", "PALETTE_SIZE", "CHART_RC"]

PALETTE_SIZE = 10
#: Stand-in colours replaced by CSS variables after drawing (never used for anything else).
_FG, _MUTED, _GRID, _SPAN_A, _SPAN_B = "#010203", "#040506", "#070809", "#0a0b0c", "#0d0e0f"
_PALETTE = [f"#1{i}1{i}1{i}" for i in range(PALETTE_SIZE)]
_SENTINELS = {
    _FG: "var(--chart-fg)",
    _MUTED: "var(--chart-muted)",
    _GRID: "var(--chart-grid)",
    _SPAN_A: "var(--chart-span-a)",
    _SPAN_B: "var(--chart-span-b)",
}
_SENTINELS.update({colour: f"var(--c{i})" for i, colour in enumerate(_PALETTE)})

CHART_RC: Any = {  # matplotlib types rc keys as a Literal of every rcParam name
    "svg.fonttype": "none",  # real <text>: selectable, small, and escaped by matplotlib
    "svg.hashsalt": "gpuscope",
    "text.parse_math": False,
    "font.family": "sans-serif",
    "font.size": 9.0,
    "axes.edgecolor": _MUTED,
    "axes.labelcolor": _FG,
    "axes.titlecolor": _FG,
    "xtick.color": _MUTED,
    "ytick.color": _MUTED,
    "xtick.labelcolor": _FG,
    "ytick.labelcolor": _FG,
    "text.color": _FG,
    "grid.color": _GRID,
    "legend.edgecolor": _GRID,
    "legend.facecolor": "none",
    "legend.framealpha": None,
    "figure.facecolor": "none",
    "axes.facecolor": "none",
    "savefig.facecolor": "none",
    "savefig.edgecolor": "none",
    "path.simplify": True,
}


def _figure(width_in: float, height_in: float) -> Figure:
    use_private_matplotlib_dir()  # before matplotlib's first import
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width_in, height_in), dpi=72)
    FigureCanvasSVG(figure)
    return figure


def _svg_text(figure: Figure, prefix: str, label: str) -> str:
    import io

    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    return _postprocess(buffer.getvalue(), prefix, label)


def _postprocess(svg: str, prefix: str, label: str) -> str:
    """Make matplotlib's SVG document an inline element for one HTML page."""
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, flags=re.S)
    svg = re.sub(r'(id=")([^"]+)(")', lambda m: f"{m.group(1)}{prefix}-{m.group(2)}{m.group(3)}", svg)
    svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}-{m.group(1)})", svg)
    svg = re.sub(r'((?:xlink:)?href=")#([^"]+)"', lambda m: f'{m.group(1)}#{prefix}-{m.group(2)}"', svg)
    svg = svg.replace("*{stroke-linejoin", f"#{prefix}-chart *{{stroke-linejoin")
    for sentinel, variable in _SENTINELS.items():
        svg = svg.replace(sentinel, variable)
    from html import escape

    head_end = svg.index(">")
    head = svg[:head_end]
    head = re.sub(r'\s(width|height)="[^"]*"', "", head)
    head += f' id="{prefix}-chart" class="chart" role="img" aria-label="{escape(label, quote=True)}"'
    return head + svg[head_end:].rstrip() + "\n"


def _rc() -> AbstractContextManager[None]:
    use_private_matplotlib_dir()  # before matplotlib's first import
    import matplotlib

    return matplotlib.rc_context(CHART_RC)


def _si_formatter(unit: str) -> Formatter:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(
        lambda value, _pos: (
            fmt_quantity(value, unit, digits=3).replace(".00 ", " ").replace(".0 ", " ") if value > 0 else ""
        )
    )


def _short(value: object, limit: int = 40) -> str:
    return clean_text(value, limit)


# --- roofline --------------------------------------------------------------------------------

#: Report colour slot (``var(--cN)``) of each layout colour slot: CPU blue, GPUs orange, green,
#: purple, yellow, then teal (the page's light and dark palettes, colour-blind safe in order).
_DEVICE_SLOTS = (0, 1, 2, 3, 6, 5)
#: Each roof style (:data:`gpuscope.roofline.shapes.Style`): its words in the key, its line.
_STYLES: dict[str, tuple[str, LineStyle]] = {
    "envelope": ("bold: envelope min(peak, I x DRAM)", {"linewidth": 2.6, "linestyle": "-", "alpha": 1.0}),
    "dtype": ("dashed: other dtypes", {"linewidth": 1.0, "linestyle": (0, (5, 3)), "alpha": 0.9}),
    "level": ("dotted: cache levels", {"linewidth": 1.0, "linestyle": (0, (1.5, 2.5)), "alpha": 0.9}),
    "datasheet": (
        "dash-dot: datasheet roofs beside measured ones",
        {"linewidth": 0.9, "linestyle": (0, (6, 2, 1.5, 2)), "alpha": 0.8},
    ),
}
#: Each mark: its words in the key, its matplotlib marker.
_MARKERS = {
    "ridge": ("circles: ridge points", "o"),
    "point": ("thin diamonds: workloads", "d"),
    "estimated": ("diamonds: estimated workloads", "D"),
    "above_roof": ("triangles: workloads above their roof", "^"),
}


def roofline_key(full: bool = True) -> str:
    """What the chart's line styles and marks mean, from the styles and markers it draws with
    (``full=False``: the short key printed under the chart's legend)."""
    styles = _STYLES if full else {k: v for k, v in _STYLES.items() if k != "datasheet"}
    marks = _MARKERS if full else {"ridge": _MARKERS["ridge"]}
    return "; ".join(words for words, _ in (*styles.values(), *marks.values()))


#: Label cells of the SVG chart: monospace text at this size fills one cell per character.
_LABEL_PT = 7.5
_CELL_W_PX = _LABEL_PT * 0.62
_CELL_H_PX = 11.0


def roofline_svg(
    roofline: Roofline, prefix: str = "roofline", all_roofs: bool = False, label: str | None = None
) -> str | None:
    """The report's roofline chart as inline SVG, or None without roofs and points: the layout of
    :mod:`gpuscope.roofline.layout` (bold envelope per device, thin other dtypes and levels
    stopping at their ridge, ridge marks labelled in FLOP/B, labels on their lines placed so none
    covers a line or another label, numbered points) with the points table under the plot.
    ``roofline`` is the report's roofline section (:func:`gpuscope.report.roofview.roofline_view`);
    ``label`` is the chart's accessible name (default: what it draws, with ``prefix``)."""
    model = model_from_view(roofline)
    if model is None:
        return None
    layout = layout_roofline(model, all_roofs=all_roofs, tight=True)
    if layout.empty:
        return None

    def colour(device: int) -> str:
        return _PALETTE[_DEVICE_SLOTS[layout.legend[device].colour_index % len(_DEVICE_SLOTS)]]

    tagged = [point for point in layout.points if point.tag and not point.dram]
    # names the 34-character column would cut alike keep their last words (the one column rule)
    names = distinct_cuts([safe_text(point.placement.point.name) for point in tagged], 34)
    rows_table = [
        _point_row(point.number, point.placement, model, name) for point, name in zip(tagged, names, strict=True)
    ]
    width_in, plot_h_in = 10.0, 5.2
    legend_h_in = 0.2 * (len(layout.legend) + 1) + 0.15 * len(layout.notes)
    table_h_in = 0.16 * (len(rows_table) + 1) + 0.1 if rows_table else 0.0
    height_in = plot_h_in + legend_h_in + table_h_in + 0.7
    with _rc():
        figure = _figure(width_in, height_in)
        left, right = 0.09, 0.97
        bottom = (table_h_in + 0.55) / height_in
        top = bottom + plot_h_in / height_in
        axes = figure.add_axes((left, bottom, right - left, top - bottom))
        (x0, x1), (y0, y1) = layout.x_range, layout.y_range
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlim(10.0**x0, 10.0**x1)
        axes.set_ylim(10.0**y0, 10.0**y1)
        axes.grid(True, which="major", linewidth=0.5)
        axes.set_xlabel("arithmetic intensity (FLOP/byte)")
        axes.set_ylabel("performance (FLOP/s)")
        axes.xaxis.set_major_formatter(_x_formatter())
        axes.yaxis.set_major_formatter(_si_formatter("FLOP/s"))
        axes.xaxis.set_minor_formatter(_blank())
        axes.yaxis.set_minor_formatter(_blank())
        for style in ("datasheet", "level", "dtype", "envelope"):
            for segment in layout.segments:
                if segment.style == style:
                    axes.plot(
                        [segment.x0, segment.x1],
                        [segment.y0, segment.y1],
                        color=colour(segment.device),
                        solid_capstyle="butt",
                        zorder=2 if style != "envelope" else 3,
                        **_STYLES[style][1],
                    )
        for ridge in layout.ridges:
            axes.plot(
                [ridge.x], [ridge.y], linestyle="none", marker=_MARKERS["ridge"][1],
                markersize=6 if ridge.envelope else 4, markerfacecolor="none" if not ridge.envelope else _BG,
                markeredgecolor=colour(ridge.device), markeredgewidth=1.4, zorder=4,
            )  # fmt: skip
        # a fleet's untagged points: one line of markers per look (a line each costs seconds per 1,000)
        untagged: dict[tuple[str, str, str], tuple[list[float], list[float]]] = {}
        for point in layout.points:
            mark = "above_roof" if point.above_roof else ("estimated" if point.estimated else "point")
            marker, edge = _MARKERS[mark][1], _FG if point.above_roof else colour(point.device)
            if not point.tag:
                xs, ys = untagged.setdefault((marker, colour(point.device), edge), ([], []))
                xs.append(point.x)
                ys.append(point.y)
                continue
            axes.plot(
                [point.x], [point.y], linestyle="none", marker=marker, markersize=7.5, color=colour(point.device),
                markeredgecolor=edge, zorder=5,
            )  # fmt: skip
        for (marker, face, edge), (xs, ys) in untagged.items():
            axes.plot(
                xs, ys, linestyle="none", marker=marker, markersize=7.5, color=face, markeredgecolor=edge, zorder=5
            )
        box = axes.get_window_extent()
        columns = max(20, int(box.width / _CELL_W_PX))
        rows = max(8, int(box.height / _CELL_H_PX))
        # a marker is wider than a text cell: keep the cells either side of it free as well
        beside = {
            (row, column) for row in (0, rows - 1) for column in range(columns)
        }  # text centred on the frame would cross it
        beside |= {(row, column) for row in range(rows) for column in (0, columns - 1)}
        for point in layout.points:
            row, column = cell_of(layout, point.x, point.y, columns, rows)
            beside |= {(row, column - 1), (row, column + 1)}
        placement = place_labels(
            layout, columns, rows, blocked=beside, slanted_aspect=(box.height / rows) / (box.width / columns)
        )
        for item in placement.texts:
            if item.kind == "point":
                who = layout.points[item.owner].device
                weight = "bold"
            elif item.kind == "roof":
                who, weight = layout.labels[item.owner].device, "normal"
            else:
                who, weight = layout.ridges[item.owner].device, "normal"
            fx = (item.column - 0.45) / (columns - 1)  # the cell's left edge, as cell_of maps
            fy = ((rows - 1) - item.row) / (rows - 1)
            axes.text(
                fx, fy, item.text, transform=axes.transAxes, fontsize=_LABEL_PT, family="monospace", color=colour(who),
                ha="left", va="center",
                fontweight=weight, zorder=6, rotation=item.angle_deg, rotation_mode="anchor",
            )  # fmt: skip
        y = 1 - 0.2 / height_in
        for index, entry in enumerate(layout.legend):
            figure.lines.append(_legend_line(figure, left, y, colour(index)))
            figure.text(left + 0.045, y, _short(entry.text, 110), fontsize=8, va="center", color=_FG)
            y -= 0.2 / height_in
        figure.text(left, y, roofline_key(full=False), fontsize=7, va="center", color=_MUTED)
        for note in layout.notes:
            y -= 0.15 / height_in
            figure.text(left, y, _short(note, 150), fontsize=7, va="center", color=_FG, fontweight="bold")
        if rows_table:
            header = ("#", "workload", "device", "bound", "eff.", "headroom")
            table = [header, *rows_table]
            widths = [max(len(row[i]) for row in table) for i in range(len(header))]
            y_table = (table_h_in - 0.05) / height_in
            char_in = _LABEL_PT * 0.62 / 72  # one monospace character (SVG collapses spaces: one text per cell)
            for number, table_row in enumerate(table):
                x = left
                for column, cell in enumerate(table_row):
                    figure.text(
                        x, y_table - number * 0.16 / height_in, cell, fontsize=_LABEL_PT, family="monospace", va="top",
                        color=_FG if number else _MUTED,
                    )  # fmt: skip
                    x += (widths[column] + 2) * char_in / width_in
        points = len(model.placements)
        name = label or (
            ("Roofline chart" + ("" if prefix == "roofline" else f" ({prefix})") + ": ")
            + f"{len(model.devices)} device{'s' if len(model.devices) != 1 else ''}, "
            f"{points} workload{'s' if points != 1 else ''}"
        )
        return _svg_text(figure, prefix, name)


_BG = _SPAN_A  # the ridge mark's fill: the page's faint span colour


def _legend_line(figure: Figure, x: float, y: float, colour: str) -> Line2D:
    from matplotlib.lines import Line2D

    return Line2D([x, x + 0.035], [y, y], transform=figure.transFigure, color=colour, linewidth=2.6)


def _point_row(number: int, placement: Placement, model: RooflineModel, name: str) -> tuple[str, ...]:
    """``#, workload, device, bound, eff., headroom`` of one placed point (``number``: its tag
    on the chart, 1-based over the model's placements; ``name``: its name as the column shows it)."""
    point = placement.point
    efficiency = placement.efficiency
    headroom = "-" if not efficiency or efficiency <= 0 else f"{1 / efficiency:.2g}x"
    bound = placement.bound + (" ABOVE ROOF" if placement.above_roof else "")
    return (
        str(number),
        name,
        model.device_label(point.key),
        bound,
        "-" if efficiency is None else f"{efficiency * 100:.0f}%",
        headroom,
    )


def _x_formatter() -> Formatter:
    from matplotlib.ticker import FuncFormatter

    def text(value: float, _pos: int) -> str:
        if value <= 0:
            return ""
        if value >= 1000:
            return fmt_quantity(value, "", 3).replace(".00 ", " ").replace(".0 ", " ").strip()
        return f"{value:g}"

    return FuncFormatter(text)


def _blank() -> Formatter:
    from matplotlib.ticker import NullFormatter

    return NullFormatter()


# --- telemetry -------------------------------------------------------------------------------


def telemetry_svg(telemetry: Telemetry, measurements: list[MeasurementRow], prefix: str = "telemetry") -> str | None:
    """Telemetry time series, one panel per metric group, every GPU a colour, with each probe
    run shaded and numbered on the time axis. None when the log has nothing to draw."""
    panels = telemetry.panels or []
    if not panels:
        return None
    start = float(telemetry.start or 0.0)
    duration = float(telemetry.duration_s or 0.0)
    spans = []
    for number, m in enumerate(measurements, start=1):
        inside = run_in_log(m, telemetry)  # the one overlap rule (the runs table and warnings use it too)
        if inside is not None:
            spans.append((number, *inside, m.name))
    keys = [g.key for g in telemetry.gpus or []]
    colour_of = {key: 1 + (i % (PALETTE_SIZE - 1)) for i, key in enumerate(keys)}
    colour_of["host"] = 0
    height_per_panel = 1.55
    with _rc():
        figure = _figure(10.0, 0.9 + height_per_panel * len(panels))
        top = 1 - 0.55 / figure.get_figheight()
        bottom = 0.5 / figure.get_figheight()
        axes_list = figure.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
        figure.subplots_adjust(left=0.08, right=0.80, top=top, bottom=bottom, hspace=0.45)
        handles: dict[str, Line2D] = {}
        for axes, panel in zip(axes_list, panels):
            axes.set_title(
                f"{panel.title} ({panel.unit})",
                loc="left",
                fontsize=8.5,
                pad=14 if axes is axes_list[0] and spans else 4,
            )
            axes.grid(True, linewidth=0.5)
            for number, a, b, _name in spans:
                axes.axvspan(
                    a, b if b > a else a + max(duration, 1.0) / 500, color=_SPAN_A if number % 2 else _SPAN_B,
                    linewidth=0, zorder=0,
                )  # fmt: skip
            for line in panel.lines:
                colour = _PALETTE[colour_of.get(line.key, 1)]
                v = [math.nan if value is None else value for value in line.v]
                (artist,) = axes.plot(line.t, v, color=colour, linestyle=line.style or "-", linewidth=1.1)
                if line.style in (None, "-"):
                    handles.setdefault(_short(line.label, 30), artist)
            if panel.unit == "%":
                axes.set_ylim(0, 105)
            else:
                axes.margins(y=0.1)
                axes.set_ylim(bottom=0)
            axes.tick_params(labelsize=7.5)
        axes_list[-1].set_xlabel(f"seconds since {fmt_time_utc(start)}")
        axes_list[0].set_xlim(0, max(duration, 1.0))
        first = axes_list[0]
        for number, a, b, _name in spans:
            first.annotate(
                str(number), ((a + b) / 2, 1.0), xycoords=("data", "axes fraction"), xytext=(0, 2),
                textcoords="offset points", ha="center", va="bottom", fontsize=7, color=_FG,
            )  # fmt: skip
        if handles:
            figure.legend(
                list(handles.values()), list(handles.keys()), loc="upper left", bbox_to_anchor=(0.815, top),
                fontsize=7.5, frameon=False,
            )  # fmt: skip
        if spans:
            figure.text(
                0.815, bottom, "shaded: probe runs\n(numbers as in the\nProbe runs table)", fontsize=7, color=_MUTED,
                va="bottom",
            )  # fmt: skip
        titles = ", ".join(str(panel.title) for panel in panels)
        marked = f"; {len(spans)} probe runs shaded" if spans else ""
        return _svg_text(figure, prefix, f"Telemetry time series of {telemetry.source}: {titles}{marked}")
