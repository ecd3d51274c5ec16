"""Hand-made results documents and telemetry logs for report and compare tests (no hardware)."""

from __future__ import annotations

import json
import math
import os
from typing import Any

from gpuscope.telemetry.records import GpuProcessSample
from support.samples import make_sample

__all__ = ["HOSTILE", "make_results", "make_log_samples", "write_log", "write_results"]

#: A name that must stay text everywhere.
HOSTILE = "<script>alert(1)</script>"

T0 = 1_700_000_000.0


def _measurement(
    mid: str, name: str, kind: str, device: str, start: float, duration: float, samples_s: list[float], **extra: Any
) -> dict[str, Any]:
    return {
        "id": mid,
        "kind": kind,
        "name": name,
        "device": device,
        "parameters": {},
        "flops": extra.pop("flops", None),
        "bytes": extra.pop("bytes", None),
        "counting_rule": "test",
        "samples_s": samples_s,
        "statistic": "best-of-N",
        "time_s": min(samples_s) if samples_s else None,
        "status": extra.pop("status", "ok"),
        "error": extra.pop("error", None),
        "validation_error": 0.0,
        "start": start,
        "end": start + duration,
        "versions": {"torch": "2.13.0", "cuda": "12.8"},
        **extra,
    }


def make_results(
    hostname: str = "node-a",
    gpus: int = 2,
    hbm_bytes_per_s: list[float] | None = None,
    hostile: bool = False,
    created: float = T0 + 100.0,
    rank: int | None = None,
    t0: float = T0,
    spread: float = 0.01,
) -> dict[str, Any]:
    """A results document: one CPU and ``gpus`` H100 SXM GPUs with compute, memory and transfer
    ceilings, one measurement per ceiling (with ``start``/``end`` inside a log starting at ``t0``)
    and three workloads. ``hbm_bytes_per_s[i]`` sets GPU i's dram.triad ceiling; ``hostile`` puts
    :data:`HOSTILE` into hostname-free names (workloads, a measurement, an error)."""
    hbm = list(hbm_bytes_per_s or [3.0e12] * gpus)
    evil = HOSTILE if hostile else ""
    devices: list[dict[str, Any]] = [{"device": "cpu", "type": "cpu", "name": "Fake CPU 9000", "host": hostname}]
    ceilings: list[dict[str, Any]] = []
    measurements: list[dict[str, Any]] = []
    clock = t0 + 5.0

    def add(device: str, kind: str, name: str, value: float, unit: str) -> None:
        nonlocal clock
        mid = f"m{len(measurements) + 1}"
        best = 1.0
        samples = [best * (1 + spread * i) for i in range(5)]
        measurements.append(_measurement(mid, f"{device} {name}", kind, device, clock, 4.0, samples))
        entry = {
            "device": device,
            "kind": kind,
            "name": name,
            "value": value,
            "unit": unit,
            "measurement_id": mid,
            "host": hostname,
        }
        if rank is not None:
            entry["rank"] = rank
        ceilings.append(entry)
        clock += 6.0

    for index in range(gpus):
        device = f"cuda:{index}"
        entry = {
            "device": device,
            "type": "gpu",
            "name": "NVIDIA H100 80GB HBM3",
            "host": hostname,
            "memory_total_bytes": 80e9,
        }
        if rank is not None:
            entry["rank"] = rank
        devices.append(entry)
        add(device, "compute", "bf16", 780e12, "FLOP/s")
        add(device, "compute", "fp32", 60e12, "FLOP/s")
        add(device, "memory", "dram.triad", hbm[index], "B/s")
        add(device, "transfer", "h2d.pinned", 53e9, "B/s")
    add("cpu", "compute", "fp32", 145e9, "FLOP/s")
    add("cpu", "memory", "dram.triad", 23e9, "B/s")
    measurements.append(
        _measurement(
            f"m{len(measurements) + 1}",
            f"failing probe {evil}".strip(),
            "matmul",
            "cuda:0" if gpus else "cpu",
            clock,
            2.0,
            [],
            status="failed",
            error=f"validation error 0.5 exceeds tolerance {evil}".strip(),
        )
    )
    n = 8192
    workloads: list[dict[str, Any]] = [
        {
            "name": f"gemm {n} bf16 {evil}".strip(),
            "device": "cuda:0" if gpus else "cpu",
            "dtype": "bf16",
            "flops": 2.0 * n**3,
            "bytes": 3.0 * n * n * 2,
            "bytes_rule": "distinct tensors",
            "time_s": 2.0 * n**3 / 700e12,
            "time_p10_s": 2.0 * n**3 / 710e12,
            "time_p90_s": 2.0 * n**3 / 690e12,
            "n": 20,
            "source": "measure",
        },
        {
            "name": "decode gemv $x$",
            "device": "cuda:0" if gpus else "cpu",
            "dtype": "bf16",
            "flops": 2.0 * n * n,
            "bytes": 2.0 * n * n,
            "bytes_rule": "distinct tensors",
            "time_s": 2.0 * n * n / 2.5e12,
            "time_p10_s": 2.0 * n * n / 2.6e12,
            "time_p90_s": 2.0 * n * n / 2.4e12,
            "n": 20,
            "source": "measure",
        },
        {
            "name": "numpy sgemm 2048",
            "device": "cpu",
            "dtype": "fp32",
            "flops": 2.0 * 2048**3,
            "bytes": 3.0 * 2048 * 2048 * 4,
            "time_s": 2.0 * 2048**3 / 120e9,
            "time_p10_s": 2.0 * 2048**3 / 125e9,
            "time_p90_s": 2.0 * 2048**3 / 115e9,
            "n": 10,
            "source": "measure",
        },
    ]
    if rank is not None:
        for item in workloads:
            item["rank"] = rank
            item["host"] = hostname
    return {
        "schema": "gpuscope.results",
        "schema_version": 1,
        "gpuscope_version": "0.1.0",
        "created": created,
        "partial": False,
        "partial_reason": None,
        "suite": {"name": "quick", "path": "/home/alice/probes/quick.toml"},
        "system": {
            "hostname": hostname,
            "cpu_model": "Fake CPU 9000",
            "logical_cores": 4,
            "physical_cores": 2,
            "os": "Linux 6.1",
            "python": "3.11.2",
            "torch": "2.13.0",
            "cuda": "12.8",
            "driver": "550.54.15",
            "blas": "OpenBLAS 0.3.27",
            "user": "alice",
            "argv": ["gpuscope", "probe", "--secret-token", "hunter2"],
        },
        "devices": devices,
        "ceilings": ceilings,
        "measurements": measurements,
        "workloads": workloads,
    }


