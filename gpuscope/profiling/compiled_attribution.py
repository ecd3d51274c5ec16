"""Attribution inside compiled regions: each kernel Inductor generated becomes a timed op with the
FLOPs and bytes of the eager ops it fused.

In a profiled step of a ``torch.compile``'d model the profiler shows, for each compiled frame, a
``Torch-Compiled Region: F/C`` event (frame F, compile C) and, inside it, one
``## Call CompiledFxGraph <key> ##`` event per graph run (forward, then backward in a training step).
Inside a graph run:

- **extern kernels** (matmuls, convolutions, attention Inductor does not generate) run as aten ops
  (``aten::addmm`` with an ``out=`` buffer): claimed and joined to the counting step's ops as in an
  eager step (:mod:`gpuscope.profiling.attribution`), the ``out=`` tensor left out of the key;
- **fused kernels**: on the CPU, each C++ kernel is a call ``<built-in function kernel>`` under the
  generated module's ``call`` (seen with the profiler's Python stack); the n-th such call is the
  n-th fused kernel of the generated ``call`` (:func:`gpuscope.profiling.compiled.read_graph_source`).
  On a GPU, each Triton kernel is a device kernel under its own name.

**FLOPs** of a fused kernel: the counting step's FLOPs of the eager ops it holds. The ops are read
from the kernel's name (Inductor names a kernel after the original aten ops it fuses). For each op
name, the counting step's calls not joined to an extern kernel are given, in execution order, to
the kernels holding that op, in execution order, in proportion to the elements each kernel's loop
covers; so the kernels of a step add up to the counting step's total. A kernel whose name lists no
op, or a part that is not an aten op, has unknown FLOPs (verdict ``unknown``), never guessed.
**Bytes**: the distinct tensors passed to the kernel (shapes, strides and dtypes from the generated
code), each once: intermediates the fusion keeps in registers are not counted.

**Graph breaks**: a compiled function that breaks runs as several frames; Dynamo resumes each
after a break in a function named ``torch_dynamo_resume_in_<function>_at_<line>``, seen as the
Python frame around the region: each such region is listed with the function and line.

No torch import: plain records in, plain records out.
"""

from __future__ import annotations

import bisect
import collections
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpuscope.measuring.counting import POINTWISE_FLOPS_PER_ELEMENT
from gpuscope.measuring.formulas import FORMULAS, formula_for
from gpuscope.profiling.attribution import StepEvents, TimedOp
from gpuscope.profiling.compiled import GraphSource, KernelCall, kernel_ops, read_graph_source
from gpuscope.profiling.record import DATA_MOVEMENT_OPS, CountedStep, OpRecord, is_data_movement, match_key
from gpuscope.telemetry.records import JsonObject

__all__ = [
    "CompiledProfile",
    "CompiledRegion",
    "CompiledStep",
    "GraphBreak",
    "attribute_compiled",
    "is_compiled_step",
    "summarize_compiled",
]

_GRAPH_CALL = re.compile(r"^## Call CompiledFxGraph (\S+) ##$")
_REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)$")
_PY_CALL = re.compile(r"^(.*\.py)\((\d+)\): call$")
_RESUME = re.compile(r"^(.*\.py)\((\d+)\): torch_dynamo_resume_in_(\w+)_at_(\d+)$")
_PY_FRAME = re.compile(r"^(.*\.py)\((\d+)\): (\w+)$")
_CPU_KERNEL = "<built-in function kernel>"
#: functionalized names Inductor's kernels carry -> the op the counting step records
_ALIASES = {
    "_native_batch_norm_legit_functional": ("native_batch_norm", "_native_batch_norm_legit"),
    "_native_batch_norm_legit_no_training": ("native_batch_norm", "_native_batch_norm_legit_no_training"),
    "_native_batch_norm_legit": ("native_batch_norm", "_native_batch_norm_legit"),
}
#: ops Inductor's kernels name whose eager form ran as other ops (CPU autograd's dropout)
_DECOMPOSES = {
    "native_dropout": ("bernoulli", "div", "mul"),
    "native_dropout_backward": ("mul",),
}
_DTYPE_ROOF = {"float32": "fp32", "float64": "fp64", "bfloat16": "bf16", "float16": "fp16", "int8": "int8"}


@dataclass(frozen=True)
class GraphBreak:
    """Where a compiled function broke: Dynamo resumed it after ``line`` of ``function``."""

    function: str
    line: int
    file: str
    frame: int  # the compiled frame that resumed there ("Torch-Compiled Region: F/C")

    @property
    def label(self) -> str:
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line} in {self.function} (frame {self.frame})"


