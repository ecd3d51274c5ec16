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
import socket
from collections.abc import Callable, Sequence

from gpuscope.batchgc import few_collections
from gpuscope.results import read_results
from gpuscope.roofline.datasheet import COMPUTE_DTYPES, cpu_datasheet, cpu_datasheet_peaks, match_gpu_datasheet
from gpuscope.roofline.hierarchy import out_of_order_roofs
from gpuscope.roofline.model import (
    DATASHEET,
    MEASURED,
    UNIT_FOR_KIND,
    BandwidthPoint,
    DeviceKey,
    DeviceRoofs,
    Point,
    Roof,
    RooflineModel,
    place_point,
)
from gpuscope.schema.core import finite_or_none
from gpuscope.schema.results import Ceiling, Device, Measurement, Results, Workload, contention_notes
from gpuscope.telemetry.cpuinfo import CpuInfo, cpu_info

__all__ = ["load_model", "build_model", "point_from_workload", "out_of_order_ceilings"]


_FAILED_STATUSES = frozenset({"failed", "error", "invalid", "skipped", "validation_failed"})
_Entry = Device | Ceiling | Measurement | Workload
_Placement = dict[str, tuple[str | None, int | None]]


def load_model(
    paths: Sequence[str | os.PathLike[str]],
    *,
    datasheet: bool = True,
    local_cpu: CpuInfo | None = None,
    local_hostname: str | None = None,
) -> RooflineModel:
    """Read results files (raising :class:`BadInputError` with one line for a bad one) and build
    the model. ``datasheet=False`` leaves out the built-in datasheet roofs."""
    with few_collections():  # a large file: see gpuscope.batchgc
        documents = [(str(path), read_results(path)) for path in paths]
        return build_model(documents, datasheet=datasheet, local_cpu=local_cpu, local_hostname=local_hostname)


def _text(value: object) -> str | None:
    """A non-empty string, else None. Text stays as the file has it: it is made safe where it
    reaches a terminal or a page (gpuscope.textsafe), not here."""
    return value if isinstance(value, str) and value else None


class _Builder:
    def __init__(self) -> None:
        self.devices: dict[DeviceKey, DeviceRoofs] = {}
        self.points: list[Point] = []
        self.warnings: list[str] = []
        self.entries: dict[DeviceKey, Device] = {}  # the first devices entry naming each device
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


def _device_placement(document: Results, default_host: str | None) -> _Placement:
    """device -> (host, rank) from the document's ``devices`` list, when a device appears once."""
    seen: dict[str, list[tuple[str | None, int | None]]] = {}
    for entry in document.devices:
        seen.setdefault(entry.device, []).append((_text(entry.host) or default_host, entry.rank))
    return {device: places[0] for device, places in seen.items() if len(set(places)) == 1}


def _raw_key(item: _Entry, placement: _Placement, default_host: str | None) -> DeviceKey | None:
    """(host, rank, device) as the file writes it."""
    device = _text(item.device)
    if device is None:
        return None
    host, rank = placement.get(device, (default_host, None))
    return DeviceKey(host=_text(item.host) or host, rank=item.rank if item.rank is not None else rank, device=device)


def _is_cpu(device: str, kind: str | None) -> bool:
    return kind == "cpu" or device == "cpu" or device.startswith("cpu:")


class _Identities:
    """Maps each file's (host, rank, device) to one machine-wide :class:`DeviceKey` (see the
    module docstring for the rule)."""

    def __init__(self) -> None:
        self.by_uuid: dict[str, DeviceKey] = {}
        self.cpu_models: dict[str | None, set[str]] = {}  # host -> CPU models named on it

    def note_document(self, document: Results, placement: _Placement, default_host: str | None) -> None:
        for entry in document.devices:
            key = _raw_key(entry, placement, default_host)
            if key is not None and _is_cpu(key.device, entry.type):
                model = _text(entry.name) or _text(document.system.cpu_model)
                if model:
                    self.cpu_models.setdefault(key.host, set()).add(model.strip())

    def key_of(self, raw: DeviceKey, document: Results, entries: _DeviceEntries, multi_rank: bool) -> DeviceKey:
        entry = entries.find(raw)
        if _is_cpu(raw.device, entry.type if entry else None):
            model = (_text(entry.name) if entry else None) or _text(document.system.cpu_model)
            if model is None or len(self.cpu_models.get(raw.host, set())) <= 1:
                return DeviceKey(raw.host, None, "cpu")
            return DeviceKey(raw.host, None, f"cpu:{model.strip()}")  # one hostname, two machines
        found = DeviceKey(raw.host, raw.rank if multi_rank else None, raw.device)
        if entry is not None and entry.uuid:
            return self.by_uuid.setdefault(entry.uuid.lower().removeprefix("gpu-"), found)
        return found


