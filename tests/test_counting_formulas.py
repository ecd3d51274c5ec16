"""gpuscope's formula table (gpuscope.measuring.formulas) against analytic counts and against the
decomposed path of the same module: grouped/depthwise convolution backward, the fused transformer
and multi-head-attention fast paths, CPU flash attention, grouped matmuls, embedding bags, pooling,
interpolation and inference-mode composites."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from gpuscope.measuring.formulas import FORMULAS, flop_mapping, formula_for, table_markdown  # noqa: E402
from gpuscope.profiling.record import CountedStep, count_step  # noqa: E402

DOCS = Path(__file__).resolve().parent.parent / "docs" / "profile.md"


def total(step: CountedStep) -> int:
    return step.flop_counter_total + step.pointwise_flops


def by_op(step: CountedStep, name: str) -> int:
    return sum(record.flops for record in step.records if record.name == name)


def upstream_flops(fn) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        fn()
    return int(counter.get_total_flops())


def conv_forward_flops(conv: nn.Conv2d, out: torch.Tensor) -> int:
    return 2 * out.numel() * conv.in_channels // conv.groups * math.prod(conv.kernel_size)


@pytest.mark.parametrize("groups", [1, 4, 64], ids=["dense", "grouped", "depthwise"])
def test_convolution_backward_costs_two_forwards_whatever_the_groups(groups: int) -> None:
    torch.manual_seed(0)
    conv = nn.Conv2d(64, 64, 3, padding=1, groups=groups, bias=False)
    x = torch.randn(2, 64, 16, 16, requires_grad=True)
    out = conv(x)
    forward = conv_forward_flops(conv, out)

    def step() -> None:
        conv(x).sum().backward()

    counted = count_step(step)
    assert by_op(counted, "aten::convolution_backward") == 2 * forward  # grad_input + grad_weight
    upstream = upstream_flops(step) - forward
    assert upstream == forward * (groups + 1)  # torch's formula: grad_weight x groups
    if groups == 64:
        assert upstream / (2 * forward) == pytest.approx(32.5)


def test_convolution_backward_without_input_gradient_and_transposed() -> None:
    conv = nn.Conv2d(8, 16, 3, groups=2)
    x = torch.randn(1, 8, 10, 10)  # no grad for the input: grad_weight only
    counted = count_step(lambda: conv(x).sum().backward())
    assert by_op(counted, "aten::convolution_backward") == conv_forward_flops(conv, conv(x))
    deconv = nn.ConvTranspose2d(8, 16, 3, stride=2, groups=2)
    y = torch.randn(1, 8, 6, 6, requires_grad=True)
    forward = 2 * y.numel() * (16 // 2) * 9  # each input pixel meets Cout/groups x k x k weights
    counted = count_step(lambda: deconv(y).sum().backward())
    assert by_op(counted, "aten::convolution") == forward
    assert by_op(counted, "aten::convolution_backward") == 2 * forward


def _decomposed(fn) -> CountedStep:
    """The same call with autograd enabled and math attention: the decomposed path."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with torch.enable_grad(), sdpa_kernel(SDPBackend.MATH):
        return count_step(fn)


@pytest.mark.parametrize(("activation", "norm_first"), [("relu", False), ("gelu", True)])
def test_fused_encoder_layer_counts_like_its_decomposed_path(activation: str, norm_first: bool) -> None:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(64, 4, 128, activation=activation, batch_first=True, norm_first=norm_first)
    layer.eval()
    x = torch.randn(2, 24, 64)
    with torch.no_grad():
        fused = count_step(lambda: layer(x))
    assert {record.name for record in fused.records} >= {"aten::_transformer_encoder_layer_fwd"}
    decomposed = _decomposed(lambda: layer(x))
    assert "aten::_transformer_encoder_layer_fwd" not in decomposed.names
    # the math path also scales Q and K and runs the softmax (5 per score); fused attention counts
    # its matmuls only, as torch's formulas do for every fused attention kernel
    softmax, k_scaling = 5 * 2 * 4 * 24 * 24, 2 * 24 * 64
    assert total(decomposed) == total(fused) + softmax + k_scaling
    tokens, width, hidden = 2 * 24, 64, 128
    matmuls = 2 * tokens * width * (4 * width + 2 * hidden) + 4 * 2 * 24 * 24 * width
    assert fused.flop_counter_total >= matmuls  # the matmuls, plus norms and activation


