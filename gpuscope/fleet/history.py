"""Per-node history: a few node-wide series kept in fixed-size rings (direct scrapes), or
filled from Prometheus range queries."""

from __future__ import annotations

import statistics
from collections import deque

from gpuscope.fleet.snapshot import FleetNode, FleetSnapshot, HistoryPoint

__all__ = ["HISTORY_METRICS", "NodeHistory", "node_values"]

#: Node-wide history series: name -> what it is (the mean over GPUs for percents, the sum for rates).
HISTORY_METRICS: dict[str, str] = {
    "sm_activity_percent": "mean SM activity of its GPUs (%)",
    "utilization_percent": "mean GPU utilization (%)",
    "power_w": "power of all its GPUs (W)",
    "nic_rx_bytes_per_s": "NIC receive, all NICs but loopback (B/s)",
}


def node_values(node: FleetNode) -> dict[str, float]:
    """The :data:`HISTORY_METRICS` of ``node`` now (those that are known)."""
    out: dict[str, float] = {}
    live = [gpu for gpu in node.gpus if not gpu.lost]
    for name in ("sm_activity_percent", "utilization_percent"):
        values = [v for v in (getattr(gpu, name) for gpu in live) if v is not None]
        if values:
            out[name] = statistics.fmean(values)
    power = [gpu.power_w for gpu in live if gpu.power_w is not None]
    if power:
        out["power_w"] = sum(power)
    if node.nic_rx_bytes_per_s is not None:
        out["nic_rx_bytes_per_s"] = node.nic_rx_bytes_per_s
    return out


class NodeHistory:
    """History of every node: ``points`` per node and metric, at most ``capacity`` each."""

    def __init__(self, capacity: int = 600) -> None:
        self.capacity = capacity
        self._rings: dict[tuple[str, str], deque[HistoryPoint]] = {}

    def add(self, snapshot: FleetSnapshot) -> None:
        """Append the values of every answering node of ``snapshot``."""
        for node in snapshot.nodes:
            if node.state != "up":
                continue
            time_s = node.sample_timestamp_s or snapshot.timestamp_s
            for name, value in node_values(node).items():
                ring = self._rings.get((node.instance, name))
                if ring is None:
                    ring = self._rings[(node.instance, name)] = deque(maxlen=self.capacity)
                if ring and ring[-1].time_s >= time_s:
                    continue  # the exporter has not sampled since
                ring.append(HistoryPoint(time_s, value))

    def replace(self, instance: str, name: str, points: list[HistoryPoint]) -> None:
        """Set a whole series (from a Prometheus range query)."""
        ring: deque[HistoryPoint] = deque(points[-self.capacity :], maxlen=self.capacity)
        self._rings[(instance, name)] = ring

    def points(self, instance: str, name: str) -> list[HistoryPoint]:
        """The series of one node, oldest first ([] when none)."""
        return list(self._rings.get((instance, name), ()))
