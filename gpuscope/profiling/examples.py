"""Ready-made steps to profile (the acceptance workloads), e.g.::

    gpuscope profile gpuscope.profiling.examples:transformer_train_step --device cpu
    gpuscope profile gpuscope.profiling.examples:convnet_step --args-json '{"kwargs": {"batch": 8}}'

Each function builds its model and inputs once per argument set (cached), then runs one step.
torch is imported when a step runs.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

#: A model and the input it runs on.
Example = tuple["torch.nn.Module", "torch.Tensor"]

__all__ = [
    "build_convnet",
    "build_transformer",
    "convnet_step",
    "convnet_train_step",
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
