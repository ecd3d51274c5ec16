"""Per-sample NVML reads of one GPU, and the rules that turn readings into GpuSample fields.

Static unavailability (NotSupported, FunctionNotFound) is remembered per GPU and metric, so a
metric the GPU does not have costs one call in the whole run, not one per sample. The calls
every sample makes inline :func:`~.session.call` (one Python frame less each).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from gpuscope.telemetry.nvml import compat
from gpuscope.telemetry.nvml.session import failed, pynvml
from gpuscope.telemetry.records import NOT_COLLECTED, GpuSample
from gpuscope.telemetry.values import Metric, Reason, Unavailable

__all__ = [
    "THROTTLE_REASONS",
    "throttle_reason_names",
    "MetricCalls",
    "prefer",
    "fill_missing",
    "link_keys",
    "METRIC_FIELDS",
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


class MetricCalls:
    """Per-sample NVML calls of one GPU handle, remembering static unavailability."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.static: dict[str, Unavailable] = {}
        # metric -> candidate (what, fn, extra args); a FunctionNotFound drops the candidate
        # (nvidia-ml-py before 12.570 has no nvmlDeviceGetTemperatureV: that candidate is left out)
        wanted: dict[str, list[tuple[str, tuple[Any, ...]]]] = {
            "temperature": [
                ("nvmlDeviceGetTemperatureV", (pynvml.NVML_TEMPERATURE_GPU,)),
                ("nvmlDeviceGetTemperature", (pynvml.NVML_TEMPERATURE_GPU,)),
            ],
            "throttle": [
                ("nvmlDeviceGetCurrentClocksEventReasons", ()),
                ("nvmlDeviceGetCurrentClocksThrottleReasons", ()),
            ],
        }
        self._fallbacks: dict[str, list[tuple[str, Callable[..., Any], tuple[Any, ...]]]] = {
            key: [(name, fn, args) for name, args in candidates if (fn := compat.function(name)) is not None]
            for key, candidates in wanted.items()
        }

    def get(self, key: str, fn: Callable[..., Any], *args: Any) -> Metric[Any]:
        """``fn(handle, *args)`` or why not. Raises GpuLostError."""
        known = self.static.get(key)
        if known is not None:
            return known
        try:  # session.call, inlined: several calls per GPU per sample come here
            return fn(self.handle, *args)
        except Exception as exc:  # noqa: BLE001 - one failing metric never spoils the rest
            value = failed(getattr(fn, "__name__", key), exc)
        if isinstance(value, Unavailable) and value.reason in (Reason.NOT_SUPPORTED, Reason.DRIVER_TOO_OLD):
            self.static[key] = value
        return value

    def first(self, key: str) -> Metric[Any]:
        """The first candidate function for ``key`` that the driver has."""
        known = self.static.get(key)
        if known is not None:
            return known
        candidates = self._fallbacks[key]
        while True:
            what, fn, args = candidates[0]
            try:
                return fn(self.handle, *args)
            except Exception as exc:  # noqa: BLE001 - as in get()
                value = failed(what, exc)
            if isinstance(value, Unavailable) and value.reason is Reason.DRIVER_TOO_OLD and len(candidates) > 1:
                candidates.pop(0)
                continue
            if isinstance(value, Unavailable) and value.reason in (Reason.NOT_SUPPORTED, Reason.DRIVER_TOO_OLD):
                self.static[key] = value
            return value
