"""gpuscope's FLOP formulas: one table for every aten op that ``torch.utils.flop_counter`` has no
formula for, or a wrong one, each row with its rule stated (``docs/profile.md`` shows the table).

Two kinds of rows:

- **matmul-class** (``kind="counter"``): attention, fused transformer paths, grouped matmuls and
  the corrected grouped-convolution backward. Reported with FlopCounterMode's own formulas.
- **elementwise** (``kind="pointwise"``): pointwise arithmetic, activations and their backward,
  reductions, softmax, norms, pooling, interpolation, embedding-bag sums, scatter-adds, MoE
  routing (top-k, sort, histogram) and the optimizers' ``_foreach_*`` ops. Reported apart as
  "pointwise" FLOPs.

A row whose ``corrects`` is set replaces an upstream formula; the text says what was wrong.
Rows may also bound the bytes of an op (gathers read the rows they gather, not the whole table).

Every row is installed in FlopCounterMode through its ``custom_mapping`` (:func:`flop_mapping`), so
composites that FlopCounterMode decomposes (``layer_norm`` under ``inference_mode``) are counted
through the rows of the ops they decompose into. torch is imported only inside functions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuscope.measuring import op_rules as r
from gpuscope.measuring.op_rules import ELEMENTWISE, Call

__all__ = [
    "Call",
    "ELEMENTWISE",
    "FORMULAS",
    "Formula",
    "formula_for",
    "formula_bytes",
    "flop_mapping",
    "is_pointwise_op",
    "pointwise_total",
    "split_flops",
    "table_markdown",
]


@dataclass(frozen=True)
class Formula:
    """One row: the ops it covers, its rule in words, and what it computes from a :class:`Call`."""

    ops: tuple[str, ...]  # aten op names without namespace ("convolution_backward")
    rule: str  # the rule as docs/profile.md states it
    flops: Callable[[Call], int]
    kind: str = "pointwise"  # "counter" (matmul-class) | "pointwise"
    corrects: str | None = None  # the upstream formula this row replaces, and why
    bytes: Callable[[Call], int] | None = None  # a byte count replacing the extent rule (gathers)


_CONV_BACKWARD_CORRECTION = (
    "torch 2.13's conv_backward_flop counts grad_weight as conv(x^T, grad_out^T) with all Cin x Cout "
    "channel pairs, ignoring groups: a grouped convolution's backward comes out (groups+1)/2 times too "
    "large (a depthwise Conv2d(64, groups=64) 32.5x)"
)

_ATTENTION_RULE_NOTE = "matmuls only: softmax not counted, as in torch's formulas for every fused attention kernel"

#: The table. The ``rule`` strings are what docs/profile.md shows.
FORMULAS: tuple[Formula, ...] = (
    # --- corrections of upstream formulas ---
    Formula(
        ("convolution_backward",),
        "each gradient asked for (output_mask: grad_input, grad_weight) costs one forward convolution: "
        "2 x N x Cout x Cin/groups x prod(kernel) x prod(output spatial); bias gradient not counted",
        r.convolution_backward,
        "counter",
        corrects=_CONV_BACKWARD_CORRECTION,
    ),
    # --- fused paths and attention ---
    Formula(
        ("_scaled_dot_product_flash_attention_for_cpu",),
        f"Q K^T and P V: 2 x B x H x Sq x Sk x (D + Dv); {_ATTENTION_RULE_NOTE}",
        r.flash_cpu_forward,
        "counter",
    ),
    Formula(
        ("_scaled_dot_product_flash_attention_for_cpu_backward",),
        "recomputed Q K^T, dO V^T, P^T dO, dS K, dS^T Q: 2 x B x H x Sq x Sk x (3D + 2Dv) "
        "(torch's rule for the CUDA flash backward)",
        r.flash_cpu_backward,
        "counter",
    ),
    Formula(
        ("_transformer_encoder_layer_fwd",),
        "nn.TransformerEncoderLayer's fused eval path, T tokens of width E (a nested input: its real tokens), "
        "FFN width F, B x H x S^2 scores: "
        "QKV + out projection + FFN 2 x T x E x (4E + 2F), QKV bias and Q scaling 4 x T x E, attention "
        f"4 x B x H x S^2 x E/H ({_ATTENTION_RULE_NOTE}), two layer norms 7 x T x E each, activation "
        "(gelu 8, relu 1) x T x F, two residual adds T x E",
        r.transformer_encoder_layer,
        "counter",
    ),
    Formula(
        ("_native_multi_head_attention",),
        "nn.MultiheadAttention's fused eval path: Q, K, V projections 2 x E^2 x (Tq + 2 Tk), their biases "
        "E x (Tq + 2 Tk), Q scaling Tq x E, out projection 2 x Tq x E^2, attention 4 x B x H x Sq x Sk x E/H "
        f"({_ATTENTION_RULE_NOTE})",
        r.native_multi_head_attention,
        "counter",
    ),
    Formula(
        ("_grouped_mm",),
        "grouped matmul (MoE experts): 2 x M x K x N over the rows the offsets cover (offs[-1]), per operand "
        "layout (2D x 3D, 3D x 2D, 2D x 2D split over K, 3D x 3D batched)",
        r.grouped_mm,
        "counter",
    ),
    # --- norms with options ---
    Formula(
        ("native_batch_norm", "_native_batch_norm_legit", "batch_norm"),
        "4 per input element ((x - mean) x rstd x weight + bias); + 3 when training (mean, variance)",
        r.batch_norm,
    ),
    Formula(
        ("_native_batch_norm_legit_no_training",),
        "4 per input element ((x - mean) x rstd x weight + bias)",
        r.batch_norm_no_training,
    ),
    Formula(("native_dropout",), "2 per element when training (mask multiply, scale), 0 otherwise", r.native_dropout),
    # --- gathers and scatters: embeddings, MoE routing ---
    Formula(
        ("embedding",),
        "0 FLOPs (a gather); bytes: indices + the gathered rows read + the output written",
        lambda call: 0,
        bytes=r.embedding_bytes,
    ),
    Formula(
        ("index_select",),
        "0 FLOPs (a gather); bytes: index + the selected rows read + the output written",
        lambda call: 0,
        bytes=r.index_select_bytes,
    ),
    Formula(
        ("gather",),
        "0 FLOPs; bytes: index + the gathered elements read + the output written",
        lambda call: 0,
        bytes=r.gather_bytes,
    ),
    Formula(
        ("index",),
        "0 FLOPs (advanced indexing); bytes: indices + the selected elements read + the output written",
        lambda call: 0,
        bytes=r.index_bytes,
    ),
    Formula(
        ("_embedding_bag", "_embedding_bag_forward_only"),
        "1 add (or max compare) per gathered element: indices x D; + indices x D multiplies with "
        "per_sample_weights; + bags x D divides for mode='mean'; bytes: the gathered rows, not the table",
        r.embedding_bag,
        bytes=r.embedding_bag_bytes,
    ),
    Formula(
        ("embedding_dense_backward", "embedding_backward"),
        "1 add per gradient element (scatter-add into the table)",
        r.per_grad_out(1),
    ),
    Formula(
        ("_embedding_bag_backward", "_embedding_bag_dense_backward", "_embedding_bag_sparse_backward"),
        "1 add per gathered element: indices x D",
        r.embedding_bag_backward,
    ),
    Formula(("index_add",), "1 add per source element", r.source_elements(3, "source")),
    Formula(
        ("scatter_add", "scatter_reduce", "index_reduce"),
        "1 add (or reduce) per source element",
        r.source_elements(3, "src"),
    ),
    Formula(
        ("index_put", "_index_put_impl"),
        "1 add per value when accumulate=True, else 0 (a scatter); bytes: indices + values read + the indexed "
        "elements written (+ read when accumulating), not the whole tensor (a KV cache written in place)",
        r.index_put,
        bytes=r.index_put_bytes,
    ),
    Formula(
        ("index_copy",),
        "0 FLOPs (a scatter of rows); bytes: index + the source rows read + the same rows written, not the "
        "whole tensor (a static KV cache's update)",
        lambda call: 0,
        bytes=r.index_copy_bytes,
    ),
    Formula(("topk",), "ceil(log2(k + 1)) comparisons per input element (heap selection)", r.topk),
    Formula(("sort", "argsort"), "ceil(log2(n)) comparisons per input element, n the sorted dimension", r.sort),
    # --- generation loops (issue 34.3): token tests and sampling ---
    Formula(
        ("isin",),
        "torch's choice: n x m comparisons (each of n elements against m test elements) when m < 10 x n^0.145, "
        "else a sort of the n + m values, (n + m) x ceil(log2(n + m)) + n + m; a scalar side counts 1",
        r.isin,
    ),
    Formula(
        ("multinomial",),
        "one sample or no replacement: p / q with q ~ Exp(1) (the draw: a random fill, 0) 1 per element + argmax "
        "1 per element (k samples: top-k, ceil(log2(k + 1)) per element); k > 1 samples with replacement: "
        "3 per element (normalise, cumulative sum) + ceil(log2(n)) per sample drawn",
        r.multinomial,
    ),
    # --- losses ---
    Formula(("nll_loss_forward", "nll_loss2d_forward"), "1 per target element (pick, negate-sum)", r.nll_loss),
    Formula(("nll_loss_backward", "nll_loss2d_backward"), "1 per target element", r.nll_loss_backward),
    # --- pooling ---
    Formula(
        (
            "max_pool1d",
            "max_pool2d",
            "max_pool3d",
            "max_pool2d_with_indices",
            "max_pool3d_with_indices",
            "max_pool1d_with_indices",
        ),
        "prod(kernel) comparisons per output element",
        r.max_pool,
    ),
    Formula(
        ("max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward"),
        "1 add per output-gradient element (into its argmax)",
        r.per_grad_out(1),
    ),
    Formula(("avg_pool1d", "avg_pool2d", "avg_pool3d"), "prod(kernel) adds + 1 divide per output element", r.avg_pool),
    Formula(
        ("avg_pool2d_backward", "avg_pool3d_backward"),
        "prod(kernel) adds + 1 divide per output-gradient element",
        r.avg_pool_backward,
    ),
    Formula(
        (
            "adaptive_avg_pool1d",
            "adaptive_avg_pool2d",
            "adaptive_avg_pool3d",
            "_adaptive_avg_pool2d",
            "_adaptive_avg_pool3d",
        ),
        "1 add per input element + 1 divide per output element",
        r.adaptive_avg_pool,
    ),
    Formula(
        ("_adaptive_avg_pool2d_backward", "_adaptive_avg_pool3d_backward"),
        "1 divide + 1 add per input-gradient element",
        r.per_out(2),
    ),
    Formula(
        ("adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d"),
        "1 comparison per input element",
        lambda call: call.numel(0, "self"),
    ),
    Formula(
        ("adaptive_max_pool2d_backward", "adaptive_max_pool3d_backward"),
        "1 add per output-gradient element",
        r.per_grad_out(1),
    ),
    # --- interpolation ---
    Formula(
        (
            "upsample_nearest1d",
            "upsample_nearest2d",
            "upsample_nearest3d",
            "_upsample_nearest_exact1d",
            "_upsample_nearest_exact2d",
            "_upsample_nearest_exact3d",
        ),
        "0 FLOPs (each output copies one input element)",
        lambda call: 0,
    ),
    Formula(
        (
            "upsample_nearest1d_backward",
            "upsample_nearest2d_backward",
            "upsample_nearest3d_backward",
            "_upsample_nearest_exact1d_backward",
            "_upsample_nearest_exact2d_backward",
            "_upsample_nearest_exact3d_backward",
        ),
        "1 add per output-gradient element",
        r.per_grad_out(1),
    ),
    Formula(("upsample_linear1d",), "3 per output element (2 weights x taps, 1 add)", r.per_out(3)),
    Formula(
        ("upsample_bilinear2d", "_upsample_bilinear2d_aa", "grid_sampler_2d"),
        "7 per output element (4 taps x weight, 3 adds)",
        r.per_out(7),
    ),
    Formula(("upsample_trilinear3d",), "15 per output element (8 taps x weight, 7 adds)", r.per_out(15)),
    Formula(
        ("upsample_bicubic2d", "_upsample_bicubic2d_aa"),
        "31 per output element (16 taps x weight, 15 adds)",
        r.per_out(31),
    ),
    Formula(("upsample_linear1d_backward",), "3 per output-gradient element", r.per_grad_out(3)),
    Formula(
        ("upsample_bilinear2d_backward", "_upsample_bilinear2d_aa_backward", "grid_sampler_2d_backward"),
        "7 per output-gradient element",
        r.per_grad_out(7),
    ),
    Formula(("upsample_trilinear3d_backward",), "15 per output-gradient element", r.per_grad_out(15)),
    Formula(("upsample_bicubic2d_backward",), "31 per output-gradient element", r.per_grad_out(31)),
    # --- fused optimizers ---
    Formula(
        ("_fused_adam", "_fused_adamw"),
        "11 per parameter element (as the foreach path: decay, 2 moments, sqrt, eps, divide, update)",
        r.fused_optimizer(11),
    ),
    Formula(("_fused_sgd",), "3 per parameter element (decay, momentum, update)", r.fused_optimizer(3)),
)


def _build_index() -> dict[str, Formula]:
    index: dict[str, Formula] = {}
    for name, (per, basis) in ELEMENTWISE.items():
        noun = r.ELEMENTWISE_BASIS[basis]
        index[name] = Formula((name,), f"{per:g} per {noun}", r.elementwise_flops(name))
    for row in FORMULAS:
        for name in row.ops:
            index[name] = row
    return index


_INDEX = _build_index()


def formula_for(op: str) -> Formula | None:
    """The row for aten op ``op`` (name without namespace; an in-place ``add_`` finds ``add``;
    ``_foreach_mul_`` the per-element rule of ``mul`` over every tensor of its first list)."""
    row = _INDEX.get(op)
    if row is None and op.endswith("_") and not op.endswith("__"):
        row = _INDEX.get(op[:-1])
    if row is None and op.startswith(r.FOREACH_PREFIX):
        base = op.removeprefix(r.FOREACH_PREFIX).rstrip("_")
        if base in ELEMENTWISE and base != "copy":
            per = ELEMENTWISE[base][0]
            return Formula((op,), f"{per:g} per element of every tensor of the first list ({base})",
                           functools.partial(r.foreach_flops, name=op))  # fmt: skip
    return row


def is_pointwise_op(op: str) -> bool:
    """Whether op's FLOPs are reported as pointwise (an elementwise row, not a matmul-class one)."""
    row = formula_for(op)
    return row is not None and row.kind == "pointwise"


