"""Ready-made steps to profile (the acceptance workloads), e.g.::

    gpuscope profile gpuscope.profiling.examples:transformer_train_step --device cpu
    gpuscope profile gpuscope.profiling.examples:convnet_step --args-json '{"kwargs": {"batch": 8}}'
    gpuscope profile gpuscope.profiling.examples:llama_decode_step --device cpu --roofs probe.json

The Llama steps are inference as people run it: a Llama-style ``transformers`` model built from a
config (random weights, nothing downloaded), a prefill of a prompt, and one KV-cache decode step.

Each function builds its model and inputs once per argument set (cached), then runs one step.
torch is imported when a step runs.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

#: A model and the input it runs on.
Example = tuple["torch.nn.Module", "torch.Tensor"]

__all__ = [
    "build_convnet",
    "build_llama",
    "build_llama_decode",
    "build_transformer",
    "convnet_step",
    "convnet_train_step",
    "llama_decode_step",
    "llama_prefill_step",
    "transformer_step",
    "transformer_train_step",
]


def _device_dtype(device: str | None, dtype: str) -> tuple[torch.device, torch.dtype]:
    import torch

    resolved = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch_dtype = getattr(torch, dtype)
    if not isinstance(torch_dtype, torch.dtype):
        raise ValueError(f"dtype={dtype!r} is not a torch dtype")
    return resolved, torch_dtype


def _run(model_and_input: Example, train: bool) -> torch.Tensor | None:
    """The model's output on its input; with ``train``, zero the grads and backpropagate its sum (returns None)."""
    model, x = model_and_input
    if not train:
        out: torch.Tensor = model(x)
        return out
    model.zero_grad(set_to_none=True)
    model(x).sum().backward()
    return None


@functools.lru_cache(maxsize=4)
def build_transformer(
    d_model: int = 512,
    heads: int = 8,
    seq: int = 256,
    batch: int = 8,
    device: str | None = None,
    dtype: str = "float32",
) -> Example:
    """``torch.nn.TransformerEncoderLayer(d_model, heads, batch_first=True)`` and a random input
    ``(batch, seq, d_model)``, on ``device`` in ``dtype``. Seeded."""
    import torch

    resolved, torch_dtype = _device_dtype(device, dtype)
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=4 * d_model, batch_first=True).to(
        resolved, torch_dtype
    )
    x = torch.randn(batch, seq, d_model, device=resolved, dtype=torch_dtype)
    return layer, x


def transformer_step(
    d_model: int = 512,
    heads: int = 8,
    seq: int = 256,
    batch: int = 8,
    device: str | None = None,
    dtype: str = "float32",
    *,
    train: bool = False,
) -> torch.Tensor | None:
    """Forward of the TransformerEncoderLayer of :func:`build_transformer` with these arguments (grad
    enabled, as in training); with ``train``, forward + backward (loss = sum of the output)."""
    return _run(build_transformer(d_model, heads, seq, batch, device, dtype), train)


def transformer_train_step(
    d_model: int = 512,
    heads: int = 8,
    seq: int = 256,
    batch: int = 8,
    device: str | None = None,
    dtype: str = "float32",
) -> None:
    """Forward + backward of the TransformerEncoderLayer of :func:`build_transformer` with these arguments."""
    _run(build_transformer(d_model, heads, seq, batch, device, dtype), train=True)


@functools.lru_cache(maxsize=4)
def build_convnet(
    batch: int = 16, size: int = 32, channels: int = 32, device: str | None = None, dtype: str = "float32"
) -> Example:
    """A small conv net (3 conv + batch-norm + ReLU blocks, pooling, a linear head) and a random
    ``(batch, 3, size, size)`` input. Seeded."""
    import torch
    from torch import nn

    resolved, torch_dtype = _device_dtype(device, dtype)
    torch.manual_seed(0)

    def block(inputs: int, outputs: int) -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(inputs, outputs, 3, padding=1), nn.BatchNorm2d(outputs), nn.ReLU())

    net = nn.Sequential(
        block(3, channels),
        block(channels, channels),
        nn.MaxPool2d(2),
        block(channels, 2 * channels),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(2 * channels, 10),
    ).to(resolved, torch_dtype)
    x = torch.randn(batch, 3, size, size, device=resolved, dtype=torch_dtype)
    return net, x


