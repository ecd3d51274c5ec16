"""Count the FLOPs and bound the bytes of one call of a torch function.

FLOPs come from ``torch.utils.flop_counter.FlopCounterMode``. A second dispatch mode, below it,
sees every op that actually runs and records:

- ops that have no FLOP formula (reported by name: their FLOPs are missing from the count),
  leaving out views, copies, allocation and indexing, which do no arithmetic;
- the FLOPs of each counted op by dtype (so the point can be placed against its dtype's roof);
- the bytes: distinct storage ranges that existed before the call and were read, plus distinct
  storage ranges written that outlive the call (returned tensors, and pre-existing tensors
  changed in place). Intermediates are left out: they may never leave the caches. This is a
  lower bound on the memory traffic of the call.

torch is imported only inside :func:`count_call`.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuscope.measuring.formulas import ELEMENTWISE, flop_mapping, is_pointwise_op

if TYPE_CHECKING:
    import torch

__all__ = [
    "CountResult",
    "count_call",
    "FlopFormula",
    "torch_dtype_roof_name",
    "BYTES_RULE",
    "ZERO_FLOP_OPS",
    "POINTWISE_FLOPS_PER_ELEMENT",
    "POINTWISE_RULE",
    "FLOP_COUNTING_RULE",
    "pointwise_flops",
    "pointwise_flop_formulas",
    "tensor_extent",
    "tensor_shape",
    "union_length",
]

BYTES_RULE = (
    "lower bound: distinct storage bytes read that existed before the call (inputs, weights) + "
    "distinct storage bytes written that outlive it (outputs, in-place updates), each counted once; "
    "intermediates excluded"
)

#: A FLOP formula for FlopCounterMode's ``custom_mapping``: the op's arguments (shapes) and
#: ``out_shape`` -> FLOPs of one call.
FlopFormula = Callable[..., int]

#: aten ops that move, create, view or index data and do no floating-point arithmetic.
ZERO_FLOP_OPS = frozenset(
    """
    _local_scalar_dense _reshape_alias _to_copy _unsafe_view alias arange as_strided bernoulli
    bernoulli_ cat chunk clone constant_pad_nd contiguous copy copy_ detach detach_ diagonal empty
    empty_like empty_strided equal expand fill fill_ flatten flip full full_like gather index
    index_copy index_copy_ index_put index_put_ index_select item lift_fresh lift_fresh_copy
    masked_fill masked_fill_ narrow new_empty new_empty_strided new_full new_ones new_zeros normal_
    ones ones_like permute rand rand_like randint randn randn_like random_ repeat reshape resize_
    roll scalar_tensor scatter scatter_ select set_ slice split split_with_sizes squeeze stack t
    transpose unbind unfold uniform_ unsqueeze view where zero_ zeros zeros_like
    embedding one_hot triu tril triu_indices tril_indices slice_backward select_backward
    index_select_backward narrow_copy dropout feature_dropout alpha_dropout is_nonzero to
    pad reflection_pad1d reflection_pad2d replication_pad1d replication_pad2d repeat_interleave
    masked_scatter masked_select take put_ movedim tile expand_as view_as reshape_as
    upsample_nearest1d upsample_nearest2d upsample_nearest3d _upsample_nearest_exact1d
    _upsample_nearest_exact2d _upsample_nearest_exact3d
    _record_function_enter _record_function_enter_new _record_function_exit
    _nested_tensor_from_mask _nested_tensor_from_mask_left_aligned to_padded_tensor _nested_tensor_from_tensor_list
    """.split()
)


#: FLOPs per element of the aten pointwise, reduction and normalisation ops torch's FlopCounterMode
#: has no formula for (the elementwise rows of :data:`gpuscope.measuring.formulas.ELEMENTWISE`).
#: The element count is the output's for elementwise ops (broadcasting included) and the first
#: input's for reductions, softmax and norms.
POINTWISE_FLOPS_PER_ELEMENT: dict[str, float] = {name: per for name, (per, _) in ELEMENTWISE.items()}

#: How pointwise FLOPs are counted: stored as ``pointwise_rule`` with each workload that
#: ``gpuscope measure`` or ``gpuscope profile`` writes (the table may change between versions).
POINTWISE_RULE = (
    "pointwise ops: FLOPs per element x elements (output for elementwise ops, first input for "
    "reductions, softmax and norms); gelu 8, silu 4, sigmoid 3, softmax 5, layer_norm 7, rms_norm 4, "
    "add/mul/div/relu 1; pooling, interpolation, embedding bags, scatter-adds, top-k/sort and "
    "_foreach ops by gpuscope.measuring.formulas; matmul/conv/attention by torch.utils.flop_counter"
)

#: How ``gpuscope measure`` counts FLOPs (its workloads' ``flop_counting_rule``).
FLOP_COUNTING_RULE = (
    "torch.utils.flop_counter.FlopCounterMode with gpuscope's formula table (gpuscope.measuring.formulas: "
    "fused attention and transformer paths, grouped matmuls, grouped-convolution backward corrected) "
    "+ gpuscope's pointwise formulas (pointwise_rule)"
)

_PER_INPUT = frozenset(name for name, (_, basis) in ELEMENTWISE.items() if basis == "in")


def _numel(shape: object) -> int:
    """Elements of a torch.Size (or the first Size in a tuple of them); 0 for anything else."""
    if isinstance(shape, (tuple, list)) and shape and all(isinstance(size, int) for size in shape):
        count = 1
        for size in shape:
            count *= size
        return count
    if isinstance(shape, (tuple, list)) and len(shape) == 0:
        return 1  # a 0-d tensor
    if isinstance(shape, (tuple, list)):
        for item in shape:
            if isinstance(item, (tuple, list)):
                return _numel(item)
    return 0


def pointwise_flops(op: str, input_shape: object, output_shape: object) -> int:
    """FLOPs of one call of pointwise op ``op`` (a key of :data:`POINTWISE_FLOPS_PER_ELEMENT`,
    with or without a trailing ``_`` for the in-place form), from its first input's and its
    output's shapes (tuples of ints). 0 for an op not in the table."""
    name = op[:-1] if op.endswith("_") and op[:-1] in POINTWISE_FLOPS_PER_ELEMENT else op
    per = POINTWISE_FLOPS_PER_ELEMENT.get(name)
    if per is None:
        return 0
    elements = _numel(input_shape) if name in _PER_INPUT else _numel(output_shape) or _numel(input_shape)
    return int(per * elements)