def test_fused_multi_head_attention_counts_like_its_decomposed_path() -> None:
    torch.manual_seed(0)
    attention = nn.MultiheadAttention(64, 4, batch_first=True).eval()
    x = torch.randn(2, 20, 64)  # the fast path needs self-attention
    with torch.no_grad():
        fused = count_step(lambda: attention(x, x, x, need_weights=False))
    assert "aten::_native_multi_head_attention" in fused.names
    decomposed = _decomposed(lambda: attention(x, x, x, need_weights=False))
    tokens = 2 * 20
    expected = 2 * 64 * 64 * 4 * tokens + 4 * tokens * 64 + 4 * 2 * 20 * 20 * 64  # projections, biases, attention
    assert by_op(fused, "aten::_native_multi_head_attention") == expected
    softmax, k_scaling = 5 * 2 * 4 * 20 * 20, tokens * 64
    assert total(decomposed) == expected + softmax + k_scaling


def test_cpu_flash_attention_forward_and_backward() -> None:
    q, k, v = (torch.randn(2, 4, 32, 16, requires_grad=True) for _ in range(3))
    counted = count_step(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward())
    scores = 2 * 4 * 32 * 32
    assert by_op(counted, "aten::_scaled_dot_product_flash_attention_for_cpu") == 2 * scores * (16 + 16)
    assert by_op(counted, "aten::_scaled_dot_product_flash_attention_for_cpu_backward") == 2 * scores * (
        3 * 16 + 2 * 16
    )
    with torch.inference_mode():  # the composite recorded whole, counted through what it runs
        whole = count_step(lambda: F.scaled_dot_product_attention(q.detach(), k.detach(), v.detach()))
    assert by_op(whole, "aten::scaled_dot_product_attention") == 2 * scores * 32


def test_grouped_matmul_counts_the_rows_its_offsets_cover() -> None:
    tokens, k, n, groups = 20, 16, 24, 4
    a, b = torch.randn(tokens, k), torch.randn(groups, k, n)
    offsets = torch.tensor([3, 9, 9, 17], dtype=torch.int32)  # rows 17.. are not computed
    counted = count_step(lambda: torch._grouped_mm(a, b, offs=offsets))
    assert by_op(counted, "aten::_grouped_mm") == 2 * 17 * k * n


def test_embedding_bag_flops_and_bytes_gather_rows_not_the_table() -> None:
    bag = nn.EmbeddingBag(100_000, 32, mode="mean")
    indices, offsets = torch.randint(0, 100_000, (64,)), torch.arange(0, 64, 8)
    with torch.no_grad():
        counted = count_step(lambda: bag(indices, offsets))
    record = next(r for r in counted.records if r.name == "aten::_embedding_bag")
    assert record.flops == 64 * 32 + 8 * 32  # sums + mean divides
    table_bytes = 100_000 * 32 * 4
    assert record.bytes < table_bytes / 100
    assert record.bytes >= 64 * 32 * 4 + 8 * 32 * 4


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (lambda x: F.max_pool2d(x, 3, 2, 1), 9 * 2 * 8 * 8 * 8),
        (lambda x: F.avg_pool2d(x, 2), (4 + 1) * 2 * 8 * 8 * 8),
        (lambda x: F.adaptive_avg_pool2d(x, 2), 2 * 8 * 16 * 16 + 2 * 8 * 4),
        (lambda x: F.adaptive_avg_pool2d(x, 1), 2 * 8 * 16 * 16),  # a mean
        (lambda x: F.layer_norm(x, (16,)), 7 * 2 * 8 * 16 * 16),
        (lambda x: F.group_norm(x, 2), 7 * 2 * 8 * 16 * 16),
        (lambda x: F.batch_norm(x, torch.zeros(8), torch.ones(8)), 4 * 2 * 8 * 16 * 16),
        (lambda x: F.hardswish(x), 5 * 2 * 8 * 16 * 16),
        (lambda x: torch.topk(x.flatten(1), 3).values, 2 * 2 * 8 * 16 * 16),
        (lambda x: torch.sort(x, dim=1).values, 3 * 2 * 8 * 16 * 16),  # log2(8) comparisons per element
        (lambda x: torch.sort(x).values, 4 * 2 * 8 * 16 * 16),
    ],
    ids=["max_pool", "avg_pool", "adaptive_avg_pool", "global_avg_pool", "layer_norm", "group_norm",
         "batch_norm", "hardswish", "topk", "sort_dim1", "sort_last"],
)  # fmt: skip
def test_elementwise_rows_same_under_no_grad_and_inference_mode(fn, expected: int) -> None:
    x = torch.randn(2, 8, 16, 16)
    with torch.no_grad():
        plain = count_step(lambda: fn(x))
    with torch.inference_mode():
        whole = count_step(lambda: fn(x))  # composites recorded whole
    assert total(plain) == expected
    assert total(whole) == expected
    assert not [record.name for record in whole.records if record.no_formula]


