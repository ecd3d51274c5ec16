"""Plain-text tables of a roofline model: the points (where each workload sits) and the roofs."""

from __future__ import annotations

import statistics
import textwrap
from collections import Counter
from collections.abc import Sequence

from gpuscope.roofline.columns import fit_columns, format_fitted, is_numeric_column
from gpuscope.roofline.layout import envelope_roofs
from gpuscope.roofline.layout_fleet import Drawn, chart_devices
from gpuscope.roofline.model import (
    ABOVE_DATASHEET_TEXT,
    DATASHEET,
    DRAM_ROOF_RULE,
    UNIT_FOR_KIND,
    DeviceKey,
    DeviceRoofs,
    Placement,
    Roof,
    RooflineModel,
    above_datasheet,
    datasheet_twin,
    memory_roof_for,
)
from gpuscope.roofline.shapes import roof_title as roof_label
from gpuscope.roofline.units import format_bytes, format_count, format_intensity, format_si

__all__ = ["format_table", "points_table", "roofs_table", "bandwidth_table", "devices_lines", "stragglers_lines"]


def format_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int | None = None,
    *,
    drop_order: Sequence[int] = (),
    shrink: Sequence[int] | None = None,
    shrink_min: int = 12,
    note: bool = False,
) -> list[str]:
    """Left-aligned columns separated by two spaces; numeric-looking columns right-aligned.
    A table wider than ``width`` is fitted by the one rule (:mod:`gpuscope.roofline.columns`):
    text columns (``shrink``; default every non-numeric column but the first) are shortened with
    "…", then whole columns are dropped (``drop_order`` first, then from the right): a number is
    never cut. ``note``: a last line names the columns left out."""
    if shrink is None:
        text = [i for i in range(1, len(headers)) if not is_numeric_column([row[i] for row in rows])]
        shrink = sorted(text, key=lambda i: -max([len(headers[i]), *(len(row[i]) for row in rows)]))  # widest first
    fitted = fit_columns(
        headers, [list(row) for row in rows], width, drop_order=drop_order, shrink=shrink, shrink_min=shrink_min
    )
    lines = format_fitted(fitted)
    if note and fitted.dropped:
        names = ", ".join(headers[i] for i in fitted.dropped)
        lines.extend(textwrap.wrap(f"not shown at {width} columns: {names} (wider terminal, or --json)", width or 100))
    return lines


#: The points table's columns in the order they are left out when the width is short (the
#: first first); #, workload, bound and eff. always stay (the name shortened with "…").
POINTS_DROP_ORDER = ("bytes", "FLOP", "FLOP/DRAM B", "dtype", "device", "FLOP/s", "FLOP/B", "roof")
#: The roofs table's: the kind first (the value's unit says it), then range, flag and source;
#: device, roof name, value and ridge stay (the roof name shortened with "…").
ROOFS_DROP_ORDER = ("kind", "range", "source", "flag")
#: The stragglers table's.
STRAGGLERS_DROP_ORDER = ("kind", "hardware", "host", "median")


def _indices(headers: Sequence[str], names: Sequence[str]) -> list[int]:
    """The indices of ``names`` among ``headers`` (names not present are skipped)."""
    return [headers.index(name) for name in names if name in headers]


