"""Per-sample NVML reads of one GPU, and the rules that turn readings into GpuSample fields.

Static unavailability (NotSupported, FunctionNotFound) is remembered per GPU and metric, so a
metric the GPU does not have costs one call in the whole run, not one per sample. The calls
every sample makes inline :func:`~.session.call` (one Python frame less each).

The seven queries of every sample (:meth:`MetricCalls.read`) call the C symbol as pynvml's
wrapper does, on output buffers allocated once per GPU: the wrapper allocates two or three
ctypes objects and makes three Python calls each time, which cost more than the query itself.
"""

from __future__ import annotations

import ctypes
import dataclasses
import operator
from collections.abc import Callable
from typing import Any

from gpuscope.telemetry.nvml import compat
from gpuscope.telemetry.nvml.session import CFunction, failed, pynvml
from gpuscope.telemetry.nvml.structs import memory_decoder, temperature_view, utilization_decoder
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
_VALUE = operator.attrgetter("value")


class _Query(CFunction):
    """One NVML query of one handle: the C symbol (its function kept after the first call: a
    handle's queries live within one NVML session), its arguments (the output buffer last, by
    reference, as pynvml's wrapper passes it) and how to read the answer from ``out``."""

    __slots__ = ("args", "out", "decode")

    def __init__(self, symbol: str, args: tuple[Any, ...], out: Any, decode: Callable[[Any], Any]) -> None:
        super().__init__(symbol)
        self.args = args
        self.out = out
        self.decode = decode


def _scalar(symbol: str, handle: Any, kind: type[Any], *inputs: Any) -> _Query:
    """A query answered in one ``kind`` (c_uint, c_ulonglong) after ``inputs``."""
    out = kind()
    return _Query(symbol, (handle, *inputs, ctypes.byref(out)), out, _VALUE)


def _queries(handle: Any) -> dict[str, list[_Query]]:
    """Each :data:`SAMPLED` metric's queries, the preferred one first (only those this
    nvidia-ml-py has a wrapper for: what its wrapper would call)."""
    utilization, memory = pynvml.c_nvmlUtilization_t(), pynvml.c_nvmlMemory_t()
    temperature: list[_Query] = []
    # nvidia-ml-py 12.570 and newer: the wrapper and its request structure
    request_type = getattr(pynvml, "c_nvmlTemperature_v1_t", None)
    if compat.function("nvmlDeviceGetTemperatureV") is not None and request_type is not None:
        request = request_type()
        request.version = compat.TEMPERATURE_V1
        request.sensorType = pynvml.NVML_TEMPERATURE_GPU
        view = temperature_view(request)
        temperature.append(
            _Query(
                "nvmlDeviceGetTemperatureV", (handle, ctypes.byref(request)), view, operator.attrgetter("temperature")
            )
        )
    if compat.function("nvmlDeviceGetTemperature") is not None:
        sensor = ctypes.c_uint(pynvml.NVML_TEMPERATURE_GPU)
        temperature.append(_scalar("nvmlDeviceGetTemperature", handle, ctypes.c_uint, sensor))
    throttle = [
        _scalar(name, handle, ctypes.c_ulonglong)
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
        if compat.function(name) is not None
    ]
    return {
        "utilization": [
            _Query(
                "nvmlDeviceGetUtilizationRates", (handle, ctypes.byref(utilization)), utilization, utilization_decoder()
            )
        ],
        "memory": [_Query("nvmlDeviceGetMemoryInfo", (handle, ctypes.byref(memory)), memory, memory_decoder())],
        "sm_clock": [_scalar("nvmlDeviceGetClockInfo", handle, ctypes.c_uint, ctypes.c_uint(pynvml.NVML_CLOCK_SM))],
        "memory_clock": [
            _scalar("nvmlDeviceGetClockInfo", handle, ctypes.c_uint, ctypes.c_uint(pynvml.NVML_CLOCK_MEM))
        ],
        "fan": [_scalar("nvmlDeviceGetFanSpeed", handle, ctypes.c_uint)],
        "temperature": temperature,
        "throttle": throttle,
    }


class MetricCalls:
    """Per-sample NVML calls of one GPU handle, remembering static unavailability."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.static: dict[str, Unavailable] = {}
        self._candidates: dict[str, list[_Query]] | None = None  # built on the first read()
        #: (position in SAMPLED, key, candidates) of each metric not known to be unavailable for
        #: good (None: build again), and the SAMPLED list with those known ones in place
        self._queries: list[tuple[int, str, list[_Query]]] | None = None
        self._known: list[Any] = []

    def get(self, key: str, fn: Callable[..., Any], *args: Any) -> Metric[Any]:
        """``fn(handle, *args)`` or why not. Raises GpuLostError."""
        known = self.static.get(key)
        if known is not None:
            return known
        try:  # session.call, inlined: several calls per GPU per sample come here
            return fn(self.handle, *args)
        except Exception as exc:  # noqa: BLE001 - one failing metric never spoils the rest
            value = failed(getattr(fn, "__name__", key), exc)
        self._remember(key, value)
        return value

    def read(self) -> list[Metric[Any]]:
        """The :data:`SAMPLED` readings, queried in that order: (gpu, memory) busy percent,
        (total, free, used) bytes, SM and memory clock MHz, fan percent, GPU temperature in C,
        and the clocks-event (throttle) reason mask; each one or why not. Raises GpuLostError."""
        queries = self._queries
        if queries is None:
            queries = self._queries = self._pending()
        values = self._known.copy()
        for position, key, candidates in queries:
            query = candidates[0]
            try:
                query.check(*query.args)
            except Exception as exc:  # noqa: BLE001 - as in get()
                values[position] = self._failed(key, candidates, exc)
                continue
            values[position] = query.decode(query.out)
        return values

    def _pending(self) -> list[tuple[int, str, list[_Query]]]:
        """The queries :meth:`read` makes (metrics not known to be unavailable for good); sets
        :attr:`_known` to match."""
        if self._candidates is None:
            self._candidates = _queries(self.handle)
        self._known = [self.static.get(key) for key in SAMPLED]
        return [
            (position, key, self._candidates[key]) for position, key in enumerate(SAMPLED) if key not in self.static
        ]

    def _failed(self, key: str, candidates: list[_Query], exc: BaseException) -> Metric[Any]:
        """What :meth:`read` gives for ``key`` when its first candidate raised ``exc``: the next
        candidate's reading where the driver lacks this one, else the reason (remembered, and
        no longer asked, when it is for good)."""
        value = failed(candidates[0].symbol, exc)
        if isinstance(value, Unavailable) and value.reason is Reason.DRIVER_TOO_OLD and len(candidates) > 1:
            candidates.pop(0)  # remembered: the next read starts at the one the driver has
            query = candidates[0]
            try:
                query.check(*query.args)
            except Exception as again:  # noqa: BLE001 - as in get()
                return self._failed(key, candidates, again)
            return query.decode(query.out)
        self._remember(key, value)
        return value

    def _remember(self, key: str, value: Metric[Any]) -> None:
        """Keep ``value`` as ``key``'s answer for the rest of the run when it is unavailable for
        good (NotSupported, FunctionNotFound): not asked again (:meth:`read` leaves it out)."""
        if isinstance(value, Unavailable) and value.reason in (Reason.NOT_SUPPORTED, Reason.DRIVER_TOO_OLD):
            self.static[key] = value
            self._queries = None
