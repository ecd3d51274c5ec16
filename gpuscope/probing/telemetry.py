"""Telemetry next to each measurement, through :class:`gpuscope.telemetry.collector.TelemetryCollector`.

The adapter tolerates the collector's absence or failure: telemetry is then recorded as
``{"available": false, "reason": ...}``, never as zeros. ``before``/``after`` are one sample
each; on a GPU a background thread samples every ``interval_s`` while the measurement runs and
``during`` holds mean and max of each numeric field (on a CPU the sampler would steal the cores
being measured, so there is no ``during``).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from typing import Protocol

from gpuscope.probing.environment import DeviceSpec
from gpuscope.schema.core import Detail, DetailMap
from gpuscope.telemetry.collector import TelemetryCollector
from gpuscope.telemetry.nvml import mapping
from gpuscope.telemetry.nvml.mapping import match_cuda_device
from gpuscope.telemetry.records import Sample
from gpuscope.telemetry.values import Unavailable

__all__ = ["ProbeTelemetry", "SampleSource", "TelemetryFactory", "summarize_device", "GPU_FIELDS", "HOST_FIELDS"]

#: GpuSample fields summarised per measurement (units in the names).
GPU_FIELDS = tuple(
    "sm_clock_mhz memory_clock_mhz power_w temperature_gpu_c temperature_memory_c utilization_percent "
    "memory_used_bytes dram_bandwidth_bytes_per_s dram_bandwidth_percent_of_peak sm_activity_percent "
    "tensor_activity_percent pcie_tx_bytes_per_s pcie_rx_bytes_per_s nvlink_tx_bytes_per_s "
    "nvlink_rx_bytes_per_s".split()
)
HOST_FIELDS = ("cpu_utilization_percent", "memory_used_bytes", "load_average_1m")


class SampleSource(Protocol):
    """What the probes need of a telemetry collector (:class:`TelemetryCollector`; a fake in tests)."""

    def open(self) -> Unavailable | None: ...

    def sample(self) -> Sample: ...

    def close(self) -> None: ...


#: Makes the collector a probe run samples (tests: a fake).
TelemetryFactory = Callable[[], SampleSource]


def _value(obj: object, name: str) -> Detail:
    """A sample's field as a telemetry detail (None when unavailable)."""
    value = getattr(obj, name)
    return None if isinstance(value, Unavailable) else value


def summarize_device(sample: Sample, device: DeviceSpec, cuda_uuid: str | None = None) -> DetailMap:
    """One telemetry sample reduced to the fields that matter for ``device`` (None = unavailable).
    The GPU is found by ``cuda_uuid`` (torch's UUID of the device), else by ``CUDA_VISIBLE_DEVICES``
    and PCI order, never by NVML index (:func:`gpuscope.telemetry.nvml.mapping.match_cuda_device`);
    ``gpu_match`` says how. A MIG device's per-GPU fields (power, clocks) come from its parent GPU."""
    out: DetailMap = {"timestamp": sample.timestamp}
    for name in HOST_FIELDS:
        out[f"host_{name}"] = _value(sample.host, name)
    clocks = [c for c in (_value(core, "frequency_mhz") for core in sample.host.cores) if isinstance(c, (int, float))]
    out["host_cpu_frequency_mhz"] = sum(clocks) / len(clocks) if clocks else None
    match = match_cuda_device(sample.gpus, device.index or 0, cuda_uuid=cuda_uuid) if device.is_gpu else None
    if device.is_gpu and match is None:
        out["gpu_unavailable"] = str(sample.gpu_unavailable or "GPU not in telemetry")
    if match is not None:
        gpu = match.gpu
        parent = next((g for g in sample.gpus if g.mig_parent_index is None and g.index == gpu.mig_parent_index), None)
        out["gpu_uuid"] = gpu.uuid
        out["gpu_match"] = match.method
        for name in GPU_FIELDS:
            value = _value(gpu, name)
            out[name] = _value(parent, name) if value is None and parent is not None else value
        out["throttle_reasons"] = _value(gpu, "throttle_reasons")
        processes = gpu.processes
        if isinstance(processes, list):
            out["other_processes"] = [
                {"pid": p.pid, "name": _value(p, "name"), "gpu_memory_bytes": _value(p, "gpu_memory_bytes")}  # type: ignore[dict-item]
                for p in processes
                if p.pid != os.getpid()
            ]
    return out


