"""The roofline part of a report, taken from :mod:`gpuscope.roofline` (the one roofline model).

:func:`roofline_view` is the single call the report makes into the model. What it returns is
plain data stored in the report JSON, so a report re-rendered from JSON needs no model:

``{"available": bool, "note": str | None,
   "roofs":  [{"device", "device_type", "device_name", "host", "rank", "source", "kind", "name",
               "value", "unit", "origin": "measured" | "datasheet", "label", "straggler"}],
   "points": [{"name", "device", "device_type", "host", "rank", "source", "intensity_flop_per_byte",
               "flop_per_s", "bound", "roof", "attainable_flop_per_s", "efficiency_percent",
               "above_roof", "straggler"}],
   "datasheet": [{"device", "host", "rank", "source", "kind", "name", "value", "unit"}]}``
"""

from __future__ import annotations

from typing import Any

__all__ = ["roofline_view", "device_type", "device_name", "datasheet_value", "datasheet_entry"]


def device_type(device: str | None, devices: list[dict[str, Any]] | None = None) -> str:
    """``"gpu"`` or ``"cpu"`` for a device string like ``cuda:0`` / ``cpu``."""
    for entry in devices or []:
        if entry.get("device") == device and entry.get("type") in ("cpu", "gpu"):
            return str(entry["type"])
    text = (device or "").lower()
    return "gpu" if text.startswith(("cuda", "gpu", "rocm", "hip")) else "cpu"


def device_name(device: str | None, devices: list[dict[str, Any]] | None, system: dict[str, Any] | None = None, host: str | None = None) -> str | None:
    """The hardware name (``NVIDIA H200``, the CPU model) of ``device``, or None."""
    for entry in devices or []:
        if entry.get("device") == device and (host is None or entry.get("host") in (None, host)) and isinstance(entry.get("name"), str):
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
    from gpuscope.roofline.chart import roof_label, select_chart_roofs
    from gpuscope.roofline.model import DATASHEET, memory_level

    main = {id(chart_roof.roof) for chart_roof in select_chart_roofs(model, "main")}
    roofs: list[dict[str, Any]] = []
    datasheet: list[dict[str, Any]] = []
    notes: list[str] = []
    for device in model.devices:
        key = device.key
        label = model.device_label(key)
        for note in device.notes:
            notes.append(f"{label}: {note}")
        for roof in sorted(device.roofs, key=lambda r: (_KIND_ORDER.get(r.kind, 9), r.source != "measured", -r.value, r.name)):
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
                "label": roof_label(roof, roof.note.split()[-1] if (roof.source == DATASHEET and roof.kind == "memory" and roof.note) else None),
                "note": roof.note or None,
                # Measured roofs outside the default selection are drawn thin and faint; a
                # datasheet roof only when the default selection (terminal, TUI) draws it too.
                "chart": (roof.source != DATASHEET and not _superseded(roof, device)) or id(roof) in main,
                "main": id(roof) in main,
                "level": memory_level(roof.name) if roof.kind == "memory" else roof.kind,
                "straggler": roof.straggler,
            }
            roofs.append(entry)
            if roof.source == DATASHEET:
                datasheet.append({key_: entry[key_] for key_ in ("device", "host", "rank", "kind", "name", "value", "unit")})
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
    return {"available": True, "note": None, "notes": notes, "warnings": list(model.warnings), "roofs": roofs, "points": points, "datasheet": datasheet}


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
        if d.get("device") == ceiling.get("device") and d.get("host") == ceiling.get("host") and d.get("rank") == ceiling.get("rank") and d.get("kind") == kind
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
