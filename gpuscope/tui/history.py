"""Fixed-size metric histories for the dashboard charts (no Textual).

Each series is a ring buffer (``collections.deque`` with ``maxlen``) of ``float | None`` (None
where the metric was unavailable, so a chart shows a gap, never a zero). Keys are tuples:
``("gpu", uuid, field)`` or ``("host", name)``.

Memory is bounded: :func:`capacity_for` keeps the longest chart window (15 min) at the polling
interval, at most :data:`MAX_POINTS` points per series (about 110 series with 8 GPUs: a few MB).
Charts ask for a window (:meth:`History.window`) and downsample it to their width.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from itertools import islice

from gpuscope.schema.core import finite_or_none
from gpuscope.telemetry.records import GpuSample, Sample

__all__ = ["GPU_SERIES", "History", "gpu_key", "WINDOWS_S", "MAX_POINTS", "capacity_for", "window_label"]

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
    "memory_busy_percent",  # AMD's memory chart (no DRAM bytes there)
    "pcie_bytes_per_s",  # AMD: both directions in one
    "xgmi_tx_bytes_per_s",
    "xgmi_rx_bytes_per_s",
)

#: The chart windows offered (key ``w`` cycles), seconds.
WINDOWS_S = (60.0, 300.0, 900.0)
#: The most points one series keeps, whatever the interval (0.25 s x 15 min).
MAX_POINTS = 3600


def capacity_for(interval_s: float, longest_window_s: float = WINDOWS_S[-1]) -> int:
    """Points per series that cover ``longest_window_s`` at ``interval_s`` (at least 300, for
    replays and slow intervals), capped at :data:`MAX_POINTS`."""
    return max(300, min(MAX_POINTS, math.ceil(longest_window_s / max(interval_s, 1e-3)) + 1))


def window_label(window_s: float) -> str:
    """``"1 min"``, ``"15 min"``, ``"30 s"``."""
    return f"{window_s / 60:g} min" if window_s >= 60 else f"{window_s:g} s"


def gpu_key(gpu: GpuSample) -> str:
    """A stable identity for a GPU or MIG instance across samples."""
    if gpu.mig_parent_index is not None:
        return f"{gpu.uuid or gpu.mig_parent_index}/mig{gpu.mig_gpu_instance_id}.{gpu.mig_compute_instance_id}"
    return gpu.uuid or f"gpu{gpu.index}"


class History:
    """Per-metric ring buffers of the last ``capacity`` samples."""

    def __init__(self, capacity: int = 300) -> None:
        self.capacity = capacity
        self._series: dict[tuple[str, ...], deque[float | None]] = {}
        #: GPU key -> its series in the order of GPU_SERIES (the same deques as in ``_series``).
        self._gpu_series: dict[str, list[deque[float | None]]] = {}
        self.timestamps: deque[float] = deque(maxlen=capacity)

    def clear(self) -> None:
        self._series.clear()
        self._gpu_series.clear()
        self.timestamps.clear()

    def _get(self, key: tuple[str, ...]) -> deque[float | None]:
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = deque(maxlen=self.capacity)
            # a series that appears late (a GPU hot-added) lines up with the timestamps
            series.extend([None] * max(0, len(self.timestamps) - 1))
        return series

    def _push(self, key: tuple[str, ...], value: float | None) -> None:
        self._get(key).append(value)

    def push(self, sample: Sample) -> None:
        """Append every charted metric of ``sample``."""
        self.timestamps.append(sample.timestamp)
        for gpu in sample.gpus:
            key = gpu_key(gpu)
            rows = self._gpu_series.get(key)
            if rows is None:  # (looked up once per GPU, not per metric and sample)
                rows = self._gpu_series[key] = [self._get(("gpu", key, name)) for name in GPU_SERIES]
            for series, name in zip(rows, GPU_SERIES):
                series.append(finite_or_none(getattr(gpu, name)))
        host = sample.host
        self._push(("host", "cpu"), finite_or_none(host.cpu_utilization_percent))
        used, total = finite_or_none(host.memory_used_bytes), finite_or_none(host.memory_total_bytes)
        self._push(("host", "memory"), 100.0 * used / total if used is not None and total else None)
        rx = [finite_or_none(nic.rx_bytes_per_s) for nic in host.nics if not nic.is_loopback]
        tx = [finite_or_none(nic.tx_bytes_per_s) for nic in host.nics if not nic.is_loopback]
        self._push(("host", "net_rx"), sum(v for v in rx if v is not None) if any(v is not None for v in rx) else None)
        self._push(("host", "net_tx"), sum(v for v in tx if v is not None) if any(v is not None for v in tx) else None)
        self._push(("host", "disk_read"), finite_or_none(getattr(host, "disk_read_bytes_per_s", None)))
        self._push(("host", "disk_write"), finite_or_none(getattr(host, "disk_write_bytes_per_s", None)))

    def extend(self, samples: Iterable[Sample]) -> None:
        for sample in samples:
            self.push(sample)

    def series(self, *key: str) -> list[float | None]:
        """The values of ``key``, oldest first (empty when never seen)."""
        return list(self._series.get(tuple(key), ()))

    def values(self, *key: str) -> list[float]:
        """The available values of ``key``, oldest first (gaps dropped), for sparklines."""
        return [v for v in self._series.get(tuple(key), ()) if v is not None]

    def spacing_s(self) -> float | None:
        """Mean seconds between the stored samples, or None with fewer than two."""
        if len(self.timestamps) < 2:
            return None
        span = self.timestamps[-1] - self.timestamps[0]
        return span / (len(self.timestamps) - 1) if span > 0 else None

    def points_in(self, window_s: float, spacing_s: float | None = None) -> int:
        """How many points cover ``window_s`` at ``spacing_s`` (default: the stored spacing)."""
        spacing = spacing_s or self.spacing_s() or 1.0
        return max(2, min(self.capacity, round(window_s / spacing)))

    def window(self, key: tuple[str, ...], points: int) -> list[float | None]:
        """The last ``points`` values of ``key`` (oldest first), padded on the left with None
        where the history is shorter, so the newest point is always at the right end."""
        series = self._series.get(key)
        if not series:
            return [None] * points
        recent = list(islice(reversed(series), points))
        recent.reverse()
        if len(recent) < points:
            recent[:0] = [None] * (points - len(recent))
        return recent

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
