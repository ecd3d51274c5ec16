"""Report charts drawn with matplotlib (Agg, no pyplot state) as SVG text ready to inline in HTML.

Output is deterministic (fixed hash salt, no date in the metadata), ids are prefixed per chart
so several charts can share one page, and colours are CSS variables (``var(--chart-fg)``,
``var(--c0)`` ...) so the page's light and dark styles recolour them. Labels are passed with
mathtext off, so a ``$`` in a workload name is text; matplotlib escapes ``<``, ``>`` and ``&``.
"""

from __future__ import annotations

import math
import re
from typing import Any

from gpuscope.paths import use_private_matplotlib_dir
from gpuscope.report.fmt import clean_text, fmt_quantity

__all__ = ["roofline_svg", "telemetry_svg", "PALETTE_SIZE", "CHART_RC"]

PALETTE_SIZE = 10
#: Stand-in colours replaced by CSS variables after drawing (never used for anything else).
_FG, _MUTED, _GRID, _SPAN_A, _SPAN_B = "#010203", "#040506", "#070809", "#0a0b0c", "#0d0e0f"
_PALETTE = [f"#1{i}1{i}1{i}" for i in range(PALETTE_SIZE)]
_SENTINELS = {_FG: "var(--chart-fg)", _MUTED: "var(--chart-muted)", _GRID: "var(--chart-grid)", _SPAN_A: "var(--chart-span-a)", _SPAN_B: "var(--chart-span-b)"}
_SENTINELS.update({colour: f"var(--c{i})" for i, colour in enumerate(_PALETTE)})

CHART_RC: dict[str, Any] = {
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


def _figure(width_in: float, height_in: float) -> Any:
    use_private_matplotlib_dir()  # before matplotlib's first import
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width_in, height_in), dpi=72)
    FigureCanvasSVG(figure)
    return figure


def _svg_text(figure: Any, prefix: str, label: str) -> str:
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


def _rc() -> Any:
    use_private_matplotlib_dir()  # before matplotlib's first import
    import matplotlib

    return matplotlib.rc_context(CHART_RC)


def _si_formatter(unit: str) -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _pos: fmt_quantity(value, unit, digits=3).replace(".00 ", " ").replace(".0 ", " ") if value > 0 else "")


def _short(value: Any, limit: int = 40) -> str:
    return clean_text(value, limit)


# --- roofline --------------------------------------------------------------------------------

#: Measured roofs of identical devices within this fraction of their median are drawn as one line.
_MERGE_TOLERANCE = 0.03
_LABEL_GAP_PX = 9.5


def _hardware_key(item: dict[str, Any]) -> tuple[Any, ...]:
    """Devices of one model on one host (and rank) share a colour and merge their roofs."""
    return (item.get("host"), item.get("rank"), item.get("device_type"), item.get("device_name") or str(item.get("device")))


