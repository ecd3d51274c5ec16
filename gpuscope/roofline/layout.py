"""The roofline picture as positioned primitives, painted by plotext (terminal and TUI) and
matplotlib (report SVG). No Textual, plotext or matplotlib import here.

:func:`layout_roofline` turns a :class:`~gpuscope.roofline.model.RooflineModel` into a
:class:`RooflineLayout` in data coordinates (x: FLOP/byte, y: FLOP/s, both log scale):

- per device one bold **envelope** ``min(peak, I x DRAM)``: the DRAM slope up to the ridge, the
  peak of the dtype its workloads use (their highest) to the right edge;
- thin lines for the other roofs drawn: other dtypes start at their own ridge with the DRAM roof
  and run right; other memory levels rise from the left edge and stop where they meet the
  envelope's peak (their own ridge);
- a ridge mark (and label "ridge 5.5 FLOP/B") where each line meets the DRAM roof;
- one label per roof ("fp32 204 GFLOP/s", "DRAM triad 37 GB/s") anchored at its line;
- points with their number (1-based over the model's placements, then live placements), the
  tag the painters show instead of a name (the table beside the chart carries the name);
- the legend: one entry per device (colour, name, measured or datasheet); a fleet (more than
  :data:`~gpuscope.roofline.layout_fleet.FLEET_DEVICES` devices) has one per hardware model, its
  median device, beside its worst stragglers (:mod:`gpuscope.roofline.layout_fleet`).

Default roofs: per device the envelope (the dtypes its workloads use; with no workloads the
highest measured compute roof, else datasheet bf16/fp32) plus DRAM, and the other dtypes its
workloads use. ``all_roofs=True`` adds every other compute dtype and memory level, datasheet
roofs beside measured ones. Transfer and collective bandwidths are never FLOP roofs here (see
:func:`gpuscope.roofline.tables.bandwidth_table`).

:func:`place_labels` puts the labels into a grid of character cells (terminal columns, or the
SVG's text cells) so that no label covers a line, a point, a ridge mark or another label; a
label with no free place is dropped (its roof is in the legend and the roofs table, its point
in the points table). :func:`legibility` counts what a picture still gets wrong.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpuscope.roofline.layout_fleet import chart_devices
from gpuscope.roofline.model import (
    DATASHEET,
    MEASURED,
    DeviceKey,
    DeviceRoofs,
    Placement,
    Roof,
    RooflineModel,
    above_datasheet,
    best_roof,
    compute_roof_for,
    dtype_roof,
    is_finite_positive,
    memory_roof_for,
)
from gpuscope.roofline.shapes import (
    LegendEntry,
    PointMark,
    RidgeMark,
    RoofLabel,
    RooflineLayout,
    Segment,
    Style,
    roof_title,
)
from gpuscope.roofline.units import format_intensity, format_si
from gpuscope.textsafe import safe_text

__all__ = ["layout_roofline", "envelope_roofs"]


def _memory_kind(roof: Roof) -> str | None:
    """``"HBM3e"`` from a datasheet DRAM roof's note (``"H200 SXM HBM3e"``)."""
    if roof.source == DATASHEET and roof.kind == "memory" and roof.note:
        return roof.note.split()[-1]
    return None


def _roof_text(roof: Roof) -> str:
    unit = "FLOP/s" if roof.kind == "compute" else "B/s"
    return f"{roof_title(roof, _memory_kind(roof))} {format_si(roof.value, unit, 3)}"


# --- roof choice --------------------------------------------------------------------------------


def _dtype(name: str) -> str:
    return name.split(".", 1)[0]


def envelope_roofs(model: RooflineModel, device: DeviceRoofs) -> tuple[Roof | None, Roof | None, list[Roof]]:
    """``(envelope peak, DRAM roof, other compute roofs its workloads use)`` of one device.

    The peak is the highest roof among the dtypes the device's workloads use; without workloads
    (or dtypes) a CPU's fp32 roof (what CPUs run: its bf16 dot-product peak would set a ceiling no
    fp32 code meets), a GPU's highest measured compute roof, else the datasheet bf16."""
    placements = model.placements_of(device.key)
    return _envelope(device, placements, [p.compute_roof for p in placements if p.compute_roof is not None])


