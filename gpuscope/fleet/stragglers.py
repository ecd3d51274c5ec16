"""Live stragglers: the rule ``gpuscope probe --distributed`` uses (gpuscope.probing.cluster),
applied to the fleet's live SM activity and power.

A GPU is a straggler when its SM activity (or its power) is more than ``margin`` (default 10%)
below the median of the same metric over its peers -- every answering, not lost GPU of the same
model in the fleet, itself included, at least 2 -- while those peers are busy (their median SM
activity is at least ``busy_sm_activity_percent``, default 20%: an idle fleet has no stragglers).
A node is a straggler when its mean over its GPUs is more than the margin below the median of the
node means (nodes with GPUs of the same model), under the same busy condition.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from gpuscope.fleet.snapshot import FleetGpu, FleetNode, FleetStraggler

__all__ = ["DEFAULT_MARGIN", "BUSY_SM_ACTIVITY_PERCENT", "METRICS", "flag_stragglers"]

#: The same default as ``probe --distributed --straggler-margin`` (gpuscope.probing.cluster).
DEFAULT_MARGIN = 0.10
#: Peers whose median SM activity is below this are idle: nobody is a straggler then.
BUSY_SM_ACTIVITY_PERCENT = 20.0
#: The metrics compared, as FleetGpu field names.
METRICS: tuple[str, ...] = ("sm_activity_percent", "power_w")


def _value(gpu: FleetGpu, metric: str) -> float | None:
    value = getattr(gpu, metric)
    return None if gpu.lost or value is None else float(value)


def _flag(
    members: Sequence[tuple[str, int | None, float]],
    metric: str,
    margin: float,
    mark: Callable[[str, int | None], None],
) -> list[FleetStraggler]:
    """Flag the members (instance, gpu, value) more than ``margin`` below their median."""
    if len(members) < 2:
        return []
    median = statistics.median(value for _, _, value in members)
    if median <= 0:
        return []
    found = []
    for instance, gpu, value in members:
        fraction = value / median
        if fraction < 1.0 - margin:
            mark(instance, gpu)
            found.append(
                FleetStraggler(
                    instance=instance,
                    gpu=gpu,
                    metric=metric,
                    value=value,
                    median=median,
                    fraction_of_median=fraction,
                    below_median_percent=(1.0 - fraction) * 100.0,
                    peers=len(members),
                )  # fmt: skip
            )
    return found


def flag_stragglers(
    nodes: list[FleetNode], margin: float = DEFAULT_MARGIN, busy_sm_activity_percent: float = BUSY_SM_ACTIVITY_PERCENT
) -> list[FleetStraggler]:
    """Mark straggler GPUs and nodes in place (``straggler``, ``straggler_metrics``) and return
    them, GPUs first, each list ordered by instance and GPU."""
    live = [node for node in nodes if node.state == "up"]
    by_model: dict[str, list[tuple[FleetNode, FleetGpu]]] = {}
    for node in live:
        for gpu in node.gpus:
            by_model.setdefault(gpu.name, []).append((node, gpu))
    gpu_index = {(node.instance, gpu.index): gpu for node in live for gpu in node.gpus}
    node_index = {node.instance: node for node in live}

    def mark_gpu(metric: str) -> Callable[[str, int | None], None]:
        def mark(instance: str, index: int | None) -> None:
            gpu = gpu_index[(instance, index if index is not None else -1)]
            gpu.straggler = True
            gpu.straggler_metrics.append(metric)

        return mark

    def mark_node(metric: str) -> Callable[[str, int | None], None]:
        def mark(instance: str, _index: int | None) -> None:
            node = node_index[instance]
            node.straggler = True
            node.straggler_metrics.append(metric)

        return mark

    found: list[FleetStraggler] = []
    for peers in by_model.values():
        activity = [v for v in (_value(gpu, "sm_activity_percent") for _, gpu in peers) if v is not None]
        if len(activity) < 2 or statistics.median(activity) < busy_sm_activity_percent:
            continue
        for metric in METRICS:
            members = [(node.instance, gpu.index, v) for node, gpu in peers if (v := _value(gpu, metric)) is not None]
            found.extend(_flag(members, metric, margin, mark_gpu(metric)))
    node_found: list[FleetStraggler] = []
    models = {node.instance: tuple(sorted({gpu.name for gpu in node.gpus})) for node in live if node.gpus}
    for model in set(models.values()):
        group = [node for node in live if models.get(node.instance) == model]
        means: dict[str, dict[str, float]] = {}
        for node in group:
            for metric in ("sm_activity_percent", *METRICS[1:]):
                values = [v for v in (_value(gpu, metric) for gpu in node.gpus) if v is not None]
                if values:
                    means.setdefault(metric, {})[node.instance] = statistics.fmean(values)
        activity = list(means.get("sm_activity_percent", {}).values())
        if len(activity) < 2 or statistics.median(activity) < busy_sm_activity_percent:
            continue
        for metric in METRICS:
            whole = [(instance, None, value) for instance, value in means.get(metric, {}).items()]
            node_found.extend(_flag(whole, metric, margin, mark_node(metric)))
    found.sort(key=lambda s: (s.instance, -1 if s.gpu is None else s.gpu, s.metric))
    node_found.sort(key=lambda s: (s.instance, s.metric))
    return found + node_found