class _DeviceEntries:
    """The ``devices`` entries of one document by (device, host), indexed once: every ceiling,
    measurement and workload looks its device up (a scan of the list each made a fleet quadratic)."""

    def __init__(self, document: Results) -> None:
        default_host = _text(document.system.hostname)
        self.by_place: dict[tuple[str, str | None], list[Device]] = {}
        for entry in document.devices:
            self.by_place.setdefault((entry.device, _text(entry.host) or default_host), []).append(entry)

    def find(self, raw: DeviceKey) -> Device | None:
        """The entry of ``raw`` (same device and host; the same rank where both give one), else
        the first entry of that device on that host, else None."""
        entries = self.by_place.get((raw.device, raw.host), [])
        for entry in entries:
            if entry.rank is None or raw.rank is None or entry.rank == raw.rank:
                return entry
        return entries[0] if entries else None


def _multi_rank(document: Results) -> bool:
    """True for a multi-rank (distributed) file: more than one rank named, or a ``distributed`` block."""
    entries: list[_Entry] = [*document.devices, *document.ceilings, *document.workloads]
    ranks = {item.rank for item in entries if item.rank is not None}
    return len(ranks) > 1 or document.distributed is not None


def point_from_workload(workload: Workload, key: DeviceKey, origin: str | None = None) -> Point:
    """A :class:`Point` from one ``workloads`` entry of a results file."""
    warm = workload.warm
    if warm is None and workload.cache_state is not None:
        warm = workload.cache_state == "warm"
    return Point(
        name=workload.name, key=key, flops=float(workload.flops), bytes=float(workload.bytes),
        time_s=float(workload.time_s), dtype=_text(workload.dtype), dram_bytes_measured=workload.dram_bytes_measured,
        bytes_rule=_text(workload.bytes_rule), source=_text(workload.source) or "results", warm=warm, origin=origin,
        straggler=workload.straggler is True,
    )  # fmt: skip


def _roof(ceiling: Ceiling, key: DeviceKey, source: str) -> Roof:
    """The measured roof of one ``ceilings`` entry."""
    median = ceiling.median_value
    return Roof(
        key, ceiling.kind, ceiling.name, float(ceiling.value), ceiling.unit, MEASURED,
        _text(ceiling.note) or "", source, straggler=ceiling.straggler is True,
        median_value=median if median is not None and median > 0 else None, size_bytes=ceiling.size_bytes,
    )  # fmt: skip


def build_model(
    documents: Sequence[tuple[str, Results]],
    *,
    datasheet: bool = True,
    local_cpu: CpuInfo | None = None,
    local_hostname: str | None = None,
    cpu_info_factory: Callable[[], CpuInfo] | None = None,
) -> RooflineModel:
    """The model of results documents ``(source name, document)``.

    ``local_cpu`` is the :class:`CpuInfo` used for a CPU's datasheet roof (default: this
    machine's, read only when a CPU device is present); it is applied only to a CPU whose model
    matches, since a results file may come from another machine."""
    builder = _Builder()
    typed = list(documents)
    identities = _Identities()
    for _source, document in typed:
        default_host = _text(document.system.hostname)
        identities.note_document(document, _device_placement(document, default_host), default_host)
    contention: list[str] = []
    for source, document in typed:
        contention.extend(f"{source}: {note}" for note in contention_notes(document))
        _add_document(builder, identities, source, document)
    builder.warnings.extend(note for note in contention if note not in builder.warnings)
    if datasheet:
        _add_datasheet_roofs(builder, local_cpu, local_hostname, cpu_info_factory)
    margins = [margin for _, doc in typed if (margin := doc.straggler_margin) is not None and 0 < margin < 1]
    model = RooflineModel(
        devices=sorted(builder.devices.values(), key=_device_order), points=builder.points,
        sources=[source for source, _ in typed], warnings=builder.warnings,
        straggler_margin=margins[0] if margins else None, bandwidths=builder.bandwidths, contention=contention,
    )  # fmt: skip
    model.placements = [place_point(point, model.device(point.key)) for point in model.points]
    return model


