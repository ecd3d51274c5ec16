"""Fixed-size metric histories for the dashboard charts (no Textual).

Each series is a ring buffer of ``float | None`` (None where the metric was unavailable, so a
chart shows a gap, never a zero). Keys are tuples: ``("gpu", uuid, field)`` or ``("host", name)``.
"""

from __future__ import annotations

from collections import deque
from typing import Iterable

from gpuscope.telemetry.records import GpuSample, Sample
from gpuscope.telemetry.values import Unavailable

__all__ = ["GPU_SERIES", "History", "gpu_key"]

#: GpuSample fields kept as history (the charts on each GPU card).
GPU_SERIES = (
    "utilization_percent",
    "sm_activity_percent",
    "tensor_activity_percent",
    "dram_bandwidth_bytes_per_s",
    "dram_bandwidth_percent_of_peak",
    "memory_used_bytes",
    "power_w",
    "temperature_gpu_c",
    "sm_clock_mhz",
    "pcie_tx_bytes_per_s",
    "pcie_rx_bytes_per_s",
    "nvlink_tx_bytes_per_s",
    "nvlink_rx_bytes_per_s",
)


def gpu_key(gpu: GpuSample) -> str:
    """A stable identity for a GPU or MIG instance across samples."""
    if gpu.mig_parent_index is not None:
        return f"{gpu.uuid or gpu.mig_parent_index}/mig{gpu.mig_gpu_instance_id}.{gpu.mig_compute_instance_id}"
    return gpu.uuid or f"gpu{gpu.index}"


def _number(value: object) -> float | None:
    if isinstance(value, Unavailable) or value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return None


class History:
    """Per-metric ring buffers of the last ``capacity`` samples."""

    def __init__(self, capacity: int = 300) -> None:
        self.capacity = capacity
        self._series: dict[tuple[str, ...], deque[float | None]] = {}
        self.timestamps: deque[float] = deque(maxlen=capacity)

    def clear(self) -> None:
        self._series.clear()
        self.timestamps.clear()

    def _push(self, key: tuple[str, ...], value: float | None) -> None:
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = deque(maxlen=self.capacity)
        series.append(value)

    def push(self, sample: Sample) -> None:
        """Append every charted metric of ``sample``."""
        self.timestamps.append(sample.timestamp)
        for gpu in sample.gpus:
            key = gpu_key(gpu)
            for name in GPU_SERIES:
                self._push(("gpu", key, name), _number(getattr(gpu, name)))
        host = sample.host
        self._push(("host", "cpu"), _number(host.cpu_utilization_percent))
        total = host.memory_total_bytes or 0
        self._push(("host", "memory"), 100.0 * host.memory_used_bytes / total if total else None)
        rx = [_number(nic.rx_bytes_per_s) for nic in host.nics]
        tx = [_number(nic.tx_bytes_per_s) for nic in host.nics]
        self._push(("host", "net_rx"), sum(v for v in rx if v is not None) if any(v is not None for v in rx) else None)
        self._push(("host", "net_tx"), sum(v for v in tx if v is not None) if any(v is not None for v in tx) else None)

    def extend(self, samples: Iterable[Sample]) -> None:
        for sample in samples:
            self.push(sample)

    def series(self, *key: str) -> list[float | None]:
        """The values of ``key``, oldest first (empty when never seen)."""
        return list(self._series.get(tuple(key), ()))

    def values(self, *key: str) -> list[float]:
        """The available values of ``key``, oldest first (gaps dropped), for sparklines."""
        return [v for v in self._series.get(tuple(key), ()) if v is not None]

    def mean_between(self, key: tuple[str, ...], start_s: float, end_s: float) -> float | None:
        """Mean of ``key`` over samples with start_s <= timestamp <= end_s; None when none."""
        series = self._series.get(key)
        if not series:
            return None
        offset = len(self.timestamps) - len(series)
        picked = [
            value
            for position, value in enumerate(series)
            if value is not None and start_s <= self.timestamps[position + offset] <= end_s
        ]
        return sum(picked) / len(picked) if picked else None
