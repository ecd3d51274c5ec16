"""Plain-text tables of a roofline model: the points (where each workload sits) and the roofs."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from gpuscope.roofline.layout import roof_title as roof_label
from gpuscope.roofline.model import (
    ABOVE_DATASHEET_TEXT,
    DATASHEET,
    DRAM_ROOF_RULE,
    UNIT_FOR_KIND,
    Roof,
    RooflineModel,
    memory_roof_for,
)
from gpuscope.roofline.units import format_bytes, format_count, format_intensity, format_si

__all__ = ["format_table", "points_table", "roofs_table", "bandwidth_table", "devices_lines", "stragglers_lines"]


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


def fit_table(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int | None, keep: int) -> list[str]:
    """:func:`format_table` after dropping columns from the right, beyond the first ``keep``,
    until every line fits ``width``; then, if still too wide, the widest kept text column
    (the name) is shortened with "…"."""
    kept, cells = list(headers), [list(row) for row in rows]
    while width is not None and len(kept) > keep and max(len(line) for line in format_table(kept, cells)) > width:
        kept.pop()
        for row in cells:
            row.pop()
    lines = format_table(kept, cells)
    if width is not None and max(len(line) for line in lines) > width:
        over = max(len(line) for line in lines) - width
        column = 1 if len(kept) > 1 else 0
        limit = max(4, max(len(row[column]) for row in cells) - over) if cells else 4
        for row in cells:
            if len(row[column]) > limit:
                row[column] = row[column][: limit - 1] + "…"
        lines = format_table(kept, cells, width)
    return lines


def points_table(model: RooflineModel, width: int | None = None) -> list[str]:
    """One row per workload: number (the tag next to its mark on the chart), name, then what a
    reader needs first (bound, efficiency, the roof it is judged against, measured or
    datasheet), then device, dtype, intensity, FLOP/s, FLOPs, bytes; columns that do not fit
    ``width`` are left out, notes follow their row as indented lines."""
    if not model.placements:
        return ["no workloads (add some with `gpuscope measure` or gpuscope.measure())"]
    with_dram = any(placement.point.dram_bytes_measured is not None for placement in model.placements)
    headers = ["#", "workload", "bound", "eff.", "roof", "device", "dtype", "FLOP/B", "FLOP/s"]
    if with_dram:
        headers += ["FLOP/DRAM B"]
    headers += ["FLOP", "bytes"]
    rows = []
    notes_of: list[list[str]] = []
    for number, placement in enumerate(model.placements, start=1):
        point = placement.point
        roof = placement.bounding_roof
        roof_text = "-" if roof is None else f"{roof.name} {'ds' if roof.source == DATASHEET else 'meas.'}"
        row = [
            str(number),
            point.name,
            placement.bound,
            "-" if placement.efficiency is None else f"{placement.efficiency * 100:.0f}%",
            roof_text,
            model.device_label(point.key),
            point.dtype or "-",
            format_intensity(point.intensity_flop_per_byte),
            format_si(point.flop_per_s, "", 3),
        ]
        if with_dram:
            row += [format_intensity(point.dram_intensity_flop_per_byte)]
        row += [format_count(point.flops), format_bytes(point.bytes)]
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
        rows.append(row)
        notes_of.append(notes)
    lines = fit_table(headers, rows, width, keep=5)
    out = [lines[0]]
    for line, notes in zip(lines[1:], notes_of):
        out.append(line)
        if notes and notes != ["warm"]:
            text = "; ".join(notes)
            out.extend(
                textwrap.wrap(text, max(20, (width or 100) - 5), initial_indent="     ", subsequent_indent="     ")
            )
    if any(notes == ["warm"] or "warm" in notes for notes in notes_of):
        out.extend(textwrap.wrap("warm: timed with warm caches (gpuscope measure --cold flushes them)", width or 100))
    out.extend(
        textwrap.wrap(
            "roof: meas. = this device's measured roof, ds = datasheet; "
            "eff. = achieved / attainable at the point's intensity",
            width or 100,
        )
    )
    return out


def roofs_table(model: RooflineModel, width: int | None = None) -> list[str]:
    """One row per roof: device, kind, name, value, source, and for compute roofs the ridge
    point against the device's DRAM roof; with stragglers (multi-rank runs) a flag column."""
    from gpuscope.roofline.model import above_datasheet

    with_stragglers = bool(model.stragglers)
    flagged = {id(item.measured): item for device in model.devices for item in above_datasheet(device)}
    rows = []
    for device in model.devices:
        dram = memory_roof_for(device)
        kinds = {"compute": 0, "memory": 1, "transfer": 2, "collective": 3}
        for roof in sorted(
            (r for r in device.roofs if r.kind in ("compute", "memory")),
            key=lambda r: (kinds.get(r.kind, 9), r.source != "measured", -r.value),
        ):
            ridge = format_intensity(roof.value / dram.value) if roof.kind == "compute" and dram is not None else "-"
            row = [
                model.device_label(device.key),
                roof.kind,
                roof_label(roof),
                format_si(roof.value, UNIT_FOR_KIND[roof.kind], 3),
                roof.source,
                ridge,
            ]
            flag = f"ABOVE DATASHEET {flagged[id(roof)].ratio * 100:.0f}%" if id(roof) in flagged else ""
            if with_stragglers:
                flag = " ".join(part for part in (flag, _straggler_flag(roof)) if part)
            row.append(flag)
            rows.append(row)
    if not rows:
        return ["no roofs (run `gpuscope probe`, or keep the datasheet roofs on)"]
    headers = ["device", "kind", "roof", "value", "source", "ridge FLOP/B", "flag"]
    if not any(row[-1] for row in rows):
        headers.pop()
        rows = [row[:-1] for row in rows]
    lines = fit_table(headers, rows, width, keep=len(headers))
    if flagged:
        lines.extend(textwrap.wrap(f"ABOVE DATASHEET: {ABOVE_DATASHEET_TEXT}", width or 100))
    lines.extend(
        textwrap.wrap(f"ridge FLOP/B: against the device's default DRAM roof ({DRAM_ROOF_RULE})", width or 100)
    )
    return lines


