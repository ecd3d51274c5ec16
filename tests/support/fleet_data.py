"""A made-up fleet for the fleet screen's tests and snapshots: nodes of 8 H200s, one with a
straggler GPU, one with a lost GPU, one with an Xid, one down; fixed clock, no network."""

from __future__ import annotations

from gpuscope.fleet.assemble import assemble
from gpuscope.fleet.series import Series, alerts_of, build_node
from gpuscope.fleet.snapshot import FleetNode, FleetSnapshot, HistoryPoint

TIMESTAMP_S = 1_796_000_000.0  # fixed: the screens show the time of day (UTC in tests)


def node_series(
    host: str,
    gpus: int = 8,
    slow: int | None = None,
    lost: int | None = None,
    xid: int | None = None,
    load: float = 1.0,
    timestamp_s: float = TIMESTAMP_S,
) -> list[Series]:
    """The series one exporter would answer with."""
    out = [
        Series("gpuscope_sample_timestamp_seconds", {"host": host}, timestamp_s),
        Series("gpuscope_cpu_utilization_ratio", {"host": host}, 0.25),
        Series("gpuscope_nic_receive_bytes_per_second", {"host": host, "nic": "eth0"}, 1.25e9 * load),
        Series("gpuscope_nic_transmit_bytes_per_second", {"host": host, "nic": "eth0"}, 0.5e9 * load),
        Series("gpuscope_nic_receive_bytes_per_second", {"host": host, "nic": "lo"}, 9e9),
        Series("gpuscope_infiniband_receive_bytes_per_second", {"host": host, "device": "mlx5_0", "port": "1"}, 22e9),
        Series("gpuscope_infiniband_transmit_bytes_per_second", {"host": host, "device": "mlx5_0", "port": "1"}, 21e9),
    ]
    for index in range(gpus):
        labels = {
            "host": host,
            "gpu": str(index),
            "uuid": f"GPU-{host}-{index}",
            "gpu_instance": "",
            "compute_instance": "",
        }
        info = {**labels, "name": "NVIDIA H200", "state": "lost" if index == lost else "ok"}
        out.append(Series("gpuscope_gpu_info", info, 1.0))
        out.append(Series("gpuscope_gpu_up", labels, 0.0 if index == lost else 1.0))
        if index == lost:
            continue
        factor = 0.25 if index == slow else 1.0
        wobble = 1.0 + 0.01 * ((index * 7) % 5)
        values = {
            "gpuscope_gpu_utilization_ratio": 0.8,
            "gpuscope_gpu_sm_activity_ratio": 0.70 * factor * wobble,
            "gpuscope_gpu_dram_bandwidth_bytes_per_second": 1.5e12 * factor * load,
            "gpuscope_gpu_dram_bandwidth_ratio": 0.31 * factor * load,
            "gpuscope_gpu_power_watts": 450.0 * (0.5 if index == slow else 1.0) * wobble,
            "gpuscope_gpu_power_limit_watts": 700.0,
            "gpuscope_gpu_temperature_celsius": 55.0 + 3 * (index % 4) + 20 * (load - 1.0),
            "gpuscope_gpu_memory_used_bytes": 100 * 2**30 * load,
            "gpuscope_gpu_memory_total_bytes": 141 * 2**30,
            "gpuscope_gpu_nvlink_transmit_bytes_per_second": 90e9,
            "gpuscope_gpu_nvlink_receive_bytes_per_second": 90e9,
        }
        out.extend(Series(name, labels, value) for name, value in values.items())
    if xid is not None:
        labels = {
            "host": host,
            "gpu": str(xid),
            "uuid": f"GPU-{host}-{xid}",
            "gpu_instance": "",
            "compute_instance": "",
            "xid": "79",
        }
        out.append(Series("gpuscope_gpu_xid_events_total", labels, 1.0))
    return out


def fleet_snapshot(nodes: int = 8, gpus: int = 8) -> FleetSnapshot:
    """``nodes`` nodes (node03 has a straggler, node05 a lost GPU, node06 an Xid, the last is down)."""
    built: list[FleetNode] = []
    alerts = []
    for number in range(nodes - 1):
        host = f"node{number + 1:02d}"
        instance = f"10.0.0.{number + 1}:9842"
        series = node_series(
            host, gpus, slow=3 if number == 2 else None, lost=5 if number == 4 else None,
            xid=2 if number == 5 else None, load=1.0 + 0.05 * (number % 3),
        )  # fmt: skip
        built.append(build_node(instance, series))
        alerts.extend(alerts_of(instance, series))
    refused = f"http://10.0.0.{nodes}:9842: connection refused (nothing listens there)"
    built.append(FleetNode(instance=f"10.0.0.{nodes}:9842", state="down", error=refused))
    return assemble("hosts", f"{nodes} hosts", TIMESTAMP_S, built, alerts, nodes)


class StaticSource:
    """A fleet source that always answers the same snapshot (and a made-up history)."""

    kind = "hosts"
    margin = 0.10

    def __init__(self, snapshot: FleetSnapshot) -> None:
        self.snapshot = snapshot
        self.where = snapshot.where
        self.refreshes = 0

    def refresh(self) -> FleetSnapshot:
        self.refreshes += 1
        return self.snapshot

    def refresh_history(self) -> int:
        return 0

    def node_history(self, instance: str, name: str) -> list[HistoryPoint]:
        base = {"sm_activity_percent": 60.0, "utilization_percent": 80.0, "power_w": 3400.0}.get(name, 1e9)
        return [HistoryPoint(TIMESTAMP_S - 2 * (60 - i), base * (1 + 0.1 * ((i * 13) % 7) / 7)) for i in range(60)]

    def close(self) -> None:
        pass
