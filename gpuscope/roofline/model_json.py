"""The roofline model's one JSON form: ``gpuscope roofline --json`` prints it, the report stores
it (``roofline.model``) and draws its chart from it. :func:`model_to_json` writes it,
:func:`model_from_json` reads it back (placements computed again). Units are in the field names.
"""

from __future__ import annotations

from typing import Any

from gpuscope.roofline import model as rm
from gpuscope.schema.core import finite_or_none

__all__ = ["MODEL_JSON_SCHEMA", "model_to_json", "model_from_json"]

MODEL_JSON_SCHEMA = "gpuscope.roofline"


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _items(value: Any) -> list[dict[str, Any]]:
    """The objects of a JSON list (anything else: none)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _pick(obj: Any, names: str) -> dict[str, Any]:
    """``{name: obj.name}`` for each space-separated name, in order."""
    return {name: getattr(obj, name) for name in names.split()}


def _where(model: rm.RooflineModel, key: rm.DeviceKey) -> dict[str, Any]:
    return {**_pick(key, "host rank device"), "label": model.device_label(key)}


def _labelled(model: rm.RooflineModel, key: rm.DeviceKey) -> dict[str, Any]:
    return {"label": model.device_label(key), **_pick(key, "device host rank")}


def _roof_json(roof: rm.Roof | None, flags: dict[int, Any] | None = None) -> dict[str, Any] | None:
    if roof is None:
        return None
    flag = (flags or {}).get(id(roof))
    return {
        **_pick(roof, "kind name value unit source"),
        "note": roof.note or None,
        **_pick(roof, "origin straggler median_value below_median_percent size_bytes"),
        "above_datasheet": None
        if flag is None
        else {"datasheet_value": flag.datasheet.value, **_pick(flag, "ratio text")},
    }


def model_to_json(model: rm.RooflineModel) -> dict[str, Any]:
    """The model as plain JSON data: ``gpuscope roofline --json`` prints it and the report stores
    it (``roofline.model``); :func:`model_from_json` reads it back. Each device names its
    envelope (the compute and DRAM roofs of the chart's bold line); each measured roof above its
    datasheet roof carries ``above_datasheet`` (also listed at the top level)."""
    from gpuscope.roofline.layout import envelope_roofs

    flags = {id(item.measured): item for item in model.above_datasheet}
    devices = []
    for device in model.devices:
        peak, dram, _others = envelope_roofs(model, device)
        ridges = [
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
                **_where(model, device.key),
                "type": device.device_type,
                **_pick(device, "name datasheet straggler"),
                "notes": list(device.notes),
                "envelope": {"compute": _roof_json(peak), "memory": _roof_json(dram)},
                "roofs": [
                    _roof_json(r, flags) for r in sorted(device.roofs, key=lambda r: (r.kind, r.source, -r.value))
                ],
                "ridge_points": ridges,
            }
        )
    points = [
        {
            **_pick(p.point, "name"),
            **_where(model, p.point.key),
            **_pick(p.point, "dtype flops bytes bytes_rule dram_bytes_measured time_s flop_per_s"),
            **_pick(p.point, "intensity_flop_per_byte dram_intensity_flop_per_byte"),
            "intensity_basis": p.intensity_basis,
            **_pick(p.point, "source warm estimated"),
            **_pick(p, "bound efficiency attainable_flop_per_s ridge_flop_per_byte"),
            "compute_roof": _roof_json(p.compute_roof),
            "memory_roof": _roof_json(p.memory_roof),
            "above_roof": p.above_roof,
            "note": p.note or None,
            **_pick(p.point, "origin straggler"),
        }
        for p in model.placements
    ]
    stragglers = [
        {
            **_where(model, device.key),
            "name": device.name,
            "kind": roof.kind,
            "ceiling": roof.name,
            **_pick(roof, "value unit median_value below_median_percent"),
        }
        for device, roof in model.stragglers
    ]
    above = [
        {
            **_labelled(model, item.device.key),
            "name": item.measured.name,
            "value": item.measured.value,
            "datasheet_value": item.datasheet.value,
            **_pick(item, "ratio text"),
        }
        for item in model.above_datasheet
    ]
    return {
        "schema": MODEL_JSON_SCHEMA,
        "schema_version": 1,
        "sources": list(model.sources),
        "warnings": list(model.warnings),
        "straggler_margin": model.straggler_margin,
        "dram_rule": rm.DRAM_ROOF_RULE,
        "above_datasheet": above,
        "stragglers": stragglers,
        "bandwidths": [
            {**_labelled(model, b.key), **_pick(b, "link size_bytes bytes_per_s")} for b in model.bandwidths
        ],
        "devices": devices,
        "points": points,
    }


def model_from_json(data: dict[str, Any]) -> rm.RooflineModel:
    """The model back from :func:`model_to_json`'s data (placements computed again). Fields it
    does not know are ignored; numbers that are not finite and positive drop their roof or point."""

    def number(value: Any) -> float | None:
        found = finite_or_none(value)
        return found if found is not None and found > 0 else None

    def key_of(entry: dict[str, Any]) -> rm.DeviceKey:
        return rm.DeviceKey(_str_or_none(entry.get("host")), _int_or_none(entry.get("rank")), str(entry.get("device")))

    devices: list[rm.DeviceRoofs] = []
    for entry in _items(data.get("devices")):
        key = key_of(entry)
        notes = entry.get("notes")
        device = rm.DeviceRoofs(
            key=key, device_type=str(entry.get("type") or "unknown"), name=_str_or_none(entry.get("name")),
            datasheet=_str_or_none(entry.get("datasheet")),
            notes=[str(note) for note in notes] if isinstance(notes, list) else [],
        )  # fmt: skip
        for roof in _items(entry.get("roofs")):
            value, kind = number(roof.get("value")), roof.get("kind")
            if value is None or not isinstance(kind, str) or kind not in rm.UNIT_FOR_KIND:
                continue
            device.roofs.append(
                rm.Roof(key, kind, str(roof.get("name")), value, rm.UNIT_FOR_KIND[kind],
                        rm.DATASHEET if roof.get("source") == rm.DATASHEET else rm.MEASURED,
                        str(roof.get("note") or ""), _str_or_none(roof.get("origin")), roof.get("straggler") is True,
                        number(roof.get("median_value")), number(roof.get("size_bytes")))
            )  # fmt: skip
        devices.append(device)
    by_key = {device.key: device for device in devices}
    points = []
    for entry in _items(data.get("points")):
        flops, size, time_s = number(entry.get("flops")), number(entry.get("bytes")), number(entry.get("time_s"))
        key = key_of(entry)
        if flops is None or time_s is None or key not in by_key:
            continue
        text = {name: _str_or_none(entry.get(name)) for name in ("dtype", "bytes_rule", "source", "origin")}
        points.append(
            rm.Point(name=str(entry.get("name")), key=key, flops=flops, bytes=size or 0.0, time_s=time_s,
                     dtype=text["dtype"], dram_bytes_measured=number(entry.get("dram_bytes_measured")),
                     bytes_rule=text["bytes_rule"], source=text["source"] or "results",
                     warm=entry.get("warm") if isinstance(entry.get("warm"), bool) else None,
                     estimated=entry.get("estimated") is True, origin=text["origin"],
                     straggler=entry.get("straggler") is True)
        )  # fmt: skip
    bandwidths = []
    for entry in _items(data.get("bandwidths")):
        key = key_of(entry)
        size, rate = number(entry.get("size_bytes")), number(entry.get("bytes_per_s"))
        if key in by_key and size is not None and rate is not None:
            bandwidths.append(rm.BandwidthPoint(key, str(entry.get("link")), size, rate))
    sources, warnings = data.get("sources"), data.get("warnings")
    model = rm.RooflineModel(
        devices=devices, points=points, sources=[str(s) for s in sources] if isinstance(sources, list) else [],
        warnings=[str(w) for w in warnings] if isinstance(warnings, list) else [], bandwidths=bandwidths,
    )  # fmt: skip
    model.placements = [rm.place_point(point, model.device(point.key)) for point in points]
    return model