def bandwidth_table(model: RooflineModel, width: int | None = None) -> list[str]:
    """Interconnect bandwidths (host-device transfers, peer copies, collectives' bus bandwidth):
    one row per device and link, the bandwidth measured at each message size (columns), the best
    (the ceiling) and the datasheet figure it is held against. These are roofs of data movement,
    not of FLOP/s, so the chart leaves them out. Empty when there are none."""
    from gpuscope.roofline.model import datasheet_twin

    sizes = sorted({point.size_bytes for point in model.bandwidths})
    headers = ["device", "link", "best", "datasheet", *(format_bytes(size) for size in sizes)]
    rows = []
    for device in model.devices:
        links = sorted(device.transfer + device.collective, key=lambda r: (r.kind, r.name, r.source))
        measured = [roof for roof in links if roof.source != DATASHEET]
        shown = {roof.name for roof in measured}
        for roof in measured:
            twin = datasheet_twin(device, roof)
            by_size = {
                p.size_bytes: p.bytes_per_s for p in model.bandwidths if p.key == device.key and p.link == roof.name
            }
            flag = " STRAGGLER" if roof.straggler else ""
            rows.append(
                [model.device_label(device.key), roof_label(roof) + flag, format_si(roof.value, "B/s", 3),
                 format_si(twin.value, "B/s", 3) if twin else "-",
                 *(format_si(by_size[size], "B/s", 3) if size in by_size else "-" for size in sizes)]
            )  # fmt: skip
        for roof in links:
            if (
                roof.source == DATASHEET
                and not any(datasheet_twin(device, other) is roof for other in measured)
                and roof.name not in shown
            ):
                rows.append(
                    [
                        model.device_label(device.key),
                        roof_label(roof),
                        "-",
                        format_si(roof.value, "B/s", 3),
                        *("-" for _ in sizes),
                    ]
                )
    if not rows:
        return []
    lines = fit_table(headers, rows, width, keep=4)
    if sizes and len(lines[0].split()) < len(headers):
        lines.extend(
            textwrap.wrap("(message sizes that do not fit this width are left out: --json has them all)", width or 100)
        )
    return lines


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
        unit, below = UNIT_FOR_KIND[roof.kind], roof.below_median_percent
        rows.append(
            [device.key.host or "-", "-" if device.key.rank is None else str(device.key.rank), device.key.device,
             device.name or "-", roof.kind, roof.name, format_si(roof.value, unit, 3),
             format_si(roof.median_value, unit, 3) if roof.median_value else "-",
             "-" if below is None else f"{below:.1f}%"]
        )  # fmt: skip
    title = f"Stragglers ({len(stragglers)}: ceilings {margin}below the median of the same ceiling across ranks):"
    headers = ["host", "rank", "device", "hardware", "kind", "ceiling", "value", "median", "below median"]
    return [title, *format_table(headers, rows, width)]


def devices_lines(model: RooflineModel, width: int | None = None) -> list[str]:
    """One entry per device (wrapped to ``width``): label, type, name, datasheet entry and notes."""
    lines = []
    for device in model.devices:
        parts = [f"{model.device_label(device.key)}: {device.device_type}"]
        if device.name:
            parts.append(device.name)
        if device.datasheet:
            parts.append(f"datasheet: {device.datasheet}")
        if device.straggler:
            parts.append("STRAGGLER: " + ", ".join(_below_short(roof) for roof in device.stragglers))
        lines.extend(textwrap.wrap(" · ".join(parts), width or 10_000, subsequent_indent="    "))
        for note in device.notes:
            lines.extend(textwrap.wrap(note, width or 10_000, initial_indent="    ", subsequent_indent="    "))
    return lines
