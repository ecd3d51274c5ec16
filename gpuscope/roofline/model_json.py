"""The roofline model's one JSON form: ``gpuscope roofline --json`` prints it, the report stores
it (``roofline.model``) and draws its chart from it. :func:`model_to_json` writes it,
:func:`model_from_json` reads it back (placements computed again). Units are in the field names.
"""

from __future__ import annotations

from typing import Any

from gpuscope.roofline.model import (
    DATASHEET,
    MEASURED,
    BandwidthPoint,
    DeviceKey,
    DeviceRoofs,
    Point,
    Roof,
    RooflineModel,
    place_point,
    ridge_points,
)

__all__ = ["MODEL_JSON_SCHEMA", "model_to_json", "model_from_json"]

MODEL_JSON_SCHEMA = "gpuscope.roofline"

_UNIT_FOR_KIND = {"compute": "FLOP/s", "memory": "B/s", "transfer": "B/s", "collective": "B/s"}


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _items(value: Any) -> list[dict[str, Any]]:
    """The objects of a JSON list (anything else: none)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _roof_json(roof: Roof | None, flags: dict[int, Any] | None = None) -> dict[str, Any] | None:
    if roof is None:
        return None
    flag = (flags or {}).get(id(roof))
    return {
        "kind": roof.kind,
        "name": roof.name,
        "value": roof.value,
        "unit": roof.unit,
        "source": roof.source,
        "note": roof.note or None,
        "origin": roof.origin,
        "straggler": roof.straggler,
        "median_value": roof.median_value,
        "below_median_percent": roof.below_median_percent,
        "size_bytes": roof.size_bytes,
        "above_datasheet": None
        if flag is None
        else {"datasheet_value": flag.datasheet.value, "ratio": flag.ratio, "text": flag.text},
    }


def model_to_json(model: RooflineModel) -> dict[str, Any]:
    """The model as plain JSON data: ``gpuscope roofline --json`` prints it and the report stores
    it (``roofline.model``); :func:`model_from_json` reads it back. Each device names its
    envelope (the compute and DRAM roofs of the chart's bold line); each measured roof above its
    datasheet roof carries ``above_datasheet`` (also listed at the top level)."""
    from gpuscope.roofline.layout import envelope_roofs
    from gpuscope.roofline.model import DRAM_ROOF_RULE

    flags = {id(item.measured): item for item in model.above_datasheet}
    devices = []
    for device in model.devices:
        peak, dram, _others = envelope_roofs(model, device)
        devices.append(
            {
                "host": device.key.host,
                "rank": device.key.rank,
                "device": device.key.device,
                "label": model.device_label(device.key),
                "type": device.device_type,
                "name": device.name,
                "datasheet": device.datasheet,
                "straggler": device.straggler,
                "notes": list(device.notes),
                "envelope": {"compute": _roof_json(peak), "memory": _roof_json(dram)},
                "roofs": [
                    _roof_json(roof, flags) for roof in sorted(device.roofs, key=lambda r: (r.kind, r.source, -r.value))
                ],
                "ridge_points": [
                    {
                        "compute": ridge.compute.name,
                        "compute_source": ridge.compute.source,
                        "memory": ridge.memory.name,
                        "memory_source": ridge.memory.source,
                        "intensity_flop_per_byte": ridge.intensity_flop_per_byte,
                    }
                    for ridge in ridge_points(device)
                ],
            }
        )
    points = []
    for placement in model.placements:
        point = placement.point
        points.append(
            {
                "name": point.name,
                "host": point.key.host,
                "rank": point.key.rank,
                "device": point.key.device,
                "label": model.device_label(point.key),
                "dtype": point.dtype,
                "flops": point.flops,
                "bytes": point.bytes,
                "bytes_rule": point.bytes_rule,
                "dram_bytes_measured": point.dram_bytes_measured,
                "time_s": point.time_s,
                "flop_per_s": point.flop_per_s,
                "intensity_flop_per_byte": point.intensity_flop_per_byte,
                "dram_intensity_flop_per_byte": point.dram_intensity_flop_per_byte,
                "intensity_basis": placement.intensity_basis,
                "source": point.source,
                "warm": point.warm,
                "estimated": point.estimated,
                "bound": placement.bound,
                "efficiency": placement.efficiency,
                "attainable_flop_per_s": placement.attainable_flop_per_s,
                "ridge_flop_per_byte": placement.ridge_flop_per_byte,
                "compute_roof": _roof_json(placement.compute_roof),
                "memory_roof": _roof_json(placement.memory_roof),
                "above_roof": placement.above_roof,
                "note": placement.note or None,
                "origin": point.origin,
                "straggler": point.straggler,
            }
        )
    stragglers = [
        {
            "host": device.key.host,
            "rank": device.key.rank,
            "device": device.key.device,
            "label": model.device_label(device.key),
            "name": device.name,
            "kind": roof.kind,
            "ceiling": roof.name,
            "value": roof.value,
            "unit": roof.unit,
            "median_value": roof.median_value,
            "below_median_percent": roof.below_median_percent,
        }
        for device, roof in model.stragglers
    ]
    return {
        "schema": MODEL_JSON_SCHEMA,
        "schema_version": 1,
        "sources": list(model.sources),
        "warnings": list(model.warnings),
        "straggler_margin": model.straggler_margin,
        "dram_rule": DRAM_ROOF_RULE,
        "above_datasheet": [
            {
                "label": model.device_label(item.device.key),
                "device": item.device.key.device,
                "host": item.device.key.host,
                "rank": item.device.key.rank,
                "name": item.measured.name,
                "value": item.measured.value,
                "datasheet_value": item.datasheet.value,
                "ratio": item.ratio,
                "text": item.text,
            }
            for item in model.above_datasheet
        ],  # fmt: skip
        "stragglers": stragglers,
        "bandwidths": [
            {
                "label": model.device_label(b.key),
                "device": b.key.device,
                "host": b.key.host,
                "rank": b.key.rank,
                "link": b.link,
                "size_bytes": b.size_bytes,
                "bytes_per_s": b.bytes_per_s,
            }
            for b in model.bandwidths
        ],  # fmt: skip
        "devices": devices,
        "points": points,
    }


def model_from_json(data: dict[str, Any]) -> RooflineModel:
    """The model back from :func:`model_to_json`'s data (placements computed again). Fields it
    does not know are ignored; numbers that are not finite and positive drop their roof or point."""
    import math

    def number(value: Any) -> float | None:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
        return float(value) if ok else None

    devices: list[DeviceRoofs] = []
    for entry in _items(data.get("devices")):
        key = DeviceKey(_str_or_none(entry.get("host")), _int_or_none(entry.get("rank")), str(entry.get("device")))
        device = DeviceRoofs(
            key=key,
            device_type=str(entry.get("type") or "unknown"),
            name=_str_or_none(entry.get("name")),
            datasheet=_str_or_none(entry.get("datasheet")),
        )
        notes = entry.get("notes")
        device.notes = [str(note) for note in notes] if isinstance(notes, list) else []
        for roof in _items(entry.get("roofs")):
            value = number(roof.get("value"))
            if value is None or not isinstance(roof.get("kind"), str) or roof["kind"] not in _UNIT_FOR_KIND:
                continue
            source = DATASHEET if roof.get("source") == DATASHEET else MEASURED
            device.roofs.append(
                Roof(
                    key,
                    roof["kind"],
                    str(roof.get("name")),
                    value,
                    _UNIT_FOR_KIND[roof["kind"]],
                    source,
                    str(roof.get("note") or ""),
                    _str_or_none(roof.get("origin")),
                    roof.get("straggler") is True,
                    number(roof.get("median_value")),
                    number(roof.get("size_bytes")),
                )
            )
        devices.append(device)
    by_key = {device.key: device for device in devices}
    points = []
    for entry in _items(data.get("points")):
        flops, size, time_s = number(entry.get("flops")), number(entry.get("bytes")), number(entry.get("time_s"))
        if flops is None or time_s is None:
            continue
        key = DeviceKey(_str_or_none(entry.get("host")), _int_or_none(entry.get("rank")), str(entry.get("device")))
        if key not in by_key:
            continue
        points.append(
            Point(
                name=str(entry.get("name")),
                key=key,
                flops=flops,
                bytes=size or 0.0,
                time_s=time_s,
                dtype=_str_or_none(entry.get("dtype")),
                dram_bytes_measured=number(entry.get("dram_bytes_measured")),
                bytes_rule=_str_or_none(entry.get("bytes_rule")),
                source=_str_or_none(entry.get("source")) or "results",
                warm=entry.get("warm") if isinstance(entry.get("warm"), bool) else None,
                estimated=entry.get("estimated") is True,
                origin=_str_or_none(entry.get("origin")),
                straggler=entry.get("straggler") is True,
            )
        )
    bandwidths = []
    for entry in _items(data.get("bandwidths")):
        key = DeviceKey(_str_or_none(entry.get("host")), _int_or_none(entry.get("rank")), str(entry.get("device")))
        size, rate = number(entry.get("size_bytes")), number(entry.get("bytes_per_s"))
        if key in by_key and size is not None and rate is not None:
            bandwidths.append(BandwidthPoint(key, str(entry.get("link")), size, rate))
    sources, warnings = data.get("sources"), data.get("warnings")
    model = RooflineModel(
        devices=devices, points=points, sources=[str(s) for s in sources] if isinstance(sources, list) else [],
        warnings=[str(w) for w in warnings] if isinstance(warnings, list) else [], bandwidths=bandwidths,
    )  # fmt: skip
    model.placements = [place_point(point, model.device(point.key)) for point in points]
    return model