def _envelope(
    device: DeviceRoofs, placements: Sequence[Placement], bounding: list[Roof]
) -> tuple[Roof | None, Roof | None, list[Roof]]:
    """:func:`envelope_roofs` of ``device`` whose points are ``placements`` (``bounding``: the
    compute roofs of ``device`` that bound them)."""
    dram = memory_roof_for(device)
    used = sorted({p.point.dtype for p in placements if p.point.dtype})
    used_roofs = [roof for roof in (dtype_roof(device, dtype) for dtype in used) if roof is not None]
    if not used_roofs:
        used_roofs = bounding
    if not used_roofs:
        peak = dtype_roof(device, "fp32") if device.device_type == "cpu" else None
        if peak is None:
            peak = best_roof(device.of_kind("compute", MEASURED))
        if peak is None:
            peak = compute_roof_for(device, "fp32" if device.device_type == "cpu" else "bf16")
        return peak, dram, []
    ordered = sorted(set(used_roofs), key=lambda roof: (-roof.value, roof.name))
    return ordered[0], dram, ordered[1:]


# --- layout -------------------------------------------------------------------------------------


def _decades(lo: float, hi: float) -> tuple[float, float]:
    return math.floor(math.log10(lo) + 1e-9), math.ceil(math.log10(hi) - 1e-9)


