"""The counting step: run one step under torch's FlopCounterMode with a dispatch mode below it that
records every aten op that actually runs (the ops a profiler shows with their own kernels), with
its FLOPs, its bytes lower bound, its dtype and the ``nn.Module`` it ran in.

FLOPs: what FlopCounterMode counts while the op runs (its formulas for matmul, convolution and
attention, applied to the op or to what it decomposes the op into; per op these add up to
``FlopCounterMode.get_total_flops()``), else gpuscope's pointwise formula
(:func:`pointwise_op_flops`), kept apart so the two totals can be told apart.

Bytes (:data:`OP_BYTES_RULE`): per call, the byte extent of each tensor the op reads and of each
tensor it writes (outputs, in-place and ``out=`` arguments), overlapping views of one storage
merged; views and allocations move nothing. It is a lower bound for an op that streams each
operand through memory once.

torch is imported only inside :func:`count_step`.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuscope.measuring.counting import (
    ZERO_FLOP_OPS,
    pointwise_flops,
    tensor_extent,
    tensor_shape,
    torch_dtype_roof_name,
    union_length,
    written_tensors,
)
from gpuscope.measuring.formulas import flop_mapping, formula_bytes, is_pointwise_op, pointwise_total, split_flops

__all__ = [
    "DATA_MOVEMENT_OPS",
    "DATA_MOVEMENT_RULE",
    "NO_TRAFFIC_OPS",
    "OP_BYTES_RULE",
    "CountedStep",
    "OpRecord",
    "StepCounter",
    "count_step",
    "is_data_movement",
    "match_key",
    "pointwise_op_flops",
]

OP_BYTES_RULE = (
    "per op call: byte extent of each tensor read (inputs) + each tensor written (outputs, in-place "
    "and out= arguments), overlapping views of one storage merged; views and allocations 0; a lower "
    "bound (each operand crosses memory once)"
)

#: Tensors of a list argument (``cat``'s inputs) whose shapes an op's group shows and is keyed by.
LIST_SHAPES_SHOWN = 8

#: aten ops that allocate or re-describe a tensor without touching its data.
NO_TRAFFIC_OPS = frozenset(
    "empty empty_like empty_strided new_empty new_empty_strided detach alias lift_fresh resize_ set_ _reshape_alias "
    "as_strided view _unsafe_view t transpose permute expand unsqueeze squeeze select slice unfold diagonal split "
    "split_with_sizes unbind chunk narrow".split()
)

#: Genuine data movement: ops whose FLOPs are zero by definition. Copies, concatenation, fills,
#: gathers, indexing, selection, random fills (:data:`gpuscope.measuring.counting.ZERO_FLOP_OPS`),
#: views and allocations (:data:`NO_TRAFFIC_OPS`), and any op torch marks as a view. An op outside
#: this list that no formula counts is "no FLOP formula": its FLOPs are unknown, never 0.
DATA_MOVEMENT_OPS = ZERO_FLOP_OPS | NO_TRAFFIC_OPS

DATA_MOVEMENT_RULE = (
    "genuine data movement = ops with zero FLOPs by definition: copies, cat/stack, fills, gathers, "
    "indexing, where/masked_fill, random fills, views and allocations "
    "(gpuscope.profiling.record.DATA_MOVEMENT_OPS)"
)


def is_data_movement(op: str, is_view: bool = False) -> bool:
    """Whether aten op ``op`` (name without namespace, e.g. ``"copy_"``) does no arithmetic by
    definition (:data:`DATA_MOVEMENT_OPS`, or a view)."""
    return is_view or op in DATA_MOVEMENT_OPS or op.startswith("_foreach_copy")


if TYPE_CHECKING:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

Shape = tuple[int, ...]


def pointwise_op_flops(op: str, input_shape: object, output_shape: object) -> int:
    """FLOPs of one call of a pointwise, reduction or normalisation op torch's FlopCounterMode has
    no formula for (``op`` is the aten name without namespace, e.g. ``"add_"``). The one place the
    profile takes pointwise formulas from: gpuscope's table in :mod:`gpuscope.measuring.counting`."""
    return int(pointwise_flops(op, input_shape, output_shape))


def match_key(name: str, shapes: object) -> tuple[str, tuple[Shape, ...]]:
    """The key that joins a counted op to the profiler's events: the op name (in-place suffix
    dropped) and the sorted non-empty tensor shapes (the profiler lists shapes per schema
    argument, scalars as ``[]``)."""
    flat: list[Shape] = []

    def walk(value: object) -> None:
        if isinstance(value, (list, tuple)):
            if value and all(isinstance(item, int) for item in value):
                flat.append(tuple(int(item) for item in value))
            else:
                for item in value:
                    walk(item)

    walk(shapes)
    # In-place and out-of-place forms join: autograd and composite ops pick ``add_`` or ``add`` by
    # whether a buffer can be reused, which a dispatch mode changes.
    return (name.rstrip("_") if not name.endswith("__") else name, tuple(sorted(flat)))