@dataclass
class CompiledRegion:
    """One compiled frame of one step: its graph runs and their time (seconds)."""

    region: str  # "0/0"
    time_s: float = 0.0  # inclusive CPU time of the region's events
    graphs: list[str] = field(default_factory=list)  # generated modules (file paths) run in it
    kernels: int = 0  # fused kernels timed
    unresolved_kernels: int = 0  # fused kernels whose ops or time could not be read


@dataclass
class CompiledStep:
    """What the compiled attribution found in one profiled step."""

    regions: list[CompiledRegion] = field(default_factory=list)
    graph_breaks: list[GraphBreak] = field(default_factory=list)
    kernels: list[TimedOp] = field(default_factory=list)  # the fused kernels, in the order they ran
    notes: list[str] = field(default_factory=list)
    unplaced_ops: int = 0  # counted op calls (with FLOPs or bytes) neither joined nor held by a kernel
    unresolved_kernels: int = 0  # fused kernels whose ops or time could not be read (forward and backward)


def is_compiled_step(events: Sequence[object]) -> bool:
    """Whether a step's profiler events show a compiled region."""
    return any(_REGION.match(str(getattr(event, "name", ""))) for event in events)


def _children(event: object) -> list[object]:
    return list(getattr(event, "cpu_children", None) or [])


def _start(event: object) -> float:
    time_range = getattr(event, "time_range", None)
    return float(getattr(time_range, "start", 0.0)) if time_range is not None else 0.0


def _walk(event: object) -> list[object]:
    found, stack = [], [event]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(_children(current))
    return found


@dataclass
class _Claimant:
    """A kernel waiting for the eager ops it holds."""

    op: TimedOp
    ops: list[str]
    weight: float
    assigned: list[OpRecord] = field(default_factory=list)


def attribute_compiled(
    events: Sequence[object], step: StepEvents, counted: CountedStep, device_type: str
) -> CompiledStep:
    """Add the fused kernels of the compiled regions in ``events`` (one profiled step's events) to
    ``step.ops``, with the FLOPs of the eager ops they hold, and give extern kernels and eager ops the
    join could not pair (an ``out=`` tensor in the key) their counted twins. Returns what it found."""
    result = CompiledStep()
    if not is_compiled_step(events):
        return result
    _join_out_variants(step, counted)
    vocabulary = frozenset(
        {record.name.split("::", 1)[-1] for record in counted.records}
        | set(POINTWISE_FLOPS_PER_ELEMENT)
        | set(DATA_MOVEMENT_OPS)
        | {"convolution", "convolution_backward", "addmm", "mm", "bmm", "native_layer_norm", "_softmax"}
        | set(_ALIASES)
        | set(_DECOMPOSES)
        | {name for row in FORMULAS for name in row.ops}
    )
    counted_names = frozenset(record.name.split("::", 1)[-1].rstrip("_") for record in counted.records)
    cuda = device_type == "cuda"
    claimants: list[_Claimant] = []
    regions = sorted((event for event in events if _REGION.match(str(getattr(event, "name", "")))), key=_start)
    for event in regions:
        name = str(getattr(event, "name", "")).split(": ", 1)[1]
        result.regions.append(CompiledRegion(region=name, time_s=_cpu_time_s(event)))
    for event in sorted(events, key=_start):
        found = _resume_point(event)
        if found is not None and found not in result.graph_breaks:
            result.graph_breaks.append(found)
    graph_calls = sorted((e for e in events if _GRAPH_CALL.match(str(getattr(e, "name", "")))), key=_start)
    if graph_calls and not any(_PY_CALL.match(str(getattr(e, "name", ""))) for e in events) and not cuda:
        result.notes.append(
            "compiled graphs ran without the profiler's Python stack: their fused kernels' time is outside ops"
        )
    for call in graph_calls:
        source, timed, unresolved = _graph_kernels(call, cuda)
        region = _enclosing_region(call, result.regions)  # None for a backward graph (run by autograd)
        result.unresolved_kernels += unresolved
        if region is not None:
            region.unresolved_kernels += unresolved
        if source is None:
            continue
        if region is not None:
            region.graphs.append(source.path)
        for kernel, time_s in timed:
            ops, rest = kernel_ops(kernel.name, vocabulary)
            if not ops and not rest and kernel.name in source.copy_only:
                ops = ("copy",)  # its C++ only loads and stores: a layout copy, zero FLOPs by definition
            held = [name for op in ops for name in _eager_names(op, counted_names)]
            largest = kernel.largest_float or kernel.largest  # a mask (bool) does not name the roof
            shapes = tuple(sorted({buffer.shape for buffer in kernel.buffers}, key=lambda s: -_numel(s)))[:4]
            record = OpRecord(
                name=f"inductor::{kernel.name}",
                shapes=shapes,
                dtype=_DTYPE_ROOF.get(largest.dtype, largest.dtype) if largest is not None else None,
                counter_flops=0,
                pointwise_flops=0,
                bytes=kernel.bytes,
                module="",
                backward=source.backward,
                no_formula=bool(rest) or not held,
                fused=tuple(held),
            )
            timed_op = TimedOp(record.name, [list(shape) for shape in shapes], time_s, record)
            result.kernels.append(timed_op)
            result.unresolved_kernels += bool(rest) or not held
            if region is not None:
                region.kernels += 1
                region.unresolved_kernels += bool(rest) or not held
            claimants.append(_Claimant(timed_op, held, float(max(kernel.elements, 1))))
    # eager ops not joined to a timed op (extern kernels with other shapes, ops fused into kernels)
    joined = {id(op.record) for op in step.ops if op.record is not None}
    for op in step.ops:
        if op.record is None and op.name.startswith("aten::"):  # an extern kernel the join missed
            elements = max((_numel(shape) for shape in op.shapes if isinstance(shape, list)), default=1)
            claimants.append(_Claimant(op, [op.name.split("::", 1)[-1].rstrip("_")], float(max(elements, 1))))
    order = {id(op): index for index, op in enumerate(result.kernels)}  # fused kernels in the order they ran,
    order.update({id(op): len(order) + index for index, op in enumerate(step.ops)})  # then extern ops
    claimants.sort(key=lambda claimant: order[id(claimant.op)])
    pools: dict[str, list[OpRecord]] = collections.defaultdict(list)
    for record in counted.records:
        if id(record) not in joined and (record.flops or record.bytes):
            pools[record.name.split("::", 1)[-1].rstrip("_")].append(record)
    _assign(pools, claimants)
    placed = {id(record) for claimant in claimants for record in claimant.assigned}
    result.unplaced_ops = sum(id(record) not in placed for records in pools.values() for record in records)
    for claimant in claimants:
        _settle(claimant, counted_names)
    step.ops.extend(result.kernels)
    return result


