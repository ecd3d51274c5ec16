"""Hand-made results documents for roofline tests and demos (no probe run needed).

``h200_results()`` is one H200 host with measured GPU and CPU ceilings and three workloads;
``cpu_results()`` a CPU-only run of another host; ``write_results(path, doc)`` saves one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gpuscope.results import to_results
from gpuscope.schema.results import Results

__all__ = [
    "results_document",
    "ceiling",
    "workload",
    "h200_results",
    "cpu_results",
    "fleet_results",
    "laptop_results",
    "three_device_results",
    "CHART_PICTURES",
    "write_results",
    "typed",
]


def ceiling(device: str, kind: str, name: str, value: float, **extra: Any) -> dict[str, Any]:
    """One ``ceilings`` entry (unit from the kind)."""
    unit = "FLOP/s" if kind == "compute" else "B/s"
    return {"device": device, "kind": kind, "name": name, "value": value, "unit": unit, **extra}


def workload(name: str, device: str, flops: float, bytes_: float, time_s: float, **extra: Any) -> dict[str, Any]:
    """One ``workloads`` entry."""
    return {
        "name": name,
        "device": device,
        "flops": flops,
        "bytes": bytes_,
        "time_s": time_s,
        "flop_per_s": flops / time_s,
        "intensity_flop_per_byte": flops / bytes_ if bytes_ else None,
        "bytes_rule": "hand-made",
        "source": "test",
        **extra,
    }


def results_document(
    hostname: str,
    devices: list[dict[str, Any]],
    ceilings: list[dict[str, Any]],
    workloads: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A results document of schema version 1."""
    return {
        "schema": "gpuscope.results",
        "schema_version": 1,
        "gpuscope_version": "0.1.0",
        "created": 1_700_000_000.0,
        "partial": False,
        "partial_reason": None,
        "suite": None,
        "system": {"hostname": hostname, "cpu_model": "Fake CPU 9000"},
        "devices": devices,
        "ceilings": ceilings,
        "measurements": [],
        "workloads": workloads or [],
    }


def _h200_ceilings() -> list[dict[str, Any]]:
    """The measured ceilings of the H200 at ``cuda:0``: bf16 and fp32 compute, DRAM, L2, host-to-device."""
    return [
        ceiling("cuda:0", "compute", "bf16", 790e12),
        ceiling("cuda:0", "compute", "fp32", 51e12),
        ceiling("cuda:0", "memory", "dram.triad", 4.3e12),
        ceiling("cuda:0", "memory", "l2.triad", 11e12),
        ceiling("cuda:0", "transfer", "h2d.pinned", 53e9),
    ]


def h200_results(hostname: str = "gpu-node") -> dict[str, Any]:
    """An H200 host: measured bf16/fp32 and DRAM/L2/PCIe GPU ceilings, CPU ceilings, three workloads."""
    return results_document(
        hostname,
        devices=[
            {"device": "cuda:0", "type": "gpu", "name": "NVIDIA H200", "host": hostname},
            {"device": "cpu", "type": "cpu", "name": "Fake CPU 9000", "host": hostname},
        ],
        ceilings=[
            *_h200_ceilings(),
            ceiling("cpu", "compute", "fp32", 2.0e12),
            ceiling("cpu", "memory", "dram.triad", 150e9),
        ],
        workloads=[
            workload("matmul 8192 bf16", "cuda:0", 1.1e12, 4.0e8, 0.0014, dtype="bf16"),
            workload("softmax", "cuda:0", 5e8, 8e8, 0.0002),
            workload("cpu gemm", "cpu", 2e9, 1.2e7, 0.002, dtype="fp32"),
        ],
    )


def cpu_results(hostname: str = "laptop") -> dict[str, Any]:
    """A CPU-only host with its own ceilings and one workload."""
    return results_document(
        hostname,
        devices=[{"device": "cpu", "type": "cpu", "name": "Other CPU 42", "host": hostname}],
        ceilings=[
            ceiling("cpu", "compute", "fp32", 150e9),
            ceiling("cpu", "compute", "fp64", 75e9),
            ceiling("cpu", "memory", "dram.triad", 23e9),
            ceiling("cpu", "memory", "llc.copy", 90e9),
        ],
        workloads=[workload("stencil", "cpu", 1e9, 4e9, 0.2, dtype="fp64")],
    )


