"""Plain-text tables of a roofline model: the points (where each workload sits) and the roofs."""

from __future__ import annotations

from typing import Sequence

from gpuscope.roofline.chart_style import roof_label
from gpuscope.roofline.model import DATASHEET, Roof, RooflineModel, memory_roof_for
from gpuscope.roofline.units import format_bytes, format_count, format_intensity, format_si

__all__ = ["format_table", "points_table", "roofs_table", "devices_lines", "stragglers_lines"]


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int | None = None) -> list[str]:
    """Left-aligned columns separated by two spaces; numeric-looking columns right-aligned.
    Lines longer than ``width`` are cut with an ellipsis."""
    columns = len(headers)
    widths = [len(header) for header in headers]
    for row in rows:
        for index in range(columns):
            widths[index] = max(widths[index], len(row[index]))
    numeric = []
    for index in range(columns):
        values = [row[index] for row in rows if row[index] not in ("", "-")]
        numeric.append(bool(values) and all(value[:1].isdigit() or value[:1] in "-." for value in values))
    lines = []
    for row in [list(headers), *[list(row) for row in rows]]:
        cells = [row[i].rjust(widths[i]) if numeric[i] else row[i].ljust(widths[i]) for i in range(columns)]
        line = "  ".join(cells).rstrip()
        if width is not None and len(line) > width:
            line = line[: max(1, width - 1)] + "…"
        lines.append(line)
    return lines


def points_table(model: RooflineModel, width: int | None = None) -> list[str]:
    """One row per workload: number (the tag the chart shows when the full label has no room),
    name, device, dtype, intensity, FLOP/s, bound, efficiency, notes."""
    if not model.placements:
        return ["no workloads (add some with `gpuscope measure` or gpuscope.measure())"]
    with_dram = any(placement.point.dram_bytes_measured is not None for placement in model.placements)
    headers = ["#", "workload", "device", "dtype", "FLOP", "bytes", "FLOP/B"]
    if with_dram:
        headers += ["DRAM B", "FLOP/DRAM B"]
    headers += ["FLOP/s", "bound", "eff.", "roof", "notes"]
    rows = []
    for number, placement in enumerate(model.placements, start=1):
        point = placement.point
        row = [
            str(number),
            point.name,
            model.device_label(point.key),
            point.dtype or "-",
            format_count(point.flops),
            format_bytes(point.bytes),
            format_intensity(point.intensity_flop_per_byte),
        ]
        if with_dram:
            row += [format_bytes(point.dram_bytes_measured), format_intensity(point.dram_intensity_flop_per_byte)]
        roof = placement.bounding_roof
        roof_text = "-" if roof is None else f"{roof.name}{' (ds)' if roof.source == DATASHEET else ''}"
        notes = []
        if placement.above_roof:
            notes.append("ABOVE ROOF: counting error")
        if point.warm:
            notes.append("warm")
        if point.estimated:
            notes.append("estimated from activity counters")
        if placement.bound == "unknown" and placement.note:
            notes.append(placement.note)
        device = model.device(point.key)
        if point.straggler or (device is not None and device.straggler):
            notes.append("STRAGGLER rank")
        row += [
            format_si(point.flop_per_s, "", 3),
            placement.bound,
            "-" if placement.efficiency is None else f"{placement.efficiency * 100:.0f}%",
            roof_text,
            "; ".join(notes),
        ]
        rows.append(row)
    return format_table(headers, rows, width)


def roofs_table(model: RooflineModel, width: int | None = None) -> list[str]:
    """One row per roof: device, kind, name, value, source, and for compute roofs the ridge
    point against the device's DRAM roof; with stragglers (multi-rank runs) a flag column."""
    with_stragglers = bool(model.stragglers)
    rows = []
    for device in model.devices:
        dram = memory_roof_for(device)
        kinds = {"compute": 0, "memory": 1, "transfer": 2, "collective": 3}
        for roof in sorted(device.roofs, key=lambda r: (kinds.get(r.kind, 9), r.source != "measured", -r.value)):
            unit = "FLOP/s" if roof.kind == "compute" else "B/s"
            ridge = "-"
            if roof.kind == "compute" and dram is not None:
                ridge = format_intensity(roof.value / dram.value)
            row = [
                model.device_label(device.key),
                roof.kind,
                roof_label(roof),
                format_si(roof.value, unit, 3),
                roof.source,
                ridge,
            ]
            if with_stragglers:
                row.append(_straggler_flag(roof))
            rows.append(row)
    if not rows:
        return ["no roofs (run `gpuscope probe`, or keep the datasheet roofs on)"]
    headers = ["device", "kind", "roof", "value", "source", "ridge FLOP/B (vs DRAM)"]
    return format_table(headers + (["flag"] if with_stragglers else []), rows, width)


def _straggler_flag(roof: Roof) -> str:
    if not roof.straggler:
        return ""
    below = roof.below_median_percent
    return "STRAGGLER" + (f" -{below:.0f}%" if below is not None else "")


def _below_short(roof: Roof) -> str:
    below = roof.below_median_percent
    return roof.name if below is None else f"{roof.name} -{below:.0f}% vs median"


def stragglers_lines(model: RooflineModel, width: int | None = None) -> list[str]:
    """The "Stragglers" section of a multi-rank model: a title and one row per straggler roof
    (host, rank, device, ceiling, value, median, % below median); empty when there are none."""
    stragglers = model.stragglers
    if not stragglers:
        return []
    margin = f"more than {model.straggler_margin * 100:.0f}% " if model.straggler_margin else ""
    rows = []
    for device, roof in stragglers:
        unit = "FLOP/s" if roof.kind == "compute" else "B/s"
        below = roof.below_median_percent
        rows.append(
            [
                device.key.host or "-",
                "-" if device.key.rank is None else str(device.key.rank),
                device.key.device,
                device.name or "-",
                roof.kind,
                roof.name,
                format_si(roof.value, unit, 3),
                format_si(roof.median_value, unit, 3) if roof.median_value else "-",
                "-" if below is None else f"{below:.1f}%",
            ]
        )
    title = f"Stragglers ({len(stragglers)}: ceilings {margin}below the median of the same ceiling across ranks):"
    headers = ["host", "rank", "device", "hardware", "kind", "ceiling", "value", "median", "below median"]
    return [title, *format_table(headers, rows, width)]


def devices_lines(model: RooflineModel) -> list[str]:
    """One line per device: label, type, name, datasheet entry and notes."""
    lines = []
    for device in model.devices:
        parts = [f"{model.device_label(device.key)}: {device.device_type}"]
        if device.name:
            parts.append(device.name)
        if device.datasheet:
            parts.append(f"datasheet: {device.datasheet}")
        if device.straggler:
            parts.append("STRAGGLER: " + ", ".join(_below_short(roof) for roof in device.stragglers))
        lines.append(" · ".join(parts))
        for note in device.notes:
            lines.append(f"    {note}")
    return lines
