"""Tiny models compiled with ``torch.compile`` (Inductor, C++ backend on the CPU) for the compiled
profile tests: a transformer block, a convnet and a model with a deliberate graph break, each as an
inference step and a training step. Kept tiny: compiling is the slow part."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn


class Block(nn.Module):
    """A pre-norm transformer block: attention (SDPA) + GELU MLP."""

    def __init__(self, width: int = 32, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (t.view(batch, tokens, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        attended = nn.functional.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, tokens, width))
        out: torch.Tensor = x + self.mlp(self.norm2(x))
        return out


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
        )  # fmt: skip
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.features(x).mean(dim=(2, 3)))
        return out


class Breaking(nn.Module):
    """Two compiled graphs with a graph break between them (a print)."""

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.first = nn.Sequential(nn.Linear(width, 64), nn.ReLU())
        self.second = nn.Sequential(nn.LayerNorm(64), nn.Linear(64, width), nn.Tanh())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.first(x)
        torch._dynamo.graph_break()  # the deliberate break (torch.compiler has no public spelling)
        out: torch.Tensor = self.second(hidden)
        return out


@dataclass
class CompiledCase:
    """A compiled model with its input and its inference and training steps."""

    name: str
    model: nn.Module  # the eager module (its parameters are the compiled one's)
    compiled: Callable[..., torch.Tensor]
    inputs: torch.Tensor
    optimizer: torch.optim.Optimizer

    def infer(self) -> None:
        with torch.no_grad():
            self.compiled(self.inputs)

    def train(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        self.compiled(self.inputs).square().mean().backward()
        self.optimizer.step()


def make_case(name: str) -> CompiledCase:
    """A fresh compiled case (not yet run, so not yet compiled)."""
    torch.manual_seed(0)
    if name == "block":
        model: nn.Module = Block()
        inputs = torch.randn(2, 16, 32)
    elif name == "convnet":
        model = ConvNet()
        inputs = torch.randn(2, 3, 16, 16)
    elif name == "breaking":
        model = Breaking()
        inputs = torch.randn(8, 32)
    else:
        raise ValueError(name)
    return CompiledCase(
        name=name,
        model=model,
        compiled=torch.compile(model),
        inputs=inputs,
        optimizer=torch.optim.SGD(model.parameters(), lr=1e-3),
    )


def compiled_region_events(step: Callable[[], object]) -> list[str]:
    """The names of the compiled-region events one run of ``step`` shows in torch's profiler."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    return [
        event.name
        for event in prof.events()
        if event.name.startswith("Torch-Compiled Region") or "CompiledFxGraph" in event.name
    ]
