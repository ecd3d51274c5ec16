"""Typed telemetry records. Units live in field names; GB means 1e9 bytes.

Every metric field holds a value or an :class:`Unavailable` naming the reason.
In JSON a record becomes an object whose unavailable fields are ``null`` and whose
``unavailable`` member maps each such field name to ``"reason: detail"``. The
record schema is documented in ``docs/telemetry-schema.md``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Union, get_args, get_origin

from gpuscope.telemetry.values import Metric, Reason, Unavailable

__all__ = [
    "SCHEMA_VERSION",
    "CpuCoreSample",
    "NicSample",
    "InfinibandPortSample",
    "HostSample",
    "NvLinkLinkSample",
    "GpuProcessSample",
    "GpuSample",
    "Sample",
    "record_to_dict",
    "record_from_dict",
    "NOT_COLLECTED",
]

#: Version of the log record layout; bump on any incompatible change.
SCHEMA_VERSION = 1

#: Default of every GPU metric: a collector that forgets a field shows it as unavailable, not as 0.
NOT_COLLECTED = Unavailable(Reason.ERROR, "not collected")


@dataclass(slots=True)
class CpuCoreSample:
    core: int
    utilization_percent: Metric[float]
    frequency_mhz: Metric[float]


@dataclass(slots=True)
class NicSample:
    name: str
    rx_bytes_per_s: Metric[float]
    tx_bytes_per_s: Metric[float]
    is_up: Metric[bool]
    speed_mbit_per_s: Metric[float]
    is_loopback: bool = False  # `lo`: kept in the record, hidden by default in views


@dataclass(slots=True)
class InfinibandPortSample:
    """An InfiniBand or RoCE port from /sys/class/infiniband (counters are 4-byte words)."""

    device: str
    port: int
    link_layer: str  # "InfiniBand" or "Ethernet" (RoCE)
    state: str
    rate_gbit_per_s: Metric[float]
    rx_bytes_per_s: Metric[float]
    tx_bytes_per_s: Metric[float]


@dataclass(slots=True)
class HostSample:
    hostname: str
    cpu_model: str
    logical_cores: int
    physical_cores: Metric[int]
    cpu_utilization_percent: Metric[float]  # all cores
    cores: list[CpuCoreSample]
    load_average_1m: Metric[float]
    load_average_5m: Metric[float]
    load_average_15m: Metric[float]
    memory_total_bytes: Metric[int]
    memory_used_bytes: Metric[int]
    memory_available_bytes: Metric[int]
    swap_total_bytes: Metric[int]
    swap_used_bytes: Metric[int]
    nics: list[NicSample]
    infiniband_ports: list[InfinibandPortSample]
    disk_read_bytes_per_s: Metric[float] = NOT_COLLECTED  # all physical disks
    disk_write_bytes_per_s: Metric[float] = NOT_COLLECTED


@dataclass(slots=True)
class NvLinkLinkSample:
    link: int
    tx_bytes_per_s: Metric[float]
    rx_bytes_per_s: Metric[float]


@dataclass(slots=True)
class GpuProcessSample:
    pid: int
    name: Metric[str]
    user: Metric[str]
    gpu_memory_bytes: Metric[int]
    sm_percent: Metric[float]
    kind: str  # "compute" or "graphics"


@dataclass(slots=True)
class GpuSample:
    """One GPU, or one MIG instance (``mig_parent_index`` set), at one instant."""

    index: int
    name: str
    uuid: str
    pci_bus_id: str
    architecture: str
    state: str  # "ok" or "lost"
    mig_parent_index: int | None = None
    mig_gpu_instance_id: int | None = None
    mig_compute_instance_id: int | None = None
    mig_mode: Metric[bool] = NOT_COLLECTED
    utilization_percent: Metric[float] = NOT_COLLECTED
    memory_busy_percent: Metric[float] = NOT_COLLECTED  # time memory was busy, NOT bandwidth
    memory_used_bytes: Metric[int] = NOT_COLLECTED
    memory_total_bytes: Metric[int] = NOT_COLLECTED
    dram_bandwidth_bytes_per_s: Metric[float] = NOT_COLLECTED
    dram_bandwidth_percent_of_peak: Metric[float] = NOT_COLLECTED
    dram_peak_bytes_per_s: Metric[float] = NOT_COLLECTED  # bus width x max mem clock x 2 / 8
    sm_activity_percent: Metric[float] = NOT_COLLECTED
    sm_occupancy_percent: Metric[float] = NOT_COLLECTED
    tensor_activity_percent: Metric[float] = NOT_COLLECTED  # any tensor pipe
    hmma_tensor_activity_percent: Metric[float] = NOT_COLLECTED
    imma_tensor_activity_percent: Metric[float] = NOT_COLLECTED
    dfma_tensor_activity_percent: Metric[float] = NOT_COLLECTED
    fp64_activity_percent: Metric[float] = NOT_COLLECTED
    fp32_activity_percent: Metric[float] = NOT_COLLECTED
    fp16_activity_percent: Metric[float] = NOT_COLLECTED
    pcie_tx_bytes_per_s: Metric[float] = NOT_COLLECTED
    pcie_rx_bytes_per_s: Metric[float] = NOT_COLLECTED
    pcie_link_generation: Metric[int] = NOT_COLLECTED
    pcie_link_width: Metric[int] = NOT_COLLECTED
    nvlink_tx_bytes_per_s: Metric[float] = NOT_COLLECTED
    nvlink_rx_bytes_per_s: Metric[float] = NOT_COLLECTED
    nvlink_active_links: Metric[int] = NOT_COLLECTED
    nvlink_version: Metric[int] = NOT_COLLECTED
    nvlink_link_peak_bytes_per_s: Metric[float] = NOT_COLLECTED  # one direction, one link
    nvlink_links: list[NvLinkLinkSample] = field(default_factory=list)
    sm_clock_mhz: Metric[float] = NOT_COLLECTED
    sm_clock_max_mhz: Metric[float] = NOT_COLLECTED
    memory_clock_mhz: Metric[float] = NOT_COLLECTED
    memory_clock_max_mhz: Metric[float] = NOT_COLLECTED
    power_w: Metric[float] = NOT_COLLECTED
    power_limit_w: Metric[float] = NOT_COLLECTED
    energy_j: Metric[float] = NOT_COLLECTED  # cumulative since driver load
    temperature_gpu_c: Metric[float] = NOT_COLLECTED
    temperature_memory_c: Metric[float] = NOT_COLLECTED
    fan_speed_percent: Metric[float] = NOT_COLLECTED
    throttle_reasons: Metric[list[str]] = NOT_COLLECTED  # empty list: not throttled
    ecc_corrected_errors: Metric[int] = NOT_COLLECTED  # volatile, since driver load
    ecc_uncorrected_errors: Metric[int] = NOT_COLLECTED
    processes: Metric[list[GpuProcessSample]] = NOT_COLLECTED


@dataclass(slots=True)
class Sample:
    """One tick of the sampler: the host and every GPU (and MIG instance) at one instant."""

    timestamp: float  # wall clock, seconds since the epoch
    host: HostSample
    gpus: list[GpuSample]
    driver_version: Metric[str]
    nvml_version: Metric[str]
    cuda_driver_version: Metric[str]
    gpu_unavailable: Unavailable | None = None  # why there is no GPU side at all
    sample_cost_s: float = 0.0  # wall time spent collecting this sample
    schema_version: int = SCHEMA_VERSION
    alerts: list[str] = field(default_factory=list)  # "level kind message" (gpuscope.telemetry.alerts), worst first


# --- serialisation -------------------------------------------------------------------------

_RECORD_TYPES: dict[str, type] = {}


def _register(*classes: type) -> None:
    for cls in classes:
        _RECORD_TYPES[cls.__name__] = cls


_register(
    CpuCoreSample, NicSample, InfinibandPortSample, HostSample, NvLinkLinkSample, GpuProcessSample, GpuSample, Sample
)


def record_to_dict(record: Any) -> Any:
    """A record as plain JSON-ready data: unavailable fields become ``null`` plus an
    entry in the object's ``unavailable`` map."""
    if dataclasses.is_dataclass(record):
        out: dict[str, Any] = {}
        missing: dict[str, str] = {}
        for f in dataclasses.fields(record):
            value = getattr(record, f.name)
            if isinstance(value, Unavailable):
                out[f.name] = None
                missing[f.name] = value.to_json()
            else:
                out[f.name] = record_to_dict(value)
        if missing:
            out["unavailable"] = missing
        return out
    if isinstance(value := record, Unavailable):
        return value.to_json()
    if isinstance(record, list):
        return [record_to_dict(item) for item in record]
    return record


