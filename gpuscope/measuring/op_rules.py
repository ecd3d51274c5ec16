"""How gpuscope counts the ops of its formula table (:mod:`gpuscope.measuring.formulas`): a call as
the formulas see it (:class:`Call`), the per-element rules (:data:`ELEMENTWISE`) and one function
per structured rule (attention, fused layers, grouped matmuls, convolution backward, gathers,
pooling, interpolation, routing). FLOPs per call; bytes where a rule bounds them. No torch import
at module level.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "Call",
    "ELEMENTWISE",
    "ELEMENTWISE_BASIS",
    "FOREACH_PREFIX",
    "adaptive_avg_pool",
    "avg_pool",
    "avg_pool_backward",
    "batch_norm",
    "batch_norm_no_training",
    "convolution_backward",
    "elementwise_flops",
    "embedding_bag",
    "embedding_bag_backward",
    "embedding_bag_bytes",
    "embedding_bytes",
    "flash_cpu_backward",
    "flash_cpu_forward",
    "foreach_flops",
    "fused_optimizer",
    "gather_bytes",
    "grouped_mm",
    "index_bytes",
    "index_copy_bytes",
    "index_put",
    "index_put_bytes",
    "isin",
    "index_select_bytes",
    "max_pool",
    "multinomial",
    "native_dropout",
    "native_multi_head_attention",
    "nll_loss",
    "nll_loss_backward",
    "per_grad_out",
    "per_out",
    "sort",
    "source_elements",
    "topk",
    "transformer_encoder_layer",
]


class Call:
    """One op call as a formula sees it: the op's arguments and its output (tensors, not shapes)."""

    def __init__(self, args: Sequence[object], kwargs: Mapping[str, object], out: object) -> None:
        self.args = tuple(args)
        self.kwargs = dict(kwargs)
        self.out = out

    def arg(self, index: int, name: str, default: object = None) -> object:
        """Positional argument ``index``, else keyword ``name``, else ``default``."""
        if index < len(self.args):
            return self.args[index]
        return self.kwargs.get(name, default)

    def shape(self, index: int, name: str = "") -> tuple[int, ...]:
        """Shape of the tensor argument (``()`` when it is not a tensor)."""
        return _shape(self.arg(index, name))

    def numel(self, index: int, name: str = "") -> int:
        """Elements of a tensor argument, or of every tensor in a list argument."""
        value = self.arg(index, name)
        if isinstance(value, (list, tuple)):
            return sum(_numel(item) for item in value)
        return _numel(value)

    def first_numel(self) -> int:
        """Elements of the first tensor (or tensor list) argument."""
        for value in self.args:
            if isinstance(value, (list, tuple)) and value and _is_tensor(value[0]):
                return sum(_numel(item) for item in value)
            if _is_tensor(value):
                return _numel(value)
        return 0

    def out_numel(self) -> int:
        """Elements of the (first) output."""
        out = self.out
        if isinstance(out, (list, tuple)):
            out = next((item for item in out if _is_tensor(item)), None)
        return _numel(out) if out is not None else 0


def _is_tensor(value: object) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _shape(value: object) -> tuple[int, ...]:
    if _is_tensor(value):
        try:
            return tuple(int(size) for size in value.shape)  # type: ignore[attr-defined]
        except (RuntimeError, TypeError):  # nested tensors have no regular shape
            return ()
    return ()


def _numel(value: object) -> int:
    if not _is_tensor(value):
        return 0
    try:
        return int(value.numel())  # type: ignore[attr-defined]
    except (RuntimeError, TypeError):
        return 0


def _nbytes(value: object) -> int:
    if not _is_tensor(value):
        return 0
    return _numel(value) * int(value.element_size())  # type: ignore[attr-defined]


# --- elementwise: FLOPs per element -----------------------------------------------------------

