"""A zoo of small real models, built without downloading anything: ``transformers`` configs with
random weights (GPT-2, BERT, Llama, T5, Mixtral) and vision/recommender models defined here
(ResNet, MobileNet with depthwise convolutions, a ViT on ``nn.TransformerEncoderLayer``, a ViT on
``nn.MultiheadAttention``, a ConvNeXt block stack, a U-Net-style segmenter with pooling and
upsampling, a DLRM-style recommender with ``nn.EmbeddingBag``).

Each model runs in three modes (:data:`MODES`): ``train`` (forward, loss, backward, AdamW step),
``eval`` (``model.eval()`` under ``torch.no_grad``: the fused fast paths) and ``inference``
(``model.eval()`` under ``torch.inference_mode``: composites recorded whole).

:func:`build` returns a :class:`ZooCase` whose ``step()`` runs one step of the mode, and whose
``forward()`` runs the same forward with autograd enabled (the decomposed path, for references).
``scale="tiny"`` keeps tests fast; ``scale="real"`` is for benchmarks.
"""

# mypy: disable-error-code="no-any-return"
# (nn.Module calls return Any: every forward below returns one)
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["MODELS", "MODES", "ZooCase", "build", "reference_flops"]

MODES = ("train", "eval", "inference")


@dataclass
class ZooCase:
    """One model, its input and one mode."""

    name: str
    mode: str
    model: nn.Module
    inputs: dict[str, Any]
    loss: Callable[[Any], torch.Tensor]
    optimizer: torch.optim.Optimizer | None

    def step(self) -> None:
        """One step of the mode."""
        if self.mode == "train":
            assert self.optimizer is not None
            self.loss(self.model(**self.inputs)).backward()
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        elif self.mode == "eval":
            with torch.no_grad():
                self.model(**self.inputs)
        else:
            with torch.inference_mode():
                self.model(**self.inputs)

    def forward(self) -> object:
        """The mode's forward with autograd enabled (the decomposed path), no backward."""
        with torch.enable_grad():
            return self.model(**self.inputs)


# --- vision and recommender models defined here -------------------------------------------


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.down(x))