@dataclass(frozen=True)
class OpRecord:
    """One aten op call of the counting step. FLOPs and bytes are of this call."""

    name: str  # "aten::mm"
    shapes: tuple[Shape, ...]  # tensor argument shapes, in argument order
    dtype: str | None  # roof dtype name of the first tensor argument: "fp32", "bf16"
    counter_flops: int  # FlopCounterMode's formula (0 when it has none)
    pointwise_flops: int  # gpuscope's pointwise formula (0 when FlopCounterMode counts the op)
    bytes: int  # lower bound, OP_BYTES_RULE
    module: str  # innermost nn.Module path ("TransformerEncoderLayer.self_attn"), "" outside modules
    backward: bool
    no_formula: bool  # does arithmetic but neither formula knows it
    fused: tuple[str, ...] = ()  # a compiled kernel's eager ops (gpuscope.profiling.compiled_attribution)
    # shapes of the tensors inside list arguments (cat, stack, index_put_'s indices; the first
    # LIST_SHAPES_SHOWN, none for _foreach_*): the profiler records a list as [], so they are not in
    # the join key (:attr:`key`), only in the group and its label
    list_shapes: tuple[Shape, ...] = ()

    @property
    def flops(self) -> int:
        return self.counter_flops + self.pointwise_flops

    @property
    def key(self) -> tuple[str, tuple[Shape, ...]]:
        return match_key(self.name, self.shapes)


@dataclass(frozen=True)
class CountedStep:
    """Every op of the counting step, and FlopCounterMode's own total for the step."""

    records: list[OpRecord]
    flop_counter_total: int  # FlopCounterMode.get_total_flops()
    wall_s: float

    @property
    def counter_flops(self) -> int:
        return sum(record.counter_flops for record in self.records)

    @property
    def pointwise_flops(self) -> int:
        return sum(record.pointwise_flops for record in self.records)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(record.name for record in self.records)


def _innermost(parents: set[str]) -> str:
    names = [name for name in parents if name != "Global"]
    if not names:
        return ""
    innermost = max(names, key=lambda name: (name.count("."), len(name)))
    # torch.compile's wrapper holds the user's module as ``_orig_mod``: "OptimizedModule._orig_mod.qkv"
    # is the user's "qkv", one level below the root as in an eager run
    return innermost.replace("._orig_mod.", ".").removesuffix("._orig_mod")


def count_step(step: Callable[[], object], synchronize: Callable[[], object] = lambda: None) -> CountedStep:
    """Run ``step()`` once under the counters; returns every op it ran."""
    counter = StepCounter(synchronize)
    with counter:
        step()
    assert counter.result is not None
    return counter.result


class StepCounter:
    """A context manager form of :func:`count_step`: the ops run inside the ``with`` block are
    counted; :attr:`result` is set on a clean exit."""

    def __init__(self, synchronize: Callable[[], object] = lambda: None) -> None:
        self.synchronize = synchronize
        self.result: CountedStep | None = None
        self._modes: tuple[TorchDispatchMode, FlopCounterMode, list[OpRecord], float] | None = None
        self._eager: contextlib.AbstractContextManager[None] = contextlib.nullcontext()

    def __enter__(self) -> StepCounter:
        import time

        from gpuscope.profiling.compiled import eager_counting

        recorder, counter, records = _make_modes()
        self.synchronize()
        started = time.perf_counter()
        # A torch.compile'd callable runs its eager code for this step: under a dispatch mode Dynamo
        # would mark its frames "skip" for good (gpuscope.profiling.compiled).
        self._eager = eager_counting()
        self._eager.__enter__()
        # The recorder is entered last, so it sees each op first, as the profiler names it, before
        # FlopCounterMode (below it) decomposes ops it has no formula for.
        try:
            counter.__enter__()
        except BaseException:
            self._eager.__exit__(None, None, None)
            raise
        try:
            recorder.__enter__()
        except BaseException:
            counter.__exit__(None, None, None)
            self._eager.__exit__(None, None, None)
            raise
        self._modes = (recorder, counter, records, started)
        return self

    @property
    def recorded(self) -> int:
        """Op calls recorded so far in the running step (0 outside it): a position in the step's
        records (gpuscope.profiling.generation marks forward-call boundaries with it)."""
        return len(self._modes[2]) if self._modes is not None else 0

    def __exit__(self, *exc: object) -> None:
        import time

        assert self._modes is not None
        recorder, counter, records, started = self._modes
        self._modes = None
        try:
            recorder.__exit__(*exc)
        finally:
            try:
                counter.__exit__(*exc)
            finally:
                self._eager.__exit__(None, None, None)
        if exc[0] is None:
            self.synchronize()
            self.result = CountedStep(  # FlopCounterMode's total less the table's pointwise rows (reported apart)
                records=records,
                flop_counter_total=int(counter.get_total_flops()) - pointwise_total(counter.flop_counts["Global"]),
                wall_s=time.perf_counter() - started,
            )