def test_interpolation_counted_in_every_mode() -> None:
    x = torch.randn(2, 8, 16, 16, requires_grad=True)
    counted = count_step(lambda: F.interpolate(x, scale_factor=2, mode="bilinear").sum().backward())
    assert by_op(counted, "aten::upsample_bilinear2d") == 7 * 2 * 8 * 32 * 32
    assert by_op(counted, "aten::upsample_bilinear2d_backward") == 7 * 2 * 8 * 32 * 32
    counted = count_step(lambda: F.interpolate(x, scale_factor=2, mode="nearest").sum().backward())
    assert by_op(counted, "aten::upsample_nearest2d") <= 4 * 32  # a copy (and its index arithmetic)
    assert by_op(counted, "aten::upsample_nearest2d_backward") == 2 * 8 * 32 * 32
    for mode in ("bilinear", "nearest"):  # the composite .vec form: counted by what it decomposes into
        with torch.inference_mode():
            whole = count_step(lambda mode=mode: F.interpolate(x.detach(), scale_factor=2, mode=mode))
        assert not [record.name for record in whole.records if record.no_formula]


def test_training_step_ops_all_have_formulas() -> None:
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Hardswish(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.LazyLinear(4))  # fmt: skip
    x = torch.randn(2, 3, 12, 12)
    model(x)
    optimizer = torch.optim.AdamW(model.parameters(), foreach=True)

    def step() -> None:
        F.cross_entropy(model(x), torch.tensor([0, 3])).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()
    counted = count_step(step)
    assert not [record.name for record in counted.records if record.no_formula]
    parameters = sum(p.numel() for p in model.parameters())
    foreach = sum(r.pointwise_flops for r in counted.records if r.name.startswith("aten::_foreach_"))
    assert foreach >= 11 * parameters  # AdamW: decay, two moments, sqrt, eps, divide, update


def test_every_row_is_in_the_docs_and_corrections_say_so() -> None:
    docs = DOCS.read_text()
    assert table_markdown() in docs
    corrections = [row for row in FORMULAS if row.corrects]
    assert [row.ops for row in corrections] == [("convolution_backward",)]
    assert "(groups+1)/2" in corrections[0].corrects
    assert formula_for("add_") is formula_for("add")
    assert formula_for("_foreach_addcmul_") is not None and formula_for("_foreach_copy_") is None
    mapping = flop_mapping()
    assert torch.ops.aten.convolution_backward in mapping and torch.ops.aten._foreach_mul_ in mapping


def test_moe_routing_and_gathers_are_counted() -> None:
    """A hand-written top-2 mixture of experts: router, softmax, top-k, gathers, per-expert matmuls,
    index_add_ back into the tokens; forward and backward."""
    torch.manual_seed(0)
    tokens, width, experts = 32, 16, 4
    x = torch.randn(tokens, width, requires_grad=True)
    router = nn.Linear(width, experts)
    weights = nn.Parameter(torch.randn(experts, width, width))

    def step() -> None:
        probs = router(x).softmax(-1)
        top, chosen = probs.topk(2, dim=-1)
        out = torch.zeros_like(x)
        for expert in range(experts):
            rows, slot = torch.where(chosen == expert)
            picked = x.index_select(0, rows) @ weights[expert]
            out = out.index_add(0, rows, picked * top[rows, slot].unsqueeze(-1))
        out.sum().backward()

    counted = count_step(step)
    assert not [record.name for record in counted.records if record.no_formula]
    index_add = sum(r.flops for r in counted.records if r.name == "aten::index_add" and not r.backward)
    assert index_add == 2 * tokens * width  # every token reaches 2 experts: one add per element
    topk = next(r for r in counted.records if r.name == "aten::topk")
    assert topk.flops == tokens * experts * 2  # ceil(log2(3)) comparisons per score


def test_fused_encoder_on_a_nested_tensor_counts_the_real_tokens() -> None:
    """With a padding mask the encoder runs on a nested tensor: 36 real tokens of 48, sequences of
    24 and 12; the fused layer counts those, the decomposed path the padded batch."""
    torch.manual_seed(0)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 4, 128, batch_first=True), 2).eval()
    x, mask = torch.randn(2, 24, 64), torch.zeros(2, 24, dtype=torch.bool)
    mask[1, 12:] = True
    with torch.no_grad():
        counted = count_step(lambda: encoder(x, src_key_padding_mask=mask))
    assert not [record.name for record in counted.records if record.no_formula]
    tokens, scores = 36, 4 * (24 * 24 + 12 * 12)
    per_layer = 2 * tokens * 64 * (4 * 64 + 2 * 128) + 4 * scores * 16 + tokens * 64 * (4 + 14 + 2) + tokens * 128
    assert by_op(counted, "aten::_transformer_encoder_layer_fwd") == 2 * per_layer