def _add_document(builder: _Builder, identities: _Identities, source: str, document: Results) -> None:
    """The devices, measured roofs, bandwidths and points of one document."""
    default_host = _text(document.system.hostname)
    placement = _device_placement(document, default_host)
    multi_rank = _multi_rank(document)
    entries = _DeviceEntries(document)

    def key_of(item: _Entry) -> DeviceKey | None:
        raw = _raw_key(item, placement, default_host)
        return None if raw is None else identities.key_of(raw, document, entries, multi_rank)

    for entry in document.devices:
        key = key_of(entry)
        assert key is not None  # Device.device is never empty
        builder.device(key, _text(entry.type), _text(entry.name))
        builder.entries.setdefault(key, entry)
    disordered = out_of_order_ceilings(document.ceilings)
    for position, ceiling in enumerate(document.ceilings):
        key = key_of(ceiling)
        assert key is not None  # Ceiling.device is never empty
        what = f"{source}: ceilings[{position}] ({ceiling.name})"
        if UNIT_FOR_KIND[ceiling.kind] != ceiling.unit:
            builder.warnings.append(f"{what} is kind {ceiling.kind} with unit {ceiling.unit}; ignored")
        elif ceiling.status is not None and ceiling.status.lower() in _FAILED_STATUSES:
            builder.warnings.append(f"{what} has status {ceiling.status!r}; ignored")
        elif (flag := disordered.get((ceiling.device, ceiling.name))) is not None:
            builder.device(key).out_of_order[ceiling.name] = flag  # flagged, not drawn
        else:
            builder.add_roof(_roof(ceiling, key, source))
    for measurement in document.measurements:
        link = _bandwidth_point(measurement)
        key = key_of(measurement) if link is not None else None
        if link is not None and key is not None:
            builder.bandwidths.append(BandwidthPoint(key, *link))
    for workload in document.workloads:
        key = key_of(workload)
        if key is None:
            builder.warnings.append(f"{source}: workload {workload.name!r} has no 'device'; ignored")
            continue
        builder.device(key)
        builder.points.append(point_from_workload(workload, key, source))


def out_of_order_ceilings(ceilings: list[Ceiling]) -> dict[tuple[str, str], str]:
    """(device, roof name) -> flag text of every memory ceiling slower than a farther level of
    its kernel, as the file says or (files written before ``out_of_order``) as the values say."""
    rates: dict[str, dict[str, float]] = {}
    flags: dict[tuple[str, str], str] = {}
    for ceiling in ceilings:
        if ceiling.kind == "memory" and (ceiling.status is None or ceiling.status.lower() not in _FAILED_STATUSES):
            rates.setdefault(ceiling.device, {})[ceiling.name] = ceiling.value
            if ceiling.out_of_order:
                flags[(ceiling.device, ceiling.name)] = ceiling.out_of_order
    for device, named in rates.items():
        for name, text in out_of_order_roofs(named).items():
            flags.setdefault((device, name), text)
    return flags


def _bandwidth_point(measurement: Measurement) -> tuple[str, float, float] | None:
    """``(link, size_bytes, bytes_per_s)`` of an ok transfer or collective measurement (bus
    bandwidth for collectives), else None."""
    if measurement.kind not in ("transfer", "collective"):
        return None
    if (measurement.status or "ok").lower() in _FAILED_STATUSES:
        return None
    parameters = measurement.parameters if isinstance(measurement.parameters, dict) else {}
    size = finite_or_none(parameters.get("size_bytes"))
    if measurement.kind == "collective":
        link = f"{parameters.get('op') or 'collective'}.busbw"
        rate = measurement.busbw_bytes_per_s or measurement.bytes_per_s
    else:
        link = _text(measurement.ceiling_name) or str(parameters.get("direction") or "transfer")
        rate = measurement.bytes_per_s
    if size is None or rate is None or size <= 0 or rate <= 0:
        return None
    return link, size, rate


def _device_order(device: DeviceRoofs) -> tuple[str, int, int, int, str]:
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