def fleet_results(hostname: str = "gpu-node") -> dict[str, Any]:
    """One host with a measured 2-core CPU, a measured H200 and a datasheet-only A100, and a
    dozen workloads across them (memory- and compute-bound, several dtypes, one above its roof)."""
    return results_document(
        hostname,
        devices=[
            {"device": "cuda:0", "type": "gpu", "name": "NVIDIA H200", "host": hostname, "uuid": "GPU-aaaa"},
            {"device": "cuda:1", "type": "gpu", "name": "NVIDIA A100-SXM4-80GB", "host": hostname, "uuid": "GPU-bbbb"},
            {"device": "cpu", "type": "cpu", "name": "Fake CPU 9000", "host": hostname, "physical_cores": 2},
        ],
        ceilings=[
            *_h200_ceilings(),
            ceiling("cpu", "compute", "fp32", 204e9),
            ceiling("cpu", "compute", "fp64", 107e9),
            ceiling("cpu", "memory", "dram.triad", 23e9),
            ceiling("cpu", "memory", "dram.copy", 31e9),
            ceiling("cpu", "memory", "l2.copy", 214e9),
            ceiling("cpu", "collective", "allreduce.busbw", 1.5e9),
        ],
        workloads=[
            workload("axpy 8M fp32", "cpu", 16.8e6, 100.7e6, 0.0075, dtype="fp32"),
            workload("matmul 2048 fp32", "cpu", 17.2e9, 50.3e6, 0.094, dtype="fp32"),
            workload("mlp 1024x4096 fp32", "cpu", 8.6e9, 33.6e6, 0.06, dtype="fp32"),
            workload("stencil fp64", "cpu", 1e9, 4e9, 0.25, dtype="fp64"),
            workload("layernorm bf16", "cuda:0", 58.7e6, 67.1e6, 0.000022, dtype="bf16"),
            workload("attention bf16", "cuda:0", 550e9, 1.34e9, 0.00088, dtype="bf16"),
            workload("matmul 8192 bf16", "cuda:0", 1.1e12, 4.0e8, 0.0014, dtype="bf16"),
            workload("softmax fp32", "cuda:0", 83.9e6, 134e6, 0.000041, dtype="fp32"),
            workload("gelu fp32", "cuda:0", 134e6, 134e6, 0.000035, dtype="fp32"),
            workload("conv fp32", "cuda:0", 240e9, 0.5e9, 0.0065, dtype="fp32"),
            workload("matmul 4096 bf16", "cuda:1", 137e9, 1e8, 0.00065, dtype="bf16"),
            workload("embedding bag fp32", "cuda:1", 20e6, 400e6, 0.00035, dtype="fp32"),
        ],
    )


def laptop_results() -> dict[str, Any]:
    """A 2-core CPU alone: four roofs (one L2) and two workloads, one each side of the ridge."""
    return results_document(
        "laptop",
        devices=[{"device": "cpu", "type": "cpu", "name": "AMD EPYC", "physical_cores": 2}],
        ceilings=[
            ceiling("cpu", "compute", "fp32", 204e9),
            ceiling("cpu", "compute", "fp64", 107e9),
            ceiling("cpu", "memory", "dram.triad", 23e9),
            ceiling("cpu", "memory", "l2.copy", 214e9),
            ceiling("cpu", "collective", "allreduce.busbw", 1.5e9),
        ],
        workloads=[
            workload("axpy 8M fp32", "cpu", 16.8e6, 100.7e6, 0.0075, dtype="fp32"),
            workload("matmul 2048 fp32", "cpu", 17.2e9, 50.3e6, 0.094, dtype="fp32"),
        ],
    )


def three_device_results() -> dict[str, Any]:
    """The fleet's CPU, H200 and A100 with one workload each."""
    fleet = fleet_results()
    return {**fleet, "workloads": [fleet["workloads"][i] for i in (0, 5, 10)]}


#: The roofline pictures the chart snapshots show and the legibility benchmark measures.
CHART_PICTURES: dict[str, Callable[[], dict[str, Any]]] = {
    "cpu_only": laptop_results,
    "cpu_h200_a100": three_device_results,
    "dozen_workloads": fleet_results,
}


def write_results(path: str | Path, document: dict[str, Any]) -> Path:
    """Write ``document`` as JSON to ``path``; returns the path."""
    target = Path(path)
    target.write_text(json.dumps(document), encoding="utf-8")
    return target


def typed(documents: Sequence[tuple[str, Any]]) -> list[tuple[str, Results]]:
    """``(name, document)`` pairs with each document checked into :class:`Results`, what
    :func:`gpuscope.roofline.loading.build_model` takes."""
    return [(name, to_results(document, name)) for name, document in documents]