class ResNet(nn.Module):
    """ResNet-18-shaped: stem conv 7x7/2, max pool, four stages of basic blocks, global pool, fc."""

    def __init__(self, width: int, blocks: int, classes: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
        )
        layers, cin = [], width
        for stage in range(4):
            cout = width * 2**stage
            for index in range(blocks):
                layers.append(BasicBlock(cin, cout, 2 if index == 0 and stage > 0 else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.layers(self.stem(x)), 1), 1))


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.reduce = nn.Conv2d(channels, max(channels // 4, 8), 1)
        self.expand = nn.Conv2d(max(channels // 4, 8), channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = F.hardsigmoid(self.expand(F.relu(self.reduce(F.adaptive_avg_pool2d(x, 1)))))
        return x * scale


class InvertedResidual(nn.Module):
    """MobileNetV3 block: 1x1 expand, depthwise kxk (groups = channels), squeeze-excite, 1x1 project."""

    def __init__(self, cin: int, cout: int, expand: int, kernel: int, stride: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.block = nn.Sequential(
            nn.Conv2d(cin, hidden, 1, bias=False),
            nn.BatchNorm2d(hidden),
            nn.Hardswish(),
            nn.Conv2d(hidden, hidden, kernel, stride, kernel // 2, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            nn.Hardswish(),
            SqueezeExcite(hidden),
            nn.Conv2d(hidden, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        )
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.residual else y


class MobileNet(nn.Module):
    def __init__(self, width: int, classes: int) -> None:
        super().__init__()
        w = width
        self.stem = nn.Sequential(nn.Conv2d(3, w, 3, 2, 1, bias=False), nn.BatchNorm2d(w), nn.Hardswish())
        self.blocks = nn.Sequential(
            InvertedResidual(w, w, 1, 3, 1),
            InvertedResidual(w, 2 * w, 4, 3, 2),
            InvertedResidual(2 * w, 2 * w, 3, 3, 1),
            InvertedResidual(2 * w, 3 * w, 3, 5, 2),
            InvertedResidual(3 * w, 3 * w, 6, 5, 1),
        )
        self.head = nn.Sequential(nn.Linear(3 * w, 4 * w), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(4 * w, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1), 1))


class PatchEmbed(nn.Module):
    def __init__(self, dim: int, patch: int, image: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, dim, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.proj(x).flatten(2).transpose(1, 2)
        return torch.cat([self.cls.expand(x.shape[0], -1, -1), tokens], dim=1) + self.pos


class ViT(nn.Module):
    """ViT on ``nn.TransformerEncoderLayer`` (pre-norm, GELU): its eval runs the fused fast path."""

    def __init__(self, dim: int, depth: int, heads: int, patch: int, image: int, classes: int) -> None:
        super().__init__()
        self.embed = PatchEmbed(dim, patch, image)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.1, activation="gelu", batch_first=True,
                                           norm_first=True)  # fmt: skip
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.encoder(self.embed(x))[:, 0]))


class MHABlock(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class ViTMHA(nn.Module):
    """ViT built from ``nn.MultiheadAttention`` blocks: its eval runs ``_native_multi_head_attention``."""

    def __init__(self, dim: int, depth: int, heads: int, patch: int, image: int, classes: int) -> None:
        super().__init__()
        self.embed = PatchEmbed(dim, patch, image)
        self.blocks = nn.Sequential(*[MHABlock(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.blocks(self.embed(x))).mean(dim=1))


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), 1e-6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.gamma * self.pwconv2(F.gelu(self.pwconv1(self.norm(y))))
        return x + y.permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    def __init__(self, dim: int, depths: tuple[int, ...], classes: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, dim, 4, 4)
        self.stem_norm = nn.GroupNorm(1, dim)  # channels-first layer norm
        stages: list[nn.Module] = []
        for index, depth in enumerate(depths):
            width = dim * 2**index
            if index:
                stages += [nn.GroupNorm(1, width // 2), nn.Conv2d(width // 2, width, 2, 2)]
            stages += [ConvNeXtBlock(width) for _ in range(depth)]
        self.stages = nn.Sequential(*stages)
        self.norm = nn.LayerNorm(dim * 2 ** (len(depths) - 1))
        self.head = nn.Linear(dim * 2 ** (len(depths) - 1), classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.stages(self.stem_norm(self.stem(x))).mean((-2, -1))))


class UNet(nn.Module):
    """A two-level U-Net: max pool down, bilinear and nearest upsampling, skip concatenation."""

    def __init__(self, width: int, classes: int) -> None:
        super().__init__()

        def double(cin: int, cout: int) -> nn.Module:
            return nn.Sequential(
                nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.SiLU(),
                nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.SiLU(),
            )  # fmt: skip

        self.down1 = double(3, width)
        self.down2 = double(width, 2 * width)
        self.bottom = double(2 * width, 4 * width)
        self.up2 = double(6 * width, 2 * width)
        self.up1 = double(3 * width, width)
        self.out = nn.Conv2d(width, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.down1(x)
        b = self.down2(F.max_pool2d(a, 2))
        c = self.bottom(F.avg_pool2d(b, 2))
        b = self.up2(torch.cat([F.interpolate(c, scale_factor=2, mode="bilinear", align_corners=False), b], 1))
        a = self.up1(torch.cat([F.interpolate(b, scale_factor=2, mode="nearest"), a], 1))
        return self.out(a)


class DLRM(nn.Module):
    """DLRM-style recommender: bottom MLP over dense features, ``nn.EmbeddingBag`` (sum) per sparse
    feature, pairwise dot-product interaction (bmm), top MLP."""

    def __init__(self, dim: int, tables: int, rows: int, dense: int) -> None:
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(dense, 4 * dim), nn.ReLU(), nn.Linear(4 * dim, dim), nn.ReLU())
        self.bags = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(tables))
        pairs = (tables + 1) * tables // 2
        self.top = nn.Sequential(nn.Linear(dim + pairs, 4 * dim), nn.ReLU(), nn.Linear(4 * dim, 1))

    def forward(self, dense: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        features = torch.stack([x] + [bag(indices[i], offsets) for i, bag in enumerate(self.bags)], dim=1)
        interactions = torch.bmm(features, features.transpose(1, 2))
        row, col = torch.triu_indices(features.shape[1], features.shape[1], 1)
        return self.top(torch.cat([x, interactions[:, row, col]], dim=1))


# --- builders --------------------------------------------------------------------------------

_Built = tuple[nn.Module, dict[str, Any], Callable[[Any], torch.Tensor]]


def _lm_loss(out: Any) -> torch.Tensor:
    return out.loss


def _sum_loss(out: Any) -> torch.Tensor:
    return out.float().pow(2).mean()


def _tokens(batch: int, seq: int, vocab: int) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq))


def _gpt2(tiny: bool) -> _Built:
    from transformers import GPT2Config, GPT2LMHeadModel

    dim, layers, heads, seq, batch = (64, 2, 4, 32, 2) if tiny else (768, 12, 12, 128, 1)
    vocab = 512 if tiny else 50257
    model = GPT2LMHeadModel(GPT2Config(n_embd=dim, n_layer=layers, n_head=heads, vocab_size=vocab, n_positions=1024))
    ids = _tokens(batch, seq, vocab)
    return model, {"input_ids": ids, "labels": ids, "use_cache": False}, _lm_loss


def _bert(tiny: bool) -> _Built:
    from transformers import BertConfig, BertForMaskedLM

    dim, layers, heads, seq, batch = (64, 2, 4, 32, 2) if tiny else (768, 12, 12, 128, 1)
    vocab = 512 if tiny else 30522
    config = BertConfig(hidden_size=dim, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=4 * dim, vocab_size=vocab)  # fmt: skip
    ids = _tokens(batch, seq, vocab)
    return BertForMaskedLM(config), {"input_ids": ids, "labels": ids}, _lm_loss


def _llama(tiny: bool) -> _Built:
    from transformers import LlamaConfig, LlamaForCausalLM

    dim, layers, heads, kv, seq, batch = (64, 2, 4, 2, 32, 2) if tiny else (512, 8, 8, 4, 128, 1)
    vocab = 512 if tiny else 32000
    config = LlamaConfig(hidden_size=dim, intermediate_size=int(2.75 * dim), num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv, vocab_size=vocab)  # fmt: skip
    ids = _tokens(batch, seq, vocab)
    return LlamaForCausalLM(config), {"input_ids": ids, "labels": ids, "use_cache": False}, _lm_loss


def _t5(tiny: bool) -> _Built:
    from transformers import T5Config, T5ForConditionalGeneration

    dim, layers, heads, seq, batch = (64, 2, 4, 32, 2) if tiny else (512, 6, 8, 128, 1)
    vocab = 512 if tiny else 32128
    config = T5Config(d_model=dim, d_ff=4 * dim, d_kv=dim // heads, num_heads=heads, num_layers=layers,
                      num_decoder_layers=layers, vocab_size=vocab)  # fmt: skip
    ids = _tokens(batch, seq, vocab)
    inputs = {"input_ids": ids, "decoder_input_ids": ids, "labels": ids, "use_cache": False}
    return T5ForConditionalGeneration(config), inputs, _lm_loss


def _mixtral(tiny: bool) -> _Built:
    from transformers import MixtralConfig, MixtralForCausalLM

    dim, layers, heads, kv, seq, batch = (64, 2, 4, 2, 32, 2) if tiny else (256, 4, 8, 4, 128, 1)
    vocab = 512 if tiny else 32000
    config = MixtralConfig(hidden_size=dim, intermediate_size=2 * dim, num_hidden_layers=layers,
                           num_attention_heads=heads, num_key_value_heads=kv, num_local_experts=4,
                           num_experts_per_tok=2, vocab_size=vocab)  # fmt: skip
    ids = _tokens(batch, seq, vocab)
    return MixtralForCausalLM(config), {"input_ids": ids, "labels": ids, "use_cache": False}, _lm_loss


def _image(batch: int, size: int) -> dict[str, Any]:
    return {"x": torch.randn(batch, 3, size, size)}


def _resnet(tiny: bool) -> _Built:
    width, blocks, size, batch = (8, 1, 32, 2) if tiny else (64, 2, 224, 1)
    return ResNet(width, blocks, 10 if tiny else 1000), _image(batch, size), _sum_loss


def _mobilenet(tiny: bool) -> _Built:
    width, size, batch = (8, 32, 2) if tiny else (24, 224, 1)
    return MobileNet(width, 10 if tiny else 1000), _image(batch, size), _sum_loss


def _vit(tiny: bool) -> _Built:
    dim, depth, heads, patch, size, batch = (64, 2, 4, 8, 32, 2) if tiny else (384, 6, 6, 16, 224, 1)
    return ViT(dim, depth, heads, patch, size, 10 if tiny else 1000), _image(batch, size), _sum_loss


def _vit_mha(tiny: bool) -> _Built:
    dim, depth, heads, patch, size, batch = (64, 2, 4, 8, 32, 2) if tiny else (384, 6, 6, 16, 224, 1)
    return ViTMHA(dim, depth, heads, patch, size, 10 if tiny else 1000), _image(batch, size), _sum_loss


def _convnext(tiny: bool) -> _Built:
    dim, depths, size, batch = (16, (1, 1), 32, 2) if tiny else (48, (2, 2, 4), 224, 1)
    return ConvNeXt(dim, depths, 10 if tiny else 1000), _image(batch, size), _sum_loss


def _unet(tiny: bool) -> _Built:
    width, size, batch = (8, 32, 2) if tiny else (32, 128, 1)
    return UNet(width, 4), _image(batch, size), _sum_loss


def _dlrm(tiny: bool) -> _Built:
    dim, tables, rows, batch, per_bag = (16, 4, 1000, 16, 8) if tiny else (64, 8, 100_000, 512, 32)
    indices = torch.randint(0, rows, (tables, batch * per_bag))
    offsets = torch.arange(0, batch * per_bag, per_bag)
    inputs = {"dense": torch.randn(batch, 13), "indices": indices, "offsets": offsets}
    return DLRM(dim, tables, rows, 13), inputs, _sum_loss


#: name -> builder(tiny) -> (model, inputs, loss of the output)
MODELS: dict[str, Callable[[bool], _Built]] = {
    "gpt2": _gpt2,
    "bert": _bert,
    "llama": _llama,
    "t5": _t5,
    "mixtral": _mixtral,
    "resnet": _resnet,
    "mobilenet": _mobilenet,
    "vit": _vit,
    "vit_mha": _vit_mha,
    "convnext": _convnext,
    "unet": _unet,
    "dlrm": _dlrm,
}


def build(name: str, mode: str, scale: str = "tiny", seed: int = 0) -> ZooCase:
    """Model ``name`` of :data:`MODELS` in ``mode`` of :data:`MODES`, random weights (seeded)."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")
    torch.manual_seed(seed)
    model, inputs, loss = MODELS[name](scale == "tiny")
    optimizer = None
    if mode == "train":
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    else:
        model.eval()
        inputs = {key: value for key, value in inputs.items() if key != "labels"}
    return ZooCase(name, mode, model, inputs, loss, optimizer)


def _conv_backward_reference(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, *args: Any, out_val: Any = None, **kwargs: Any
) -> int:
    """Analytic: grad_input and grad_weight each cost one forward convolution,
    2 x N x Cout x Cin/groups x prod(kernel) x prod(output spatial) (transposed: input spatial)."""
    transposed, mask = args[4], args[7]
    spatial = x.shape[2:] if transposed else grad_out.shape[2:]
    forward = 2 * x.shape[0] * weight.shape[0] * weight.shape[1] * math.prod(weight.shape[2:]) * math.prod(spatial)
    return forward * (int(bool(mask[0])) + int(bool(mask[1])))


_conv_backward_reference._get_raw = True  # type: ignore[attr-defined]  # FlopCounterMode passes tensors


def reference_flops(case: ZooCase) -> int:
    """FLOPs of the case's step by the decomposed path, independent of gpuscope's matmul-class rows:
    FlopCounterMode's own matmul, conv and attention formulas (math attention: bmm), an analytic
    convolution backward, MoE experts as an eager loop of matmuls, and gpuscope's pointwise table
    for elementwise ops. The training step runs as it is; eval and inference run their forward with
    autograd enabled (no fused fast paths)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from gpuscope.measuring.formulas import flop_mapping

    mapping = flop_mapping(include=lambda row: row.kind == "pointwise")
    mapping[torch.ops.aten.convolution_backward] = _conv_backward_reference
    model: Any = case.model
    experts = getattr(getattr(model, "config", None), "_experts_implementation", None)
    if experts not in (None, "eager"):
        model.set_experts_implementation("eager")
    try:
        counter = FlopCounterMode(display=False, custom_mapping=mapping)
        with sdpa_kernel(SDPBackend.MATH), counter:
            if case.mode == "train":
                case.step()
            else:
                case.forward()
    finally:
        if experts not in (None, "eager"):
            model.set_experts_implementation(experts)
    return int(counter.get_total_flops())