def pointwise_flop_formulas() -> dict[object, FlopFormula]:
    """gpuscope's whole formula table (:mod:`gpuscope.measuring.formulas`) as FlopCounterMode
    ``custom_mapping`` formulas (aten overload packet -> formula), in-place variants included.
    Imports torch."""
    return flop_mapping()


@dataclass(frozen=True)
class CountResult:
    """What one call computed and touched. FLOPs and bytes are per call."""

    flops: int
    flops_by_dtype: dict[str, int]
    read_bytes: int
    written_bytes: int
    uncounted_ops: dict[str, int]  # op name -> calls, ops with no FLOP formula
    bytes_rule: str = BYTES_RULE
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def bytes(self) -> int:
        """Lower bound on bytes moved: read + written."""
        return self.read_bytes + self.written_bytes

    @property
    def dtype(self) -> str | None:
        """The dtype roof name carrying most FLOPs (``"bf16"``), or None without counted FLOPs."""
        if not self.flops_by_dtype:
            return None
        return max(self.flops_by_dtype.items(), key=lambda item: item[1])[0]


def tf32_allowed(op_kind: str = "matmul") -> bool:
    """Whether CUDA float32 matmuls (or ``op_kind="conv"`` convolutions) may run as TF32.

    torch >= 2.9 has ``torch.backends.cuda.matmul.fp32_precision`` / ``cudnn.conv.fp32_precision``
    ("tf32", "ieee", or "none" = the global ``torch.backends.fp32_precision``); once user code set
    one, reading the legacy ``allow_tf32`` or ``get_float32_matmul_precision()`` raises ("mix of
    the legacy and new APIs"). So: the new setting when it says tf32 or ieee, else the legacy
    flags, and never raise (an unreadable setting counts as fp32)."""
    import torch

    backends = torch.backends
    if op_kind == "conv":
        backend = getattr(backends.cudnn, "conv", None)
    else:
        backend = getattr(backends.cuda, "matmul", None)
    setting = getattr(backend, "fp32_precision", None) if backend is not None else None
    if isinstance(setting, str) and setting == "none":
        setting = getattr(backends, "fp32_precision", None)
    if setting == "tf32":
        return True
    if setting == "ieee":
        return False
    try:
        if op_kind == "conv":
            return bool(backends.cudnn.allow_tf32)
        return bool(backends.cuda.matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest"
    except RuntimeError:
        return False


def torch_dtype_roof_name(dtype: torch.dtype, device_type: str = "cpu", op_kind: str = "matmul") -> str | None:
    """Compute roof name for a torch dtype: float32 -> ``"fp32"`` (``"tf32"`` for CUDA matmuls and
    convolutions when TF32 is allowed, :func:`tf32_allowed`), bfloat16 -> ``"bf16"``, float8 ->
    ``"fp8"``, int8 -> ``"int8"``."""
    import torch

    if dtype == torch.float32:
        if device_type == "cuda" and op_kind in ("matmul", "conv") and tf32_allowed(op_kind):
            return "tf32"
        return "fp32"
    names = {
        torch.float64: "fp64",
        torch.float16: "fp16",
        torch.bfloat16: "bf16",
        torch.int8: "int8",
        torch.uint8: "int8",
    }
    if dtype in names:
        return names[dtype]
    if "float8" in str(dtype):
        return "fp8"
    if dtype in (torch.complex64,):
        return "fp32"
    if dtype in (torch.complex128,):
        return "fp64"
    return None


def union_length(intervals: list[tuple[int, int]]) -> int:
    """Total length of the union of half-open byte intervals."""
    total = 0
    current_start = current_end = None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None and current_start is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None and current_start is not None:
        total += current_end - current_start
    return total


def tensor_extent(tensor: torch.Tensor) -> tuple[tuple[str, int], tuple[int, int]] | None:
    """Where a tensor's bytes lie: its storage (device, data pointer) and the half-open byte range
    it spans in that storage; None for an empty, non-strided or meta tensor, or one without storage."""
    import torch

    try:
        if (
            tensor.is_nested  # nested tensors have no single shape and stride: left out (a lower bound)
            or tensor.numel() == 0
            or tensor.layout != torch.strided
            or tensor.device.type == "meta"
        ):
            return None
        pointer = tensor.untyped_storage().data_ptr()
        span = 1 + sum((size - 1) * abs(stride) for size, stride in zip(tensor.shape, tensor.stride()) if size > 0)
    except (RuntimeError, NotImplementedError, TypeError):
        return None
    item = tensor.element_size()
    start = int(tensor.storage_offset()) * item
    return (str(tensor.device), pointer), (start, start + int(span) * item)


def tensor_shape(tensor: torch.Tensor) -> tuple[int, ...]:
    """A tensor's shape as ints; ``()`` for a nested tensor (no single shape)."""
    if tensor.is_nested:
        return ()
    return tuple(int(size) for size in tensor.shape)


def written_tensors(
    func: object, args: tuple[object, ...], kwargs: Mapping[str, object]
) -> tuple[list[torch.Tensor], set[int]]:
    """The tensors an aten op writes, from its schema's alias annotations, and the ids of
    those it only writes (``out=`` arguments: not read, so not counted as read traffic)."""
    import torch
    from torch.utils._pytree import tree_leaves

    mutated: list[torch.Tensor] = []
    write_only: set[int] = set()
    schema = getattr(func, "_schema", None)
    if schema is None:
        return mutated, write_only
    for position, argument in enumerate(schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = kwargs.get(argument.name) if argument.kwarg_only or position >= len(args) else args[position]
        for leaf in tree_leaves(value):
            if isinstance(leaf, torch.Tensor):
                mutated.append(leaf)
                if argument.is_out:
                    write_only.add(id(leaf))
    return mutated, write_only


def count_call(
    fn: Callable[..., object],
    args: tuple[object, ...],
    kwargs: Mapping[str, object],
    *,
    flop_formulas: Mapping[object, FlopFormula] | None = None,
) -> tuple[CountResult, object]:
    """Run ``fn(*args, **kwargs)`` once under the counters; returns the counts and fn's result.

    ``flop_formulas`` adds FLOP formulas (aten op -> formula), passed to FlopCounterMode as its
    ``custom_mapping`` after the pointwise formulas (:data:`POINTWISE_FLOPS_PER_ELEMENT`), so a
    caller's formula wins."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False, custom_mapping={**pointwise_flop_formulas(), **(flop_formulas or {})})
    registry = counter.flop_registry

    class Recorder(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()  # type: ignore[no-untyped-call]  # TorchDispatchMode.__init__ is unannotated
            self.created: set[tuple[str, int]] = set()
            self.preexisting: set[tuple[str, int]] = set()
            self.read: dict[tuple[str, int], list[tuple[int, int]]] = collections.defaultdict(list)
            self.written: dict[tuple[str, int], list[tuple[int, int]]] = collections.defaultdict(list)
            self.ops = 0
            self.no_formula: collections.Counter[str] = collections.Counter()
            self.flops_by_dtype: collections.Counter[str] = collections.Counter()

        def __torch_dispatch__(
            self,
            func: Callable[..., object],
            types: object,
            args: tuple[object, ...] = (),
            kwargs: dict[str, object] | None = None,
        ) -> object:
            kwargs = kwargs or {}
            self.ops += 1
            mutated, write_only = written_tensors(func, args, kwargs)
            for leaf in tree_leaves((args, kwargs)):
                if not isinstance(leaf, torch.Tensor) or id(leaf) in write_only:
                    continue
                extent = tensor_extent(leaf)
                if extent is not None and extent[0] not in self.created:
                    self.preexisting.add(extent[0])
                    self.read[extent[0]].append(extent[1])
            out = func(*args, **kwargs)
            for leaf in mutated:
                extent = tensor_extent(leaf)
                if extent is not None and extent[0] not in self.created:
                    self.preexisting.add(extent[0])
                    self.written[extent[0]].append(extent[1])
            for leaf in tree_leaves(out):
                if isinstance(leaf, torch.Tensor):
                    extent = tensor_extent(leaf)
                    if extent is not None and extent[0] not in self.preexisting:
                        self.created.add(extent[0])
            packet = getattr(func, "_overloadpacket", func)
            if packet in registry:
                try:
                    flops = int(registry[packet](*args, **kwargs, out_val=out))
                except Exception:  # noqa: BLE001 - the dtype split is best effort; FlopCounterMode counts
                    flops = 0
                tensors = [leaf for leaf in tree_leaves(args) if isinstance(leaf, torch.Tensor)]
                if tensors and flops:
                    short_name = str(packet).split(".")[-1]
                    kind = (
                        "conv" if "conv" in str(packet) else ("pointwise" if is_pointwise_op(short_name) else "matmul")
                    )
                    name = torch_dtype_roof_name(tensors[0].dtype, tensors[0].device.type, kind) or str(
                        tensors[0].dtype
                    )
                    self.flops_by_dtype[name] += flops
            else:
                short = str(packet).split(".", 1)[-1]
                if (
                    not getattr(func, "is_view", False)
                    and short not in ZERO_FLOP_OPS
                    and not short.startswith("_foreach_copy")
                ):
                    self.no_formula[str(packet)] += 1
            return out

    recorder = Recorder()
    with recorder, counter:
        result = fn(*args, **kwargs)
    written = {key: list(ranges) for key, ranges in recorder.written.items()}
    for leaf in tree_leaves(result):
        if isinstance(leaf, torch.Tensor):
            extent = tensor_extent(leaf)
            if extent is not None and extent[0] in recorder.created:
                written.setdefault(extent[0], []).append(extent[1])
    read_bytes = sum(union_length(ranges) for ranges in recorder.read.values())
    written_bytes = sum(union_length(ranges) for ranges in written.values())
    notes = []
    if recorder.ops == 0:
        notes.append("no torch ops ran: FLOPs and bytes cannot be counted (pass flops= and bytes_moved=)")
    return (
        CountResult(
            flops=int(counter.get_total_flops()),
            flops_by_dtype=dict(recorder.flops_by_dtype),
            read_bytes=int(read_bytes),
            written_bytes=int(written_bytes),
            uncounted_ops=dict(sorted(recorder.no_formula.items())),
            notes=tuple(notes),
        ),
        result,
    )
