"""The fleet snapshot: every node and GPU of a cluster at one moment, from either source
(a Prometheus server or direct scrapes of ``gpuscope serve`` exporters). Units live in the field
names; a value that is not known is ``None`` (absent from the exporter), never a zero.

``gpuscope fleet --once --json`` prints :class:`FleetSnapshot` as JSON (docs/fleet.md).
"""

from __future__ import annotations

import msgspec

__all__ = [
    "FLEET_SCHEMA",
    "NODE_STATES",
    "FleetGpu",
    "FleetNode",
    "FleetAlert",
    "FleetStraggler",
    "FleetSnapshot",
    "HistoryPoint",
]

#: The ``schema`` member of every fleet snapshot document.
FLEET_SCHEMA = "gpuscope.fleet/1"
#: ``up``: answered with gpuscope metrics; ``down``: unreachable, timed out or refused;
#: ``garbage``: answered, but not with gpuscope's metrics; ``stale``: its last sample is old.
NODE_STATES = ("up", "down", "garbage", "stale")


class FleetGpu(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One GPU of a node (MIG instances are not listed separately)."""

    index: int
    uuid: str = ""
    name: str = ""
    lost: bool = False  # the exporter says gpu_up 0 (fell off the bus, GpuIsLost)
    utilization_percent: float | None = None  # NVML "a kernel was running"
    sm_activity_percent: float | None = None  # GPM SM_UTIL
    dram_bandwidth_bytes_per_s: float | None = None
    dram_bandwidth_percent_of_peak: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temperature_c: float | None = None
    memory_used_bytes: float | None = None
    memory_total_bytes: float | None = None
    nvlink_tx_bytes_per_s: float | None = None
    nvlink_rx_bytes_per_s: float | None = None
    xid_events_total: float | None = None  # since the exporter started
    straggler: bool = False
    straggler_metrics: list[str] = msgspec.field(default_factory=list)  # "sm_activity_percent", "power_w"


class FleetNode(msgspec.Struct, kw_only=True):
    """One exporter: ``instance`` is the HOST:PORT it is scraped at (Prometheus's ``instance``)."""

    instance: str
    hostname: str = ""  # the exporter's ``host`` label ("" when it never answered)
    state: str = "up"  # one of NODE_STATES
    error: str | None = None  # one line: why it is down, garbage or stale
    sample_timestamp_s: float | None = None  # wall clock of the exporter's latest sample
    cpu_utilization_percent: float | None = None
    nic_rx_bytes_per_s: float | None = None  # all NICs but loopback
    nic_tx_bytes_per_s: float | None = None
    infiniband_rx_bytes_per_s: float | None = None  # InfiniBand and RoCE ports
    infiniband_tx_bytes_per_s: float | None = None
    nvlink_tx_bytes_per_s: float | None = None  # all GPUs of the node
    nvlink_rx_bytes_per_s: float | None = None
    gpus: list[FleetGpu] = msgspec.field(default_factory=list)
    straggler: bool = False  # its mean SM activity or power is far below the other nodes'
    straggler_metrics: list[str] = msgspec.field(default_factory=list)

    @property
    def label(self) -> str:
        """How the node is named on screen: its hostname, else its address."""
        return self.hostname or self.instance


class FleetAlert(msgspec.Struct, kw_only=True):
    """One fleet alert: an exporter's alert series, a node down, a GPU lost, a straggler."""

    instance: str
    level: str  # "careful", "warning" or "critical"
    kind: str  # the exporter's alert kind, or "down", "lost", "straggler", "garbage"
    message: str
    gpu: int | None = None


class FleetStraggler(msgspec.Struct, kw_only=True):
    """A GPU (``gpu`` set) or node (``gpu`` None) more than the margin below its peers' median."""

    instance: str
    metric: str  # "sm_activity_percent" or "power_w"
    value: float
    median: float
    fraction_of_median: float
    below_median_percent: float
    gpu: int | None = None
    peers: int = 0  # values the median was taken over


class HistoryPoint(msgspec.Struct, array_like=True):
    """One point of a node's history: wall-clock seconds and the value."""

    time_s: float
    value: float


class FleetSnapshot(msgspec.Struct, kw_only=True):
    """The whole fleet at ``timestamp_s``; ``queries`` counts the HTTP requests this refresh made."""

    schema: str = FLEET_SCHEMA
    source: str  # "prometheus" or "hosts"
    where: str  # the Prometheus URL, or the number of hosts scraped
    timestamp_s: float
    nodes: list[FleetNode] = msgspec.field(default_factory=list)
    alerts: list[FleetAlert] = msgspec.field(default_factory=list)
    stragglers: list[FleetStraggler] = msgspec.field(default_factory=list)
    straggler_margin: float = 0.10
    busy_sm_activity_percent: float = 20.0
    queries: int = 0

    @property
    def gpu_count(self) -> int:
        """GPUs over every node (lost ones included)."""
        return sum(len(node.gpus) for node in self.nodes)
