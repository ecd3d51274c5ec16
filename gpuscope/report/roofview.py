"""The roofline part of a report, taken from :mod:`gpuscope.roofline` (the one roofline model).

:func:`roofline_view` is the single call the report makes into the model. What it returns is
plain data stored in the report JSON, so a report re-rendered from JSON needs no model:

``{"available": bool, "note": str | None,
   "roofs":  [{"device", "device_type", "device_name", "host", "rank", "source", "kind", "name",
               "value", "unit", "origin": "measured" | "datasheet", "label", "straggler"}],
   "points": [{"name", "device", "device_type", "host", "rank", "source", "intensity_flop_per_byte",
               "flop_per_s", "bound", "roof", "attainable_flop_per_s", "efficiency_percent",
               "above_roof", "straggler"}],
   "datasheet": [{"device", "host", "rank", "source", "kind", "name", "value", "unit"}],
   "above_datasheet": [{"device", "host", "rank", "name", "value", "datasheet_value", "ratio", "text"}]}``

Each roof also carries ``above_datasheet`` (the flag text, or None) and the DRAM roof rule is in
``dram_rule``. :func:`model_from_view` turns the roofs and points back into a model, so the
chart of a report read back from JSON is drawn by the same layout as ``gpuscope roofline``.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["roofline_view", "model_from_view", "device_type", "device_name", "datasheet_value", "datasheet_entry"]


def device_type(device: str | None, devices: list[dict[str, Any]] | None = None) -> str:
    """``"gpu"`` or ``"cpu"`` for a device string like ``cuda:0`` / ``cpu``."""
    for entry in devices or []:
        if entry.get("device") == device and entry.get("type") in ("cpu", "gpu"):
            return str(entry["type"])
    text = (device or "").lower()
    return "gpu" if text.startswith(("cuda", "gpu", "rocm", "hip")) else "cpu"


def device_name(
    device: str | None,
    devices: list[dict[str, Any]] | None,
    system: dict[str, Any] | None = None,
    host: str | None = None,
) -> str | None:
    """The hardware name (``NVIDIA H200``, the CPU model) of ``device``, or None."""
    for entry in devices or []:
        if (
            entry.get("device") == device
            and (host is None or entry.get("host") in (None, host))
            and isinstance(entry.get("name"), str)
        ):
            return str(entry["name"])
    if device_type(device, devices) == "cpu" and system and isinstance(system.get("cpu_model"), str):
        return str(system["cpu_model"])
    return None


def roofline_view(inputs: list[tuple[str, dict[str, Any]]], local_cpu: Any = None) -> dict[str, Any]:
    """Roofs, workload points and datasheet values of ``inputs`` (label, results document) pairs,
    from :func:`gpuscope.roofline.loading.build_model`. ``local_cpu`` (a ``CpuInfo``) is passed
    on for the CPU datasheet roof (default: this machine's, used only when the model matches)."""
    from gpuscope.roofline.loading import build_model

    model = build_model(inputs, local_cpu=local_cpu)
    return _from_model(model)


def _from_model(model: Any) -> dict[str, Any]:
    """The roofline model's roofs and placements as the report's plain data."""
    from gpuscope.roofline.layout import envelope_roofs, roof_title
    from gpuscope.roofline.loading import model_to_json
    from gpuscope.roofline.model import DATASHEET, DRAM_ROOF_RULE, above_datasheet, memory_level

    roofs: list[dict[str, Any]] = []
    datasheet: list[dict[str, Any]] = []
    notes: list[str] = []
    flagged: list[dict[str, Any]] = []
    for device in model.devices:
        key = device.key
        label = model.device_label(key)
        for note in device.notes:
            notes.append(f"{label}: {note}")
        peak, dram, others = envelope_roofs(model, device)
        main = {id(roof) for roof in (peak, dram, *others) if roof is not None}
        above = {id(item.measured): item for item in above_datasheet(device)}
        for item in above.values():
            notes.append(f"{label}: {item.text}")
            flagged.append(
                {"device": key.device, "host": key.host, "rank": key.rank, "name": item.measured.name,
                 "value": item.measured.value, "datasheet_value": item.datasheet.value, "ratio": item.ratio,
                 "text": item.text}
            )  # fmt: skip
        for roof in sorted(
            device.roofs, key=lambda r: (_KIND_ORDER.get(r.kind, 9), r.source != "measured", -r.value, r.name)
        ):
            memory_kind = (
                roof.note.split()[-1] if (roof.source == DATASHEET and roof.kind == "memory" and roof.note) else None
            )
            entry = {
                "device": key.device,
                "device_type": device.device_type,
                "device_name": device.name,
                "host": key.host,
                "rank": key.rank,
                "source": roof.origin,
                "kind": roof.kind,
                "name": roof.name,
                "value": roof.value,
                "unit": roof.unit,
                "origin": "datasheet" if roof.source == DATASHEET else "measured",
                "label": roof_title(roof, memory_kind),
                "note": roof.note or None,
                # compute and memory roofs are FLOP roofs of the chart; transfers and collectives are not
                "chart": roof.kind in ("compute", "memory"),
                "main": id(roof) in main,
                "level": memory_level(roof.name) if roof.kind == "memory" else roof.kind,
                "straggler": roof.straggler,
                "above_datasheet": above[id(roof)].text if id(roof) in above else None,
            }
            roofs.append(entry)
            if roof.source == DATASHEET:
                datasheet.append(
                    {key_: entry[key_] for key_ in ("device", "host", "rank", "kind", "name", "value", "unit")}
                )
    points: list[dict[str, Any]] = []
    for placement in model.placements:
        point = placement.point
        device = model.device(point.key)
        bounding = placement.bounding_roof
        points.append(
            {
                "name": point.name,
                "device": point.key.device,
                "device_type": device.device_type if device else device_type(point.key.device),
                "device_name": device.name if device else None,
                "host": point.key.host,
                "rank": point.key.rank,
                "source": point.origin,
                "dtype": point.dtype,
                "intensity_flop_per_byte": placement.intensity_flop_per_byte,
                "intensity_basis": placement.intensity_basis,
                "flop_per_s": point.flop_per_s,
                "bound": placement.bound if placement.bound != "unknown" else None,
                "roof": (f"{bounding.name} ({bounding.source})" if bounding is not None else None),
                "attainable_flop_per_s": placement.attainable_flop_per_s,
                "efficiency_percent": placement.efficiency * 100.0 if placement.efficiency is not None else None,
                "above_roof": placement.above_roof,
                "note": placement.note or None,
                "straggler": point.straggler or bool(device and device.straggler),
            }
        )
    return {
        "available": True, "note": None, "notes": notes, "warnings": list(model.warnings), "roofs": roofs,
        "points": points, "datasheet": datasheet, "above_datasheet": flagged, "dram_rule": DRAM_ROOF_RULE,
        "model": model_to_json(model),
    }  # fmt: skip


def model_from_view(view: dict[str, Any]) -> Any:
    """A :class:`~gpuscope.roofline.model.RooflineModel` rebuilt from a report's roofline
    section (its ``roofs`` and ``points``), or None when it has neither. Points keep their
    intensity and FLOP/s (FLOPs = FLOP/s x 1 s); placements are computed again. A section that
    carries the model's own JSON (``model``, :func:`gpuscope.roofline.loading.model_to_json`) is
    read from that instead."""
    if isinstance(view.get("model"), dict):
        from gpuscope.roofline.loading import model_from_json

        return model_from_json(view["model"])
    from gpuscope.roofline.model import (
        DATASHEET,
        MEASURED,
        DeviceKey,
        DeviceRoofs,
        Point,
        Roof,
        RooflineModel,
        place_point,
    )

    devices: dict[Any, DeviceRoofs] = {}

    def device_of(item: dict[str, Any]) -> DeviceRoofs:
        rank = (
            item.get("rank") if isinstance(item.get("rank"), int) and not isinstance(item.get("rank"), bool) else None
        )
        host = item.get("host") if isinstance(item.get("host"), str) else None
        key = DeviceKey(host, rank, str(item.get("device")))
        if key not in devices:
            kind = item.get("device_type") if item.get("device_type") in ("cpu", "gpu") else device_type(key.device)
            name = item.get("device_name") if isinstance(item.get("device_name"), str) else None
            devices[key] = DeviceRoofs(key=key, device_type=str(kind), name=name)
        return devices[key]

    def number(value: Any) -> float | None:
        return (
            float(value)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
            else None
        )

    def items(value: Any) -> list[dict[str, Any]]:
        return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []

    for item in items(view.get("roofs")):
        value = number(item.get("value"))
        if value is None or item.get("kind") not in ("compute", "memory", "transfer", "collective"):
            continue
        device = device_of(item)
        source = DATASHEET if item.get("origin") == "datasheet" else MEASURED
        unit = "FLOP/s" if item["kind"] == "compute" else "B/s"
        device.roofs.append(
            Roof(device.key, str(item["kind"]), str(item.get("name")), value, unit, source, str(item.get("note") or ""))
        )
    points = []
    for item in items(view.get("points")):
        rate, intensity = number(item.get("flop_per_s")), number(item.get("intensity_flop_per_byte"))
        if rate is None or intensity is None:
            continue
        device = device_of(item)
        dtype = item.get("dtype") if isinstance(item.get("dtype"), str) else None
        points.append(
            Point(
                name=str(item.get("name")), key=device.key, flops=rate, bytes=rate / intensity, time_s=1.0, dtype=dtype
            )
        )
    if not devices:
        return None
    model = RooflineModel(devices=list(devices.values()), points=points)
    model.placements = [place_point(point, model.device(point.key)) for point in points]
    return model


def _superseded(roof: Any, device: Any) -> bool:
    """An algbw collective roof of a collective whose busbw was measured (never drawn)."""
    if roof.kind != "collective" or not roof.name.endswith(".algbw"):
        return False
    op = roof.name.split(".", 1)[0]
    return any(other.kind == "collective" and other.name == f"{op}.busbw" for other in device.roofs)


_KIND_ORDER = {"compute": 0, "memory": 1, "transfer": 2, "collective": 3}


def datasheet_value(ceiling: dict[str, Any], datasheet: list[dict[str, Any]]) -> float | None:
    """The datasheet value a measured ceiling is held against, or None (see :func:`datasheet_entry`)."""
    entry = datasheet_entry(ceiling, datasheet)
    return float(entry["value"]) if entry is not None else None


def datasheet_entry(ceiling: dict[str, Any], datasheet: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The datasheet roof a measured ceiling is held against, or None.

    compute: the same dtype (``fp64`` also against ``fp64.tensor``, the higher one);
    memory: the datasheet roof of the same level (``dram.triad`` -> ``dram``);
    transfer: pinned host copies against PCIe each way (``h2d.pinned`` -> ``pcie.h2d``), NVLink
    and peer copies against NVLink; pageable copies and collectives have no datasheet value."""
    from gpuscope.roofline.model import dtype_roof_names, memory_level

    kind, name = ceiling.get("kind"), str(ceiling.get("name") or "")
    mine = [
        d
        for d in datasheet
        if d.get("device") == ceiling.get("device")
        and d.get("host") == ceiling.get("host")
        and d.get("kind") == kind
        and (
            d.get("rank") == ceiling.get("rank")
            or d.get("rank") is None
            or (ceiling.get("rank") in (None, 0) and d.get("rank") in (None, 0))
        )
    ]
    if kind == "compute":
        wanted: tuple[str, ...] = dtype_roof_names(name)
    elif kind == "memory":
        level = memory_level(name)
        candidates = [d for d in mine if memory_level(str(d.get("name"))) == level]
        return max(candidates, key=lambda d: d["value"]) if candidates else None
    elif kind == "transfer":
        head = name.lower()
        if "pageable" in head:
            return None
        if head.startswith(("h2d", "pcie.h2d")):
            wanted = ("pcie.h2d",)
        elif head.startswith(("d2h", "pcie.d2h")):
            wanted = ("pcie.d2h",)
        elif head.startswith(("nvlink", "p2p")):
            wanted = ("nvlink",)
        else:
            wanted = (name,)
    else:
        return None
    candidates = [d for d in mine if d.get("name") in wanted]
    return max(candidates, key=lambda d: d["value"]) if candidates else None
