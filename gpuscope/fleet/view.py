"""What the fleet screen shows, without Textual: the node order (sort keys), the filters, and
the per-GPU numbers of the grid with the level (0-100) each is coloured by."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from gpuscope.fleet.snapshot import FleetGpu, FleetNode, FleetSnapshot
from gpuscope.telemetry.records import GpuSample
from gpuscope.telemetry.values import Reason, Unavailable

__all__ = ["SORTS", "GRID_METRICS", "GridMetric", "order_nodes", "node_has_problem", "gpu_sample_of"]


def _mean_of(node: FleetNode, name: str) -> float:
    values = [getattr(g, name) for g in node.gpus if not g.lost and getattr(g, name) is not None]
    return statistics.fmean(values) if values else -1.0


#: Sort key name -> (label, key over nodes). Problems sort first in every order but "name".
SORTS: dict[str, tuple[str, Callable[[FleetNode], tuple[float, str]]]] = {
    "name": ("name", lambda n: (0.0, n.label + n.instance)),
    "sm": ("SM activity, lowest first", lambda n: (_mean_of(n, "sm_activity_percent"), n.label + n.instance)),
    "power": ("power, lowest first", lambda n: (_mean_of(n, "power_w"), n.label + n.instance)),
    "temperature": ("temperature, hottest first", lambda n: (-_mean_of(n, "temperature_c"), n.label + n.instance)),
}


def node_has_problem(node: FleetNode, alerting: set[str]) -> bool:
    """Down, garbage, a lost GPU, a straggler, or an alert."""
    return (
        node.state != "up"
        or node.straggler
        or node.instance in alerting
        or any(gpu.lost or gpu.straggler for gpu in node.gpus)
    )


def order_nodes(
    snapshot: FleetSnapshot,
    sort: str = "name",
    problems_only: bool = False,
    text: str = "",
    names: dict[str, str] | None = None,
) -> list[FleetNode]:
    """The nodes to show, in order: ``text`` filters by name or address (case-insensitive),
    ``problems_only`` keeps nodes with a problem; nodes that are down come first except by name."""
    alerting = {alert.instance for alert in snapshot.alerts}
    wanted = text.strip().lower()
    nodes = [
        node
        for node in snapshot.nodes
        if (
            not wanted
            or wanted in node.instance.lower()
            or wanted in (names or {}).get(node.instance, node.label).lower()
        )
        and (not problems_only or node_has_problem(node, alerting))
    ]
    _, key = SORTS.get(sort, SORTS["name"])
    if sort == "name":
        return sorted(nodes, key=key)
    return sorted(nodes, key=lambda n: (n.state == "up", *key(n)))


@dataclass(frozen=True)
class GridMetric:
    """One number per GPU cell: short tag, how to format it, its 0-100 colour level."""

    name: str
    tag: str
    value: Callable[[FleetGpu], float | None]
    text: Callable[[float], str]
    level: Callable[[FleetGpu], float | None]


def _ratio(part: float | None, whole: float | None) -> float | None:
    return None if part is None or not whole else 100.0 * part / whole


def _short_rate(value: float) -> str:
    for scale, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if value >= scale:
            return f"{value / scale:.1f}{unit}" if value / scale < 100 else f"{value / scale:.0f}{unit}"
    return f"{value / 1e3:.0f}k"


GRID_METRICS: tuple[GridMetric, ...] = (
    GridMetric("sm_activity_percent", "SM%", lambda g: g.sm_activity_percent, lambda v: f"{v:.0f}%",
               lambda g: g.sm_activity_percent),
    GridMetric("utilization_percent", "util", lambda g: g.utilization_percent, lambda v: f"{v:.0f}%",
               lambda g: g.utilization_percent),
    GridMetric("dram_bandwidth_bytes_per_s", "DRAM", lambda g: g.dram_bandwidth_bytes_per_s, _short_rate,
               lambda g: g.dram_bandwidth_percent_of_peak),
    GridMetric("power_w", "W", lambda g: g.power_w, lambda v: f"{v:.0f}W",
               lambda g: _ratio(g.power_w, g.power_limit_w)),
    GridMetric("temperature_c", "°C", lambda g: g.temperature_c, lambda v: f"{v:.0f}°",
               lambda g: None if g.temperature_c is None else 100.0 * g.temperature_c / 90.0),
    GridMetric("memory_used_bytes", "mem", lambda g: g.memory_used_bytes, lambda v: f"{v / 2**30:.0f}G",
               lambda g: _ratio(g.memory_used_bytes, g.memory_total_bytes)),
)  # fmt: skip


_NOT_EXPORTED = Unavailable(Reason.NOT_SUPPORTED, "not exported by this node")
_LOST = Unavailable(Reason.GPU_LOST, "the exporter reports the GPU lost")


def gpu_sample_of(gpu: FleetGpu) -> GpuSample:
    """A telemetry record of the fleet GPU (what the exporter exposed), so the node's view can show
    the dashboard's GPU cards; what the fleet does not read is "not exported", a lost GPU's values
    are "GPU lost"."""
    missing = _LOST if gpu.lost else _NOT_EXPORTED

    def known(value: float | None) -> float | Unavailable:
        return missing if value is None else value

    memory_used = gpu.memory_used_bytes
    memory_total = gpu.memory_total_bytes
    return GpuSample(
        index=gpu.index, name=gpu.name, uuid=gpu.uuid, pci_bus_id="", architecture="",
        state="lost" if gpu.lost else "ok",
        utilization_percent=known(gpu.utilization_percent), sm_activity_percent=known(gpu.sm_activity_percent),
        memory_used_bytes=missing if memory_used is None else int(memory_used),
        memory_total_bytes=missing if memory_total is None else int(memory_total),
        dram_bandwidth_bytes_per_s=known(gpu.dram_bandwidth_bytes_per_s),
        dram_bandwidth_percent_of_peak=known(gpu.dram_bandwidth_percent_of_peak),
        nvlink_tx_bytes_per_s=known(gpu.nvlink_tx_bytes_per_s), nvlink_rx_bytes_per_s=known(gpu.nvlink_rx_bytes_per_s),
        power_w=known(gpu.power_w), power_limit_w=known(gpu.power_limit_w), temperature_gpu_c=known(gpu.temperature_c),
        pcie_rx_bytes_per_s=missing, throttle_reasons=missing,
    )  # fmt: skip