def layout_roofline(
    model: RooflineModel,
    *,
    all_roofs: bool = False,
    extra_placements: Sequence[Placement] = (),
    highlight: int | str | None = None,
    tight: bool = False,
    short: bool = False,
) -> RooflineLayout:
    """The picture of ``model`` (see the module docstring). ``extra_placements`` are live,
    estimated points numbered after the model's; ``highlight`` names a point (its name or its
    0-based index in ``model.placements``). ``tight`` ends the x axis a little past the last
    ridge point or point, and the y axis a little above the highest roof or point, instead of at
    the next whole decade (the report's chart, whose ticks need not fall on the axis ends).
    ``short`` (a chart with few rows per decade: the TUI at 80x24) spends no row on margins: the
    y axis runs from just below the lowest point or roof to just above the highest, not to
    whole decades, so each decade gets more rows."""
    plans: list[tuple[int, DeviceRoofs, Roof | None, Roof | None, list[Roof], list[Roof]]] = []
    legend: list[LegendEntry] = []
    cpu_slots, gpu_slots = 0, 0
    entries, notes = chart_devices(model)
    fleet = any(entry.group for entry in entries)
    slots: dict[DeviceKey, int] = {}  # each device's legend entry (a group's members: the group's)
    for entry in entries:
        device = entry.device
        if entry.group:
            placements = [p for member in entry.members for p in model.placements_of(member.key)]
            bounding = [roof for p in placements if (roof := compute_roof_for(device, p.point.dtype)) is not None]
            peak, dram, others = _envelope(device, placements, bounding)
        else:
            peak, dram, others = envelope_roofs(model, device)
        levels: list[Roof] = []
        if all_roofs:
            drawn = {id(roof) for roof in [peak, dram, *others] if roof is not None}
            others += sorted((r for r in device.compute if id(r) not in drawn), key=lambda r: _dtype(r.name))
            levels = [roof for roof in device.memory if id(roof) not in drawn]
        is_cpu = device.device_type == "cpu"
        slot = (0 if cpu_slots == 0 else 5) if is_cpu else 1 + (gpu_slots % 4)
        if is_cpu:
            cpu_slots += 1
        else:
            gpu_slots += 1
        index = len(legend)
        given = [roof.source for roof in (peak, dram) if roof is not None]
        both_measured = given == [MEASURED, MEASURED]
        source = "measured" if both_measured else "datasheet" if set(given) <= {DATASHEET} else "measured + datasheet"
        parts = [_roof_text(roof) for roof in (peak, dram) if roof is not None]
        envelope_text = (" · ".join(parts) or "no roofs") + f" ({source})"
        label = entry.label(model)
        if entry.group:  # the range across its devices goes to the notes: a legend line must stay short
            envelope_text = f"median of {label}: {envelope_text}"
            flags = (f"across them {entry.ranges_text([peak, dram])}", *_group_flags(entry.members))
        else:
            flags = tuple(item.text for item in above_datasheet(device)) + tuple(device.out_of_order.values())
            for roof in device.stragglers:
                below = roof.below_median_percent
                flags += (f"straggler: {roof.name}" + (f" -{below:.0f}% vs median" if below is not None else ""),)
        # in a fleet the devices drawn on their own are stragglers or one of a kind: name which
        name = f"{label} ({device.name})" if fleet and not entry.group and device.name else device.name
        legend.append(LegendEntry(label, name, device.device_type, slot, envelope_text, flags))
        for flag in flags:  # above-datasheet ceilings and straggler roofs
            notes.append(f"{label}: {flag}")
        if dram is None and peak is not None:
            notes.append(f"{label}: no DRAM roof, so no slope and no ridge (points there are bound 'unknown')")
        for member in entry.members:
            if not entry.group or member.key not in slots:  # a straggler drawn on its own keeps its entry
                slots[member.key] = index
        plans.append((index, device, peak, dram, others, levels))

    # Axis ranges: every ridge of a drawn roof and every point, with margin; whole decades.
    xs: list[float] = []
    ys: list[float] = []
    for _, _device, peak, dram, others, levels in plans:
        drawn_compute: list[Roof | None] = [peak, *others]
        for compute_roof in drawn_compute:
            if compute_roof is None:
                continue
            ys.append(compute_roof.value)
            if dram is not None:
                xs.append(compute_roof.value / dram.value)
        for level in levels:
            if peak is not None:
                xs.append(peak.value / level.value)
    tagged = {entry.device.key for entry in entries if not entry.group} if fleet else None
    marks = _point_marks(model, extra_placements, highlight, slots, tagged)
    for mark in marks:
        xs.append(mark.x)
        ys.append(mark.y)
    if not xs:
        xs = [0.1, 100.0]
    if not ys:
        ys = [1e9, 1e12]
    x_lo, x_hi = _decades(min(xs) / 4, max(xs) * 4)
    y_top = max(ys) * 3
    point_ys = {mark.y for mark in marks}
    peak_ys = [y for y in ys if y not in point_ys] or ys
    y_bottom = min(min(peak_ys) / 30, min(point_ys) / 3 if point_ys else math.inf)
    y_lo, y_hi = _decades(y_bottom, y_top)
    if tight:
        x_hi, y_hi = math.log10(max(xs) * 4), math.log10(y_top)
    if short:
        low = min(min(point_ys) / 1.5 if point_ys else math.inf, min(peak_ys) / 3)
        y_lo, y_hi = math.log10(low), math.log10(max(ys) * 1.6)
    notes += [f"contention: {text}" for text in model.contention]
    layout = RooflineLayout(
        (x_lo, x_hi), (y_lo, y_hi), legend=legend, notes=[safe_text(note) for note in notes], points=marks
    )
    left, right, bottom = 10.0**x_lo, 10.0**x_hi, 10.0**y_lo

    def draw(roof: Roof, x0: float, x1: float, index: int, style: Style, rank: int, y1: float | None = None) -> None:
        """``roof``'s line from ``x0`` to ``x1`` and its label: a bandwidth roof (y = x * value)
        labelled at its start, a compute roof (flat) at its end."""
        sloped = roof.kind != "compute"
        y0 = x0 * roof.value if sloped else roof.value
        y1 = y1 if y1 is not None else x1 * roof.value if sloped else roof.value
        layout.segments.append(Segment(x0, y0, x1, y1, index, style, roof))
        text = _roof_text(roof) + (" (datasheet)" if style == "datasheet" else "")
        x, y = (x0, y0) if sloped else (x1, y1)
        layout.labels.append(RoofLabel(text, x, y, index, sloped, rank, style, roof))

    for priority, (index, _device, peak, dram, _others, _levels) in enumerate(plans):
        start = max(left, bottom / dram.value) if dram is not None else left
        if peak is not None and dram is not None:
            ridge = peak.value / dram.value
            if start < ridge:
                draw(dram, start, ridge, index, "envelope", priority, y1=peak.value)
            draw(peak, ridge, right, index, "envelope", priority)
            layout.ridges.append(RidgeMark(ridge, peak.value, index, f"ridge {format_intensity(ridge)} FLOP/B", True))
        elif peak is not None:
            draw(peak, left, right, index, "envelope", priority)
        elif dram is not None:
            draw(dram, start, right, index, "envelope", priority)
    priority = len(plans)
    for index, _device, peak, dram, others, levels in plans:
        for roof in others:
            measured_peak = peak is not None and peak.source == MEASURED
            style: Style = "datasheet" if roof.source == DATASHEET and measured_peak else "dtype"
            begin = min(max(roof.value / dram.value if dram is not None else left, left), right)
            draw(roof, begin, right, index, style, priority + 1)
            if dram is not None and left < begin < right:
                layout.ridges.append(
                    RidgeMark(begin, roof.value, index, f"ridge {format_intensity(begin)} FLOP/B", False)
                )
        for roof in levels:
            top = peak.value if peak is not None else 10.0**y_hi
            start, end = max(left, bottom / roof.value), min(top / roof.value, right)
            if end > start:
                draw(roof, start, end, index, "datasheet" if roof.source == DATASHEET else "level", priority + 2)
    return layout