#: op -> (FLOPs per element, whose elements: "out" the output's, "in" the first input's). Special
#: functions (exp, tanh, erf) count one FLOP each, as hardware counters and ERT count them.
ELEMENTWISE: dict[str, tuple[float, str]] = {
    # arithmetic and math functions: one FLOP per output element
    **{
        name: (1, "out")
        for name in (
            "add sub rsub mul div neg reciprocal sqrt rsqrt exp exp2 expm1 log log2 log10 log1p pow maximum minimum "
            "abs square sign floor ceil round trunc frac floor_divide remainder fmod sin cos tan asin acos atan atan2 "
            "sinh cosh asinh acosh atanh erf erfc sgn "
            # comparisons and logic: one operation per output element
            "eq ne lt le gt ge logical_not logical_and logical_or logical_xor isnan isinf isfinite bitwise_and "
            "bitwise_or bitwise_xor bitwise_not"
        ).split()
    },
    "addcmul": (2, "out"),
    "addcdiv": (2, "out"),
    "lerp": (2, "out"),
    "clamp": (2, "out"),
    "clamp_min": (1, "out"),
    "clamp_max": (1, "out"),
    "xlogy": (2, "out"),
    "hypot": (3, "out"),
    "diff": (1, "out"),
    # activations
    "relu": (1, "out"),  # max(x, 0)
    "leaky_relu": (2, "out"),  # compare + multiply
    "sigmoid": (3, "out"),  # exp, add, divide
    "tanh": (1, "out"),  # one special function
    "silu": (4, "out"),  # x * sigmoid(x)
    "gelu": (8, "out"),  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): 7 arithmetic + 1 tanh (erf form alike)
    "hardswish": (5, "out"),  # x * clamp(x + 3, 0, 6) / 6
    "hardsigmoid": (4, "out"),  # clamp(x + 3, 0, 6) / 6
    "hardtanh": (2, "out"),
    "relu6": (2, "out"),
    "elu": (3, "out"),
    "selu": (4, "out"),
    "celu": (3, "out"),
    "softplus": (3, "out"),
    "mish": (5, "out"),
    "prelu": (2, "out"),
    "_prelu_kernel": (2, "out"),
    "log_sigmoid_forward": (4, "out"),
    "glu": (4, "out"),
    # activation backward: per gradient element
    "threshold_backward": (1, "out"),  # relu': select
    "gelu_backward": (10, "out"),
    "silu_backward": (6, "out"),
    "sigmoid_backward": (3, "out"),
    "tanh_backward": (3, "out"),  # g * (1 - y^2)
    "hardswish_backward": (4, "out"),
    "hardsigmoid_backward": (2, "out"),
    "hardtanh_backward": (2, "out"),
    "leaky_relu_backward": (2, "out"),
    "elu_backward": (3, "out"),
    "softplus_backward": (4, "out"),
    "mish_backward": (8, "out"),
    "glu_backward": (6, "in"),
    "_prelu_kernel_backward": (3, "in"),
    "native_dropout_backward": (2, "out"),  # g * mask * scale
    # reductions: one FLOP per input element
    **{
        name: (1, "in")
        for name in (
            "sum mean nansum amax amin max min argmax argmin aminmax all any prod cumsum cumprod logcumsumexp "
            "nonzero kthvalue median nanmedian mode bincount"
        ).split()
    },
    "var": (3, "in"),
    "std": (3, "in"),
    "var_mean": (3, "in"),
    "std_mean": (3, "in"),
    "norm": (2, "in"),
    "linalg_vector_norm": (2, "in"),
    "logsumexp": (4, "in"),
    "histc": (2, "in"),  # scale to a bin index, then count
    # softmax along a dim: max, subtract, exp, sum, divide
    "_softmax": (5, "in"),
    "_log_softmax": (5, "in"),
    "_safe_softmax": (5, "in"),
    "_masked_softmax": (5, "in"),
    "_softmax_backward_data": (4, "in"),  # y * (g - sum(g * y))
    "_log_softmax_backward_data": (3, "in"),  # g - exp(y) * sum(g)
    "_masked_softmax_backward": (4, "in"),
    # norms: layer norm = mean, subtract, square, variance sum, scale by 1/std, weight, bias
    "native_layer_norm": (7, "in"),
    "native_group_norm": (7, "in"),
    "_fused_rms_norm": (4, "in"),  # square, sum, scale, weight
    "native_layer_norm_backward": (11, "in"),
    "native_group_norm_backward": (11, "in"),
    "native_batch_norm_backward": (11, "in"),
    "_fused_rms_norm_backward": (7, "in"),
    "_transform_bias_rescale_qkv": (2, "in"),  # add bias, scale q
    # losses
    "mse_loss": (3, "in"),
    "mse_loss_backward": (2, "in"),
    "l1_loss": (2, "in"),
    "smooth_l1_loss": (4, "in"),
    "smooth_l1_loss_backward": (3, "in"),
    "binary_cross_entropy": (5, "in"),
    "binary_cross_entropy_backward": (5, "in"),
    "binary_cross_entropy_with_logits": (6, "in"),
}