def formula_bytes(op: str, args: Sequence[object], kwargs: Mapping[str, object], out: object) -> int | None:
    """Bytes of one call by the op's row, for rows that bound bytes (gathers); None otherwise."""
    row = formula_for(op)
    if row is None or row.bytes is None:
        return None
    try:
        return int(row.bytes(Call(args, kwargs, out)))
    except (RuntimeError, TypeError, ValueError, IndexError):
        return None


def _aten_names() -> list[str]:
    """Every aten op name the table can install, in-place and _foreach forms included."""
    import torch

    names = set(_INDEX)
    names |= {name + "_" for name in _INDEX}
    names |= {r.FOREACH_PREFIX + name for name in ELEMENTWISE} | {r.FOREACH_PREFIX + name + "_" for name in ELEMENTWISE}
    return sorted(name for name in names if hasattr(torch.ops.aten, name))


def flop_mapping(include: Callable[[Formula], bool] = lambda row: True) -> dict[Any, Any]:
    """The table as FlopCounterMode ``custom_mapping`` (aten overload packet -> raw formula). Rows
    replace torch's formula for the same op (the corrections). Imports torch."""
    import torch

    mapping: dict[Any, Any] = {}
    for name in _aten_names():
        row = formula_for(name)
        if row is None or not include(row):
            continue

        def formula(*args: object, out_val: object = None, _row: Formula = row, **kwargs: object) -> int:
            try:
                return int(_row.flops(Call(args, kwargs, out_val)))
            except (RuntimeError, TypeError, ValueError, IndexError, AssertionError):
                return 0

        formula._get_raw = True  # type: ignore[attr-defined]  # FlopCounterMode passes tensors, not shapes
        mapping[getattr(torch.ops.aten, name)] = formula
    return mapping


