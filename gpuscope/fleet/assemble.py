"""The last step of every refresh, whatever the source: stragglers flagged, fleet alerts listed
(worst first), nodes in name order."""

from __future__ import annotations

from gpuscope.fleet.snapshot import FleetAlert, FleetNode, FleetSnapshot
from gpuscope.fleet.stragglers import BUSY_SM_ACTIVITY_PERCENT, DEFAULT_MARGIN, flag_stragglers

__all__ = ["assemble", "LEVEL_ORDER", "STALE_AFTER_S"]

#: An answering node whose latest sample is older than this (seconds) is ``stale``.
STALE_AFTER_S = 60.0

#: Alert levels, worst last (the order of gpuscope.telemetry.alerts).
LEVEL_ORDER = ("careful", "warning", "critical")

_METRIC_WORDS = {"sm_activity_percent": "SM activity", "power_w": "power"}


def assemble(
    source: str,
    where: str,
    timestamp_s: float,
    nodes: list[FleetNode],
    exporter_alerts: list[FleetAlert],
    queries: int,
    margin: float = DEFAULT_MARGIN,
    busy_sm_activity_percent: float = BUSY_SM_ACTIVITY_PERCENT,
) -> FleetSnapshot:
    """One :class:`FleetSnapshot` of ``nodes`` (marked in place)."""
    nodes = sorted(nodes, key=lambda node: (node.label, node.instance))
    for node in nodes:
        sampled = node.sample_timestamp_s
        if node.state == "up" and sampled is not None and timestamp_s - sampled > STALE_AFTER_S:
            node.state = "stale"
            node.error = f"its latest sample is {timestamp_s - sampled:.0f} s old (the exporter's collector is stuck?)"
    stragglers = flag_stragglers(nodes, margin, busy_sm_activity_percent)
    alerts: list[FleetAlert] = []
    for node in nodes:
        if node.state == "down":
            alerts.append(
                FleetAlert(instance=node.instance, level="critical", kind="down", message=node.error or "down")
            )
        elif node.state in ("garbage", "stale"):
            alerts.append(
                FleetAlert(instance=node.instance, level="warning", kind=node.state, message=node.error or node.state)
            )
        for gpu in node.gpus:
            if gpu.lost:
                alerts.append(
                    FleetAlert(
                        instance=node.instance,
                        level="critical",
                        kind="lost",
                        gpu=gpu.index,
                        message=f"GPU {gpu.index} lost (fell off the bus or GpuIsLost)",
                    )  # fmt: skip
                )
    seen = {(a.instance, a.kind, a.gpu) for a in alerts}
    for alert in exporter_alerts:
        key = (alert.instance, alert.kind, alert.gpu)
        if key in seen or (alert.kind == "gpu_lost" and (alert.instance, "lost", alert.gpu) in seen):
            continue
        seen.add(key)
        alerts.append(alert)
    for straggler in stragglers:
        what = "node" if straggler.gpu is None else f"GPU {straggler.gpu}"
        alerts.append(
            FleetAlert(
                instance=straggler.instance,
                level="warning",
                kind="straggler",
                gpu=straggler.gpu,
                message=f"{what} {_METRIC_WORDS.get(straggler.metric, straggler.metric)} "
                f"{straggler.below_median_percent:.0f}% below the median of {straggler.peers}",
            )  # fmt: skip
        )
    labels = {node.instance: node.label for node in nodes}
    alerts.sort(
        key=lambda a: (
            -LEVEL_ORDER.index(a.level) if a.level in LEVEL_ORDER else 0,
            labels.get(a.instance, a.instance),
            -1 if a.gpu is None else a.gpu,
            a.kind,
        )  # fmt: skip
    )
    return FleetSnapshot(
        source=source, where=where, timestamp_s=timestamp_s, nodes=nodes, alerts=alerts, stragglers=stragglers,
        straggler_margin=margin, busy_sm_activity_percent=busy_sm_activity_percent, queries=queries,
    )  # fmt: skip