#: per-element rules for the docs (the numbers above are the rule)
ELEMENTWISE_BASIS = {"out": "output element", "in": "input element"}

FOREACH_PREFIX = "_foreach_"


def elementwise_flops(name: str) -> Callable[[Call], int]:
    per, basis = ELEMENTWISE[name]

    def flops(call: Call) -> int:
        elements = call.first_numel() if basis == "in" else (call.out_numel() or call.first_numel())
        return int(per * elements)

    return flops


def foreach_flops(call: Call, name: str) -> int:
    per = ELEMENTWISE.get(name.removeprefix(FOREACH_PREFIX).rstrip("_"), (0, "out"))[0]
    return int(per * call.first_numel())


# --- matmul-class rows ------------------------------------------------------------------------


def _conv_forward_flops(x_shape: Sequence[int], w_shape: Sequence[int], out_shape: Sequence[int],
                        transposed: bool) -> int:  # fmt: skip
    """2 x batch x Cout x Cin/groups x prod(kernel) x prod(spatial) (spatial: the output's, the input's
    for a transposed convolution); w_shape is the weight's (its Cin is already per group)."""
    spatial = (x_shape if transposed else out_shape)[2:]
    c_out, c_in, *kernel = w_shape
    return 2 * x_shape[0] * c_out * c_in * math.prod(kernel) * math.prod(spatial)


def convolution_backward(call: Call) -> int:
    grad_out, x, weight = call.shape(0), call.shape(1), call.shape(2)
    transposed = bool(call.arg(7, "transposed"))
    mask = call.arg(10, "output_mask", (True, True, True))
    assert isinstance(mask, (list, tuple))
    if not (grad_out and x and weight):
        return 0
    # the forward's FLOPs: each of grad_input and grad_weight is one convolution of the same size
    if transposed:
        # weight (Cin, Cout/groups, k...): the forward ran 2 x N x Cin x Cout/groups x k per input pixel
        forward = 2 * x[0] * weight[0] * weight[1] * math.prod(weight[2:]) * math.prod(x[2:])
    else:
        forward = _conv_forward_flops(x, weight, grad_out, False)
    return forward * (int(bool(mask[0])) + int(bool(mask[1])))


def _sdpa_matmuls(q: Sequence[int], k: Sequence[int], v: Sequence[int]) -> int:
    """Q K^T and P V: 2 x B x H x Sq x Sk x (D + Dv); key/value heads broadcast to the query's (GQA)."""
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        return 0
    b, h, s_q, d = q
    s_k, d_v = k[2], v[3]
    return 2 * b * h * s_q * s_k * (d + d_v)


def _sdpa_backward_matmuls(q: Sequence[int], k: Sequence[int], v: Sequence[int]) -> int:
    """Recomputed Q K^T, dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q: 2 x B x H x Sq x Sk x (3D + 2Dv)."""
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        return 0
    b, h, s_q, d = q
    s_k, d_v = k[2], v[3]
    return 2 * b * h * s_q * s_k * (3 * d + 2 * d_v)


def flash_cpu_forward(call: Call) -> int:
    return _sdpa_matmuls(call.shape(0), call.shape(1), call.shape(2))


def flash_cpu_backward(call: Call) -> int:
    return _sdpa_backward_matmuls(call.shape(1), call.shape(2), call.shape(3))


def _tokens(value: object, width: int) -> int:
    """Tokens of a (batch, seq, width) tensor or a nested tensor of (seq, width) pieces."""
    if getattr(value, "is_nested", False):
        pieces: list[object] = list(value.unbind())  # type: ignore[attr-defined]
        return sum(_numel(piece) for piece in pieces) // max(width, 1)
    return _numel(value) // max(width, 1)