def table_markdown() -> str:
    """The table as docs/profile.md shows it: one row per formula (elementwise rows grouped by rule)."""
    lines = ["| ops | rule | kind |", "|---|---|---|"]
    for row in FORMULAS:
        kind = (
            "correction of torch's formula"
            if row.corrects
            else ("matmul-class" if row.kind == "counter" else "pointwise")
        )
        lines.append(f"| {', '.join(row.ops)} | {row.rule} | {kind} |")
    by_rule: dict[str, list[str]] = {}
    for name, (per, basis) in ELEMENTWISE.items():
        by_rule.setdefault(f"{per:g} per {r.ELEMENTWISE_BASIS[basis]}", []).append(name)
    for rule, names in by_rule.items():
        lines.append(f"| {', '.join(names)} | {rule} | pointwise |")
    lines.append("| _foreach_X (optimizers) | X's per-element rule x every tensor of the first list | pointwise |")
    return "\n".join(lines)


def _packet_op(packet: object) -> str:
    return str(packet).rsplit(".", 1)[-1] if str(packet).startswith("aten.") else ""


def split_flops(before: Mapping[object, int], after: Mapping[object, int]) -> tuple[int, int]:
    """FLOPs FlopCounterMode counted between two snapshots of its per-op counts (``flop_counts
    ["Global"]``), split into (matmul-class, pointwise): pointwise = this table's elementwise rows."""
    matmul = pointwise = 0
    for packet, count in after.items():
        delta = count - before.get(packet, 0)
        if delta:
            if is_pointwise_op(_packet_op(packet)):
                pointwise += delta
            else:
                matmul += delta
    return matmul, pointwise


def pointwise_total(counts: Mapping[object, int]) -> int:
    """The FLOPs of this table's elementwise rows in FlopCounterMode's per-op counts."""
    return sum(count for packet, count in counts.items() if is_pointwise_op(_packet_op(packet)))
