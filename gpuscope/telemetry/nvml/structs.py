"""Plain ctypes views of pynvml's structures, for the hot path.

pynvml's structures override ``__getattribute__``/``__setattr__`` in Python, so every field
access costs a Python call; with dozens of field values and GPM metrics per GPU per sample
that dominated the sample cost. These views share the same memory (``from_buffer``) and read
at C speed. ``field_values_view`` / ``gpm_metrics_view`` fall back to pynvml's own objects when
a pynvml release changed the layout.
"""

from __future__ import annotations

import ctypes
import functools
import struct
from collections.abc import Callable, Sequence
from typing import Any

from gpuscope.telemetry.nvml.session import pynvml

__all__ = [
    "FieldValueView",
    "GpmMetricView",
    "field_values_view",
    "gpm_metrics_view",
    "gpm_metric_columns",
    "utilization_row",
    "memory_row",
    "utilization_decoder",
    "memory_decoder",
    "temperature_view",
]


class _ValueView(ctypes.Union):
    _fields_ = [
        ("dVal", ctypes.c_double),
        ("uiVal", ctypes.c_uint),
        ("ulVal", ctypes.c_ulong),
        ("ullVal", ctypes.c_ulonglong),
        ("sllVal", ctypes.c_longlong),
        ("siVal", ctypes.c_int),
        ("usVal", ctypes.c_ushort),
    ]


class FieldValueView(ctypes.Structure):
    """nvmlFieldValue_t."""

    _fields_ = [
        ("fieldId", ctypes.c_uint32),
        ("scopeId", ctypes.c_uint32),
        ("timestamp", ctypes.c_int64),
        ("latencyUsec", ctypes.c_int64),
        ("valueType", ctypes.c_uint),
        ("nvmlReturn", ctypes.c_uint),
        ("value", _ValueView),
    ]


class GpmMetricView(ctypes.Structure):
    """nvmlGpmMetric_t."""

    _fields_ = [
        ("metricId", ctypes.c_uint),
        ("nvmlReturn", ctypes.c_uint),
        ("value", ctypes.c_double),
        ("metricInfo", ctypes.c_char_p * 3),
    ]


def _same(ours: type, theirs: str) -> bool:
    other = getattr(pynvml, theirs, None) if pynvml is not None else None
    return other is not None and ctypes.sizeof(ours) == ctypes.sizeof(other)


_FIELDS_OK = _same(FieldValueView, "c_nvmlFieldValue_t")
_METRICS_OK = _same(GpmMetricView, "c_nvmlGpmMetric_t")


def field_values_view(values: Any, count: int) -> Any:
    """The first ``count`` entries of a c_nvmlFieldValue_t array."""
    return (FieldValueView * count).from_buffer(values) if _FIELDS_OK else values


def gpm_metrics_view(request: Any, count: int) -> Any:
    """The first ``count`` metrics of a c_nvmlGpmMetricsGet_t."""
    if not _METRICS_OK:
        return request.metrics
    return (GpmMetricView * count).from_buffer(request, type(request).metrics.offset)


_METRIC_ROW = "IId24x"  # one nvmlGpmMetric_t: metricId, nvmlReturn, value (the name pointers skipped)
_METRIC_ROWS_OK = _METRICS_OK and struct.calcsize("=" + _METRIC_ROW) == ctypes.sizeof(GpmMetricView)


@functools.lru_cache(maxsize=16)
def _metric_rows(count: int) -> struct.Struct:
    return struct.Struct("=" + _METRIC_ROW * count)


def gpm_metric_columns(request: Any, count: int) -> tuple[Sequence[int], Sequence[int], Sequence[float]]:
    """(metric ids, return codes, values) of the first ``count`` metrics of a
    c_nvmlGpmMetricsGet_t: one C-speed unpack, or member by member where pynvml's layout differs."""
    if _METRIC_ROWS_OK:
        flat = _metric_rows(count).unpack_from(request, type(request).metrics.offset)
        return flat[0::3], flat[1::3], flat[2::3]
    metrics = gpm_metrics_view(request, count)
    return (
        [int(m.metricId) for m in metrics],
        [int(m.nvmlReturn) for m in metrics],
        [float(m.value) for m in metrics],
    )


#: nvmlUtilization_t (gpu, memory: percent) and nvmlMemory_t (total, free, used: bytes)
_UTILIZATION_ROW = struct.Struct("=II")
_MEMORY_ROW = struct.Struct("=QQQ")


def _sized(name: str, row: struct.Struct) -> Any:
    """pynvml's structure ``name`` when it has ``row``'s size (else None: read its attributes)."""
    cls = getattr(pynvml, name, None) if pynvml is not None else None
    return cls if cls is not None and ctypes.sizeof(cls) == row.size else None


_UTILIZATION_TYPE = _sized("c_nvmlUtilization_t", _UTILIZATION_ROW)
_MEMORY_TYPE = _sized("c_nvmlMemory_t", _MEMORY_ROW)


def utilization_row(util: Any) -> tuple[int, int]:
    """(gpu, memory) percent of what ``nvmlDeviceGetUtilizationRates`` returned: one C-speed
    unpack (each pynvml attribute read is a Python call)."""
    if type(util) is _UTILIZATION_TYPE:
        gpu, memory = _UTILIZATION_ROW.unpack(util)
        return gpu, memory
    return int(util.gpu), int(util.memory)


def memory_row(memory: Any) -> tuple[int, int, int]:
    """(total, free, used) bytes of what ``nvmlDeviceGetMemoryInfo`` returned, as :func:`utilization_row`."""
    if type(memory) is _MEMORY_TYPE:
        total, free, used = _MEMORY_ROW.unpack(memory)
        return total, free, used
    return int(memory.total), int(memory.free), int(memory.used)


def utilization_decoder() -> Callable[[Any], tuple[int, int]]:
    """:func:`utilization_row` for a ``c_nvmlUtilization_t``, without its Python frame where
    the layout is nvml.h's."""
    return _UTILIZATION_ROW.unpack if _UTILIZATION_TYPE is not None else utilization_row


def memory_decoder() -> Callable[[Any], tuple[int, int, int]]:
    """:func:`memory_row` for a ``c_nvmlMemory_t``, as :func:`utilization_decoder`."""
    return _MEMORY_ROW.unpack if _MEMORY_TYPE is not None else memory_row


class _TemperatureView(ctypes.Structure):
    """nvmlTemperature_v1_t."""

    _fields_ = [("version", ctypes.c_uint), ("sensorType", ctypes.c_uint), ("temperature", ctypes.c_int)]


def temperature_view(request: Any) -> Any:
    """A plain view of a ``c_nvmlTemperature_v1_t`` (its ``temperature`` read at C speed), or
    the request itself where pynvml's layout differs."""
    if ctypes.sizeof(request) != ctypes.sizeof(_TemperatureView):
        return request
    return _TemperatureView.from_buffer(request)
