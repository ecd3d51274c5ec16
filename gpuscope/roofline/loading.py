"""Build a :class:`RooflineModel` from one or more results files (probe ceilings, measured
workloads) plus the built-in datasheet roofs; and turn a model into JSON.

Several files combine into one machine identity: a device is the same device in every file that
measured it, merged by host identity plus device identity, never by label strings:

- the host is a ceiling's, workload's or device entry's ``host``, else the file's ``system.hostname``;
- a CPU is (host, CPU model): the ranks of one host share it, and a file that does not name the
  model (an old ``gpuscope.measure`` file) joins the one CPU its host has;
- a GPU with a ``uuid`` is that UUID wherever it appears; without one it is (host, device) in a
  single-rank file, and (host, rank, device) in a multi-rank file, whose ranks may each see
  their GPU as ``cuda:0``.

So ``vm/r0:cpu`` in a probe file and ``vm:cpu`` in a measure file are one CPU: the measure
file's points are judged against the probe file's measured roofs.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable, Sequence
from typing import Any

from gpuscope.results import load_results
from gpuscope.roofline.datasheet import COMPUTE_DTYPES, cpu_datasheet_peaks, match_gpu_datasheet
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
)
from gpuscope.roofline.stragglers import ceiling_median, is_straggler, straggler_margin
from gpuscope.schema.core import finite_or_none

__all__ = ["load_model", "build_model", "model_to_json", "model_from_json", "point_from_workload", "MODEL_JSON_SCHEMA"]


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
    """``value`` with every control, bidi and surrogate character in its strings (keys too)
    shown escaped (:func:`gpuscope.textsafe.safe_text`, the rule for all terminal output)."""
    if isinstance(value, str):
        from gpuscope.textsafe import safe_text

        return safe_text(value)
    if isinstance(value, dict):
        return {_clean(key): _clean(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_clean(item) for item in value]
    return value


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


class _Builder:
    def __init__(self) -> None:
        self.devices: dict[DeviceKey, DeviceRoofs] = {}
        self.points: list[Point] = []
        self.warnings: list[str] = []
        self.entries: dict[DeviceKey, dict[str, Any]] = {}  # the first devices entry naming each device
        self.bandwidths: list[BandwidthPoint] = []

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
            seen.setdefault(device, []).append(
                (_str_or_none(entry.get("host")) or default_host, _int_or_none(entry.get("rank")))
            )
    return {device: places[0] for device, places in seen.items() if len(set(places)) == 1}


def _raw_key(
    item: dict[str, Any], placement: dict[str, tuple[str | None, int | None]], default_host: str | None
) -> DeviceKey | None:
    """(host, rank, device) as the file writes it."""
    device = _str_or_none(item.get("device"))
    if device is None:
        return None
    host, rank = placement.get(device, (default_host, None))
    host = _str_or_none(item.get("host")) or host
    item_rank = _int_or_none(item.get("rank"))
    return DeviceKey(host=host, rank=item_rank if item_rank is not None else rank, device=device)


class _Identities:
    """Maps each file's (host, rank, device) to one machine-wide :class:`DeviceKey` (see the
    module docstring for the rule)."""

    def __init__(self) -> None:
        self.by_uuid: dict[str, DeviceKey] = {}
        self.cpu_models: dict[str | None, set[str]] = {}  # host -> CPU models named on it

    @staticmethod
    def _is_cpu(device: str, kind: str | None) -> bool:
        return kind == "cpu" or device == "cpu" or device.startswith("cpu:")

    def note_document(
        self, document: dict[str, Any], placement: dict[str, tuple[str | None, int | None]], default_host: str | None
    ) -> None:
        system = document.get("system") or {}
        for entry in document.get("devices", []):
            key = _raw_key(entry, placement, default_host)
            if key is not None and self._is_cpu(key.device, _str_or_none(entry.get("type"))):
                model = _str_or_none(entry.get("name")) or _str_or_none(system.get("cpu_model"))
                if model:
                    self.cpu_models.setdefault(key.host, set()).add(model.strip())

    def key_of(self, raw: DeviceKey, document: dict[str, Any], multi_rank: bool) -> DeviceKey:
        entry = _device_entry(document, raw)
        kind = _str_or_none(entry.get("type")) if entry else None
        if self._is_cpu(raw.device, kind):
            system = document.get("system") or {}
            model = (_str_or_none(entry.get("name")) if entry else None) or _str_or_none(system.get("cpu_model"))
            models = self.cpu_models.get(raw.host, set())
            if model is None or len(models) <= 1:
                return DeviceKey(raw.host, None, "cpu")
            return DeviceKey(raw.host, None, f"cpu:{model.strip()}")  # one hostname, two machines
        uuid = _str_or_none(entry.get("uuid")) if entry else None
        if uuid:
            canonical = uuid.lower().removeprefix("gpu-")
            found = self.by_uuid.get(canonical)
            if found is None:
                found = DeviceKey(raw.host, raw.rank if multi_rank else None, raw.device)
                self.by_uuid[canonical] = found
            return found
        return DeviceKey(raw.host, raw.rank if multi_rank else None, raw.device)


def _device_entry(document: dict[str, Any], raw: DeviceKey) -> dict[str, Any] | None:
    """The ``devices`` entry of ``raw`` in ``document`` (same device, host and rank where given)."""
    system = document.get("system") or {}
    default_host = _str_or_none(system.get("hostname"))
    fallback: dict[str, Any] | None = None
    for entry in document.get("devices", []):
        if entry.get("device") != raw.device:
            continue
        host = _str_or_none(entry.get("host")) or default_host
        rank = _int_or_none(entry.get("rank"))
        if host == raw.host and (rank is None or raw.rank is None or rank == raw.rank):
            return dict(entry)
        fallback = fallback or (entry if host == raw.host else None)
    return fallback


def _multi_rank(document: dict[str, Any]) -> bool:
    """True for a multi-rank (distributed) file: more than one rank named, or a ``distributed`` block."""
    ranks = {
        _int_or_none(item.get("rank"))
        for part in ("devices", "ceilings", "workloads")
        for item in document.get(part, [])
        if isinstance(item, dict)
    }
    ranks.discard(None)
    return len(ranks) > 1 or isinstance(document.get("distributed"), dict)


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
        dram_bytes_measured=finite_or_none(workload.get("dram_bytes_measured")),
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
    identities = _Identities()
    for _source, document in documents:
        system = document.get("system") or {}
        default_host = _str_or_none(system.get("hostname"))
        identities.note_document(document, _device_placement(document, default_host), default_host)
    for source, document in documents:
        system = document.get("system") or {}
        default_host = _str_or_none(system.get("hostname"))
        placement = _device_placement(document, default_host)
        multi_rank = _multi_rank(document)

        def _key(
            item: dict[str, Any],
            placement: dict[str, tuple[str | None, int | None]],
            default_host: str | None,
            document: dict[str, Any] = document,
            multi_rank: bool = multi_rank,
        ) -> DeviceKey | None:
            raw = _raw_key(item, placement, default_host)
            return None if raw is None else identities.key_of(raw, document, multi_rank)

        for entry in document.get("devices", []):
            key = _key(entry, placement, default_host)
            if key is None:
                builder.warnings.append(f"{source}: a devices entry has no 'device'; ignored")
                continue
            builder.device(key, _str_or_none(entry.get("type")), _str_or_none(entry.get("name")))
            builder.entries.setdefault(key, entry)
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
                builder.warnings.append(
                    f"{source}: ceilings[{position}] ({ceiling['name']}) has status {status!r}; ignored"
                )
                continue
            builder.add_roof(
                Roof(
                    key, kind, ceiling["name"], float(ceiling["value"]), unit, MEASURED,
                    _str_or_none(ceiling.get("note")) or "", source,
                    straggler=is_straggler(ceiling), median_value=ceiling_median(ceiling),
                    size_bytes=finite_or_none(ceiling.get("size_bytes")),
                )
            )  # fmt: skip
        for measurement in document.get("measurements", []):
            link = _bandwidth_point(measurement)
            key = _key(measurement, placement, default_host) if link is not None else None
            if link is not None and key is not None:
                builder.bandwidths.append(BandwidthPoint(key, *link))
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
        bandwidths=builder.bandwidths,
    )
    model.placements = [place_point(point, model.device(point.key)) for point in model.points]
    return model


def _bandwidth_point(measurement: Any) -> tuple[str, float, float] | None:
    """``(link, size_bytes, bytes_per_s)`` of an ok transfer or collective measurement (bus
    bandwidth for collectives), else None."""
    if not isinstance(measurement, dict) or measurement.get("kind") not in ("transfer", "collective"):
        return None
    if str(measurement.get("status") or "ok").lower() in _FAILED_STATUSES:
        return None
    found = measurement.get("parameters")
    parameters: dict[str, Any] = found if isinstance(found, dict) else {}
    size = finite_or_none(parameters.get("size_bytes"))
    if measurement["kind"] == "collective":
        link = f"{parameters.get('op') or 'collective'}.busbw"
        rate = finite_or_none(measurement.get("busbw_bytes_per_s")) or finite_or_none(measurement.get("bytes_per_s"))
    else:
        link = _str_or_none(measurement.get("ceiling_name")) or str(parameters.get("direction") or "transfer")
        rate = finite_or_none(measurement.get("bytes_per_s"))
    if size is None or rate is None or size <= 0 or rate <= 0:
        return None
    return link, size, rate


def _device_order(device: DeviceRoofs) -> tuple[Any, ...]:
    key = device.key
    kind_rank = 0 if device.device_type == "gpu" else (1 if device.device_type == "cpu" else 2)
    index = key.device.rsplit(":", 1)[-1]
    return (
        key.host or "",
        key.rank if key.rank is not None else -1,
        kind_rank,
        int(index) if index.isdigit() else 0,
        key.device,
    )


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
            builder.add_roof(
                Roof(
                    key,
                    "memory",
                    "dram",
                    sheet.memory_bytes_per_s,
                    "B/s",
                    DATASHEET,
                    f"{sheet.label} {sheet.memory_kind}",
                )
            )
            builder.add_roof(
                Roof(
                    key,
                    "transfer",
                    "pcie.h2d",
                    sheet.pcie_bytes_per_s_per_direction,
                    "B/s",
                    DATASHEET,
                    "PCIe, one direction",
                )
            )
            builder.add_roof(
                Roof(
                    key,
                    "transfer",
                    "pcie.d2h",
                    sheet.pcie_bytes_per_s_per_direction,
                    "B/s",
                    DATASHEET,
                    "PCIe, one direction",
                )
            )
            if sheet.nvlink_bytes_per_s_per_direction:
                builder.add_roof(
                    Roof(
                        key,
                        "transfer",
                        "nvlink",
                        sheet.nvlink_bytes_per_s_per_direction,
                        "B/s",
                        DATASHEET,
                        "NVLink total, one direction",
                    )
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
                recorded = {
                    dtype: finite_or_none(builder.entries.get(key, {}).get(f"datasheet_peak_{dtype}_flop_per_s"))
                    for dtype in ("fp32", "fp64")
                }
                if any(recorded.values()):  # the probe recorded the peak on the machine itself
                    device.datasheet = f"{device.name or 'CPU'}: recorded by the probe on that machine"
                    for dtype, value in recorded.items():
                        if value:
                            builder.add_roof(
                                Roof(
                                    key,
                                    "compute",
                                    dtype,
                                    value,
                                    "FLOP/s",
                                    DATASHEET,
                                    "cores x SIMD FLOP/cycle x clock, as the probe recorded it",
                                )
                            )
                    continue
                device.notes.append(
                    f"no CPU datasheet roof: the results come from {device.name or key.host!r}, "
                    f"this machine has {getattr(cpu, 'model', '?')!r}"
                )
                continue
            peaks = cpu_datasheet_peaks(cpu)
            if not peaks:
                device.notes.append("no CPU datasheet roof: clock frequency unknown")
                continue
            cores = getattr(cpu, "physical_cores", None) or getattr(cpu, "logical_cores", "?")
            clock = getattr(cpu, "clock_source", "max clock")
            device.datasheet = (
                f"{getattr(cpu, 'model', 'CPU')}: {cores} cores x {getattr(cpu, 'simd', 'SIMD')} x {clock}"
            )
            if device.name is None:
                device.name = getattr(cpu, "model", None)
            for dtype, value in peaks.items():
                per_cycle = getattr(cpu, f"{dtype}_flop_per_cycle_per_core", "?")
                note = f"{cores} cores x {per_cycle} FLOP/cycle x {clock}"
                builder.add_roof(Roof(key, "compute", dtype, value, "FLOP/s", DATASHEET, note))


def _local_cpu_info() -> Any:
    from gpuscope.telemetry.cpuinfo import cpu_info

    return cpu_info()


# The model's JSON form lives in model_json; re-exported here (``roofline --json``, the report).
from gpuscope.roofline.model_json import MODEL_JSON_SCHEMA, model_from_json, model_to_json  # noqa: E402