def make_log_samples(
    count: int = 120,
    gpus: int = 2,
    interval_s: float = 0.5,
    t0: float = T0,
    hostile: bool = False,
    hostname: str = "node-a",
) -> list[Any]:
    """Telemetry samples with moving values (utilization, power, DRAM, temperature, clocks)."""
    samples = []
    for tick in range(count):
        sample = make_sample(tick=tick, gpus=gpus)
        sample.timestamp = t0 + tick * interval_s
        sample.host.hostname = hostname
        phase = tick / max(count - 1, 1)
        for gpu in sample.gpus:
            wave = 0.5 + 0.5 * math.sin(6.28 * phase * 3 + gpu.index)
            gpu.utilization_percent = 20.0 + 75.0 * wave
            gpu.sm_activity_percent = 15.0 + 70.0 * wave
            gpu.tensor_activity_percent = 50.0 * wave
            gpu.dram_bandwidth_bytes_per_s = 0.4e12 + 2.4e12 * wave
            gpu.power_w = 150.0 + 500.0 * wave
            gpu.energy_j = 1000.0 + tick * interval_s * 400.0
            gpu.temperature_gpu_c = 40.0 + 30.0 * phase + 3 * gpu.index
            gpu.sm_clock_mhz = 1980.0 - 200.0 * wave
            gpu.pcie_tx_bytes_per_s = 1e9 + 20e9 * wave
            gpu.pcie_rx_bytes_per_s = 2e9 + 30e9 * (1 - wave)
            gpu.nvlink_tx_bytes_per_s = 100e9 * wave
            gpu.nvlink_rx_bytes_per_s = 90e9 * wave
            if hostile:
                gpu.processes = [
                    GpuProcessSample(
                        pid=4242,
                        name=HOSTILE + " --token=hunter2",
                        user="mallory",
                        gpu_memory_bytes=30_000_000_000,
                        sm_percent=90.0,
                        kind="compute",
                    )
                ]
        samples.append(sample)
    return samples


def write_log(path: str | os.PathLike[str], samples: list[Any]) -> None:
    """Write samples as a ``gpuscope log`` JSON-lines file."""
    from gpuscope.telemetry.logfile import sample_to_json_dict

    with open(path, "w", encoding="utf-8") as handle:
        for sample in samples:
            handle.write(json.dumps(sample_to_json_dict(sample)) + "\n")


def write_results(path: str | os.PathLike[str], document: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=1)