def _eager_names(op: str, counted_names: frozenset[str]) -> list[str]:
    """The names the counting step knows a kernel's op by: itself, its functionalized form's eager
    name, or the ops eager autograd decomposes it into (dropout: bernoulli_, div_, mul)."""
    if op.rstrip("_") in counted_names:
        return [op]
    alias = next((name for name in _ALIASES.get(op, ()) if name in counted_names), None)
    if alias is not None:
        return [alias]
    parts = [name for name in _DECOMPOSES.get(op, ()) if name in counted_names]
    return parts or [op]


def _assign(pools: dict[str, list[OpRecord]], claimants: list[_Claimant]) -> None:
    """Each pooled eager call goes to the claimant whose share of the op's elements covers it."""
    by_op: dict[str, list[_Claimant]] = collections.defaultdict(list)
    for claimant in claimants:
        for op in claimant.ops:
            by_op[op].append(claimant)
    for op, holders in by_op.items():
        records = pools.get(op, [])
        if not records:
            continue
        total = sum(holder.weight for holder in holders)
        bounds, running = [], 0.0
        for holder in holders:
            running += holder.weight / total
            bounds.append(running)
        for index, record in enumerate(records):
            position = (index + 0.5) / len(records)
            holders[min(bisect.bisect_left(bounds, position), len(holders) - 1)].assigned.append(record)


