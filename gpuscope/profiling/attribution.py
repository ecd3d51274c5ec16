"""Attribution: the profiler's events of one step -> device time per aten op -> groups.

Which events count. The counting step (:mod:`gpuscope.profiling.record`) names the aten ops that
run with their own kernels (the ops a dispatch mode sees, below autograd and composite ops such
as ``aten::linear``). In the profiler's event tree, the first event on each path from a root
whose name is one of those ops *claims* its whole subtree: its inclusive time is the op's time.

- CPU: inclusive CPU time of the claiming event (the sum of the self times in its subtree).
- CUDA: the GPU time of every kernel launched inside the claiming event's subtree; the profiler
  joins each kernel to the CPU op that launched it through the correlation id of the launch.

Time not inside any claiming event (composite wrappers such as ``aten::linear``, the autograd
engine, Python between ops) is reported as "outside ops", not spread over the groups.

Joining FLOPs. The n-th claiming event with a given (name, tensor shapes) in a step is the n-th
counted op with that key; from it the event takes FLOPs, bytes, dtype and module. An event
with no counted twin keeps its time, with FLOPs unknown (``counted=False``).

Grouping: op + shapes + dtype (one row per distinct call signature), and module paths rolled up
(a module's totals include its submodules'). Pure Python over plain records: testable without
torch.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gpuscope.profiling.record import CountedStep, OpRecord, Shape, is_data_movement, match_key

__all__ = [
    "ModuleTotal",
    "OpGroup",
    "StepEvents",
    "TimedOp",
    "claim_events",
    "group_ops",
    "join_counts",
    "module_rollup",
]


class ProfilerEvent(Protocol):
    """What :func:`claim_events` reads of a profiler event (``torch.autograd.profiler_util.FunctionEvent``;
    ``input_shapes``, ``cpu_parent``, ``cpu_children``, ``self_device_time_total``, ``device_type`` and
    ``time_range`` are read where present). Times in microseconds."""

    @property
    def name(self) -> str: ...

    @property
    def cpu_time_total(self) -> float: ...

    @property
    def self_cpu_time_total(self) -> float: ...

    @property
    def device_time_total(self) -> float: ...


@dataclass
class TimedOp:
    """One claiming event of one step: its op, shapes and device time (seconds)."""

    name: str
    shapes: list[object]  # the profiler's input shapes, per schema argument
    time_s: float
    record: OpRecord | None = None  # the counted twin, when found

    @property
    def counted(self) -> bool:
        return self.record is not None


@dataclass
class StepEvents:
    """What one profiled step's events add up to."""

    ops: list[TimedOp]
    traced_s: float  # all time the profiler saw (CPU: self time of every event; CUDA: every kernel)

    @property
    def ops_s(self) -> float:
        return sum(op.time_s for op in self.ops)


def claim_events(events: Sequence[ProfilerEvent], dispatch_names: frozenset[str], device_type: str) -> StepEvents:
    """The claiming events of one step's profiler events (``torch.autograd.profiler_util.FunctionEvent``
    or anything with ``name``, ``input_shapes``, ``cpu_parent``, ``cpu_children``,
    ``cpu_time_total``/``self_cpu_time_total`` and ``device_time_total``/``self_device_time_total``, us)."""
    cuda = device_type == "cuda"
    roots = [event for event in events if getattr(event, "cpu_parent", None) is None and _is_host_event(event)]
    ops: list[TimedOp] = []

    def inclusive_s(event: ProfilerEvent) -> float:
        return (float(event.device_time_total) if cuda else float(event.cpu_time_total)) * 1e-6

    claiming = frozenset(name.rstrip("_") for name in dispatch_names)  # in-place forms join (match_key)
    stack = sorted(roots, key=_start, reverse=True)
    while stack:
        event = stack.pop()
        if event.name.rstrip("_") in claiming:
            ops.append(TimedOp(event.name, list(getattr(event, "input_shapes", None) or []), inclusive_s(event)))
            continue
        children = [child for child in getattr(event, "cpu_children", []) if _is_host_event(child)]
        stack.extend(sorted(children, key=_start, reverse=True))
    if cuda:
        traced = (
            sum(float(getattr(event, "self_device_time_total", 0.0)) for event in events if _is_host_event(event))
            * 1e-6
        )
    else:
        traced = sum(float(event.self_cpu_time_total) for event in events if _is_host_event(event)) * 1e-6
    return StepEvents(ops=ops, traced_s=traced)


def _is_host_event(event: ProfilerEvent) -> bool:
    device_type = getattr(event, "device_type", None)
    return device_type is None or str(device_type).endswith("CPU")


def _start(event: ProfilerEvent) -> float:
    time_range = getattr(event, "time_range", None)
    return float(getattr(time_range, "start", 0.0)) if time_range is not None else 0.0


def join_counts(step: StepEvents, counted: CountedStep) -> int:
    """Give each timed op its counted twin (the n-th of the same key). Returns how many counted
    ops found no timed twin."""
    by_key: dict[tuple[str, tuple[Shape, ...]], list[OpRecord]] = collections.defaultdict(list)
    for record in counted.records:
        by_key[record.key].append(record)
    used: collections.Counter[tuple[str, tuple[Shape, ...]]] = collections.Counter()
    for op in step.ops:
        key = match_key(op.name, op.shapes)
        queue = by_key.get(key)
        if queue and used[key] < len(queue):
            op.record = queue[used[key]]
            used[key] += 1
    return sum(len(queue) - used[key] for key, queue in by_key.items())