def _aggregate(points: list[DetailMap]) -> DetailMap:
    out: DetailMap = {"n": len(points)}
    if not points:
        return out
    for key in points[0]:
        values = [p.get(key) for p in points]
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if key == "timestamp" or not numbers:
            continue
        out[f"{key}_mean"] = sum(numbers) / len(numbers)
        out[f"{key}_max"] = max(numbers)
    return out


class ProbeTelemetry:
    """Wraps the telemetry collector for the probe runner. Never raises from its methods."""

    def __init__(
        self,
        device: DeviceSpec,
        interval_s: float = 0.15,
        enabled: bool = True,
        factory: TelemetryFactory | None = None,
    ) -> None:
        self.device = device
        self.interval_s = interval_s
        self.enabled = enabled
        self._factory = factory
        self._collector: SampleSource | None = None
        self._lock = threading.Lock()
        self.reason: str | None = None if enabled else "telemetry turned off"
        self.gpu_unavailable: str | None = None
        #: torch's UUID of the probed CUDA device (read at open), the key to its NVML sample
        self.cuda_uuid: str | None = None

    @property
    def available(self) -> bool:
        return self._collector is not None

    def open(self) -> None:
        if not self.enabled:
            return
        try:
            collector = self._factory() if self._factory is not None else TelemetryCollector(nvml=self.device.is_gpu)
            why = collector.open()
            if why is not None and self.device.is_gpu:
                self.gpu_unavailable = str(why)
            if self.device.is_gpu:
                self.cuda_uuid = mapping.cuda_device_uuid(self.device.index or 0)
            self._collector = collector
        except ImportError as exc:
            self.reason = f"telemetry collector not importable: {exc}"
        except Exception as exc:  # noqa: BLE001 - telemetry must never break a probe
            self.reason = f"telemetry collector failed to open: {exc}"

    def close(self) -> None:
        collector, self._collector = self._collector, None
        if collector is not None:
            with contextlib.suppress(Exception):
                collector.close()

    def raw_sample(self) -> Sample | None:
        """The collector's Sample, or None."""
        if self._collector is None:
            return None
        try:
            with self._lock:
                return self._collector.sample()
        except Exception as exc:  # noqa: BLE001
            self.reason = f"telemetry sample failed: {exc}"
            return None

    def snapshot(self) -> DetailMap:
        """One summarised sample, or ``{"available": False, "reason": ...}``."""
        sample = self.raw_sample()
        if sample is None:
            return {"available": False, "reason": self.reason or "no telemetry"}
        return {"available": True, **summarize_device(sample, self.device, self.cuda_uuid)}

    def driver_version(self) -> str | None:
        sample = self.raw_sample()
        value = sample.driver_version if sample is not None else None
        return value if isinstance(value, str) else None

    def start_during(self) -> _DuringSampler | None:
        """Start background sampling (GPU only); call ``stop()`` on the result for the summary."""
        if self._collector is None or not self.device.is_gpu:
            return None
        return _DuringSampler(self, self.interval_s)


class _DuringSampler:
    """Summarises the owner's samples every ``interval_s`` from construction until :meth:`stop`."""

    def __init__(self, owner: ProbeTelemetry, interval_s: float) -> None:
        self._owner = owner
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._points: list[DetailMap] = []
        self._thread = threading.Thread(target=self._loop, name="gpuscope-probe-telemetry", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            sample = self._owner.raw_sample()
            if sample is not None:
                self._points.append(summarize_device(sample, self._owner.device, self._owner.cuda_uuid))
            next_at += self._interval_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> DetailMap:
        self._stop.set()
        self._thread.join(timeout=2.0)
        return {"available": True, "interval_s": self._interval_s, **_aggregate(self._points)}