def _merged_roofs(roofs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per roof name and hardware group: devices whose values lie within
    :data:`_MERGE_TOLERANCE` of the group's median share a line; the others (the interesting
    ones: a slow GPU) get their own line labelled with their device."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for roof in roofs:
        key = (*_hardware_key(roof), roof.get("kind"), roof.get("name"), roof.get("origin"), roof.get("main", True), roof.get("straggler") is True)
        groups.setdefault(key, []).append(roof)
    lines = []
    for members in groups.values():
        values = sorted(float(m["value"]) for m in members)
        median = values[len(values) // 2]
        near = [m for m in members if abs(float(m["value"]) / median - 1) <= _MERGE_TOLERANCE]
        far = [m for m in members if m not in near]
        if near:
            near_values = sorted(float(m["value"]) for m in near)
            lines.append({**near[0], "value": near_values[len(near_values) // 2], "devices": sorted({str(m["device"]) for m in near}, key=_natural)})
        lines.extend({**m, "devices": [str(m["device"])]} for m in far)
    return lines


def _natural(text: str) -> tuple[Any, ...]:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def _x_formatter() -> Any:
    from matplotlib.ticker import FuncFormatter

    def text(value: float, _pos: int) -> str:
        if value <= 0:
            return ""
        if value >= 1000:
            return fmt_quantity(value, "", 3).replace(".00 ", " ").replace(".0 ", " ").strip()
        return f"{value:g}"

    return FuncFormatter(text)


def _spread_labels(positions: list[float], gap: float) -> list[float]:
    """Push sorted label positions (display px, ascending) apart to at least ``gap``: the 1-D
    de-overlap of the compute-roof labels stacked at the right edge."""
    placed = list(positions)
    for i in range(1, len(placed)):
        placed[i] = max(placed[i], placed[i - 1] + gap)
    return placed


def roofline_svg(roofline: dict[str, Any], prefix: str = "roofline") -> str | None:
    """The roofline chart (log-log, FLOP/s against FLOP/byte) as inline SVG, or None without roofs
    and points. Measured roofs solid, datasheet roofs dashed; CPU and GPU in separate colours and
    marker shapes (CPU circles, GPU triangles); every drawn roof and every point labelled."""
    roofs = [
        r
        for r in roofline.get("roofs") or []
        if isinstance(r.get("value"), (int, float)) and r["value"] > 0 and r.get("unit") in ("FLOP/s", "B/s") and r.get("chart", True)
    ]
    points = [
        p
        for p in roofline.get("points") or []
        if isinstance(p.get("intensity_flop_per_byte"), (int, float)) and isinstance(p.get("flop_per_s"), (int, float)) and p["intensity_flop_per_byte"] > 0 and p["flop_per_s"] > 0
    ]
    if not roofs and not points:
        return None
    lines = _merged_roofs(roofs)
    hardware: list[tuple[Any, ...]] = []
    for item in sorted(roofs + points, key=lambda i: (i.get("device_type") != "gpu",)):
        if _hardware_key(item) not in hardware:
            hardware.append(_hardware_key(item))
    devices_of: dict[tuple[Any, ...], list[str]] = {}
    for item in roofs + points:
        devices_of.setdefault(_hardware_key(item), [])
        if str(item.get("device")) not in devices_of[_hardware_key(item)]:
            devices_of[_hardware_key(item)].append(str(item.get("device")))
    colour: dict[tuple[Any, ...], str] = {}
    cpu_slots, gpu_slots = [0, 5, 9], [1, 2, 3, 4, 6, 7, 8]
    for key in hardware:
        slots = gpu_slots if key[2] == "gpu" else cpu_slots
        used = sum(1 for other in colour if (other[2] == "gpu") == (key[2] == "gpu"))
        colour[key] = _PALETTE[slots[used % len(slots)]]
    multi_host = len({(k[0], k[1]) for k in hardware}) > 1

    def top(key: tuple[Any, ...], kinds: tuple[str, ...]) -> float | None:
        values = [line["value"] for line in lines if _hardware_key(line) == key and line.get("kind") in kinds]
        return max(values) if values else None

    xs = [p["intensity_flop_per_byte"] for p in points]
    ys = [p["flop_per_s"] for p in points]
    for line in lines:
        key = _hardware_key(line)
        if line["kind"] == "compute":
            ys.append(line["value"])
            memory = top(key, ("memory",)) or top(key, ("transfer", "collective"))
            if memory:
                xs.append(line["value"] / memory)
        elif line["kind"] == "memory":
            compute = top(key, ("compute",))
            if compute:
                xs.append(compute / line["value"])
    xs = xs or [0.1, 100.0]
    ys = ys or [1e9, 1e12]
    x_lo, x_hi = min(xs) / 5, max(xs) * 5
    y_hi = max(ys) * 3
    y_lo = min(ys) / 100
    bandwidths = [line["value"] for line in lines if line["kind"] == "memory"]
    if bandwidths:
        y_lo = max(y_lo, min(bandwidths) * x_lo)
    y_lo = min(y_lo, min(ys) / 3)

    with _rc():
        from matplotlib.lines import Line2D

        figure = _figure(10.0, 7.0)
        axes = figure.add_axes((0.125, 0.2, 0.615, 0.74))
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlim(x_lo, x_hi)
        axes.set_ylim(y_lo, y_hi)
        axes.grid(True, which="major", linewidth=0.6)
        axes.set_xlabel("Arithmetic intensity (FLOP/byte)")
        axes.set_ylabel("Performance")
        axes.xaxis.set_major_formatter(_x_formatter())
        axes.yaxis.set_major_formatter(_si_formatter("FLOP/s"))
        axes.xaxis.set_minor_formatter(_blank())
        axes.yaxis.set_minor_formatter(_blank())
        axes.set_title("Roofline: measured roofs solid, datasheet roofs dashed", loc="left", fontsize=10)
        to_px = axes.transData.transform

        def text_of(line: dict[str, Any], unit: str) -> str:
            key = _hardware_key(line)
            who = "" if len(line["devices"]) == len(devices_of.get(key, [])) else ", ".join(line["devices"]) + " "
            if multi_host and not who:
                who = f"{line.get('host')}" + (f"/r{line.get('rank')}" if line.get("rank") is not None else "") + " "
            suffix = " (datasheet)" if line.get("origin") == "datasheet" else ""
            if line.get("straggler") is True:
                suffix += " STRAGGLER"
            return _short(f"{who}{line.get('label') or line.get('name')} {fmt_quantity(line['value'], unit)}{suffix}", 56)

        compute_labels: list[tuple[float, str, str]] = []
        for line in sorted((l for l in lines if l["kind"] == "compute"), key=lambda l: (-l["value"], l.get("origin") != "measured")):
            key = _hardware_key(line)
            memory = top(key, ("memory",)) or top(key, ("transfer", "collective"))
            start = min(max(line["value"] / memory, x_lo), x_hi) if memory else x_lo
            axes.plot([start, x_hi], [line["value"], line["value"]], **_roof_style(line, colour[key]))
            compute_labels.append((float(to_px((x_hi, line["value"]))[1]), text_of(line, "FLOP/s"), colour[key]))
        compute_labels.sort()
        placed = _spread_labels([y for y, _, _ in compute_labels], _LABEL_GAP_PX)
        from_px = axes.transData.inverted().transform
        for (_, text, line_colour), y_new in zip(compute_labels, placed):
            y_data = float(from_px((0.0, y_new))[1])
            axes.annotate(text, (x_hi, y_data), xytext=(4, 0), textcoords="offset points", fontsize=7, va="center", ha="left", color=line_colour, annotation_clip=False)
        extras = _secondary_labels(lines)
        anchors: list[tuple[float, float, Any]] = []
        for line in sorted((l for l in lines if l["kind"] != "compute"), key=lambda l: (-l["value"], l.get("origin") != "measured")):
            key = _hardware_key(line)
            ceiling = top(key, ("compute",))
            x_start = max(x_lo, y_lo / line["value"])
            x_end = min(ceiling / line["value"] if ceiling else x_hi, x_hi, y_hi / line["value"])
            if x_end <= x_start:
                continue
            axes.plot([x_start, x_end], [x_start * line["value"], x_end * line["value"]], **_roof_style(line, colour[key]))
            if id(line) in extras.secondary:
                continue  # named in its main roof's label
            x_label = x_start * 1.4
            y_label = line["value"] * x_label
            p0, p1 = to_px((x_label, y_label)), to_px((x_label * 10, y_label * 10))
            angle = math.degrees(math.atan2(p1[1] - p0[1], p1[0] - p0[0]))
            text = text_of(line, "B/s") + extras.text(line)
            merged = False
            for ax_, ay_, artist in anchors:
                if math.hypot(ax_ - p0[0], ay_ - p0[1]) < _LABEL_GAP_PX * 1.2 and len(artist.get_text()) < 110:
                    artist.set_text(artist.get_text() + " · " + text)
                    merged = True
                    break
            if not merged:
                artist = axes.text(x_label, y_label, text, fontsize=7, rotation=angle, rotation_mode="anchor", ha="left", va="bottom", color=colour[key], clip_on=True)
                anchors.append((float(p0[0]), float(p0[1]), artist))
        offsets = ((6, 5), (6, -11), (-6, 5), (-6, -11))
        for number, point in enumerate(sorted(points, key=lambda p: (p["intensity_flop_per_byte"], p["flop_per_s"]))):
            key = _hardware_key(point)
            is_gpu = point.get("device_type") == "gpu"
            point_colour = colour.get(key, _PALETTE[1 if is_gpu else 0])
            axes.plot(
                [point["intensity_flop_per_byte"]],
                [point["flop_per_s"]],
                linestyle="none",
                marker="^" if is_gpu else "o",
                markersize=7.5,
                color=point_colour,
                markeredgecolor=_FG if point.get("above_roof") else point_colour,
                markeredgewidth=1.5 if point.get("above_roof") else 1.0,
                zorder=5,
            )
            where = ""
            if multi_host:
                where = f" ({point.get('host')}" + (f"/r{point.get('rank')}" if point.get("rank") is not None else "") + f" {point.get('device')})"
            elif len(devices_of.get(key, [])) > 1:
                where = f" ({point.get('device')})"
            name = _short(point.get("name"), 36) + where + (" — above its roof!" if point.get("above_roof") else "")
            dx, dy = offsets[number % len(offsets)]
            axes.annotate(name, (point["intensity_flop_per_byte"], point["flop_per_s"]), xytext=(dx, dy), textcoords="offset points", fontsize=7.5, ha="left" if dx > 0 else "right", color=_FG, zorder=6)
        handles, labels = [], []
        for key in hardware:
            host, rank, kind, name = key
            where = ""
            if multi_host:
                where = f"{host}" + (f"/r{rank}" if rank is not None else "") + ": "
            devices = ", ".join(sorted(devices_of.get(key, []), key=_natural))
            handles.append(Line2D([], [], color=colour[key], linewidth=2.2))
            labels.append(_short(f"{where}{'GPU' if kind == 'gpu' else 'CPU'} {name} ({devices})", 90))
        handles += [
            Line2D([], [], color=_MUTED, linestyle="-"),
            Line2D([], [], color=_MUTED, linestyle="--"),
            Line2D([], [], linestyle="none", marker="^", color=_MUTED),
            Line2D([], [], linestyle="none", marker="o", color=_MUTED),
        ]
        labels += ["measured roof", "datasheet roof", "GPU workload", "CPU workload"]
        figure.legend(handles, labels, loc="upper left", bbox_to_anchor=(0.125, 0.115), ncol=2, fontsize=7.5, frameon=False, borderaxespad=0.0)
        return _svg_text(figure, prefix, "Roofline chart")


def _blank() -> Any:
    from matplotlib.ticker import NullFormatter

    return NullFormatter()


def _roof_style(roof: dict[str, Any], colour: str) -> dict[str, Any]:
    """Measured roofs solid, datasheet dashed; secondary roofs (another kernel of a memory level
    already drawn, another collective) thin and faint."""
    measured = roof.get("origin") != "datasheet"
    if not roof.get("main", True) and measured:
        return {"color": colour, "linewidth": 0.8, "linestyle": "-", "alpha": 0.45}
    return {"color": colour, "linewidth": 1.8 if measured else 1.1, "linestyle": "-" if measured else "--", "alpha": 1.0 if measured else 0.8}


class _Secondary:
    """Secondary bandwidth roofs and the short text each main roof's label gets for them."""

    def __init__(self) -> None:
        self.secondary: set[int] = set()
        self.extra: dict[int, list[str]] = {}

    def text(self, line: dict[str, Any]) -> str:
        items = self.extra.get(id(line))
        return f" (also {', '.join(items)})" if items else ""


def _secondary_labels(lines: list[dict[str, Any]]) -> _Secondary:
    """Attach each non-main bandwidth roof to the main roof of its device and level (memory
    level, or kind for transfers and collectives), so every roof is named without a label per line."""
    out = _Secondary()
    mains = [l for l in lines if l["kind"] != "compute" and l.get("main", True)]
    for line in lines:
        if line["kind"] == "compute" or line.get("main", True):
            continue
        level = line.get("level") or line["kind"]
        owner = next(
            (m for m in mains if _hardware_key(m) == _hardware_key(line) and (m.get("level") or m["kind"]) == level and m.get("origin") == line.get("origin") and m["devices"] == line["devices"]),
            None,
        )
        if owner is None:
            continue
        name = str(line.get("name"))
        short = name.split(".", 1)[1] if line["kind"] == "memory" and "." in name else name
        out.secondary.add(id(line))
        out.extra.setdefault(id(owner), []).append(f"{_short(short, 20)} {fmt_quantity(line['value'], 'B/s')}")
    return out


# --- telemetry -------------------------------------------------------------------------------


def telemetry_svg(telemetry: dict[str, Any], measurements: list[dict[str, Any]], prefix: str = "telemetry") -> str | None:
    """Telemetry time series, one panel per metric group, every GPU a colour, with each probe
    run shaded and numbered on the time axis. None when the log has nothing to draw."""
    from gpuscope.report.fmt import fmt_time_utc

    panels = telemetry.get("panels") or []
    if not panels:
        return None
    start = float(telemetry.get("start") or 0.0)
    duration = float(telemetry.get("duration_s") or 0.0)
    spans = []
    for number, m in enumerate(measurements, start=1):
        if m.get("start") is None or m.get("end") is None:
            continue
        a, b = m["start"] - start, m["end"] - start
        if b < 0 or a > duration:
            continue
        spans.append((number, max(a, 0.0), min(b, duration), m.get("name")))
    keys = [g["key"] for g in telemetry.get("gpus") or []]
    colour_of = {key: 1 + (i % (PALETTE_SIZE - 1)) for i, key in enumerate(keys)}
    colour_of["host"] = 0
    height_per_panel = 1.55
    with _rc():
        figure = _figure(10.0, 0.9 + height_per_panel * len(panels))
        top = 1 - 0.55 / figure.get_figheight()
        bottom = 0.5 / figure.get_figheight()
        axes_list = figure.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
        figure.subplots_adjust(left=0.08, right=0.80, top=top, bottom=bottom, hspace=0.45)
        handles: dict[str, Any] = {}
        for axes, panel in zip(axes_list, panels):
            axes.set_title(f"{panel['title']} ({panel['unit']})", loc="left", fontsize=8.5, pad=14 if axes is axes_list[0] and spans else 4)
            axes.grid(True, linewidth=0.5)
            for number, a, b, _name in spans:
                axes.axvspan(a, b if b > a else a + max(duration, 1.0) / 500, color=_SPAN_A if number % 2 else _SPAN_B, linewidth=0, zorder=0)
            for line in panel["lines"]:
                colour = _PALETTE[colour_of.get(line["key"], 1)]
                t = line["t"]
                v = [math.nan if value is None else value for value in line["v"]]
                (artist,) = axes.plot(t, v, color=colour, linestyle=line.get("style") or "-", linewidth=1.1)
                if line.get("style", "-") == "-":
                    handles.setdefault(_short(line["label"], 30), artist)
            if panel["unit"] == "%":
                axes.set_ylim(0, 105)
            else:
                axes.margins(y=0.1)
                axes.set_ylim(bottom=0)
            axes.tick_params(labelsize=7.5)
        axes_list[-1].set_xlabel(f"seconds since {fmt_time_utc(start)}")
        axes_list[0].set_xlim(0, max(duration, 1.0))
        first = axes_list[0]
        for number, a, b, _name in spans:
            first.annotate(str(number), ((a + b) / 2, 1.0), xycoords=("data", "axes fraction"), xytext=(0, 2), textcoords="offset points", ha="center", va="bottom", fontsize=7, color=_FG)
        if handles:
            figure.legend(list(handles.values()), list(handles.keys()), loc="upper left", bbox_to_anchor=(0.815, top), fontsize=7.5, frameon=False)
        if spans:
            figure.text(0.815, bottom, "shaded: probe runs\n(numbers as in the\nProbe runs table)", fontsize=7, color=_MUTED, va="bottom")
        return _svg_text(figure, prefix, "Telemetry time series")
