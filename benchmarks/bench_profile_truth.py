"""Benchmark: ``gpuscope.profile``'s FLOP totals on the model zoo (tests/support/zoo.py) against
counters nobody here wrote, and the profile's overhead, all from one run.

References, per model (eval forward unless said):

- ``fvcore``: ``fvcore.nn.FlopCountAnalysis`` (TorchScript trace; counts one multiply-add as one
  "flop", so its ratio sits near 0.5 where both count the same work);
- ``deepspeed``: DeepSpeed's flops profiler ``get_model_profile`` (patches torch.nn.functional;
  2 FLOPs per MAC), when deepspeed imports;
- ``fcm-dec``: ``FlopCounterMode`` on the same forward with autograd enabled and math attention
  (the decomposed path), plus gpuscope's pointwise table; for ``train`` the training step itself,
  with an analytic convolution backward (tests/test_profile_zoo.py's reference);
- ``analytic``: 2 x in x out per row of every Linear/GPT-2 Conv1D, 2 x Cout x Cin/groups x k^2
  per output pixel of every Conv2d, and nn.MultiheadAttention's projections and attention matmuls,
  from forward hooks on the decomposed forward (no other attention, no elementwise ops).

Each ratio is gpuscope's total / the reference's. ``overhead`` = the profiled step's wall time /
the median unprofiled step (timed in the same run, before and after the profile; target <= 1.5).

    .venv/bin/python benchmarks/bench_profile_truth.py [--scale real|tiny] [--models gpt2,resnet]
        [--modes eval,train] [--steps 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def _analytic(model: Any, inputs: dict[str, Any]) -> int:
    import torch
    from torch import nn

    total = 0

    def hook(module: nn.Module, args: tuple[Any, ...], out: Any) -> None:
        nonlocal total
        if isinstance(module, nn.Linear):
            total += 2 * module.in_features * module.out_features * math.prod(out.shape[:-1])
        elif isinstance(module, nn.Conv2d):
            total += 2 * out.numel() * module.in_channels // module.groups * math.prod(module.kernel_size)
        elif type(module).__name__ == "Conv1D" and hasattr(module, "nf"):  # GPT-2's transposed linear
            total += 2 * module.weight.shape[0] * module.nf * math.prod(out.shape[:-1])
        elif isinstance(module, nn.MultiheadAttention):  # projections by weight, not by submodule calls
            query, key = args[0], args[1]
            width, batch_first = module.embed_dim, module.batch_first
            q_len, k_len = (query.shape[1], key.shape[1]) if batch_first else (query.shape[0], key.shape[0])
            batch = query.shape[0] if batch_first else query.shape[1]
            total += 2 * width * width * batch * (2 * q_len + 2 * k_len) + 4 * batch * q_len * k_len * width

    handles = [module.register_forward_hook(hook) for module in model.modules()]
    try:
        with torch.enable_grad():  # the decomposed path: fused fast paths would skip the submodules' hooks
            model(**inputs)
    finally:
        for handle in handles:
            handle.remove()
    return total


def _fvcore(model: Any, inputs: dict[str, Any]) -> float | str:
    try:
        from fvcore.nn import FlopCountAnalysis
    except ImportError as error:
        return f"not installed ({error})"
    import torch

    names = list(inputs)
    values = tuple(value for value in inputs.values() if isinstance(value, torch.Tensor))
    if len(values) != len(names):  # keyword flags (use_cache): wrap into a positional-only forward
        flags = {key: value for key, value in inputs.items() if not isinstance(value, torch.Tensor)}
        tensor_names = [key for key in names if key not in flags]

        class Positional(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = model

            def forward(self, *args: Any) -> Any:
                out = self.inner(**dict(zip(tensor_names, args)), **flags)
                return out.logits if hasattr(out, "logits") else out

        target: Any = Positional().eval()
    else:
        target = model
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            analysis = FlopCountAnalysis(target, values)
            analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
            analysis.tracer_warnings("none")
            return float(analysis.total())
    except Exception as error:  # noqa: BLE001 - a reference that cannot trace the model says why
        return f"failed: {type(error).__name__}: {str(error).splitlines()[0][:60] if str(error) else ''}"


def _deepspeed(model: Any, inputs: dict[str, Any]) -> float | str:
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            from deepspeed.profiling.flops_profiler import get_model_profile
    except Exception as error:  # noqa: BLE001
        return f"not importable ({type(error).__name__})"
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            flops, _macs, _params = get_model_profile(
                model, kwargs=dict(inputs), print_profile=False, detailed=False, as_string=False, warm_up=0
            )
        return float(flops)
    except Exception as error:  # noqa: BLE001
        return f"failed: {type(error).__name__}"


def _unprofiled(step: Any, n: int) -> list[float]:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    return times


def run_case(name: str, mode: str, scale: str, steps: int, tmp: Path) -> dict[str, Any]:
    import torch
    from support import zoo
    from support.zoo import reference_flops

    from gpuscope.profiling.api import profile

    case = zoo.build(name, mode, scale=scale)
    row: dict[str, Any] = {"model": name, "mode": mode, "scale": scale}
    case.step()
    before = _unprofiled(case.step, 3)
    started = time.perf_counter()
    result = profile(case.step, steps=steps, warmup=1, device="cpu", powercap_root=tmp / "none", energy=False,
                     name=f"{name} {mode}")  # fmt: skip
    row["profile_call_s"] = time.perf_counter() - started
    after = _unprofiled(case.step, 3)
    plain_s = statistics.median(before + after)
    row.update(gpuscope_flops=result.flops, matmul_class_flops=result.flop_counter_total,
               pointwise_flops=result.pointwise_flops, coverage=result.coverage, step_s=plain_s,
               profiled_step_s=result.step_s, overhead=result.step_s / plain_s)  # fmt: skip
    refs: dict[str, float | str] = {"fcm-dec": float(reference_flops(zoo.build(name, mode, scale=scale)))}
    if mode != "train":
        model, inputs = case.model, case.inputs
        refs["analytic"] = float(_analytic(model, inputs))
        refs["fvcore"] = _fvcore(model, inputs)
        refs["deepspeed"] = _deepspeed(model, inputs)
    row["references"] = refs
    row["ratios"] = {key: result.flops / value for key, value in refs.items() if isinstance(value, float) and value}
    del torch
    return row


def _cell(row: dict[str, Any], key: str, width: int) -> str:
    if key in row["ratios"]:
        return f"{row['ratios'][key]:{width}.3f}"
    return f"{'-' if key not in row['references'] else 'n/a':>{width}}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default="real", choices=["real", "tiny"])
    parser.add_argument(
        "--models", default="resnet,mobilenet,vit,vit_mha,convnext,unet,dlrm,gpt2,bert,llama,t5,mixtral"
    )
    parser.add_argument("--modes", default="eval,inference,train")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--json", type=Path)
    options = parser.parse_args(argv)
    import tempfile

    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; scale {options.scale}")
    print(f"{'model':9} {'mode':9} {'GFLOP':>8} {'cover':>6} {'fcm-dec':>8} {'analytic':>8} {'fvcore':>7} "
          f"{'deepspd':>7} {'ovh':>5}")  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in options.models.split(","):
            for mode in options.modes.split(","):
                row = run_case(name, mode, options.scale, options.steps, Path(tmp))
                rows.append(row)
                refs = row["references"]
                print(f"{name:9} {mode:9} {row['gpuscope_flops'] / 1e9:8.3f} {row['coverage'] * 100:5.1f}% "
                      f"{_cell(row, 'fcm-dec', 8)} {_cell(row, 'analytic', 8)} {_cell(row, 'fvcore', 7)} "
                      f"{_cell(row, 'deepspeed', 7)} "
                      f"{row['overhead']:5.2f}", flush=True)  # fmt: skip
                for key, value in refs.items():
                    if isinstance(value, str):
                        print(f"    {key}: {value}")
    if options.json:
        options.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