def _settle(claimant: _Claimant, counted_names: frozenset[str]) -> None:
    """Fold the eager calls given to a claimant into its record (FLOPs, module, formula)."""
    op = claimant.op
    base = op.record
    records = claimant.assigned
    fused = base is not None and base.name.startswith("inductor::")
    if not records and not fused:
        return  # an extern op with no eager twin: stays unknown (counted=False)
    counter = sum(record.counter_flops for record in records)
    pointwise = sum(record.pointwise_flops for record in records)
    modules: collections.Counter[str] = collections.Counter()
    for record in records:
        modules[record.module] += record.flops + 1
    module = modules.most_common(1)[0][0] if modules else ""
    no_formula = any(record.no_formula for record in records)
    if fused and base is not None:
        for name in claimant.ops:  # an op the counting step never ran and no rule knows: unknown
            name = name.rstrip("_")
            if name not in counted_names and not is_data_movement(name) and formula_for(name) is None:
                no_formula = True
        op.record = OpRecord(
            name=base.name, shapes=base.shapes, dtype=base.dtype, counter_flops=counter, pointwise_flops=pointwise,
            bytes=base.bytes, module=module, backward=base.backward, no_formula=base.no_formula or no_formula,
            fused=base.fused,
        )  # fmt: skip
        return
    first = records[0]
    op.record = OpRecord(
        name=first.name, shapes=first.shapes, dtype=first.dtype, counter_flops=counter, pointwise_flops=pointwise,
        bytes=sum(record.bytes for record in records), module=module, backward=first.backward, no_formula=no_formula,
    )  # fmt: skip


def _join_out_variants(step: StepEvents, counted: CountedStep) -> None:
    """Join timed ops that found no twin because the compiled graph passes an ``out=`` tensor (the
    last shape of the profiler's list): the key without it."""
    used = collections.Counter(id(op.record) for op in step.ops if op.record is not None)
    queues: dict[tuple[str, tuple[tuple[int, ...], ...]], list[OpRecord]] = collections.defaultdict(list)
    for record in counted.records:
        if not used[id(record)]:
            queues[record.key].append(record)
    for op in step.ops:
        if op.record is not None:
            continue
        shapes = [shape for shape in op.shapes if isinstance(shape, list) and shape]
        if len(shapes) < 2:
            continue
        key = match_key(op.name, shapes[:-1])
        queue = queues.get(key)
        if queue:
            op.record = queue.pop(0)


def _graph_kernels(call: object, cuda: bool) -> tuple[GraphSource | None, list[tuple[KernelCall, float]], int]:
    """The generated module behind one graph run, its fused kernels' times (seconds), and how many
    fused kernels ran that cannot be told apart (no source, or the events and the source disagree)."""
    subtree = _walk(call)
    source = None
    python_call = None
    for event in subtree:
        found = _PY_CALL.match(str(getattr(event, "name", "")))
        if found:
            source, python_call = read_graph_source(found[1]), event
            break
    cpu_calls = (
        sorted((event for event in _children(python_call) if _event_name(event) == _CPU_KERNEL), key=_start)
        if python_call is not None
        else [event for event in subtree if _event_name(event) == _CPU_KERNEL]
    )
    if source is None:
        return None, [], len(cpu_calls)
    fused = source.fused
    if cuda:
        times: dict[str, list[float]] = collections.defaultdict(list)
        for event in subtree:
            for kernel in getattr(event, "kernels", None) or []:
                times[str(kernel.name)].append(float(kernel.duration) * 1e-6)
        timed = []
        for kernel in fused:
            queue = times.get(kernel.name)
            if queue:
                timed.append((kernel, queue.pop(0)))
        return source, timed, len(fused) - len(timed)
    if len(cpu_calls) != len(fused):
        return source, [], len(cpu_calls)  # the generated call and the events disagree: not guessed
    return source, [(kernel, _cpu_time_s(event)) for kernel, event in zip(fused, cpu_calls)], 0


def _event_name(event: object) -> str:
    """An event's name; empty when it has none."""
    return str(getattr(event, "name", ""))


def _cpu_time_s(event: object) -> float:
    """An event's inclusive CPU time, seconds (the profiler's is in microseconds)."""
    return float(getattr(event, "cpu_time_total", 0.0)) * 1e-6


def _enclosing_region(event: object, regions: list[CompiledRegion]) -> CompiledRegion | None:
    parent = getattr(event, "cpu_parent", None)
    while parent is not None:
        found = _REGION.match(str(getattr(parent, "name", "")))
        if found:
            name = f"{found[1]}/{found[2]}"
            return next((region for region in reversed(regions) if region.region == name), None)
        parent = getattr(parent, "cpu_parent", None)
    return None


def _resume_point(event: object) -> GraphBreak | None:
    """The graph break a Python frame ``torch_dynamo_resume_in_<function>_at_<line>`` resumes after,
    with the compiled frame that runs it (the region around or under it; -1 when none is seen)."""
    resumed = _RESUME.match(str(getattr(event, "name", "")))
    if resumed is None:
        return None
    frame = -1
    near = [*_walk(event)[1:], getattr(event, "cpu_parent", None)]
    for other in near:
        found = _REGION.match(str(getattr(other, "name", ""))) if other is not None else None
        if found:
            frame = int(found[1])
            break
    return GraphBreak(function=resumed[3], line=int(resumed[4]), file=resumed[1], frame=frame)