def _add_recorded_cpu_roofs(builder: _Builder, device: DeviceRoofs, entry: Device) -> None:
    """A CPU's datasheet roofs as the probe built them on the machine (cores x FLOP/cycle x the
    clock, its source stated: gpuscope.roofline.datasheet.cpu_datasheet)."""
    clock = f"{entry.datasheet_clock_mhz:.0f} MHz" if entry.datasheet_clock_mhz else "clock unknown"
    device.datasheet = f"{device.name or 'CPU'}: cores x FLOP/cycle x {clock} ({entry.datasheet_clock_source})"
    recorded = {
        "fp64": entry.datasheet_peak_fp64_flop_per_s,
        "fp32": entry.datasheet_peak_fp32_flop_per_s,
        "bf16": entry.datasheet_peak_bf16_flop_per_s,
    }
    note = entry.datasheet_rule or f"cores x FLOP/cycle x {clock} ({entry.datasheet_clock_source})"
    for dtype, value in recorded.items():
        if value:
            builder.add_roof(Roof(device.key, "compute", dtype, value, "FLOP/s", DATASHEET, note))


def _add_datasheet_roofs(
    builder: _Builder,
    local_cpu: CpuInfo | None,
    local_hostname: str | None,
    cpu_info_factory: Callable[[], CpuInfo] | None,
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
            links = [
                ("memory", "dram", sheet.memory_bytes_per_s, f"{sheet.label} {sheet.memory_kind}"),
                ("transfer", "pcie.h2d", sheet.pcie_bytes_per_s_per_direction, "PCIe, one direction"),
                ("transfer", "pcie.d2h", sheet.pcie_bytes_per_s_per_direction, "PCIe, one direction"),
                (
                    "transfer",
                    sheet.gpu_link_name.lower(),  # "nvlink", or "xgmi" on AMD GPUs
                    sheet.nvlink_bytes_per_s_per_direction,
                    f"{sheet.gpu_link_name} total, one direction",
                ),
            ]
            for kind, name, rate, text in links:
                if rate:
                    builder.add_roof(Roof(key, kind, name, rate, "B/s", DATASHEET, text))
            device.notes.extend(sheet.notes)
        elif device.device_type == "cpu":
            if cpu is None:
                try:
                    cpu = (cpu_info_factory or cpu_info)()
                except Exception as exc:  # noqa: BLE001 - a datasheet roof is optional
                    device.notes.append(f"CPU datasheet roof unavailable: {exc}")
                    continue
            entry = builder.entries.get(key)
            if entry is not None and entry.datasheet_clock_source:  # built by the probe, the clock's source stated
                _add_recorded_cpu_roofs(builder, device, entry)
                continue
            hostname = local_hostname or socket.gethostname()
            same_model = device.name is not None and device.name.strip() == cpu.model.strip()
            same_host = device.name is None and key.host in (None, hostname)
            if not (same_model or same_host):
                entry = builder.entries.get(key)
                recorded = {
                    "fp32": entry.datasheet_peak_fp32_flop_per_s if entry else None,
                    "fp64": entry.datasheet_peak_fp64_flop_per_s if entry else None,
                }
                if any(recorded.values()):  # the probe recorded the peak on the machine itself
                    device.datasheet = f"{device.name or 'CPU'}: recorded by the probe on that machine"
                    note = "cores x SIMD FLOP/cycle x clock, as the probe recorded it"
                    for dtype, value in recorded.items():
                        if value:
                            builder.add_roof(Roof(key, "compute", dtype, value, "FLOP/s", DATASHEET, note))
                    continue
                device.notes.append(
                    f"no CPU datasheet roof: the results come from {device.name or key.host!r}, "
                    f"this machine has {cpu.model!r}"
                )
                continue
            peaks = cpu_datasheet_peaks(cpu)
            if not peaks:
                device.notes.append("no CPU datasheet roof: clock frequency unknown")
                continue
            cores = cpu.physical_cores or cpu.logical_cores
            clock = cpu.clock_source
            device.datasheet = f"{cpu.model}: {cores} cores x {cpu.simd} x {clock}"
            if device.name is None:
                device.name = cpu.model
            cpu_sheet = cpu_datasheet(cpu) if isinstance(cpu, CpuInfo) else None
            for dtype, value in peaks.items():
                per_cycle = cpu.fp32_flop_per_cycle_per_core if dtype == "fp32" else cpu.fp64_flop_per_cycle_per_core
                note = cpu_sheet.note(dtype) if cpu_sheet else f"{cores} cores x {per_cycle} FLOP/cycle x {clock}"
                builder.add_roof(Roof(key, "compute", dtype, value, "FLOP/s", DATASHEET, note))
