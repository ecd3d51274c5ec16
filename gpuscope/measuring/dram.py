"""DRAM bytes a call really moves, from GPM telemetry (Hopper and newer): the GPU's DRAM bandwidth
sampled while the call runs again and again, integrated over the window, divided by the calls.
Used by :func:`gpuscope.measure` and :func:`gpuscope.profile`; torch is only ever called through
the ``synchronize`` and ``select_gpu`` the caller passes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from gpuscope.telemetry.collector import TelemetryCollector
from gpuscope.telemetry.nvml import mapping
from gpuscope.telemetry.records import GpuSample, Sample
from gpuscope.telemetry.values import Metric, Reason, Unavailable

if TYPE_CHECKING:
    import torch

__all__ = ["DramCollector", "dram_bytes_per_call", "match_gpu", "measure_dram_bytes"]


class DramCollector(Protocol):
    """What :func:`measure_dram_bytes` needs of a telemetry collector (:class:`TelemetryCollector`)."""

    def open(self) -> Unavailable | None: ...

    def sample(self) -> Sample: ...

    def close(self) -> None: ...


def dram_bytes_per_call(intervals: Sequence[tuple[float, Metric[float] | None, int]]) -> float | Unavailable:
    """DRAM bytes moved per call from telemetry intervals ``(seconds, dram_bytes_per_s, calls)``:
    the integral of bandwidth over the intervals divided by the calls made in them. An interval
    whose bandwidth is :class:`Unavailable` is skipped; when all are, the first reason is returned."""
    total_bytes = 0.0
    total_calls = 0
    reason: Unavailable | None = None
    for seconds, bandwidth, calls in intervals:
        if isinstance(bandwidth, Unavailable):
            reason = reason or bandwidth
            continue
        if bandwidth is None or seconds <= 0:
            continue
        total_bytes += float(bandwidth) * seconds
        total_calls += calls
    if total_calls == 0:
        return reason or Unavailable(Reason.ERROR, "no telemetry interval covered the run")
    return total_bytes / total_calls


def match_gpu(sample: Sample, device: torch.device) -> GpuSample | None:
    """The GpuSample of ``device`` in a telemetry Sample: by UUID, else by ``CUDA_VISIBLE_DEVICES``
    and PCI order (:func:`gpuscope.telemetry.nvml.mapping.match_cuda_device`)."""
    index = device.index or 0
    match = mapping.match_cuda_device(list(sample.gpus or []), index, cuda_uuid=mapping.cuda_device_uuid(index))
    gpu: GpuSample | None = match.gpu if match is not None else None
    return gpu


def _default_collector() -> DramCollector:
    return TelemetryCollector(processes=False)


def measure_dram_bytes(
    call: Callable[[], object],
    per_call_s: float,
    window_s: float,
    collector_factory: Callable[[], DramCollector] | None,
    synchronize: Callable[[], object],
    select_gpu: Callable[[Sample], GpuSample | None],
    device_text: str,
) -> float | Unavailable:
    """Run ``call`` for about ``window_s`` seconds while GPM telemetry samples the GPU every
    ~0.25 s (GPM needs more than 100 ms between samples); returns DRAM bytes per call.
    ``synchronize`` waits for queued GPU work; ``select_gpu`` picks the GpuSample of a Sample."""
    try:
        collector = (collector_factory or _default_collector)()
    except ImportError as exc:
        return Unavailable(Reason.NOT_SUPPORTED, f"telemetry collector not available ({exc})")
    except Exception as exc:  # noqa: BLE001 - telemetry is optional
        return Unavailable(Reason.ERROR, f"telemetry collector failed to start: {exc}")
    try:
        missing = collector.open()
        if missing is not None:
            return missing
        batch = max(1, math.ceil(0.25 / max(per_call_s, 1e-9)))
        synchronize()
        previous = collector.sample()
        if select_gpu(previous) is None:
            reason = previous.gpu_unavailable
            return reason or Unavailable(Reason.NOT_APPLICABLE, f"telemetry does not list {device_text}")
        intervals: list[tuple[float, Metric[float] | None, int]] = []
        started = previous_at = time.perf_counter()  # not the samples' wall timestamps: that clock may step
        while time.perf_counter() - started < window_s:
            for _ in range(batch):
                call()
            synchronize()
            current = collector.sample()
            now = time.perf_counter()
            gpu = select_gpu(current)
            bandwidth = (
                gpu.dram_bandwidth_bytes_per_s
                if gpu is not None
                else Unavailable(Reason.GPU_LOST, "GPU left the sample")
            )
            intervals.append((now - previous_at, bandwidth, batch))
            previous_at = now
        return dram_bytes_per_call(intervals)
    except Exception as exc:  # noqa: BLE001 - telemetry must never spoil a measurement
        return Unavailable(Reason.ERROR, f"telemetry failed during the run: {exc}")
    finally:
        try:
            collector.close()
        except Exception:  # noqa: BLE001
            pass
