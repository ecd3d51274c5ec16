"""Per-sample NVML reads of one GPU, and the rules that turn readings into GpuSample fields.

Static unavailability (NotSupported, FunctionNotFound) is remembered per GPU and metric, so a
metric the GPU does not have costs one call in the whole run, not one per sample. Every call is
pynvml's public wrapper through :func:`~.session.call`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from gpuscope.telemetry.nvml import compat
from gpuscope.telemetry.nvml.session import call, pynvml
from gpuscope.telemetry.records import NOT_COLLECTED, GpuSample
from gpuscope.telemetry.values import Metric, Reason, Unavailable

__all__ = [
    "THROTTLE_REASONS",
    "throttle_reason_names",
    "MetricCalls",
    "memory_info",
    "prefer",
    "fill_missing",
    "link_keys",
    "METRIC_FIELDS",
    "SAMPLED",
]

#: nvmlClocksEventReason* bits -> name (the deprecated "throttle" names have the same bits).
THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)

_KNOWN_BITS = sum(bit for bit, _ in THROTTLE_REASONS)

#: GpuSample fields that hold one Metric (identity and the nvlink_links list excluded).
METRIC_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(GpuSample) if f.default is NOT_COLLECTED)


def throttle_reason_names(mask: int) -> list[str]:
    """Names of the set bits of a clocks-event (throttle) reason mask; [] when none."""
    if not mask:
        return []
    names = [name for bit, name in THROTTLE_REASONS if mask & bit]
    rest = mask & ~_KNOWN_BITS
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"unknown_0x{bit:x}")
            rest &= ~bit
        bit <<= 1
    return names


def prefer(first: Metric[Any], second: Metric[Any]) -> Metric[Any]:
    """``first`` when it has a value, else ``second`` when it has one; with neither, the more
    useful reason (a hardware/driver limit of ``second`` defers to ``first``'s reason)."""
    if not isinstance(first, Unavailable):
        return first
    if not isinstance(second, Unavailable):
        return second
    if second.reason in (Reason.NOT_SUPPORTED, Reason.DRIVER_TOO_OLD, Reason.NOT_APPLICABLE):
        return first
    return second


def link_keys(links: list[int]) -> list[tuple[int, str, str]]:
    """(link, tx key, rx key) of each NVLink link: the per-link keys of the field and GPM readings."""
    return [(link, f"nvlink_tx_bytes_per_s:{link}", f"nvlink_rx_bytes_per_s:{link}") for link in links]


def fill_missing(sample: GpuSample, value: Unavailable) -> None:
    """Set every metric still at its "not collected" default to ``value``."""
    for name in METRIC_FIELDS:
        if getattr(sample, name) is NOT_COLLECTED:
            setattr(sample, name, value)


#: What :meth:`MetricCalls.read` returns, in order (each value, or why there is none).
SAMPLED = ("utilization", "memory", "sm_clock", "memory_clock", "fan", "temperature", "throttle")


def _utilization(handle: object) -> tuple[int, int]:
    util = pynvml.nvmlDeviceGetUtilizationRates(handle)
    return int(util.gpu), int(util.memory)


def memory_info(handle: object) -> tuple[int, int, int]:
    """(total, free, used) bytes of ``nvmlDeviceGetMemoryInfo``. Raises pynvml.NVMLError."""
    memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
    return int(memory.total), int(memory.free), int(memory.used)


def _clock(kind: int) -> Callable[[object], int]:
    return lambda handle: int(pynvml.nvmlDeviceGetClockInfo(handle, kind))


def _temperature_v(handle: object) -> int:
    # nvidia-ml-py 12.570 and newer only: read through compat, offered only where it exists
    return int(compat.function("nvmlDeviceGetTemperatureV")(handle, pynvml.NVML_TEMPERATURE_GPU))


def _temperature(handle: object) -> int:
    return int(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU))


def _candidates() -> dict[str, list[tuple[str, Callable[[object], object]]]]:
    """Each :data:`SAMPLED` metric's (NVML function, reader of a handle), the preferred one
    first; only those this nvidia-ml-py has a wrapper for."""

    def present(*pairs: tuple[str, Callable[[object], object]]) -> list[tuple[str, Callable[[object], object]]]:
        return [(name, read) for name, read in pairs if compat.has(name)]

    throttle = [
        (name, getattr(pynvml, name))
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
        if compat.has(name)
    ]
    return {
        "utilization": [("nvmlDeviceGetUtilizationRates", _utilization)],
        "memory": [("nvmlDeviceGetMemoryInfo", memory_info)],
        "sm_clock": [("nvmlDeviceGetClockInfo", _clock(pynvml.NVML_CLOCK_SM))],
        "memory_clock": [("nvmlDeviceGetClockInfo", _clock(pynvml.NVML_CLOCK_MEM))],
        "fan": [("nvmlDeviceGetFanSpeed", pynvml.nvmlDeviceGetFanSpeed)],
        "temperature": present(
            ("nvmlDeviceGetTemperatureV", _temperature_v), ("nvmlDeviceGetTemperature", _temperature)
        ),
        "throttle": throttle,
    }


class MetricCalls:
    """Per-sample NVML calls of one GPU handle, remembering static unavailability."""

    def __init__(self, handle: object) -> None:
        self.handle = handle
        self.static: dict[str, Unavailable] = {}
        #: each SAMPLED metric's functions still worth trying, the one to call first
        self._candidates = _candidates()

    def get(self, key: str, fn: Callable[..., Any], *args: object) -> Metric[Any]:
        """``fn(handle, *args)`` or why not (remembered for the run when it is for good).
        Raises GpuLostError."""
        known = self.static.get(key)
        if known is not None:
            return known
        value = call(getattr(fn, "__name__", key), fn, self.handle, *args)
        self._remember(key, value)
        return value

    def read(self) -> list[Metric[Any]]:
        """The :data:`SAMPLED` readings, queried in that order: (gpu, memory) busy percent,
        (total, free, used) bytes, SM and memory clock MHz, fan percent, GPU temperature in C,
        and the clocks-event (throttle) reason mask; each one or why not. Raises GpuLostError."""
        return [self._first(key) for key in SAMPLED]

    def _first(self, key: str) -> Metric[Any]:
        """The first candidate's reading of ``key``; where the driver lacks that function, the
        next one's (remembered: the next read starts there)."""
        known = self.static.get(key)
        if known is not None:
            return known
        candidates = self._candidates[key]
        if not candidates:
            return Unavailable(Reason.DRIVER_TOO_OLD, f"this nvidia-ml-py has no function for {key}")
        while True:
            name, read = candidates[0]
            value = call(name, read, self.handle)
            if isinstance(value, Unavailable) and value.reason is Reason.DRIVER_TOO_OLD and len(candidates) > 1:
                candidates.pop(0)
                continue
            self._remember(key, value)
            return value

    def _remember(self, key: str, value: Metric[Any]) -> None:
        """Keep ``value`` as ``key``'s answer for the rest of the run when it is unavailable for
        good (NotSupported, FunctionNotFound): not asked again."""
        if isinstance(value, Unavailable) and value.reason in (Reason.NOT_SUPPORTED, Reason.DRIVER_TOO_OLD):
            self.static[key] = value