def convnet_step(
    batch: int = 16,
    size: int = 32,
    channels: int = 32,
    device: str | None = None,
    dtype: str = "float32",
    *,
    train: bool = False,
) -> torch.Tensor | None:
    """Forward of the conv net of :func:`build_convnet` with these arguments; with ``train``, forward +
    backward (loss = sum of the output)."""
    return _run(build_convnet(batch, size, channels, device, dtype), train)


def convnet_train_step(
    batch: int = 16, size: int = 32, channels: int = 32, device: str | None = None, dtype: str = "float32"
) -> None:
    """Forward + backward of the conv net of :func:`build_convnet` with these arguments."""
    _run(build_convnet(batch, size, channels, device, dtype), train=True)


# --- Llama-style inference (transformers) --------------------------------------------------------


@functools.lru_cache(maxsize=2)
def build_llama(
    hidden: int = 1024,
    layers: int = 8,
    heads: int = 16,
    kv_heads: int = 4,
    intermediate: int = 2816,
    vocab: int = 32000,
    device: str | None = None,
    dtype: str = "float32",
) -> torch.nn.Module:
    """A ``transformers.LlamaForCausalLM`` built from a ``LlamaConfig`` with these sizes (grouped-query
    attention with ``kv_heads`` key/value heads, SDPA attention, untied output head), random weights
    (seeded; nothing is downloaded), in eval mode on ``device`` in ``dtype``. The defaults make
    155M parameters (620 MB in float32): far more than a CPU's last-level cache or a GPU's L2, so
    a decode step streams its weights from DRAM. Needs ``transformers``."""
    import torch

    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as exc:  # an optional dependency of the examples only
        raise ImportError(f"the Llama examples need transformers (pip install transformers): {exc}") from None
    resolved, torch_dtype = _device_dtype(device, dtype)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=8192,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    llama: Any = LlamaForCausalLM(config)  # transformers' typing of .to() is narrower than torch's
    model: torch.nn.Module = llama.to(resolved, torch_dtype).eval()
    return model


def _config(model: torch.nn.Module) -> Any:
    """The ``transformers`` config of a model of :func:`build_llama`."""
    return model.config


def _llama_args(
    hidden: int, layers: int, heads: int, kv_heads: int, intermediate: int, vocab: int, device: str | None, dtype: str
) -> tuple[int, int, int, int, int, int, str | None, str]:
    return hidden, layers, heads, kv_heads, intermediate, vocab, device, dtype


def _prompt(model: torch.nn.Module, batch: int, tokens: int) -> torch.Tensor:
    import torch

    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, int(_config(model).vocab_size), (batch, tokens), generator=generator)
    return ids.to(next(model.parameters()).device)


def llama_prefill_step(
    prompt: int = 512,
    batch: int = 1,
    hidden: int = 1024,
    layers: int = 8,
    heads: int = 16,
    kv_heads: int = 4,
    intermediate: int = 2816,
    vocab: int = 32000,
    device: str | None = None,
    dtype: str = "float32",
) -> torch.Tensor:
    """Prefill: the model of :func:`build_llama` reads a ``(batch, prompt)`` prompt into a fresh KV
    cache under ``torch.no_grad()`` and returns the next-token logits ``(batch, 1, vocab)``
    (``logits_to_keep=1``, as ``generate`` asks). Every weight is used ``batch x prompt`` times:
    compute-bound."""
    import torch
    from transformers import DynamicCache

    model = build_llama(*_llama_args(hidden, layers, heads, kv_heads, intermediate, vocab, device, dtype))
    ids = _llama_prompt(model, batch, prompt)
    with torch.no_grad():
        out = model(input_ids=ids, cache=DynamicCache(config=_config(model)), use_cache=True, logits_to_keep=1)
    logits: torch.Tensor = out.logits
    return logits