def _attention_scores(value: object, heads: int) -> int:
    """B x H x S x S of a (batch, seq, width) input (sum of S^2 over a nested tensor's pieces)."""
    if getattr(value, "is_nested", False):
        pieces: list[object] = list(value.unbind())  # type: ignore[attr-defined]
        return heads * sum(_shape(piece)[0] ** 2 for piece in pieces)
    shape = _shape(value)
    return heads * shape[0] * shape[1] * shape[1] if len(shape) == 3 else 0


def transformer_encoder_layer(call: Call) -> int:
    src = call.arg(0, "src")
    width = int(call.arg(1, "embed_dim"))  # type: ignore[call-overload]
    heads = int(call.arg(2, "num_heads"))  # type: ignore[call-overload]
    gelu = bool(call.arg(7, "use_gelu"))
    ffn = call.shape(14, "ffn_weight_1")
    hidden = ffn[0] if ffn else 4 * width
    tokens = _tokens(src, width)
    scores = _attention_scores(src, heads)
    head_dim = width // max(heads, 1)
    matmuls = 2 * tokens * width * (3 * width + width + 2 * hidden) + 2 * scores * 2 * head_dim
    # QKV bias + Q scaling (4), two layer norms, two residual adds
    elementwise = tokens * width * (4 + 2 * ELEMENTWISE["native_layer_norm"][0] + 2) + tokens * hidden * (
        ELEMENTWISE["gelu"][0] if gelu else ELEMENTWISE["relu"][0]
    )
    return int(matmuls + elementwise)


def native_multi_head_attention(call: Call) -> int:
    query, key = call.arg(0, "query"), call.arg(1, "key")
    width = int(call.arg(3, "embed_dim"))  # type: ignore[call-overload]
    heads = int(call.arg(4, "num_head"))  # type: ignore[call-overload]
    q_tokens, k_tokens = _tokens(query, width), _tokens(key, width)
    q_shape, k_shape = _shape(query), _shape(key)
    if len(q_shape) == 3 and len(k_shape) == 3:
        scores = q_shape[0] * heads * q_shape[1] * k_shape[1]
    else:
        scores = _attention_scores(query, heads)
    head_dim = width // max(heads, 1)
    projections = 2 * width * width * (q_tokens + 2 * k_tokens) + 2 * q_tokens * width * width
    bias_and_scale = width * (q_tokens + 2 * k_tokens) + q_tokens * width
    return int(projections + bias_and_scale + 2 * scores * 2 * head_dim)


def _read_last(value: object) -> int | None:
    """The last element of a small integer tensor (grouped-matmul offsets), None when unreadable."""
    if not _is_tensor(value) or _numel(value) == 0:
        return None
    try:
        from torch.utils._python_dispatch import _disable_current_modes

        with _disable_current_modes():
            if value.device.type == "meta":  # type: ignore[attr-defined]
                return None
            return int(value[-1])  # type: ignore[index]
    except (RuntimeError, TypeError, NotImplementedError):
        return None


def grouped_mm(call: Call) -> int:
    a, b = call.shape(0, "mat_a"), call.shape(1, "mat_b")
    used = _read_last(call.arg(2, "offs"))
    if len(a) == 2 and len(b) == 3:  # tokens sorted by group x per-group weights
        return 2 * (used if used is not None else a[0]) * a[1] * b[2]
    if len(a) == 3 and len(b) == 2:
        return 2 * a[1] * a[2] * (used if used is not None else b[1])
    if len(a) == 2 and len(b) == 2:  # per-group weight gradients: the contraction is split by offs
        return 2 * a[0] * b[1] * (used if used is not None else a[1])
    if len(a) == 3 and len(b) == 3:
        return 2 * a[0] * a[1] * a[2] * b[2]
    return 0


# --- gathers, scatters, pooling, interpolation, routing ----------------------------------------


def embedding_bytes(call: Call) -> int:
    """indices + the gathered rows (= the output) read + the output written."""
    return _nbytes(call.arg(1, "indices")) + 2 * _nbytes(call.out)


def index_select_bytes(call: Call) -> int:
    return _nbytes(call.arg(2, "index")) + 2 * _nbytes(call.out)


