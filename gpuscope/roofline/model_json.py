"""The roofline model's one JSON form: ``gpuscope roofline --json`` prints it, the report stores
it (``roofline.model``) and draws its chart from it. :func:`model_to_json` writes it,
:func:`model_from_json` reads it back (placements computed again). Units are in the field names.
"""

from __future__ import annotations

from typing import TypedDict, overload

from gpuscope.roofline import model as rm
from gpuscope.roofline.layout import envelope_roofs
from gpuscope.schema.core import Detail, finite_or_none

__all__ = ["MODEL_JSON_SCHEMA", "ModelJson", "model_to_json", "model_from_json"]

MODEL_JSON_SCHEMA = "gpuscope.roofline"


# --- the JSON form, key for key in the order it is written ----------------------------------------


class AboveDatasheetJson(TypedDict):
    datasheet_value: float
    ratio: float
    text: str


class RoofJson(TypedDict):
    kind: str
    name: str
    value: float
    unit: str
    source: str
    note: str | None
    origin: str | None
    straggler: bool
    median_value: float | None
    below_median_percent: float | None
    size_bytes: float | None
    above_datasheet: AboveDatasheetJson | None


class EnvelopeJson(TypedDict):
    compute: RoofJson | None
    memory: RoofJson | None


class RidgeJson(TypedDict):
    compute: str
    compute_source: str
    memory: str
    memory_source: str
    intensity_flop_per_byte: float


class DeviceJson(TypedDict):
    host: str | None
    rank: int | None
    device: str
    label: str
    type: str
    name: str | None
    datasheet: str | None
    straggler: bool
    notes: list[str]
    envelope: EnvelopeJson
    roofs: list[RoofJson]
    ridge_points: list[RidgeJson]


class PointJson(TypedDict):
    name: str
    host: str | None
    rank: int | None
    device: str
    label: str
    dtype: str | None
    flops: float
    bytes: float
    bytes_rule: str | None
    dram_bytes_measured: float | None
    time_s: float
    flop_per_s: float | None
    intensity_flop_per_byte: float | None
    dram_intensity_flop_per_byte: float | None
    intensity_basis: str
    source: str
    warm: bool | None
    estimated: bool
    bound: str
    efficiency: float | None
    attainable_flop_per_s: float | None
    ridge_flop_per_byte: float | None
    compute_roof: RoofJson | None
    memory_roof: RoofJson | None
    above_roof: bool
    note: str | None
    origin: str | None
    straggler: bool


class StragglerJson(TypedDict):
    host: str | None
    rank: int | None
    device: str
    label: str
    name: str | None
    kind: str
    ceiling: str
    value: float
    unit: str
    median_value: float | None
    below_median_percent: float | None


class FlaggedJson(TypedDict):
    label: str
    device: str
    host: str | None
    rank: int | None
    name: str
    value: float
    datasheet_value: float
    ratio: float
    text: str


class OutOfOrderJson(TypedDict):
    """A memory ceiling slower than a level farther from the core: flagged, not drawn."""

    label: str
    device: str
    host: str | None
    rank: int | None
    name: str
    text: str


class BandwidthJson(TypedDict):
    label: str
    device: str
    host: str | None
    rank: int | None
    link: str
    size_bytes: float
    bytes_per_s: float


class ModelJson(TypedDict):
    """What ``gpuscope roofline --json`` prints and the report stores as ``roofline.model``."""

    schema: str
    schema_version: int
    sources: list[str]
    warnings: list[str]
    straggler_margin: float | None
    dram_rule: str
    above_datasheet: list[FlaggedJson]
    out_of_order: list[OutOfOrderJson]
    stragglers: list[StragglerJson]
    bandwidths: list[BandwidthJson]
    devices: list[DeviceJson]
    points: list[PointJson]


@overload
def _roof_json(roof: rm.Roof, flags: dict[int, rm.AboveDatasheet] | None = None) -> RoofJson: ...


@overload
def _roof_json(roof: None, flags: dict[int, rm.AboveDatasheet] | None = None) -> None: ...


@overload
def _roof_json(roof: rm.Roof | None, flags: dict[int, rm.AboveDatasheet] | None = None) -> RoofJson | None: ...