@functools.lru_cache(maxsize=4)
def _llama_prompt(model: torch.nn.Module, batch: int, tokens: int) -> torch.Tensor:
    return _prompt(model, batch, tokens)


@functools.lru_cache(maxsize=2)
def build_llama_decode(
    context: int = 512,
    batch: int = 1,
    hidden: int = 1024,
    layers: int = 8,
    heads: int = 16,
    kv_heads: int = 4,
    intermediate: int = 2816,
    vocab: int = 32000,
    device: str | None = None,
    dtype: str = "float32",
) -> tuple[torch.nn.Module, object, torch.Tensor]:
    """The model of :func:`build_llama`, a ``DynamicCache`` holding ``context`` prefilled tokens and the
    next token to decode ``(batch, 1)``."""
    import torch
    from transformers import DynamicCache

    model = build_llama(*_llama_args(hidden, layers, heads, kv_heads, intermediate, vocab, device, dtype))
    cache = DynamicCache(config=_config(model))
    with torch.no_grad():
        out = model(input_ids=_prompt(model, batch, context), cache=cache, use_cache=True, logits_to_keep=1)
    next_token = out.logits[:, -1:].argmax(-1)
    return model, cache, next_token


def _config_layers(cache: object) -> list[Any]:
    """The per-layer entries of a ``transformers`` cache (each with ``keys`` and ``values``)."""
    return list(getattr(cache, "layers", []))


@functools.lru_cache(maxsize=2)
def _llama_decode_state(
    context: int,
    batch: int,
    hidden: int,
    layers: int,
    heads: int,
    kv_heads: int,
    intermediate: int,
    vocab: int,
    device: str | None,
    dtype: str,
) -> tuple[torch.nn.Module, object, torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
    """:func:`build_llama_decode`'s model, cache and token, and each layer's prefilled keys and values."""
    model, cache, next_token = build_llama_decode(
        context, batch, hidden, layers, heads, kv_heads, intermediate, vocab, device, dtype
    )
    # Contiguous, as the cache is from the second decode step of ``generate`` on (torch.cat's
    # outputs); the prefill stores its keys and values as transposed views.
    prefilled = [(layer.keys.contiguous(), layer.values.contiguous()) for layer in _config_layers(cache)]
    return model, cache, next_token, prefilled


def llama_decode_step(
    context: int = 512,
    batch: int = 1,
    hidden: int = 1024,
    layers: int = 8,
    heads: int = 16,
    kv_heads: int = 4,
    intermediate: int = 2816,
    vocab: int = 32000,
    device: str | None = None,
    dtype: str = "float32",
) -> torch.Tensor:
    """One KV-cache decode step: ``batch`` new tokens attend to the ``context`` tokens of the cache of
    :func:`build_llama_decode` (under ``torch.no_grad()``, as ``generate`` runs it); returns the logits
    ``(batch, 1, vocab)``. The cache is set back to its ``context`` prefilled tokens first, so every
    call does the same work: the work of decoding token ``context + 1`` in ``generate``. Each weight
    is read once for ``batch`` tokens: memory-bound."""
    import torch

    model, cache, next_token, prefilled = _llama_decode_state(
        context, batch, *_llama_args(hidden, layers, heads, kv_heads, intermediate, vocab, device, dtype)
    )
    # Back to the prefilled keys and values (the tensors themselves: DynamicCache.crop would leave
    # views of the last step's larger ones), so every call decodes token ``context + 1``.
    for layer, (keys, values) in zip(_config_layers(cache), prefilled, strict=True):
        layer.keys, layer.values = keys, values
    with torch.no_grad():
        out = model(input_ids=next_token, cache=cache, use_cache=True, logits_to_keep=1)
    logits: torch.Tensor = out.logits
    return logits