def gather_bytes(call: Call) -> int:
    return _nbytes(call.arg(2, "index")) + 2 * _nbytes(call.out)


def index_bytes(call: Call) -> int:
    indices = call.arg(1, "indices")
    index_bytes = sum(_nbytes(item) for item in indices) if isinstance(indices, (list, tuple)) else 0
    return index_bytes + 2 * _nbytes(call.out)


def _embedding_bag_out(call: Call) -> object:
    return call.out[0] if isinstance(call.out, (list, tuple)) else call.out


def embedding_bag(call: Call) -> int:
    weight, indices = call.shape(0, "weight"), call.numel(1, "indices")
    width = weight[1] if len(weight) == 2 else 0
    mode = int(call.arg(4, "mode", 0) or 0)  # type: ignore[call-overload]  # 0 sum, 1 mean, 2 max
    weighted = _is_tensor(call.arg(6, "per_sample_weights"))
    bags = _shape(_embedding_bag_out(call))[0] if _shape(_embedding_bag_out(call)) else 0
    return indices * width * (1 + int(weighted)) + (bags * width if mode == 1 else 0)


def embedding_bag_bytes(call: Call) -> int:
    weight = call.arg(0, "weight")
    row_bytes = (_shape(weight)[1] if len(_shape(weight)) == 2 else 0) * (
        int(weight.element_size()) if _is_tensor(weight) else 0  # type: ignore[attr-defined]
    )
    reads = call.numel(1, "indices") * row_bytes + _nbytes(call.arg(1, "indices")) + _nbytes(call.arg(2, "offsets"))
    reads += _nbytes(call.arg(6, "per_sample_weights"))
    return reads + _nbytes(_embedding_bag_out(call))


def embedding_bag_backward(call: Call) -> int:
    return call.numel(1, "indices") * (_shape(call.arg(0, "grad"))[-1] if _shape(call.arg(0, "grad")) else 0)


def source_elements(index: int, name: str) -> Callable[[Call], int]:
    def flops(call: Call) -> int:
        return call.numel(index, name)

    return flops


def index_put(call: Call) -> int:
    return call.numel(2, "values") if bool(call.arg(3, "accumulate", False)) else 0


def _kernel_elements(call: Call) -> int:
    kernel = call.arg(1, "kernel_size")
    if isinstance(kernel, int):
        dims = max(len(_shape(call.arg(0, "self"))) - 2, 1)
        return int(kernel**dims)
    return math.prod(int(size) for size in kernel) if isinstance(kernel, (list, tuple)) and kernel else 1


def max_pool(call: Call) -> int:
    return _kernel_elements(call) * call.out_numel()


def avg_pool(call: Call) -> int:
    return (_kernel_elements(call) + 1) * call.out_numel()


def avg_pool_backward(call: Call) -> int:
    kernel = call.arg(2, "kernel_size")
    size = math.prod(int(k) for k in kernel) if isinstance(kernel, (list, tuple)) and kernel else 1
    return (size + 1) * call.numel(0, "grad_output")


def adaptive_avg_pool(call: Call) -> int:
    return call.numel(0, "self") + call.out_numel()


def batch_norm(call: Call) -> int:
    training = call.arg(5, "training", False)
    if not isinstance(training, bool):  # _native_batch_norm_legit.no_stats(input, weight, bias, training, ...)
        training = call.arg(3, "training", False)
    return (7 if training is True else 4) * call.numel(0, "input")


def batch_norm_no_training(call: Call) -> int:
    return 4 * call.numel(0, "input")


def native_dropout(call: Call) -> int:
    train = call.arg(2, "train", True)
    return 2 * call.numel(0, "input") if train is None or bool(train) else 0


def topk(call: Call) -> int:
    k = int(call.arg(1, "k", 1) or 1)  # type: ignore[call-overload]
    return call.numel(0, "self") * max(1, math.ceil(math.log2(k + 1)))


def sort(call: Call) -> int:
    shape = call.shape(0, "self")
    dim = call.arg(1, "dim", -1)  # sort(self, dim, descending), argsort(self, dim, descending)
    if isinstance(dim, bool) or not isinstance(dim, int):  # sort.stable(self, *, stable, dim, descending)
        dim = call.kwargs.get("dim", -1)
    length = shape[dim] if shape and isinstance(dim, int) and -len(shape) <= dim < len(shape) else 1
    return call.numel(0, "self") * max(1, math.ceil(math.log2(max(length, 2))))