def _make_modes() -> tuple[TorchDispatchMode, FlopCounterMode, list[OpRecord]]:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves
    from torch.utils.flop_counter import FlopCounterMode

    # gpuscope's formula table (gpuscope.measuring.formulas): fused paths, CPU attention, grouped
    # matmuls, the grouped-convolution backward correction, elementwise ops (reported as pointwise)
    counter = FlopCounterMode(display=False, custom_mapping=flop_mapping())
    registry = counter.flop_registry
    tracker = counter.mod_tracker

    def union_bytes(tensors: list[torch.Tensor]) -> int:
        ranges: dict[tuple[str, int], list[tuple[int, int]]] = collections.defaultdict(list)
        for tensor in tensors:
            found = tensor_extent(tensor)
            if found is not None:
                ranges[found[0]].append(found[1])
        return sum(union_length(spans) for spans in ranges.values())

    records: list[OpRecord] = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(
            self,
            func: Callable[..., object],
            types: object,
            args: tuple[object, ...] = (),
            kwargs: dict[str, object] | None = None,
        ) -> object:
            kwargs = kwargs or {}
            before = dict(counter.flop_counts["Global"])
            out = func(*args, **kwargs)  # FlopCounterMode counts it (or what it decomposes into)
            counted, table_pointwise = split_flops(before, counter.flop_counts["Global"])
            packet = getattr(func, "_overloadpacket", func)
            short = str(packet).split(".", 1)[-1]
            name = f"aten::{short}" if str(packet).startswith("aten.") else str(packet).replace(".", "::", 1)
            inputs = [leaf for leaf in tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor)]
            # the profiler records a tensor list argument (cat, _foreach_*) as []: so does the join key
            shapes = tuple(
                tensor_shape(value) for value in (*args, *kwargs.values()) if isinstance(value, torch.Tensor)
            )
            list_shapes = () if short.startswith("_foreach_") else tuple(
                tensor_shape(item)
                for value in (*args, *kwargs.values()) if isinstance(value, (list, tuple))
                for item in value if isinstance(item, torch.Tensor)
            )[:LIST_SHAPES_SHOWN]  # fmt: skip
            mutated, written_only = written_tensors(func, args, kwargs)
            if getattr(func, "is_view", False) or short in NO_TRAFFIC_OPS:
                moved = 0
            else:
                read = [leaf for leaf in inputs if id(leaf) not in written_only]
                outputs = [leaf for leaf in tree_leaves(out) if isinstance(leaf, torch.Tensor)]
                moved = union_bytes(read) + union_bytes(
                    outputs + [leaf for leaf in mutated if all(leaf is not o for o in outputs)]
                )
                moved = formula_bytes(short, args, kwargs, out) or moved  # gathers: the rows gathered
            pointwise = table_pointwise
            no_formula = False
            if packet not in registry and counted == 0 and pointwise == 0:
                out_shape = next(
                    (tensor_shape(leaf) for leaf in tree_leaves(out) if isinstance(leaf, torch.Tensor)), None
                )
                pointwise = pointwise_op_flops(short, shapes[0] if shapes else None, out_shape)
                no_formula = pointwise == 0 and not is_data_movement(short, bool(getattr(func, "is_view", False)))
            dtype = None
            if inputs:
                kind = "conv" if "conv" in short else ("pointwise" if is_pointwise_op(short) else "matmul")
                dtype = torch_dtype_roof_name(inputs[0].dtype, inputs[0].device.type, kind) or str(
                    inputs[0].dtype
                ).removeprefix("torch.")
            records.append(
                OpRecord(
                    name=name,
                    shapes=shapes,
                    dtype=dtype,
                    counter_flops=counted,
                    pointwise_flops=pointwise,
                    bytes=int(moved),
                    module=_innermost(tracker.parents),
                    backward=bool(tracker.is_bw),
                    no_formula=no_formula,
                    list_shapes=list_shapes,
                )
            )
            return out

    return Recorder(), counter, records  # type: ignore[no-untyped-call]