def _point_row(model: RooflineModel, number: int, placement: Placement, with_dram: bool) -> tuple[list[str], list[str]]:
    """The points table's row of one placed point and its notes."""
    point = placement.point
    row = [
        str(number),
        point.name,
        placement.bound,
        _percent(placement.efficiency),
        _roof_text(placement.bounding_roof),
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
    return row, notes


def _on_straggler(model: RooflineModel, key: DeviceKey) -> bool:
    device = model.device(key)
    return device is not None and device.straggler


def _fleet(model: RooflineModel) -> list[Drawn] | None:
    """The chart's entries of a fleet (some devices drawn as a group), else None: the tables
    then summarize the groups as the chart does."""
    drawn, _ = chart_devices(model)
    return drawn if any(entry.group for entry in drawn) else None


#: Under each table of a fleet.
_FLEET_TEXT = (
    "{n} devices: one row per {what} and hardware model (its median over the model's devices, as the chart draws "
    "it), then the devices the chart draws on their own (stragglers, one of a kind); --json lists every device"
)


def _percent(fraction: float | None) -> str:
    return "-" if fraction is None else f"{fraction * 100:.0f}%"


def _roof_text(roof: Roof | None) -> str:
    return "-" if roof is None else f"{roof.name} {'ds' if roof.source == DATASHEET else 'meas.'}"


def _median(values: Sequence[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return statistics.median(known) if known else None


def _most_common(values: Sequence[str]) -> str:
    return Counter(values).most_common(1)[0][0]


def _fleet_point_rows(
    model: RooflineModel, fleet: list[Drawn], with_dram: bool
) -> tuple[list[list[str]], list[list[str]]]:
    """A fleet's points table: per group one row per workload (name and dtype), medians over its
    devices' points, its range in a note; then every point of the devices drawn on their own."""
    numbers = {id(placement): number for number, placement in enumerate(model.placements, start=1)}
    rows: list[list[str]] = []
    notes_of: list[list[str]] = []
    for entry in fleet:
        placements = [p for member in entry.members for p in model.placements_of(member.key)]
        if not entry.group:
            for placement in placements:
                row, notes = _point_row(model, numbers[id(placement)], placement, with_dram)
                rows.append(row)
                notes_of.append(notes)
            continue
        workloads: dict[tuple[str, str | None], list[Placement]] = {}
        for placement in placements:
            workloads.setdefault((placement.point.name, placement.point.dtype), []).append(placement)
        for (name, dtype), found in workloads.items():
            points = [p.point for p in found]
            rated = [p for p in found if p.efficiency is not None]
            row = [
                "-", name, _most_common([p.bound for p in found]), _percent(_median([p.efficiency for p in found])),
                _most_common([_roof_text(p.bounding_roof) for p in found]), f"{len(found)} devices", dtype or "-",
                format_intensity(_median([p.intensity_flop_per_byte for p in points])),
                format_si(_median([p.flop_per_s for p in points]), "", 3),
            ]  # fmt: skip
            if with_dram:
                row += [format_intensity(_median([p.dram_intensity_flop_per_byte for p in points]))]
            row += [format_count(_median([p.flops for p in points])), format_bytes(_median([p.bytes for p in points]))]
            notes = []
            if rated:
                low = min(rated, key=lambda p: p.efficiency or 0.0)
                high = max(rated, key=lambda p: p.efficiency or 0.0)
                notes.append(
                    f"median of {len(found)}: eff. {_percent(low.efficiency)} to {_percent(high.efficiency)}, "
                    f"lowest on {model.device_label(low.point.key)}"
                )
            above = sum(1 for p in found if p.above_roof)
            if above:
                notes.append(f"{above} ABOVE ROOF: counting error")
            stragglers = sum(1 for p in found if p.point.straggler or _on_straggler(model, p.point.key))
            if stragglers:
                notes.append(f"{stragglers} on STRAGGLER ranks")
            rows.append(row)
            notes_of.append(notes)
    return rows, notes_of


def points_table(model: RooflineModel, width: int | None = None) -> list[str]:
    """One row per workload: number (the tag next to its mark on the chart), name, then what a
    reader needs first (bound, efficiency, the roof it is judged against, measured or
    datasheet), then device, dtype, intensity, FLOP/s, FLOPs, bytes; columns that do not fit
    ``width`` are left out, notes follow their row as indented lines. A fleet (more devices than
    the chart draws one by one, :mod:`gpuscope.roofline.layout_fleet`) has one row per workload
    and hardware model (medians), then the points of the devices the chart draws on their own."""
    if not model.placements:
        return ["no workloads (add some with `gpuscope measure` or gpuscope.measure())"]
    with_dram = any(placement.point.dram_bytes_measured is not None for placement in model.placements)
    headers = ["#", "workload", "bound", "eff.", "roof", "device", "dtype", "FLOP/B", "FLOP/s"]
    if with_dram:
        headers += ["FLOP/DRAM B"]
    headers += ["FLOP", "bytes"]
    fleet = _fleet(model)
    if fleet is not None:
        rows, notes_of = _fleet_point_rows(model, fleet, with_dram)
    else:
        pairs = [_point_row(model, n, placement, with_dram) for n, placement in enumerate(model.placements, start=1)]
        rows, notes_of = [row for row, _ in pairs], [notes for _, notes in pairs]
    drop = _indices(headers, POINTS_DROP_ORDER)
    lines = format_table(headers, rows, width, drop_order=drop, shrink=[1], shrink_min=16, note=True)
    out = [lines[0]]
    for line, notes in zip(lines[1 : 1 + len(rows)], notes_of):
        out.append(line)
        if notes and notes != ["warm"]:
            text = "; ".join(notes)
            out.extend(
                textwrap.wrap(text, max(20, (width or 100) - 5), initial_indent="     ", subsequent_indent="     ")
            )
    out.extend(lines[1 + len(rows) :])  # the columns left out, if any
    if any(notes == ["warm"] or "warm" in notes for notes in notes_of):
        out.extend(textwrap.wrap("warm: timed with warm caches (gpuscope measure --cold flushes them)", width or 100))
    out.extend(
        textwrap.wrap(
            "roof: meas. = this device's measured roof, ds = datasheet; "
            "eff. = achieved / attainable at the point's intensity",
            width or 100,
        )
    )
    if fleet is not None:
        out.extend(textwrap.wrap(_FLEET_TEXT.format(n=len(model.devices), what="workload"), width or 100))
    return out


_KIND_ORDER = {"compute": 0, "memory": 1, "transfer": 2, "collective": 3}


def _chart_roofs(device: DeviceRoofs) -> list[Roof]:
    """``device``'s compute and memory roofs in the roofs table's order."""
    return sorted(
        (r for r in device.roofs if r.kind in ("compute", "memory")),
        key=lambda r: (_KIND_ORDER.get(r.kind, 9), r.source != "measured", -r.value),
    )


def _roof_cells(label: str, device: DeviceRoofs, roof: Roof) -> list[str]:
    """device, kind, roof, value, source, ridge (against the device's default DRAM roof)."""
    dram = memory_roof_for(device)
    ridge = format_intensity(roof.value / dram.value) if roof.kind == "compute" and dram is not None else "-"
    unit = UNIT_FOR_KIND[roof.kind]
    return [label, roof.kind, roof_label(roof), format_si(roof.value, unit, 3), roof.source, ridge]


def _same_roofs(members: Sequence[DeviceRoofs]) -> dict[tuple[str, str, str, str], list[Roof]]:
    """The members' roofs by (kind, name, source, unit): what a group's median roof stands for."""
    found: dict[tuple[str, str, str, str], list[Roof]] = {}
    for member in members:
        for roof in member.roofs:
            found.setdefault((roof.kind, roof.name, roof.source, roof.unit), []).append(roof)
    return found


def _count_label(model: RooflineModel, roofs: Sequence[Roof]) -> str:
    """``"4999 devices"`` for a group's roof, or the device's label when one device measured it
    (rank 0's collective roofs)."""
    return model.device_label(roofs[0].key) if len(roofs) == 1 else f"{len(roofs)} devices"


def _which(roof: Roof) -> tuple[str, str, str, str]:
    return roof.kind, roof.name, roof.source, roof.unit


def roofs_table(model: RooflineModel, width: int | None = None) -> list[str]:
    """One row per roof: device, kind, name, value, source, and for compute roofs the ridge
    point against the device's DRAM roof; with stragglers (multi-rank runs) a flag column. A
    fleet has one row per roof of each hardware model (the median, and the range across its
    devices), then the roofs of the devices the chart draws on their own."""
    with_stragglers = bool(model.stragglers)
    flagged = {id(item.measured): item for device in model.devices for item in above_datasheet(device)}
    fleet = _fleet(model)
    entries = fleet if fleet is not None else [Drawn(device, (device,)) for device in model.devices]
    rows = []
    for entry in entries:
        label = entry.label(model)
        if entry.group:
            same = _same_roofs(entry.members)
            for roof in _chart_roofs(entry.device):
                members = same[_which(roof)]
                values = [r.value for r in members]
                above = sum(1 for r in members if id(r) in flagged)
                slow = sum(1 for r in members if r.straggler)
                counts = ((above, "ABOVE DATASHEET"), (slow, "STRAGGLER"))
                flag = " ".join(text + (f" x{count}" if count > 1 else "") for count, text in counts if count)
                low, high = min(values), max(values)
                span = "-" if low == high else f"{format_si(low, '', 3)}-{format_si(high, '', 3)}"
                rows.append([*_roof_cells(_count_label(model, members), entry.device, roof), span, flag])
            continue
        for roof in _chart_roofs(entry.device):
            if fleet and roof.source == DATASHEET:  # the same as its group's
                continue
            flag = f"ABOVE DATASHEET {flagged[id(roof)].ratio * 100:.0f}%" if id(roof) in flagged else ""
            if with_stragglers:
                flag = " ".join(part for part in (flag, _straggler_flag(roof)) if part)
            rows.append([*_roof_cells(label, entry.device, roof), *(["-"] if fleet else []), flag])
    if not rows:
        return ["no roofs (run `gpuscope probe`, or keep the datasheet roofs on)"]
    headers = ["device", "kind", "roof", "value", "source", "ridge FLOP/B", *(["range"] if fleet else []), "flag"]
    if not any(row[-1] for row in rows):
        headers.pop()
        rows = [row[:-1] for row in rows]
    drop = _indices(headers, ROOFS_DROP_ORDER)
    lines = format_table(headers, rows, width, drop_order=drop, shrink=[2], note=True)
    lines.extend(textwrap.wrap(_envelope_text(model, entries), width or 100))
    if flagged:
        lines.extend(textwrap.wrap(f"ABOVE DATASHEET: {ABOVE_DATASHEET_TEXT}", width or 100))
    lines.extend(
        textwrap.wrap(f"ridge FLOP/B: against the device's default DRAM roof ({DRAM_ROOF_RULE})", width or 100)
    )
    if fleet is not None:
        lines.extend(textwrap.wrap(_FLEET_TEXT.format(n=len(model.devices), what="roof"), width or 100))
    return lines


def _envelope_text(model: RooflineModel, entries: Sequence[Drawn]) -> str:
    """Which compute roof each envelope uses, when a device has both a GEMM roof (``fp32``) and an
    FMA peak (``fp32.fma``, gpuscope.probing.peaks); empty otherwise."""
    if not any(roof.name.endswith(".fma") for entry in entries for roof in entry.device.compute):
        return ""
    used = []
    for entry in entries:
        peak = envelope_roofs(model, entry.device)[0]
        if peak is not None:
            what = "datasheet" if peak.source == DATASHEET else "GEMM ceiling"
            what = "FMA peak" if peak.name.endswith(".fma") else what
            used.append(f"{entry.label(model)} {peak.name} ({what})")
    return "envelope compute roof: " + ", ".join(used) + " (<dtype> is the GEMM ceiling, <dtype>.fma the FMA peak)"


def bandwidth_table(model: RooflineModel, width: int | None = None) -> list[str]:
    """Interconnect bandwidths (host-device transfers, peer copies, collectives' bus bandwidth):
    one row per device and link, the bandwidth measured at each message size (columns), the best
    (the ceiling) and the datasheet figure it is held against. These are roofs of data movement,
    not of FLOP/s, so the chart leaves them out. Empty when there are none. A fleet has one row
    per link of each hardware model (medians over its devices), then the devices the chart draws
    on their own."""
    sizes = sorted({point.size_bytes for point in model.bandwidths})
    headers = ["device", "link", "best", "datasheet", *(format_bytes(size) for size in sizes)]
    # the rate at each message size per (device, link), the last measurement of a size winning
    rates: dict[tuple[DeviceKey, str], dict[float, float]] = {}
    for point in model.bandwidths:
        rates.setdefault((point.key, point.link), {})[point.size_bytes] = point.bytes_per_s
    fleet = _fleet(model)
    entries = fleet if fleet is not None else [Drawn(device, (device,)) for device in model.devices]
    rows = []
    for entry in entries:
        device, label = entry.device, entry.label(model)
        links = sorted(device.transfer + device.collective, key=lambda r: (r.kind, r.name, r.source))
        measured = [roof for roof in links if roof.source != DATASHEET]
        shown = {roof.name for roof in measured}
        same = _same_roofs(entry.members) if entry.group else {}
        for roof in measured:
            twin = datasheet_twin(device, roof)
            if entry.group:  # the median over the devices that measured the link, at each size
                owners = {r.key for r in same[_which(roof)]}
                by_size = {
                    size: statistics.median(found)
                    for size in sizes
                    if (found := [rates[k, roof.name][size] for k in owners if size in rates.get((k, roof.name), {})])
                }
                slow = sum(1 for r in same[_which(roof)] if r.straggler)
                flag = " STRAGGLER" + (f" x{slow}" if slow > 1 else "") if slow else ""
                where = _count_label(model, same[_which(roof)])
            else:
                by_size = rates.get((device.key, roof.name), {})
                flag, where = " STRAGGLER" if roof.straggler else "", label
            rows.append(
                [where, roof_label(roof) + flag, format_si(roof.value, "B/s", 3),
                 format_si(twin.value, "B/s", 3) if twin else "-",
                 *(format_si(by_size[size], "B/s", 3) if size in by_size else "-" for size in sizes)]
            )  # fmt: skip
        for roof in links if not (fleet and not entry.group) else []:  # a fleet's own devices: as their group
            if (
                roof.source == DATASHEET
                and not any(datasheet_twin(device, other) is roof for other in measured)
                and roof.name not in shown
            ):
                rows.append([label, roof_label(roof), "-", format_si(roof.value, "B/s", 3), *("-" for _ in sizes)])
    if not rows:
        return []
    # the message sizes go from the largest, then the datasheet figure; device and link shrink
    drop = [*reversed(range(4, len(headers))), 3]
    lines = format_table(headers, rows, width, drop_order=drop, shrink=[1])
    if sizes and len(lines[0].split()) < len(headers):
        lines.extend(
            textwrap.wrap("(message sizes that do not fit this width are left out: --json has them all)", width or 100)
        )
    if fleet is not None:
        lines.extend(textwrap.wrap(_FLEET_TEXT.format(n=len(model.devices), what="link"), width or 100))
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
    table = format_table(headers, rows, width, drop_order=_indices(headers, STRAGGLERS_DROP_ORDER), shrink=[3, 5])
    return [*textwrap.wrap(title, width or 10_000), *table]


def devices_lines(model: RooflineModel, width: int | None = None) -> list[str]:
    """One entry per device (wrapped to ``width``): label, type, name, datasheet entry and notes.
    A fleet has one entry per hardware model (its count, its notes once with how many devices
    share each), then the devices the chart draws on their own."""
    fleet = _fleet(model)
    if fleet is None:
        entries = [Drawn(device, (device,)) for device in model.devices]
    else:  # devices with no roof and no point are not drawn: listed on their own
        drawn = {id(member) for entry in fleet for member in entry.members}
        entries = [*fleet, *(Drawn(d, (d,)) for d in model.devices if id(d) not in drawn)]
    lines = []
    for entry in entries:
        device = entry.device
        parts = [f"{entry.label(model)}: {device.device_type}"]
        if device.name:
            parts.append(device.name)
        if device.datasheet:
            parts.append(f"datasheet: {device.datasheet}")
        notes = Counter(note for member in entry.members for note in member.notes)
        if entry.group:
            stragglers = sum(1 for member in entry.members if member.straggler)
            if stragglers:
                parts.append(f"{stragglers} STRAGGLERS (see Stragglers)")
        elif device.straggler:
            parts.append("STRAGGLER: " + ", ".join(_below_short(roof) for roof in device.stragglers))
        lines.extend(textwrap.wrap(" · ".join(parts), width or 10_000, subsequent_indent="    "))
        for note, count in notes.items():
            text = f"({count} devices) {note}" if entry.group else note
            lines.extend(textwrap.wrap(text, width or 10_000, initial_indent="    ", subsequent_indent="    "))
    return lines