def nll_loss(call: Call) -> int:
    return call.numel(1, "target")


def nll_loss_backward(call: Call) -> int:
    return call.numel(2, "target")


def per_out(per: int) -> Callable[[Call], int]:
    def flops(call: Call) -> int:
        return per * call.out_numel()

    return flops


def per_grad_out(per: int) -> Callable[[Call], int]:
    def flops(call: Call) -> int:
        return per * call.numel(0, "grad_output")

    return flops


def fused_optimizer(per: int) -> Callable[[Call], int]:
    def flops(call: Call) -> int:
        return per * call.numel(0, "self")

    return flops


# --- generation loops: token tests, sampling, cache writes (issue 34.3) ----------------------


def isin(call: Call) -> int:
    """Comparisons of ``isin``: torch's own choice of algorithm (numpy's heuristic): brute force
    (each element against each test element, at most n x m) when m < 10 x n^0.145, else a sort of
    the n + m values, (n + m) x ceil(log2(n + m)), and one compare per value. A scalar side counts 1."""
    elements, tests = call.arg(0, "elements"), call.arg(1, "test_elements")
    n = _numel(elements) if _is_tensor(elements) else 1
    m = _numel(tests) if _is_tensor(tests) else 1
    if n == 0 or m == 0:
        return 0
    if not (_is_tensor(elements) and _is_tensor(tests)) or m < int(10.0 * n**0.145):
        return n * m
    total = n + m
    return total * max(1, math.ceil(math.log2(total))) + total


def multinomial(call: Call) -> int:
    """``multinomial`` as torch runs it: one sample or no replacement draws q ~ Exp(1) (a random fill,
    0), divides p / q (1 per element) and takes the argmax (1 per element) or the top k
    (ceil(log2(k + 1)) per element); k > 1 samples with replacement normalise and sum cumulatively
    (3 per element) and binary-search each sample (ceil(log2(n)) per sample)."""
    probs = call.arg(0, "self")
    samples = int(call.arg(1, "num_samples", 1) or 1)  # type: ignore[call-overload]
    replacement = bool(call.arg(2, "replacement", False))
    elements = _numel(probs)
    shape = _shape(probs)
    categories = shape[-1] if shape else 1
    rows = elements // max(categories, 1)
    if not replacement or samples == 1:
        select = 1 if samples == 1 else max(1, math.ceil(math.log2(samples + 1)))
        return int(elements * (1 + select))
    return int(3 * elements + rows * samples * max(1, math.ceil(math.log2(max(categories, 2)))))


def index_copy_bytes(call: Call) -> int:
    """index + the source rows read + the same rows written into ``self`` (not the whole tensor)."""
    return _nbytes(call.arg(2, "index")) + 2 * _nbytes(call.arg(3, "source"))


def index_put_bytes(call: Call) -> int:
    """indices + values read + the indexed elements written (each value broadcast to the indexed
    positions: full dimensions for ``None`` entries x the broadcast index x the dimensions left
    unindexed); + those elements read when accumulating. Not the whole of ``self``."""
    indices = call.arg(1, "indices")
    entries = list(indices) if isinstance(indices, (list, tuple)) else []
    index_tensors = [entry for entry in entries if _is_tensor(entry)]
    values, target = call.arg(2, "values"), call.arg(0, "self")
    shape = _shape(target)
    written = _nbytes(values)
    boolean = any("bool" in str(getattr(entry, "dtype", "")) for entry in index_tensors)
    if index_tensors and shape and not boolean and len(entries) <= len(shape):
        positions = max(_numel(entry) for entry in index_tensors)
        for size, entry in zip(shape, entries):
            positions *= size if entry is None else 1
        positions *= math.prod(shape[len(entries) :])
        written = max(written, positions * int(target.element_size()))  # type: ignore[attr-defined]
    accumulate = bool(call.arg(3, "accumulate", False))
    return sum(_nbytes(entry) for entry in index_tensors) + _nbytes(values) + written * (2 if accumulate else 1)