def _group_flags(members: Sequence[DeviceRoofs]) -> tuple[str, ...]:
    """A group's flags: how many of its devices have a roof above its datasheet roof, and how many
    are stragglers (each device's own are in the tables)."""
    above = sum(1 for member in members if above_datasheet(member))
    stragglers = sum(1 for member in members if member.straggler)
    flags = (f"{above} of them have a measured roof above its datasheet roof",) if above else ()
    return flags + ((f"{stragglers} of them are stragglers",) if stragglers else ())


def _point_marks(
    model: RooflineModel,
    extra: Sequence[Placement],
    highlight: int | str | None,
    slots: dict[DeviceKey, int],
    tagged: set[DeviceKey] | None,
) -> list[PointMark]:
    """The point marks; only points of the devices in ``tagged`` (None: all) carry a tag."""
    marks: list[PointMark] = []
    placements = list(model.placements) + list(extra)
    for number, placement in enumerate(placements, start=1):
        point = placement.point
        y = point.flop_per_s
        if y is None or not is_finite_positive(y):
            continue
        is_extra = number > len(model.placements)
        highlighted = highlight is not None and not is_extra and (highlight == number - 1 or highlight == point.name)
        device = slots.get(point.key, 0)
        estimated = point.estimated or is_extra
        name = point.name
        x = point.intensity_flop_per_byte
        tag = is_extra or highlighted or tagged is None or point.key in tagged
        if is_finite_positive(x):
            marks.append(
                PointMark(
                    x, y, number, str(number) if tag else "", name, device, placement, estimated,
                    placement.above_roof, highlighted,
                )
            )  # fmt: skip
        dram_x = point.dram_intensity_flop_per_byte
        if is_finite_positive(dram_x):
            marks.append(
                PointMark(
                    dram_x,
                    y,
                    number,
                    f"{number}d" if tag else "",
                    f"{name} (DRAM bytes)",
                    device,
                    placement,
                    estimated,
                    placement.above_roof,
                    highlighted,
                    True,
                )
            )
    return marks