@dataclass
class OpGroup:
    """All calls of one op with one signature (shapes, dtype), over the profiled steps.

    Times are per step (seconds, mean over the steps); FLOPs and bytes per step and per call."""

    op: str
    shapes: tuple[tuple[int, ...], ...]
    dtype: str | None
    calls_per_step: float
    time_s: float  # device time per step
    counter_flops: int  # per step, FlopCounterMode's formulas
    pointwise_flops: int  # per step, gpuscope's pointwise formulas
    bytes: int  # per step, lower bound (OP_BYTES_RULE)
    counted: bool  # FLOPs and bytes known (the op was seen by the counting step)
    no_formula: bool
    modules: list[str] = field(default_factory=list)  # module paths, most time first
    backward: bool = False
    fused: tuple[str, ...] = ()  # a compiled kernel's eager ops (gpuscope.profiling.compiled_attribution)

    @property
    def flops(self) -> int:
        return self.counter_flops + self.pointwise_flops

    @property
    def flops_known(self) -> bool:
        """Whether the group's FLOPs are known: counted by a formula, or zero by definition (genuine
        data movement, :data:`gpuscope.profiling.record.DATA_MOVEMENT_RULE`, also for an op the
        counting step never saw). What the profile's coverage counts."""
        if not self.counted:  # ops the dispatch mode never sees (detach_ in an optimizer): known when data movement
            return is_data_movement(self.op.split("::", 1)[-1])
        return not self.no_formula

    @property
    def label(self) -> str:
        """``mm fp32 2048x512, 512x1536``: op without namespace, dtype, tensor shapes (the dtype
        before the shapes, so a cut label keeps it)."""
        short = self.op.split("::", 1)[-1]
        shapes = ", ".join("x".join(str(size) for size in shape) or "()" for shape in self.shapes[:3])
        if len(self.shapes) > 3:
            shapes += " ..."
        return " ".join(part for part in (short, self.dtype or "", shapes) if part)


def group_ops(steps: Sequence[StepEvents]) -> list[OpGroup]:
    """Group the timed ops of every step by op + shapes + dtype (uncounted ops by op + profiler
    shapes); per-step means. Sorted by time, largest first."""
    n = max(len(steps), 1)
    by_key: dict[tuple[str, tuple[Shape, ...], str | None, bool], list[TimedOp]] = {}
    for op in (op for step in steps for op in step.ops):
        r = op.record
        shapes = r.shapes + r.list_shapes if r else match_key(op.name, op.shapes)[1]  # cat: its list's shapes
        key = (r.name, shapes, r.dtype, True) if r else (op.name, shapes, None, False)
        by_key.setdefault(key, []).append(op)
    groups = []
    for (name, shapes, dtype, counted), ops in by_key.items():
        records = [op.record for op in ops if op.record is not None]  # all of them, or none
        modules: dict[str, float] = collections.defaultdict(float)  # module -> time
        for op, record in zip(ops, records):
            modules[record.module] += op.time_s
        groups.append(
            OpGroup(
                op=name,
                shapes=tuple(shapes),
                dtype=dtype,
                calls_per_step=len(ops) / n,
                time_s=sum(op.time_s for op in ops) / n,
                counter_flops=round(sum(r.counter_flops for r in records) / n),
                pointwise_flops=round(sum(r.pointwise_flops for r in records) / n),
                bytes=round(sum(r.bytes for r in records) / n),
                counted=counted,
                no_formula=any(r.no_formula for r in records),
                modules=sorted(modules, key=modules.__getitem__, reverse=True),
                backward=sum(r.backward for r in records) * 2 > len(ops),
                fused=records[0].fused if records else (),
            )
        )
    groups.sort(key=lambda group: -group.time_s)
    return groups


@dataclass
class ModuleTotal:
    """One nn.Module path with everything that ran inside it (submodules included), per step."""

    path: str
    time_s: float = 0.0
    flops: int = 0
    bytes: int = 0
    calls: float = 0.0

    @property
    def depth(self) -> int:
        return self.path.count(".")


def module_rollup(steps: Sequence[StepEvents]) -> list[ModuleTotal]:
    """Per-step totals for every module path and each of its ancestors; ops outside any module go
    to ``"(no module)"``. Sorted by path."""
    n = max(len(steps), 1)
    totals: dict[str, ModuleTotal] = {}
    for step in steps:
        for op in step.ops:
            path = op.record.module if op.record is not None else ""
            parts = path.split(".") if path else []
            prefixes: Iterable[str] = [".".join(parts[: depth + 1]) for depth in range(len(parts))] or ["(no module)"]
            for prefix in prefixes:
                total = totals.setdefault(prefix, ModuleTotal(prefix))
                total.time_s += op.time_s / n
                total.calls += 1 / n
                if op.record is not None:
                    total.flops += op.record.flops
                    total.bytes += op.record.bytes
    for total in totals.values():
        total.flops = round(total.flops / n)
        total.bytes = round(total.bytes / n)
    return sorted(totals.values(), key=lambda total: total.path)