def _roof_json(roof: rm.Roof | None, flags: dict[int, rm.AboveDatasheet] | None = None) -> RoofJson | None:
    if roof is None:
        return None
    flag = (flags or {}).get(id(roof))
    return {
        "kind": roof.kind, "name": roof.name, "value": roof.value, "unit": roof.unit, "source": roof.source,
        "note": roof.note or None, "origin": roof.origin, "straggler": roof.straggler,
        "median_value": roof.median_value, "below_median_percent": roof.below_median_percent,
        "size_bytes": roof.size_bytes,
        "above_datasheet": None
        if flag is None
        else {"datasheet_value": flag.datasheet.value, "ratio": flag.ratio, "text": flag.text},
    }  # fmt: skip


def model_to_json(model: rm.RooflineModel) -> ModelJson:
    """The model as plain JSON data: ``gpuscope roofline --json`` prints it and the report stores
    it (``roofline.model``); :func:`model_from_json` reads it back. Each device names its
    envelope (the compute and DRAM roofs of the chart's bold line); each measured roof above its
    datasheet roof carries ``above_datasheet`` (also listed at the top level)."""
    flags = {id(item.measured): item for item in model.above_datasheet}
    devices: list[DeviceJson] = []
    for device in model.devices:
        key = device.key
        peak, dram, _others = envelope_roofs(model, device)
        ridges: list[RidgeJson] = [
            {
                "compute": r.compute.name,
                "compute_source": r.compute.source,
                "memory": r.memory.name,
                "memory_source": r.memory.source,
                "intensity_flop_per_byte": r.intensity_flop_per_byte,
            }
            for r in rm.ridge_points(device)
        ]
        devices.append(
            {
                "host": key.host, "rank": key.rank, "device": key.device, "label": model.device_label(key),
                "type": device.device_type, "name": device.name, "datasheet": device.datasheet,
                "straggler": device.straggler, "notes": list(device.notes),
                "envelope": {"compute": _roof_json(peak), "memory": _roof_json(dram)},
                "roofs": [
                    _roof_json(r, flags) for r in sorted(device.roofs, key=lambda r: (r.kind, r.source, -r.value))
                ],
                "ridge_points": ridges,
            }
        )  # fmt: skip
    points: list[PointJson] = []
    for p in model.placements:
        point, key = p.point, p.point.key
        points.append(
            {
                "name": point.name, "host": key.host, "rank": key.rank, "device": key.device,
                "label": model.device_label(key), "dtype": point.dtype, "flops": point.flops, "bytes": point.bytes,
                "bytes_rule": point.bytes_rule, "dram_bytes_measured": point.dram_bytes_measured,
                "time_s": point.time_s, "flop_per_s": point.flop_per_s,
                "intensity_flop_per_byte": point.intensity_flop_per_byte,
                "dram_intensity_flop_per_byte": point.dram_intensity_flop_per_byte,
                "intensity_basis": p.intensity_basis, "source": point.source, "warm": point.warm,
                "estimated": point.estimated, "bound": p.bound, "efficiency": p.efficiency,
                "attainable_flop_per_s": p.attainable_flop_per_s, "ridge_flop_per_byte": p.ridge_flop_per_byte,
                "compute_roof": _roof_json(p.compute_roof), "memory_roof": _roof_json(p.memory_roof),
                "above_roof": p.above_roof, "note": p.note or None, "origin": point.origin,
                "straggler": point.straggler,
            }
        )  # fmt: skip
    stragglers: list[StragglerJson] = [
        {
            "host": device.key.host, "rank": device.key.rank, "device": device.key.device,
            "label": model.device_label(device.key), "name": device.name, "kind": roof.kind, "ceiling": roof.name,
            "value": roof.value, "unit": roof.unit, "median_value": roof.median_value,
            "below_median_percent": roof.below_median_percent,
        }
        for device, roof in model.stragglers
    ]  # fmt: skip
    above: list[FlaggedJson] = [
        {
            "label": model.device_label(item.device.key), "device": item.device.key.device,
            "host": item.device.key.host, "rank": item.device.key.rank, "name": item.measured.name,
            "value": item.measured.value, "datasheet_value": item.datasheet.value, "ratio": item.ratio,
            "text": item.text,
        }
        for item in model.above_datasheet
    ]  # fmt: skip
    disordered: list[OutOfOrderJson] = [
        {
            "label": model.device_label(device.key), "device": device.key.device, "host": device.key.host,
            "rank": device.key.rank, "name": name, "text": text,
        }
        for device in model.devices
        for name, text in sorted(device.out_of_order.items())
    ]  # fmt: skip
    bandwidths: list[BandwidthJson] = [
        {
            "label": model.device_label(b.key), "device": b.key.device, "host": b.key.host, "rank": b.key.rank,
            "link": b.link, "size_bytes": b.size_bytes, "bytes_per_s": b.bytes_per_s,
        }
        for b in model.bandwidths
    ]  # fmt: skip
    return {
        "schema": MODEL_JSON_SCHEMA,
        "schema_version": 1,
        "sources": list(model.sources),
        "warnings": list(model.warnings),
        "straggler_margin": model.straggler_margin,
        "dram_rule": rm.DRAM_ROOF_RULE,
        "above_datasheet": above,
        "out_of_order": disordered,
        "stragglers": stragglers,
        "bandwidths": bandwidths,
        "devices": devices,
        "points": points,
    }


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _objects(value: object) -> list[dict[str, Detail]]:
    """The objects of a JSON list (anything else: none)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _number(value: object) -> float | None:
    """A finite number > 0, else None."""
    found = finite_or_none(value)
    return found if found is not None and found > 0 else None


def _key_of(entry: dict[str, Detail]) -> rm.DeviceKey:
    return rm.DeviceKey(_str_or_none(entry.get("host")), _int_or_none(entry.get("rank")), str(entry.get("device")))


def model_from_json(data: Detail) -> rm.RooflineModel:
    """The model back from :func:`model_to_json`'s data (read from a file: placements computed
    again). Fields it does not know are ignored; numbers that are not finite and positive drop
    their roof or point; anything but an object reads as an empty model."""
    if not isinstance(data, dict):
        data = {}

    devices: list[rm.DeviceRoofs] = []
    for entry in _objects(data.get("devices")):
        key = _key_of(entry)
        notes = entry.get("notes")
        device = rm.DeviceRoofs(
            key=key, device_type=str(entry.get("type") or "unknown"), name=_str_or_none(entry.get("name")),
            datasheet=_str_or_none(entry.get("datasheet")),
            notes=[str(note) for note in notes] if isinstance(notes, list) else [],
        )  # fmt: skip
        for roof in _objects(entry.get("roofs")):
            value, kind = _number(roof.get("value")), roof.get("kind")
            if value is None or not isinstance(kind, str) or kind not in rm.UNIT_FOR_KIND:
                continue
            device.roofs.append(
                rm.Roof(key, kind, str(roof.get("name")), value, rm.UNIT_FOR_KIND[kind],
                        rm.DATASHEET if roof.get("source") == rm.DATASHEET else rm.MEASURED,
                        str(roof.get("note") or ""), _str_or_none(roof.get("origin")), roof.get("straggler") is True,
                        _number(roof.get("median_value")), _number(roof.get("size_bytes")))
            )  # fmt: skip
        devices.append(device)
    by_key = {device.key: device for device in devices}
    points = []
    for entry in _objects(data.get("points")):
        warm = entry.get("warm")
        flops, size, time_s = _number(entry.get("flops")), _number(entry.get("bytes")), _number(entry.get("time_s"))
        key = _key_of(entry)
        if flops is None or time_s is None or key not in by_key:
            continue
        text = {name: _str_or_none(entry.get(name)) for name in ("dtype", "bytes_rule", "source", "origin")}
        points.append(
            rm.Point(name=str(entry.get("name")), key=key, flops=flops, bytes=size or 0.0, time_s=time_s,
                     dtype=text["dtype"], dram_bytes_measured=_number(entry.get("dram_bytes_measured")),
                     bytes_rule=text["bytes_rule"], source=text["source"] or "results",
                     warm=warm if isinstance(warm, bool) else None,
                     estimated=entry.get("estimated") is True, origin=text["origin"],
                     straggler=entry.get("straggler") is True)
        )  # fmt: skip
    bandwidths = []
    for entry in _objects(data.get("bandwidths")):
        key = _key_of(entry)
        size, rate = _number(entry.get("size_bytes")), _number(entry.get("bytes_per_s"))
        if key in by_key and size is not None and rate is not None:
            bandwidths.append(rm.BandwidthPoint(key, str(entry.get("link")), size, rate))
    sources, warnings = data.get("sources"), data.get("warnings")
    model = rm.RooflineModel(
        devices=devices, points=points, sources=[str(s) for s in sources] if isinstance(sources, list) else [],
        warnings=[str(w) for w in warnings] if isinstance(warnings, list) else [], bandwidths=bandwidths,
    )  # fmt: skip
    model.placements = [rm.place_point(point, model.device(point.key)) for point in points]
    return model
