"""A hand-made profile in a results file, for tests and snapshots that need fixed numbers (a real
``gpuscope.profile`` run times differently every time).

``profile_results()`` is one CPU host (measured fp32 204 GFLOP/s, DRAM triad 23 GB/s) with a
``torch.nn.TransformerEncoderLayer`` forward (d_model 512, 8 heads, sequence 256, batch 8) as a
profile workload: ten groups with the fields ``gpuscope.profiling`` writes, each judged against
those roofs as the profiler does (time at roof, time lost, the step's speed-up), stored in order of
time lost.
"""

from __future__ import annotations

from typing import Any

from support.roofline import ceiling, results_document

__all__ = ["PROFILE_NAME", "CPU_FP32_FLOP_PER_S", "CPU_DRAM_BYTES_PER_S", "profile_group", "profile_results"]

PROFILE_NAME = "encoder layer fwd"
CPU_FP32_FLOP_PER_S = 204e9
CPU_DRAM_BYTES_PER_S = 23e9

#: (op, label, module, FLOPs, bytes, time_s): a TransformerEncoderLayer forward on 2048 tokens.
_GROUPS: tuple[tuple[str, str, str, float, float, float], ...] = (
    ("aten::addmm", "addmm fp32 2048x512, 512x2048", "linear1", 4.295e9, 25.2e6, 0.031),
    ("aten::addmm", "addmm fp32 2048x2048, 2048x512", "linear2", 4.295e9, 25.2e6, 0.029),
    ("aten::addmm", "addmm fp32 2048x512, 512x1536", "self_attn", 3.221e9, 19.9e6, 0.024),
    ("aten::addmm", "addmm fp32 2048x512, 512x512", "self_attn.out_proj", 1.074e9, 9.4e6, 0.0075),
    ("aten::bmm", "bmm fp32 64x256x64, 64x64x256", "self_attn", 536.9e6, 25.2e6, 0.0061),
    ("aten::_softmax", "_softmax fp32 64x256x256", "self_attn", 21.0e6, 33.6e6, 0.0042),
    ("aten::relu", "relu fp32 2048x2048", "activation", 4.19e6, 33.6e6, 0.0024),
    ("aten::native_layer_norm", "native_layer_norm fp32 2048x512", "norm1", 5.2e6, 8.4e6, 0.0021),
    ("aten::copy_", "copy_ fp32 2048x512", "self_attn", 0.0, 8.4e6, 0.0011),
    ("aten::add", "add fp32 2048x512, 2048x512", "", 1.05e6, 12.6e6, 0.0009),
)
_OUTSIDE_OPS_S = 0.0052


def profile_group(
    op: str, label: str, module: str, flops: float, nbytes: float, time_s: float, step_s: float
) -> dict[str, Any]:
    """One ``profile.groups`` entry judged against the CPU roofs above (seconds, FLOPs, bytes)."""
    intensity = flops / nbytes if nbytes > 0 else None
    if flops > 0 and intensity is not None:
        attainable = min(CPU_FP32_FLOP_PER_S, CPU_DRAM_BYTES_PER_S * intensity)
        at_roof_s = flops / attainable
        bound = "compute" if attainable >= CPU_FP32_FLOP_PER_S else "memory"
    else:  # moves bytes, computes nothing
        attainable, at_roof_s, bound = None, nbytes / CPU_DRAM_BYTES_PER_S, "memory"
    lost_s = max(0.0, time_s - at_roof_s)
    matmul = op in ("aten::addmm", "aten::bmm")
    return dict(
        op=op,
        label=label,
        shapes=[],
        dtype="fp32",
        calls=1.0,
        time_s=time_s,
        flops=flops,
        counter_flops=flops if matmul else 0,
        pointwise_flops=0 if matmul else flops,
        bytes=nbytes,
        counted=True,
        no_formula=False,
        modules=[f"TransformerEncoderLayer.{module}" if module else "TransformerEncoderLayer"],
        backward=False,
        bound=bound,
        roof="fp32" if bound == "compute" else "dram.triad",
        roof_source="measured",
        attainable_flop_per_s=attainable,
        time_at_roof_s=at_roof_s,
        time_lost_s=lost_s,
        efficiency=at_roof_s / time_s,
        step_speedup=step_s / (step_s - lost_s),
        intensity_flop_per_byte=intensity,
        above_roof=False,
        note=None,
    )


def profile_results(hostname: str = "node01") -> dict[str, Any]:
    """A results document: the CPU's measured roofs and one profile workload (see the module)."""
    ops_s = sum(group[5] for group in _GROUPS)
    step_s = ops_s + _OUTSIDE_OPS_S
    groups = sorted((profile_group(*group, step_s=step_s) for group in _GROUPS), key=lambda g: -g["time_lost_s"])
    flops = sum(group[3] for group in _GROUPS)
    nbytes = sum(group[4] for group in _GROUPS)
    workload = {
        "name": PROFILE_NAME,
        "device": "cpu",
        "host": hostname,
        "flops": flops,
        "bytes": nbytes,
        "bytes_rule": "sum over the step's ops of per op call: bytes read + written (a lower bound)",
        "dtype": "fp32",
        "time_s": step_s,
        "n": 3,
        "statistic": "mean of profiled steps",
        "flop_per_s": flops / step_s,
        "intensity_flop_per_byte": flops / nbytes,
        "warm": True,
        "source": "profile",
        "profile": {
            "version": 1,
            "steps": 3,
            "warmup_steps": 1,
            "time_basis": "cpu self time",
            "step_s": step_s,
            "ops_s": ops_s,
            "outside_ops_s": _OUTSIDE_OPS_S,
            "groups": groups,
            "modules": [],
        },
    }
    return results_document(
        hostname,
        devices=[{"device": "cpu", "type": "cpu", "name": "AMD EPYC 7B13", "host": hostname}],
        ceilings=[
            ceiling("cpu", "compute", "fp32", CPU_FP32_FLOP_PER_S),
            ceiling("cpu", "memory", "dram.triad", CPU_DRAM_BYTES_PER_S),
        ],
        workloads=[workload],
    )
