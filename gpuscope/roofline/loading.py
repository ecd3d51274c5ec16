"""Build a :class:`RooflineModel` from one or more results files (probe ceilings, measured
workloads) plus the built-in datasheet roofs; and turn a model into JSON.

Several files combine: devices are keyed by (host, rank, device), so a CPU run and a GPU run of
one machine share a host, and two machines stay apart. The host comes from a ceiling's or
device entry's ``host``, else the file's ``system.hostname``.
"""

from __future__ import annotations

import os
import re
import socket
from typing import Any, Callable, Sequence

from gpuscope.results import load_results
from gpuscope.roofline.datasheet import COMPUTE_DTYPES, cpu_datasheet_peaks, match_gpu_datasheet
from gpuscope.roofline.model import (
    DATASHEET,
    MEASURED,
    DeviceKey,
    DeviceRoofs,
    Point,
    Roof,
    RooflineModel,
    place_point,
    ridge_points,
)
from gpuscope.roofline.stragglers import ceiling_median, is_straggler, straggler_margin

__all__ = ["load_model", "build_model", "model_to_json", "point_from_workload", "MODEL_JSON_SCHEMA"]

MODEL_JSON_SCHEMA = "gpuscope.roofline"

_FAILED_STATUSES = frozenset({"failed", "error", "invalid", "skipped", "validation_failed"})
_UNIT_FOR_KIND = {"compute": "FLOP/s", "memory": "B/s", "transfer": "B/s", "collective": "B/s"}


def load_model(
    paths: Sequence[str | os.PathLike[str]],
    *,
    datasheet: bool = True,
    local_cpu: Any = None,
    local_hostname: str | None = None,
) -> RooflineModel:
    """Read results files (raising :class:`BadInputError` with one line for a bad one) and build
    the model. ``datasheet=False`` leaves out the built-in datasheet roofs."""
    documents = [(str(path), load_results(path)) for path in paths]
    return build_model(documents, datasheet=datasheet, local_cpu=local_cpu, local_hostname=local_hostname)


