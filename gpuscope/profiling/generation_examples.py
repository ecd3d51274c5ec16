"""Generation workloads for ``gpuscope profile --generate N`` (and the tests): each function returns
``(model, inputs, generate_kwargs)`` for :func:`gpuscope.profiling.generation.profile_generation`::

    gpuscope profile gpuscope.profiling.generation_examples:llama --generate 32 --device cpu --roofs probe.json

A Llama-style ``transformers`` model from a config (random weights, seeded, nothing downloaded;
:func:`gpuscope.profiling.examples.build_llama`), a random prompt, greedy decoding with
``DynamicCache`` (or ``cache="static"``). torch is imported when a function runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuscope.profiling.examples import build_llama

if TYPE_CHECKING:
    import torch

__all__ = ["llama"]


def llama(
    prompt: int = 128,
    batch: int = 1,
    hidden: int = 1024,
    layers: int = 8,
    heads: int = 16,
    kv_heads: int = 4,
    intermediate: int = 2816,
    vocab: int = 32000,
    device: str | None = None,
    dtype: str = "float32",
    cache: str = "dynamic",
    sample: bool = False,
) -> tuple[torch.nn.Module, torch.Tensor, dict[str, bool | int | float | str]]:
    """The Llama model of :func:`~gpuscope.profiling.examples.build_llama`, a seeded random prompt
    ``(batch, prompt)`` and ``generate`` options: greedy (``sample=True``: top-k 50, top-p 0.9,
    temperature 0.7), ``cache`` ``"dynamic"`` (``torch.cat`` per step) or ``"static"``
    (``index_copy_`` into a preallocated cache)."""
    import torch

    model = build_llama(hidden, layers, heads, kv_heads, intermediate, vocab, device, dtype)
    first = next(model.parameters())
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (batch, prompt), generator=generator).to(first.device)
    options: dict[str, bool | int | float | str] = {"do_sample": sample, "pad_token_id": 0}
    if sample:
        options.update(top_k=50, top_p=0.9, temperature=0.7)
    if cache == "static":
        options["cache_implementation"] = "static"
    elif cache != "dynamic":
        raise ValueError(f"cache={cache!r}: 'dynamic' or 'static'")
    return model, ids, options
