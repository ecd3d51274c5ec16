"""Typed telemetry records. Units live in field names; GB means 1e9 bytes.

Every metric field holds a value or an :class:`Unavailable` naming the reason. Every number is
declared with its quantity's range (:mod:`gpuscope.schema.core`: :data:`Watts`, :data:`Timestamp`...):
the log's wire types, the reader and :func:`gpuscope.telemetry.wire.within_ranges` (which
turns an out-of-range reading into "unavailable" before anything is written) take it from here.
In JSON a record becomes an object whose unavailable fields are ``null`` and whose
``unavailable`` member maps each such field name to ``"reason: detail"``. The
record schema is documented in ``docs/telemetry-schema.md``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TypeAlias

from gpuscope.schema.core import (
    BytesPerS,
    Celsius,
    Count,
    ElapsedS,
    GbitPerS,
    Index,
    Joules,
    JsonObject,
    JsonTree,
    LoadAverage,
    MbitPerS,
    Megahertz,
    Percent,
    Timestamp,
    Watts,
)
from gpuscope.telemetry.values import Metric, Reason, Unavailable

__all__ = [
    "SCHEMA_VERSION",
    "CpuCoreSample",
    "NicSample",
    "InfinibandPortSample",
    "HostSample",
    "NvLinkLinkSample",
    "GpuProcessSample",
    "XidEvent",
    "GpuSample",
    "Sample",
    "record_to_dict",
    "JsonValue",
    "JsonObject",
    "NOT_COLLECTED",
]

#: Version of the log record layout; bump on any incompatible change.
SCHEMA_VERSION = 1

#: Default of every GPU metric: a collector that forgets a field shows it as unavailable, not as 0.
NOT_COLLECTED = Unavailable(Reason.ERROR, "not collected")


@dataclass(slots=True)
class CpuCoreSample:
    core: Index
    utilization_percent: Metric[Percent]
    frequency_mhz: Metric[Megahertz]


@dataclass(slots=True)
class NicSample:
    name: str
    rx_bytes_per_s: Metric[BytesPerS]
    tx_bytes_per_s: Metric[BytesPerS]
    is_up: Metric[bool]
    speed_mbit_per_s: Metric[MbitPerS]
    is_loopback: bool = False  # `lo`: kept in the record, hidden by default in views


@dataclass(slots=True)
class InfinibandPortSample:
    """An InfiniBand or RoCE port from /sys/class/infiniband (counters are 4-byte words)."""

    device: str
    port: Index
    link_layer: str  # "InfiniBand" or "Ethernet" (RoCE)
    state: str
    rate_gbit_per_s: Metric[GbitPerS]
    rx_bytes_per_s: Metric[BytesPerS]
    tx_bytes_per_s: Metric[BytesPerS]


@dataclass(slots=True)
class HostSample:
    hostname: str
    cpu_model: str
    logical_cores: Index
    physical_cores: Metric[Index]
    cpu_utilization_percent: Metric[Percent]  # all cores
    cores: list[CpuCoreSample]
    load_average_1m: Metric[LoadAverage]
    load_average_5m: Metric[LoadAverage]
    load_average_15m: Metric[LoadAverage]
    memory_total_bytes: Metric[Count]
    memory_used_bytes: Metric[Count]
    memory_available_bytes: Metric[Count]
    swap_total_bytes: Metric[Count]
    swap_used_bytes: Metric[Count]
    nics: list[NicSample]
    infiniband_ports: list[InfinibandPortSample]
    disk_read_bytes_per_s: Metric[BytesPerS] = NOT_COLLECTED  # all physical disks
    disk_write_bytes_per_s: Metric[BytesPerS] = NOT_COLLECTED


@dataclass(slots=True)
class NvLinkLinkSample:
    link: Index
    tx_bytes_per_s: Metric[BytesPerS]
    rx_bytes_per_s: Metric[BytesPerS]
    # error counters since the driver loaded (nvmlDeviceGetNvLinkErrorCounter); older logs lack them
    crc_flit_errors: Metric[Count] = NOT_COLLECTED
    crc_data_errors: Metric[Count] = NOT_COLLECTED
    replay_errors: Metric[Count] = NOT_COLLECTED
    recovery_errors: Metric[Count] = NOT_COLLECTED


@dataclass(slots=True)
class GpuProcessSample:
    pid: Index
    name: Metric[str]
    user: Metric[str]
    gpu_memory_bytes: Metric[Count]
    sm_percent: Metric[Percent]
    kind: str  # "compute" or "graphics"


@dataclass(slots=True)
class XidEvent:
    """Xid errors of one number that NVML reported for one GPU (or one of its MIG instances).

    NVML gives no time with an event: the times are when gpuscope read them (wall clock, seconds
    since the epoch), at most one sample interval late."""

    xid: Index
    count: Count  # events of this Xid merged into this entry
    first_time_s: Timestamp
    last_time_s: Timestamp
    meaning: str  # e.g. "GPU has fallen off the bus"; "" for an Xid gpuscope does not know
    gpu_instance_id: Index | None = None  # the MIG instance NVML named, if any
    compute_instance_id: Index | None = None


@dataclass(slots=True)
class GpuSample:
    """One GPU, or one MIG instance (``mig_parent_index`` set), at one instant."""

    index: Index
    name: str
    uuid: str
    pci_bus_id: str
    architecture: str
    state: str  # "ok" or "lost"
    vendor: str = "nvidia"  # "nvidia" (NVML) or "amd" (AMD SMI): which library the values came from
    mig_parent_index: Index | None = None
    mig_gpu_instance_id: Index | None = None
    mig_compute_instance_id: Index | None = None
    mig_mode: Metric[bool] = NOT_COLLECTED
    utilization_percent: Metric[Percent] = NOT_COLLECTED
    memory_busy_percent: Metric[Percent] = NOT_COLLECTED  # time memory was busy, NOT bandwidth
    memory_used_bytes: Metric[Count] = NOT_COLLECTED
    memory_total_bytes: Metric[Count] = NOT_COLLECTED
    dram_bandwidth_bytes_per_s: Metric[BytesPerS] = NOT_COLLECTED
    dram_bandwidth_percent_of_peak: Metric[Percent] = NOT_COLLECTED
    dram_peak_bytes_per_s: Metric[BytesPerS] = NOT_COLLECTED  # bus width x max mem clock x 2 / 8
    sm_activity_percent: Metric[Percent] = NOT_COLLECTED
    sm_occupancy_percent: Metric[Percent] = NOT_COLLECTED
    tensor_activity_percent: Metric[Percent] = NOT_COLLECTED  # any tensor pipe
    hmma_tensor_activity_percent: Metric[Percent] = NOT_COLLECTED
    imma_tensor_activity_percent: Metric[Percent] = NOT_COLLECTED
    dfma_tensor_activity_percent: Metric[Percent] = NOT_COLLECTED
    fp64_activity_percent: Metric[Percent] = NOT_COLLECTED
    fp32_activity_percent: Metric[Percent] = NOT_COLLECTED
    fp16_activity_percent: Metric[Percent] = NOT_COLLECTED
    pcie_tx_bytes_per_s: Metric[BytesPerS] = NOT_COLLECTED
    pcie_rx_bytes_per_s: Metric[BytesPerS] = NOT_COLLECTED
    pcie_link_generation: Metric[Index] = NOT_COLLECTED
    pcie_link_width: Metric[Index] = NOT_COLLECTED
    nvlink_tx_bytes_per_s: Metric[BytesPerS] = NOT_COLLECTED
    nvlink_rx_bytes_per_s: Metric[BytesPerS] = NOT_COLLECTED
    nvlink_active_links: Metric[Index] = NOT_COLLECTED
    nvlink_version: Metric[Index] = NOT_COLLECTED
    nvlink_link_peak_bytes_per_s: Metric[BytesPerS] = NOT_COLLECTED  # one direction, one link
    nvlink_links: list[NvLinkLinkSample] = field(default_factory=list)
    # link error counters since the driver loaded, summed over the active NVLink links (per link in nvlink_links)
    nvlink_crc_flit_errors: Metric[Count] = NOT_COLLECTED
    nvlink_crc_data_errors: Metric[Count] = NOT_COLLECTED
    nvlink_replay_errors: Metric[Count] = NOT_COLLECTED
    nvlink_recovery_errors: Metric[Count] = NOT_COLLECTED
    pcie_replay_errors: Metric[Count] = NOT_COLLECTED  # nvmlDeviceGetPcieReplayCounter
    # AMD's GPU links (Infinity Fabric / XGMI) and its PCIe rate, which AMD SMI gives as one total
    pcie_bytes_per_s: Metric[BytesPerS] = NOT_COLLECTED  # both directions together
    xgmi_tx_bytes_per_s: Metric[BytesPerS] = NOT_COLLECTED  # all links, written by this GPU
    xgmi_rx_bytes_per_s: Metric[BytesPerS] = NOT_COLLECTED  # all links, read by this GPU
    xgmi_active_links: Metric[Index] = NOT_COLLECTED
    xgmi_link_peak_bytes_per_s: Metric[BytesPerS] = NOT_COLLECTED  # one direction, one link
    sm_clock_mhz: Metric[Megahertz] = NOT_COLLECTED
    sm_clock_max_mhz: Metric[Megahertz] = NOT_COLLECTED
    memory_clock_mhz: Metric[Megahertz] = NOT_COLLECTED
    memory_clock_max_mhz: Metric[Megahertz] = NOT_COLLECTED
    power_w: Metric[Watts] = NOT_COLLECTED
    power_limit_w: Metric[Watts] = NOT_COLLECTED
    energy_j: Metric[Joules] = NOT_COLLECTED  # cumulative since driver load
    temperature_gpu_c: Metric[Celsius] = NOT_COLLECTED
    temperature_memory_c: Metric[Celsius] = NOT_COLLECTED
    temperature_hotspot_c: Metric[Celsius] = NOT_COLLECTED  # AMD's junction (hotspot) sensor
    fan_speed_percent: Metric[Percent] = NOT_COLLECTED
    throttle_reasons: Metric[list[str]] = NOT_COLLECTED  # empty list: not throttled
    ecc_corrected_errors: Metric[Count] = NOT_COLLECTED  # volatile, since driver load
    ecc_uncorrected_errors: Metric[Count] = NOT_COLLECTED
    xid_events: Metric[list[XidEvent]] = NOT_COLLECTED  # read since the previous sample; [] when none
    xid_events_dropped: Metric[Count] = NOT_COLLECTED  # read since the previous sample but not kept in xid_events
    xid_recent: Metric[list[XidEvent]] = NOT_COLLECTED  # the last 5 minutes, one entry per Xid (alerts hold on it)
    processes: Metric[list[GpuProcessSample]] = NOT_COLLECTED


@dataclass(slots=True)
class Sample:
    """One tick of the sampler: the host and every GPU (and MIG instance) at one instant."""

    timestamp: Timestamp  # wall clock, seconds since the epoch
    host: HostSample
    gpus: list[GpuSample]
    driver_version: Metric[str]
    nvml_version: Metric[str]
    cuda_driver_version: Metric[str]
    gpu_unavailable: Unavailable | None = None  # why there is no GPU side at all (no vendor gave a GPU)
    nvidia_unavailable: Unavailable | None = None  # why NVML gave no GPUs (None: it did, or not asked)
    amd_unavailable: Unavailable | None = None  # why AMD SMI gave no GPUs (None: it did, or not asked)
    amd_driver_version: Metric[str] = NOT_COLLECTED  # amdgpu
    amdsmi_library_version: Metric[str] = NOT_COLLECTED
    # what scripted the GPUs ("GPUSCOPE_FAKE_NVML=gpus=2xh200"): a log of fakes says so in every record
    simulated: str | None = None
    sample_cost_s: ElapsedS = 0.0  # wall time spent collecting this sample
    schema_version: int = SCHEMA_VERSION
    alerts: list[str] = field(default_factory=list)  # "level kind message" (gpuscope.telemetry.alerts), worst first


# --- serialisation -------------------------------------------------------------------------


#: JSON data as a record serialises to (a log line, a CSV row read back): the schema's one JSON tree.
JsonValue: TypeAlias = JsonTree


def record_to_dict(record: object) -> JsonValue:
    """A record as plain JSON-ready data: unavailable fields become ``null`` plus an
    entry in the object's ``unavailable`` map."""
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        out: JsonObject = {}
        missing: JsonObject = {}
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
    if isinstance(record, Unavailable):
        return record.to_json()
    if isinstance(record, list):
        return [record_to_dict(item) for item in record]
    assert record is None or isinstance(record, str | int | float | bool), f"not JSON: {record!r}"
    return record
