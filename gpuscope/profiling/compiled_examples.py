"""``torch.compile``'d acceptance workloads for ``gpuscope profile`` (and ``--compare-eager``):

    gpuscope profile gpuscope.profiling.compiled_examples:transformer_train_step --device cpu --compare-eager

The models of :mod:`gpuscope.profiling.examples` (a ``TransformerEncoderLayer``, the small conv net),
smaller by default (compiling is slow on a few cores), each compiled once per size
(``torch.compile`` with the default Inductor backend) and cached: the first call compiles.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from gpuscope.profiling.examples import build_convnet, build_transformer

if TYPE_CHECKING:
    import torch

__all__ = ["convnet_step", "convnet_train_step", "transformer_step", "transformer_train_step"]


@functools.lru_cache(maxsize=4)
def _compiled(kind: str, sizes: tuple[Any, ...]) -> tuple[Any, Any, Any]:
    """(module, its compiled form, input), built once per size."""
    import torch

    model, x = build_transformer(*sizes) if kind == "transformer" else build_convnet(*sizes)
    return model, torch.compile(model), x


def _run(kind: str, sizes: tuple[Any, ...], train: bool) -> torch.Tensor | None:
    model, compiled, x = _compiled(kind, sizes)
    if not train:
        out: torch.Tensor = compiled(x)
        return out
    model.zero_grad(set_to_none=True)
    compiled(x).sum().backward()
    return None


def transformer_step(
    d_model: int = 128, heads: int = 4, seq: int = 64, batch: int = 4, device: str | None = None,
    dtype: str = "float32", *, train: bool = False,
) -> torch.Tensor | None:  # fmt: skip
    """Forward of a compiled ``TransformerEncoderLayer`` (grad enabled); with ``train``, + backward."""
    return _run("transformer", (d_model, heads, seq, batch, device, dtype), train)


def transformer_train_step(
    d_model: int = 128, heads: int = 4, seq: int = 64, batch: int = 4, device: str | None = None,
    dtype: str = "float32",
) -> None:  # fmt: skip
    """Forward + backward of a compiled ``TransformerEncoderLayer`` (loss = sum of the output)."""
    _run("transformer", (d_model, heads, seq, batch, device, dtype), True)


def convnet_step(
    batch: int = 8, size: int = 32, channels: int = 16, device: str | None = None, dtype: str = "float32",
    *, train: bool = False,
) -> torch.Tensor | None:  # fmt: skip
    """Forward of the compiled conv net; with ``train``, + backward."""
    return _run("convnet", (batch, size, channels, device, dtype), train)


def convnet_train_step(
    batch: int = 8, size: int = 32, channels: int = 16, device: str | None = None, dtype: str = "float32"
) -> None:
    """Forward + backward of the compiled conv net (loss = sum of the output)."""
    _run("convnet", (batch, size, channels, device, dtype), True)