#: C0 and C1 control characters (ESC, BEL, CR, ...): a results file must not drive the terminal.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _clean(value: Any) -> Any:
    """``value`` with every control character in its strings (keys too) replaced by '?'."""
    if isinstance(value, str):
        return _CONTROL.sub("?", value)
    if isinstance(value, dict):
        return {_clean(key): _clean(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_clean(item) for item in value]
    return value


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _number_or_none(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


class _Builder:
    def __init__(self) -> None:
        self.devices: dict[DeviceKey, DeviceRoofs] = {}
        self.points: list[Point] = []
        self.warnings: list[str] = []

    def device(self, key: DeviceKey, device_type: str | None = None, name: str | None = None) -> DeviceRoofs:
        entry = self.devices.get(key)
        guessed = "cpu" if key.is_cpu else ("gpu" if key.device.startswith("cuda") else "unknown")
        if entry is None:
            entry = DeviceRoofs(key=key, device_type=device_type or guessed, name=name)
            self.devices[key] = entry
        else:
            if name and not entry.name:
                entry.name = name
            if device_type and entry.device_type == "unknown":
                entry.device_type = device_type
        return entry

    def add_roof(self, roof: Roof) -> None:
        device = self.device(roof.key)
        for position, existing in enumerate(device.roofs):
            if (existing.kind, existing.name, existing.source) == (roof.kind, roof.name, roof.source):
                if roof.value > existing.value:
                    device.roofs[position] = roof
                return
        device.roofs.append(roof)


def _device_placement(document: dict[str, Any], default_host: str | None) -> dict[str, tuple[str | None, int | None]]:
    """device -> (host, rank) from the document's ``devices`` list, when a device appears once."""
    seen: dict[str, list[tuple[str | None, int | None]]] = {}
    for entry in document.get("devices", []):
        device = _str_or_none(entry.get("device"))
        if device:
            seen.setdefault(device, []).append((_str_or_none(entry.get("host")) or default_host, _int_or_none(entry.get("rank"))))
    return {device: places[0] for device, places in seen.items() if len(set(places)) == 1}


def _key(item: dict[str, Any], placement: dict[str, tuple[str | None, int | None]], default_host: str | None) -> DeviceKey | None:
    device = _str_or_none(item.get("device"))
    if device is None:
        return None
    host, rank = placement.get(device, (default_host, None))
    host = _str_or_none(item.get("host")) or host
    item_rank = _int_or_none(item.get("rank"))
    return DeviceKey(host=host, rank=item_rank if item_rank is not None else rank, device=device)


def point_from_workload(workload: dict[str, Any], key: DeviceKey, origin: str | None = None) -> Point:
    """A :class:`Point` from one ``workloads`` entry of a results file."""
    warm = workload.get("warm")
    if not isinstance(warm, bool):
        state = workload.get("cache_state")
        warm = (state == "warm") if isinstance(state, str) else None
    return Point(
        name=str(workload.get("name")),
        key=key,
        flops=float(workload["flops"]),
        bytes=float(workload["bytes"]),
        time_s=float(workload["time_s"]),
        dtype=_str_or_none(workload.get("dtype")),
        dram_bytes_measured=_number_or_none(workload.get("dram_bytes_measured")),
        bytes_rule=_str_or_none(workload.get("bytes_rule")),
        source=_str_or_none(workload.get("source")) or "results",
        warm=warm,
        origin=origin,
        straggler=is_straggler(workload),
    )


def build_model(
    documents: Sequence[tuple[str, dict[str, Any]]],
    *,
    datasheet: bool = True,
    local_cpu: Any = None,
    local_hostname: str | None = None,
    cpu_info_factory: Callable[[], Any] | None = None,
) -> RooflineModel:
    """The model of already-validated results documents ``(source name, document)``.

    ``local_cpu`` is the :class:`CpuInfo` used for a CPU's datasheet roof (default: this
    machine's, read only when a CPU device is present); it is applied only to a CPU whose model
    matches, since a results file may come from another machine."""
    builder = _Builder()
    documents = [(_clean(source), _clean(document)) for source, document in documents]
    for source, document in documents:
        system = document.get("system") or {}
        default_host = _str_or_none(system.get("hostname"))
        placement = _device_placement(document, default_host)
        for entry in document.get("devices", []):
            key = _key(entry, placement, default_host)
            if key is None:
                builder.warnings.append(f"{source}: a devices entry has no 'device'; ignored")
                continue
            builder.device(key, _str_or_none(entry.get("type")), _str_or_none(entry.get("name")))
        for position, ceiling in enumerate(document.get("ceilings", [])):
            key = _key(ceiling, placement, default_host)
            assert key is not None  # validate_results checked 'device'
            kind, unit = ceiling["kind"], ceiling["unit"]
            if _UNIT_FOR_KIND[kind] != unit:
                builder.warnings.append(
                    f"{source}: ceilings[{position}] ({ceiling['name']}) is kind {kind} with unit {unit}; ignored"
                )
                continue
            status = ceiling.get("status")
            if isinstance(status, str) and status.lower() in _FAILED_STATUSES:
                builder.warnings.append(f"{source}: ceilings[{position}] ({ceiling['name']}) has status {status!r}; ignored")
                continue
            builder.add_roof(
                Roof(
                    key, kind, ceiling["name"], float(ceiling["value"]), unit, MEASURED, _str_or_none(ceiling.get("note")) or "", source,
                    straggler=is_straggler(ceiling), median_value=ceiling_median(ceiling),
                )
            )  # fmt: skip
        for workload in document.get("workloads", []):
            key = _key(workload, placement, default_host)
            if key is None:
                builder.warnings.append(f"{source}: workload {workload.get('name')!r} has no 'device'; ignored")
                continue
            builder.device(key)
            builder.points.append(point_from_workload(workload, key, source))
    if datasheet:
        _add_datasheet_roofs(builder, local_cpu, local_hostname, cpu_info_factory)
    devices = sorted(builder.devices.values(), key=_device_order)
    margins = [margin for margin in (straggler_margin(document) for _, document in documents) if margin is not None]
    model = RooflineModel(
        devices=devices,
        points=builder.points,
        sources=[source for source, _ in documents],
        warnings=builder.warnings,
        straggler_margin=margins[0] if margins else None,
    )
    model.placements = [place_point(point, model.device(point.key)) for point in model.points]
    return model


def _device_order(device: DeviceRoofs) -> tuple[Any, ...]:
    key = device.key
    kind_rank = 0 if device.device_type == "gpu" else (1 if device.device_type == "cpu" else 2)
    index = key.device.rsplit(":", 1)[-1]
    return (key.host or "", key.rank if key.rank is not None else -1, kind_rank, int(index) if index.isdigit() else 0, key.device)


def _add_datasheet_roofs(
    builder: _Builder, local_cpu: Any, local_hostname: str | None, cpu_info_factory: Callable[[], Any] | None
) -> None:
    cpu = local_cpu
    for device in builder.devices.values():
        key = device.key
        if device.device_type == "gpu":
            if not device.name:
                device.notes.append("no device name in the results: no datasheet roofs")
                continue
            sheet = match_gpu_datasheet(device.name)
            if sheet is None:
                device.notes.append(f"{device.name!r} is not in the datasheet table: no datasheet roofs")
                continue
            device.datasheet = sheet.label
            note = f"{sheet.label} datasheet, dense"
            for dtype in COMPUTE_DTYPES:
                value = sheet.compute_flop_per_s.get(dtype)
                if value and dtype != "int8":  # int8 is OP/s, not FLOP/s
                    builder.add_roof(Roof(key, "compute", dtype, value, "FLOP/s", DATASHEET, note))
            builder.add_roof(Roof(key, "memory", "dram", sheet.memory_bytes_per_s, "B/s", DATASHEET, f"{sheet.label} {sheet.memory_kind}"))
            builder.add_roof(Roof(key, "transfer", "pcie.h2d", sheet.pcie_bytes_per_s_per_direction, "B/s", DATASHEET, "PCIe, one direction"))
            builder.add_roof(Roof(key, "transfer", "pcie.d2h", sheet.pcie_bytes_per_s_per_direction, "B/s", DATASHEET, "PCIe, one direction"))
            if sheet.nvlink_bytes_per_s_per_direction:
                builder.add_roof(
                    Roof(key, "transfer", "nvlink", sheet.nvlink_bytes_per_s_per_direction, "B/s", DATASHEET, "NVLink total, one direction")
                )
            device.notes.extend(sheet.notes)
        elif device.device_type == "cpu":
            if cpu is None:
                try:
                    cpu = cpu_info_factory() if cpu_info_factory else _local_cpu_info()
                except Exception as exc:  # noqa: BLE001 - a datasheet roof is optional
                    device.notes.append(f"CPU datasheet roof unavailable: {exc}")
                    continue
            hostname = local_hostname or socket.gethostname()
            same_model = device.name is not None and device.name.strip() == str(getattr(cpu, "model", "")).strip()
            same_host = device.name is None and key.host in (None, hostname)
            if not (same_model or same_host):
                device.notes.append(
                    f"no CPU datasheet roof: the results come from {device.name or key.host!r}, this machine has {getattr(cpu, 'model', '?')!r}"
                )
                continue
            peaks = cpu_datasheet_peaks(cpu)
            if not peaks:
                device.notes.append("no CPU datasheet roof: clock frequency unknown")
                continue
            device.datasheet = f"{getattr(cpu, 'model', 'CPU')} (cores x SIMD x clock)"
            if device.name is None:
                device.name = getattr(cpu, "model", None)
            for dtype, value in peaks.items():
                builder.add_roof(Roof(key, "compute", dtype, value, "FLOP/s", DATASHEET, "cores x SIMD FLOP/cycle x max clock"))


def _local_cpu_info() -> Any:
    from gpuscope.telemetry.cpuinfo import cpu_info

    return cpu_info()


# --- JSON ------------------------------------------------------------------------------------


def _roof_json(roof: Roof | None) -> dict[str, Any] | None:
    if roof is None:
        return None
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
    }


def model_to_json(model: RooflineModel) -> dict[str, Any]:
    """The model as plain JSON data (``gpuscope roofline --json``)."""
    devices = []
    for device in model.devices:
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
                "roofs": [_roof_json(roof) for roof in sorted(device.roofs, key=lambda r: (r.kind, r.source, -r.value))],
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
        "stragglers": stragglers,
        "devices": devices,
        "points": points,
    }
