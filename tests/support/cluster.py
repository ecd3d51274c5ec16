"""A hand-made multi-rank results file (what ``gpuscope probe --distributed`` writes), merged by
the real :func:`gpuscope.probing.cluster.merge_rank_results`: no torch, no torchrun.

``multi_rank_results()``: 4 ranks on 2 hosts (``node-a`` ranks 0-1, ``node-b`` ranks 2-3), one
H100 each (``cuda:<local rank>``), bf16/fp32/DRAM/H2D ceilings, one measurement per ceiling and
one workload per rank. Rank 2's bf16 ceiling is ``slow_fraction`` of the others (a straggler);
rank 3's DRAM ceiling is 4% low (within the 10% margin: not a straggler).
"""

from __future__ import annotations

from typing import Any

__all__ = ["GPU_NAME", "STRAGGLER_RANK", "multi_rank_results"]

GPU_NAME = "NVIDIA H100 80GB HBM3"
#: The rank whose bf16 ceiling is slow in :func:`multi_rank_results`.
STRAGGLER_RANK = 2

_N = 8192


def _rank_document(
    rank: int, host: str, device: str, bf16_flop_per_s: float, dram_bytes_per_s: float
) -> dict[str, Any]:
    measurements: list[dict[str, Any]] = []
    ceilings: list[dict[str, Any]] = []

    def add(kind: str, name: str, ceiling: str, value: float, unit: str, flops: float, nbytes: float) -> None:
        mid = f"m{len(measurements) + 1:04d}"
        rate_of = flops if unit == "FLOP/s" else nbytes
        time_s = rate_of / value
        measurements.append(
            dict(
                id=mid,
                kind=kind,
                name=name,
                device=device,
                parameters={"dtype": ceiling} if kind == "matmul" else {},
                flops=flops,
                bytes=nbytes,
                samples_s=[time_s, time_s * 1.01, time_s * 1.02],
                statistic="best",
                time_s=time_s,
                flop_per_s=flops / time_s if flops else None,
                bytes_per_s=nbytes / time_s,
                status="ok",
                error=None,
            )
        )
        ceiling_kind = "compute" if unit == "FLOP/s" else ("memory" if kind == "memory" else "transfer")
        ceilings.append({"device": device, "kind": ceiling_kind,
                         "name": ceiling, "value": value, "unit": unit, "measurement_id": mid})  # fmt: skip

    gemm_flops, gemm_bytes = 2.0 * _N**3, 3.0 * _N * _N * 2
    add("matmul", f"matmul bf16 {_N}x{_N}x{_N}", "bf16", bf16_flop_per_s, "FLOP/s", gemm_flops, gemm_bytes)
    add("matmul", "matmul fp32 4096x4096x4096", "fp32", 60e12, "FLOP/s", 2.0 * 4096**3, 3.0 * 4096 * 4096 * 4)
    add("memory", "memory triad 1 GiB", "dram.triad", dram_bytes_per_s, "B/s", 0.0, 3.0 * 2**30)
    add("transfer", "h2d pinned 256 MiB", "h2d.pinned", 53e9, "B/s", 0.0, 2.0**28)
    return {
        "schema": "gpuscope.results",
        "schema_version": 1,
        "gpuscope_version": "0.1.0",
        "created": 1_700_000_100.0,
        "system": {"hostname": host, "cpu_model": "Fake CPU 9000", "driver": "550.54.15"},
        "devices": [{"device": device, "type": "gpu", "name": GPU_NAME, "memory_total_bytes": 80e9}],
        "measurements": measurements,
        "ceilings": ceilings,
        "workloads": [
            {
                "name": f"gemm {_N} bf16",
                "device": device,
                "dtype": "bf16",
                "flops": gemm_flops,
                "bytes": gemm_bytes,
                "bytes_rule": "distinct tensors",
                "time_s": gemm_flops / (bf16_flop_per_s * 0.9),
                "n": 10,
                "source": "measure",
            }
        ],
        "warnings": [],
        "duration_s": 30.0,
    }


def multi_rank_results(
    hosts: tuple[str, str] = ("node-a", "node-b"), slow_fraction: float = 0.8, margin: float = 0.10
) -> dict[str, Any]:
    """The merged results document of a 4-rank, 2-host run; rank :data:`STRAGGLER_RANK`'s bf16
    ceiling is ``slow_fraction`` of the others' (a straggler below ``1 - margin``)."""
    import json

    from gpuscope.probing.cluster import RankReport, merge_rank_results
    from gpuscope.results import to_results
    from gpuscope.schema.core import encode_json
    from gpuscope.schema.results import SuiteRef

    reports = []
    for rank in range(4):
        host, local_rank = hosts[rank // 2], rank % 2
        bf16 = 780e12 * (slow_fraction if rank == STRAGGLER_RANK else 1.0) * (1.0 + 0.002 * rank)
        dram = 3.0e12 * (0.96 if rank == 3 else 1.0)
        document = to_results(_rank_document(rank, host, f"cuda:{local_rank}", bf16, dram), f"rank {rank}")
        reports.append(
            RankReport(
                rank=rank, host=host, status="ok", results=document, local_rank=local_rank, device=f"cuda:{local_rank}"
            )
        )
    merged = merge_rank_results(reports, world_size=4, suite=SuiteRef(name="quick"), margin=margin, backend="nccl")
    merged.created = 1_700_000_200.0
    plain: dict[str, Any] = json.loads(encode_json(merged))  # as the file holds it
    return plain
