"""Words for the fleet: node names, one line per node (``gpuscope fleet --once``), value
formatting shared by the report and the screen. Every name from outside is escaped."""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from gpuscope.fleet.snapshot import FleetNode, FleetSnapshot
from gpuscope.textsafe import safe_text
from gpuscope.tui.format import fmt_rate, si

__all__ = ["node_names", "node_line", "fmt_optional_rate", "fleet_summary", "METRIC_WORDS"]

METRIC_WORDS = {"sm_activity_percent": "SM activity", "power_w": "power"}


def node_names(nodes: Iterable[FleetNode]) -> dict[str, str]:
    """instance -> the name shown: the hostname where it is unique in the fleet, else the
    address (several exporters on one host), escaped."""
    nodes = list(nodes)
    counts: dict[str, int] = {}
    for node in nodes:
        counts[node.hostname] = counts.get(node.hostname, 0) + 1
    return {
        node.instance: safe_text(node.hostname if node.hostname and counts[node.hostname] == 1 else node.instance)
        for node in nodes
    }


def fmt_optional_rate(value: float | None) -> str:
    """``1.50 TB/s``, or ``n/a``."""
    return "n/a" if value is None else fmt_rate(value)


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known else None


def _sum(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def node_line(node: FleetNode, name: str) -> str:
    """``node01 up | 8 GPUs | util 80% SM 70% | 3.60 kW | 62-66°C | mem 320/1128 GiB | DRAM 12.0 TB/s |
    NIC rx 1.2 GB/s tx 0.3 GB/s | IB rx ... | NVLink tx 40 GB/s | straggler GPU 3 (SM activity)``."""
    where = "" if name == safe_text(node.instance) else f" ({safe_text(node.instance)})"
    if node.state != "up":
        return f"{name}{where} {node.state.upper()}: {safe_text(node.error or node.state)}"
    live = [gpu for gpu in node.gpus if not gpu.lost]
    parts = [f"{name}{where} up", f"{len(node.gpus)} GPU{'s' if len(node.gpus) != 1 else ''}"]
    util = _mean([g.utilization_percent for g in live])
    sm = _mean([g.sm_activity_percent for g in live])
    parts.append("util " + ("n/a" if util is None else f"{util:.0f}%") + ("" if sm is None else f" SM {sm:.0f}%"))
    power = _sum([g.power_w for g in live])
    parts.append("power n/a" if power is None else si(power, "W"))
    temps = [g.temperature_c for g in live if g.temperature_c is not None]
    if temps:
        parts.append(f"{min(temps):.0f}-{max(temps):.0f}°C")
    used, total = _sum([g.memory_used_bytes for g in live]), _sum([g.memory_total_bytes for g in live])
    if used is not None and total:
        parts.append(f"mem {used / 2**30:.0f}/{total / 2**30:.0f} GiB")
    dram = _sum([g.dram_bandwidth_bytes_per_s for g in live])
    if dram is not None:
        parts.append(f"DRAM {fmt_rate(dram)}")
    if node.nic_rx_bytes_per_s is not None or node.nic_tx_bytes_per_s is not None:
        parts.append(
            f"NIC rx {fmt_optional_rate(node.nic_rx_bytes_per_s)} tx {fmt_optional_rate(node.nic_tx_bytes_per_s)}"
        )
    if node.infiniband_rx_bytes_per_s is not None or node.infiniband_tx_bytes_per_s is not None:
        parts.append(
            f"IB rx {fmt_optional_rate(node.infiniband_rx_bytes_per_s)} "
            f"tx {fmt_optional_rate(node.infiniband_tx_bytes_per_s)}"
        )
    if node.nvlink_tx_bytes_per_s is not None:
        parts.append(f"NVLink tx {fmt_rate(node.nvlink_tx_bytes_per_s)}")
    lost = [str(g.index) for g in node.gpus if g.lost]
    if lost:
        parts.append(f"LOST GPU {','.join(lost)}")
    xids = [str(g.index) for g in node.gpus if g.xid_events_total]
    if xids:
        parts.append(f"Xid on GPU {','.join(xids)}")
    slow = [
        f"GPU {g.index} ({', '.join(METRIC_WORDS.get(m, m) for m in g.straggler_metrics)})"
        for g in node.gpus
        if g.straggler
    ]
    if node.straggler:
        slow.insert(0, f"node ({', '.join(METRIC_WORDS.get(m, m) for m in node.straggler_metrics)})")
    if slow:
        parts.append("straggler " + "; ".join(slow))
    return " | ".join(parts)


def fleet_summary(snapshot: FleetSnapshot) -> str:
    """``4 nodes (3 up, 1 down), 32 GPUs (1 lost), 2 stragglers, 3 alerts``."""
    states: dict[str, int] = {}
    for node in snapshot.nodes:
        states[node.state] = states.get(node.state, 0) + 1
    lost = sum(1 for node in snapshot.nodes for gpu in node.gpus if gpu.lost)
    state_text = ", ".join(f"{count} {state}" for state, count in sorted(states.items(), key=lambda kv: kv[0] != "up"))
    gpus = f"{snapshot.gpu_count} GPUs" + (f" ({lost} lost)" if lost else "")
    slow = len({(s.instance, s.gpu) for s in snapshot.stragglers})
    return (
        f"{len(snapshot.nodes)} nodes ({state_text or 'none'}), {gpus}, "
        f"{slow} straggler{'s' if slow != 1 else ''}, "
        f"{len(snapshot.alerts)} alert{'s' if len(snapshot.alerts) != 1 else ''}"
    )