def _element_record_type(annotation: Any) -> type | None:
    """The dataclass inside ``list[X]`` / ``Metric[list[X]]`` / ``X | None`` annotations."""
    if isinstance(annotation, str):
        annotation = eval(annotation, vars(__import__(__name__, fromlist=["_"])))  # noqa: S307 - our own annotations
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        for arg in get_args(annotation):
            found = _element_record_type(arg)
            if found is not None:
                return found
        return None
    if origin is list:
        return _element_record_type(get_args(annotation)[0])
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return annotation
    return None


_HINTS_CACHE: dict[type, dict[str, Any]] = {}


def record_from_dict(cls: type, data: dict[str, Any]) -> Any:
    """Rebuild a record from :func:`record_to_dict` output (used by replay and reports).

    Unknown keys are ignored and missing keys become ``Unavailable(ERROR, "missing in log")``,
    so logs from a newer or older gpuscope still load.
    """
    hints = _HINTS_CACHE.get(cls)
    if hints is None:
        hints = typing.get_type_hints(cls)
        _HINTS_CACHE[cls] = hints
    missing = data.get("unavailable") or {}
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in missing:
            kwargs[f.name] = Unavailable.from_json(str(missing[f.name]))
            continue
        if f.name not in data:
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
                continue
            kwargs[f.name] = Unavailable(Reason.ERROR, "missing in log")
            continue
        value = data[f.name]
        sub = _element_record_type(hints[f.name])
        if sub is not None and value is not None:
            if isinstance(value, list):
                value = [record_from_dict(sub, item) if isinstance(item, dict) else item for item in value]
            elif isinstance(value, dict):
                value = record_from_dict(sub, value)
        elif f.name == "gpu_unavailable" and isinstance(value, str):
            value = Unavailable.from_json(value)
        kwargs[f.name] = value
    return cls(**kwargs)
