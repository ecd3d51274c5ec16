"""From Prometheus series (the exporter's names and labels, gpuscope.exporter.metrics) to
fleet nodes. Both sources end here: the Prometheus query API answers with these series, and a
direct scrape parses the same exposition text."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpuscope.fleet.snapshot import FleetAlert, FleetGpu, FleetNode

__all__ = ["Series", "WANTED", "NODE_METRICS", "build_node", "alerts_of"]

_P = "gpuscope_"


@dataclass(frozen=True, slots=True)
class Series:
    """One series: its exposed name, its labels and its latest value."""

    name: str
    labels: Mapping[str, str]
    value: float


#: GPU series -> (FleetGpu field, factor to the field's unit).
_GPU_FIELDS: dict[str, tuple[str, float]] = {
    _P + "gpu_utilization_ratio": ("utilization_percent", 100.0),
    _P + "gpu_sm_activity_ratio": ("sm_activity_percent", 100.0),
    _P + "gpu_dram_bandwidth_bytes_per_second": ("dram_bandwidth_bytes_per_s", 1.0),
    _P + "gpu_dram_bandwidth_ratio": ("dram_bandwidth_percent_of_peak", 100.0),
    _P + "gpu_power_watts": ("power_w", 1.0),
    _P + "gpu_power_limit_watts": ("power_limit_w", 1.0),
    _P + "gpu_temperature_celsius": ("temperature_c", 1.0),
    _P + "gpu_memory_used_bytes": ("memory_used_bytes", 1.0),
    _P + "gpu_memory_total_bytes": ("memory_total_bytes", 1.0),
    _P + "gpu_nvlink_transmit_bytes_per_second": ("nvlink_tx_bytes_per_s", 1.0),
    _P + "gpu_nvlink_receive_bytes_per_second": ("nvlink_rx_bytes_per_s", 1.0),
}
_GPU_INFO = _P + "gpu_info"
_GPU_UP = _P + "gpu_up"
_XID = _P + "gpu_xid_events_total"
_ALERT = _P + "alert"
_TIMESTAMP = _P + "sample_timestamp_seconds"
_CPU = _P + "cpu_utilization_ratio"
#: Host series summed into the node's east-west traffic: name -> FleetNode field.
_SUMMED: dict[str, str] = {
    _P + "nic_receive_bytes_per_second": "nic_rx_bytes_per_s",
    _P + "nic_transmit_bytes_per_second": "nic_tx_bytes_per_s",
    _P + "infiniband_receive_bytes_per_second": "infiniband_rx_bytes_per_s",
    _P + "infiniband_transmit_bytes_per_second": "infiniband_tx_bytes_per_s",
}
#: Every series name a refresh reads: one Prometheus query selects exactly these.
WANTED: frozenset[str] = frozenset({*_GPU_FIELDS, _GPU_INFO, _GPU_UP, _XID, _ALERT, _TIMESTAMP, _CPU, *_SUMMED})
#: The node-wide series a refresh reads (the rest are per GPU).
NODE_METRICS: tuple[str, ...] = (_TIMESTAMP, _CPU, *_SUMMED)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _whole_gpu(labels: Mapping[str, str]) -> int | None:
    """The GPU index of a whole-GPU series; None for a MIG instance or a host series."""
    if labels.get("gpu_instance") or labels.get("compute_instance"):
        return None
    text = labels.get("gpu", "")
    return int(text) if text.isdigit() else None


def build_node(instance: str, series: Iterable[Series]) -> FleetNode:
    """The node scraped at ``instance`` from its series (an empty list: an ``up`` node with no
    GPU series, which the caller may call garbage)."""
    node = FleetNode(instance=instance)
    gpus: dict[int, FleetGpu] = {}
    sums: dict[str, float] = {}
    for one in series:
        name, labels = one.name, one.labels
        node.hostname = node.hostname or labels.get("host", "")
        if name in _SUMMED:
            if name.startswith(_P + "nic_") and labels.get("nic") == "lo":
                continue  # loopback is not east-west traffic
            value = _finite(one.value)
            if value is not None:
                sums[_SUMMED[name]] = sums.get(_SUMMED[name], 0.0) + value
            continue
        if name == _TIMESTAMP:
            node.sample_timestamp_s = _finite(one.value)
            continue
        if name == _CPU:
            node.cpu_utilization_percent = None if _finite(one.value) is None else one.value * 100.0
            continue
        if name == _ALERT:
            continue
        index = _whole_gpu(labels)
        if index is None:
            continue
        gpu = gpus.get(index)
        if gpu is None:
            gpu = gpus[index] = FleetGpu(index=index, uuid=labels.get("uuid", ""))
        if name == _GPU_INFO:
            gpu.name = labels.get("name", "")
            gpu.lost = gpu.lost or labels.get("state") == "lost"
        elif name == _GPU_UP:
            gpu.lost = gpu.lost or one.value == 0
        elif name == _XID:
            gpu.xid_events_total = (gpu.xid_events_total or 0.0) + one.value
        elif name in _GPU_FIELDS:
            field, factor = _GPU_FIELDS[name]
            value = _finite(one.value)
            setattr(gpu, field, None if value is None else value * factor)
    for field, total in sums.items():
        setattr(node, field, total)
    node.gpus = [gpus[index] for index in sorted(gpus)]
    tx = [g.nvlink_tx_bytes_per_s for g in node.gpus if g.nvlink_tx_bytes_per_s is not None]
    rx = [g.nvlink_rx_bytes_per_s for g in node.gpus if g.nvlink_rx_bytes_per_s is not None]
    node.nvlink_tx_bytes_per_s = sum(tx) if tx else None
    node.nvlink_rx_bytes_per_s = sum(rx) if rx else None
    return node


_LEVELS = {1.0: "careful", 2.0: "warning", 3.0: "critical"}


def alerts_of(instance: str, series: Iterable[Series]) -> list[FleetAlert]:
    """The exporter's own alerts (``gpuscope_alert``) of one node, and one per Xid seen."""
    alerts: list[FleetAlert] = []
    for one in series:
        if one.name == _ALERT:
            labels = one.labels
            gpu = labels.get("gpu", "")
            level = labels.get("level") or _LEVELS.get(one.value, "warning")
            kind = labels.get("kind", "alert")
            where = f"GPU {gpu} " if gpu else ""
            alerts.append(
                FleetAlert(
                    instance=instance,
                    level=level,
                    kind=kind,
                    gpu=int(gpu) if gpu.isdigit() else None,
                    message=f"{where}{kind}",
                )  # fmt: skip
            )
        elif one.name == _XID and one.value > 0 and _whole_gpu(one.labels) is not None:
            xid = one.labels.get("xid", "?")
            alerts.append(
                FleetAlert(
                    instance=instance,
                    level="critical",
                    kind="xid",
                    gpu=_whole_gpu(one.labels),
                    message=f"GPU {one.labels.get('gpu')} Xid {xid} x{one.value:.0f} since the exporter started",
                )  # fmt: skip
            )
    return alerts