def _numel(shape: object) -> int:
    if not isinstance(shape, (list, tuple)):
        return 0
    count = 1
    for size in shape:
        if not isinstance(size, int):
            return 0
        count *= size
    return count


@dataclass(frozen=True)
class RegionDiff:
    """One region's time per step (seconds) and FLOPs, compiled and eager (``--compare-eager``,
    :mod:`gpuscope.profiling.compiled_compare`)."""

    region: str
    compiled_s: float
    eager_s: float
    compiled_flops: int
    eager_flops: int

    @property
    def speedup(self) -> float | None:
        """Eager time / compiled time (> 1: compiling made it faster)."""
        return self.eager_s / self.compiled_s if self.compiled_s > 0 else None

    def to_json(self) -> JsonObject:
        return {
            "region": self.region, "compiled_s": self.compiled_s, "eager_s": self.eager_s,
            "speedup": self.speedup, "compiled_flops": self.compiled_flops, "eager_flops": self.eager_flops,
        }  # fmt: skip


@dataclass
class CompiledProfile:
    """The compiled side of a profile, over its profiled steps (times per step, seconds)."""

    regions: dict[str, float]  # "Torch-Compiled Region" frame/compile -> mean inclusive time per step
    graph_breaks: list[str]  # "model.py:23 in forward (frame 1)", each once
    fused_kernels: float  # fused kernels timed per step
    unplaced_ops: int  # counted op calls of the last step neither joined to an event nor held by a kernel
    unresolved_kernels: float  # fused kernels per step whose ops or time could not be read
    kernels_s: float  # time of the fused kernels per step
    notes: list[str] = field(default_factory=list)
    compare_eager: list[RegionDiff] = field(default_factory=list)  # the same step eager, when profiled too

    def to_json(self) -> JsonObject:
        out: JsonObject = {
            "regions": dict(self.regions), "graph_breaks": list(self.graph_breaks),
            "fused_kernels": self.fused_kernels, "unresolved_kernels": self.unresolved_kernels,
            "fused_kernels_s": self.kernels_s, "unplaced_ops": self.unplaced_ops, "notes": list(self.notes),
        }  # fmt: skip
        if self.compare_eager:
            out["compare_eager"] = [row.to_json() for row in self.compare_eager]
        return out


def summarize_compiled(steps: Sequence[CompiledStep]) -> CompiledProfile | None:
    """One :class:`CompiledProfile` from the profiled steps; None when no step ran compiled code."""
    ran = [step for step in steps if step.regions]
    if not ran:
        return None
    n = len(steps)
    regions: dict[str, float] = collections.defaultdict(float)
    for step in ran:
        for region in step.regions:
            regions[region.region] += region.time_s / n
    breaks: list[str] = []
    for step in ran:
        for graph_break in step.graph_breaks:
            if graph_break.label not in breaks:
                breaks.append(graph_break.label)
    notes: list[str] = []
    for step in ran:
        for note in step.notes:
            if note not in notes:
                notes.append(note)
    return CompiledProfile(
        regions=dict(sorted(regions.items())),
        graph_breaks=breaks,
        fused_kernels=sum(len(step.kernels) for step in ran) / n,
        unresolved_kernels=sum(step.unresolved_kernels for step in ran) / n,
        kernels_s=sum(op.time_s for step in ran for op in step.kernels) / n,
        unplaced_ops=steps[-1].unplaced_ops,
        notes=notes,
    )


def compiled_lines(compiled: CompiledProfile) -> list[str]:
    """The summary's lines about compiled code: regions, fused kernels, graph breaks."""
    regions = ", ".join(f"{name} {seconds * 1e3:.3g} ms" for name, seconds in compiled.regions.items())
    unresolved = f", {compiled.unresolved_kernels:g} not resolved (unknown)" if compiled.unresolved_kernels else ""
    lines = [
        f"  compiled  {len(compiled.regions)} region{'s' if len(compiled.regions) != 1 else ''} ({regions}); "
        f"{compiled.fused_kernels:g} fused kernels, {compiled.kernels_s * 1e3:.3g} ms per step{unresolved}"
    ]
    if compiled.graph_breaks:
        lines.append(f"  breaks    graph breaks: {'; '.join(compiled.graph_breaks)}")
    return lines
