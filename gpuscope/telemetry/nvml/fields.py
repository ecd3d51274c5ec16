"""Field values: one batched ``nvmlDeviceGetFieldValues`` call per GPU per sample.

The batch holds energy, memory temperature, volatile ECC totals, the PCIe byte counters and
the NVLink data counters (total and per active link). Counters are differenced over their
own timestamps (microseconds, stamped by the driver), not over the sampler's clock.
Fields the GPU does not support are found on the first read (at open) and dropped from the
batch, so their cost is paid once.

Cost: the request array (``nvmlFieldValue_t[n]``, with field and scope ids filled in) is built
once per GPU and reused: each read is one C call on it (pynvml's wrapper would build a new
array through Python-level attribute setters, one per field, every sample) and one pass over a
plain ctypes view of the answers.

``NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX`` count KiB; ``scopeId`` selects the link, and
``0xFFFFFFFF`` asks for the sum of all links. Some drivers ignore the scope and return the
GPU-wide counter for every link: :class:`FieldSet` checks that (``scope_honoured``) and then
reports per-link rates as not supported rather than showing the total on every link.

``NVML_FI_DEV_PCIE_COUNT_TX/RX_BYTES`` (drivers 560 and newer; nvml.h: "Value can be wrapped")
may be 32-bit counters. Their width is taken from the value type (unsigned int: 32 bits), from
a value at or above 2**32 (64 bits), or from an observed wrap (a drop while both values fit in
32 bits). While a counter may be 32-bit, a rate is given only when the reads are close enough
that it cannot have wrapped twice at the fastest PCIe link (:data:`PCIE_MAX_BYTES_PER_S`);
otherwise the rate is unavailable with that reason, never an aliased number. A driver that
does not know these field ids (550 and older) answers them with an error at open: they are
dropped as ``driver_too_old``.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gpuscope.telemetry.nvml import compat
from gpuscope.telemetry.nvml.session import call, pynvml, unavailable_from_error
from gpuscope.telemetry.nvml.structs import _FIELDS_OK, FieldValueView, field_values_view
from gpuscope.telemetry.values import Metric, Reason, Unavailable

__all__ = ["FieldSet", "SCOPE_ALL_LINKS"]

SCOPE_ALL_LINKS = 0xFFFFFFFF
_WARMING = Unavailable(Reason.WARMING_UP, "a rate needs two reads")
_WRAP_32 = 1 << 32
#: The fastest a PCIe byte counter can move (PCIe 6.0 x16, one direction, bytes/s): a 32-bit
#: counter read more than 2**32 / this apart (34 ms) may have wrapped more than once.
PCIE_MAX_BYTES_PER_S = 128e9
_PCIE_KEYS = frozenset({"pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"})
_SUCCESS = 0  # NVML_SUCCESS


@dataclass(frozen=True)
class _Field:
    key: str  # the name in FieldSet.read()'s result ("nvlink_tx_bytes_per_s:3" per link)
    field_id: int
    scope: int
    scale: float  # value unit in SI units (KiB -> 1024 bytes, mJ -> 0.001 J)
    counter: bool  # a cumulative counter: the result is its rate per second
    pcie: bool = False  # a PCIe byte counter, which may be 32 bits wide


def _fid(name: str, default: int) -> int:
    return int(getattr(pynvml, name, default))


def _fields(links: list[int]) -> list[_Field]:
    tx, rx = _fid("NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", 138), _fid("NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", 139)
    fields = [
        _Field("energy_j", _fid("NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 83), 0, 1e-3, False),
        _Field("temperature_memory_c", _fid("NVML_FI_DEV_MEMORY_TEMP", 82), 0, 1.0, False),
        _Field("ecc_corrected_errors", _fid("NVML_FI_DEV_ECC_SBE_VOL_TOTAL", 3), 0, 1.0, False),
        _Field("ecc_uncorrected_errors", _fid("NVML_FI_DEV_ECC_DBE_VOL_TOTAL", 4), 0, 1.0, False),
        _Field("pcie_tx_bytes_per_s", _fid("NVML_FI_DEV_PCIE_COUNT_TX_BYTES", 197), 0, 1.0, True, True),
        _Field("pcie_rx_bytes_per_s", _fid("NVML_FI_DEV_PCIE_COUNT_RX_BYTES", 198), 0, 1.0, True, True),
    ]
    if links:
        fields.append(_Field("nvlink_tx_bytes_per_s", tx, SCOPE_ALL_LINKS, 1024.0, True))
        fields.append(_Field("nvlink_rx_bytes_per_s", rx, SCOPE_ALL_LINKS, 1024.0, True))
        for link in links:
            fields.append(_Field(f"nvlink_tx_bytes_per_s:{link}", tx, link, 1024.0, True))
            fields.append(_Field(f"nvlink_rx_bytes_per_s:{link}", rx, link, 1024.0, True))
    return fields


def _value(field_value: Any) -> float | int:
    """The reading in its own type (integers stay exact: byte counters pass 2**53)."""
    kind = int(field_value.valueType)
    number = getattr(field_value.value, _UNION_MEMBER.get(kind, "ullVal"))
    return float(number) if kind == _DOUBLE else int(number)


_DOUBLE = int(getattr(pynvml, "NVML_VALUE_TYPE_DOUBLE", 0))
_UINT = int(getattr(pynvml, "NVML_VALUE_TYPE_UNSIGNED_INT", 1))
_ULL = int(getattr(pynvml, "NVML_VALUE_TYPE_UNSIGNED_LONG_LONG", 3))
#: nvmlValueType_t -> the member of the value union that holds it (unknown types: ullVal)
_UNION_MEMBER = {
    _DOUBLE: "dVal",
    _UINT: "uiVal",
    int(getattr(pynvml, "NVML_VALUE_TYPE_UNSIGNED_LONG", 2)): "ulVal",
    _ULL: "ullVal",
    int(getattr(pynvml, "NVML_VALUE_TYPE_SIGNED_LONG_LONG", 4)): "sllVal",
    compat.VALUE_TYPE_SIGNED_INT: "siVal",
    compat.VALUE_TYPE_UNSIGNED_SHORT: "usVal",
}


def _request(fields: list[_Field]) -> tuple[Any, Any]:
    """A reusable ``nvmlFieldValue_t[len(fields)]`` with field and scope ids set, and its view."""
    values = (pynvml.c_nvmlFieldValue_t * len(fields))()
    view = field_values_view(values, len(fields))
    for slot, field in enumerate(fields):
        view[slot].fieldId = field.field_id
        view[slot].scopeId = field.scope
    return values, view


#: one nvmlFieldValue_t as plain numbers: fieldId, scopeId, timestamp, latencyUsec, valueType,
#: nvmlReturn, and the value union read as an unsigned long long (right for ``_ULL`` only)
_ROW = struct.Struct("=IIqqIIQ")
_ROWS_OK = _FIELDS_OK and _ROW.size == ctypes.sizeof(FieldValueView)


def _rows(values: Any, view: Any) -> Iterator[tuple[int, int, int, int, int, int, int]]:
    """The entries of a field-value array as tuples (one C-speed unpack instead of a ctypes
    attribute read per member), or read member by member where pynvml's layout differs."""
    if _ROWS_OK:
        return _ROW.iter_unpack(values)
    return (
        (entry.fieldId, entry.scopeId, entry.timestamp, 0, entry.valueType, entry.nvmlReturn, entry.value.ullVal)
        for entry in view
    )


def _get_field_values(handle: Any, values: Any, count: int) -> Any:
    """``nvmlDeviceGetFieldValues`` into a prebuilt array: the C symbol through pynvml's own
    lookup, as pynvml's wrapper calls it. Raises NVMLError."""
    fn = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetFieldValues")
    ret = fn(handle, ctypes.c_int32(count), ctypes.byref(values))
    if ret != pynvml.NVML_SUCCESS:
        raise pynvml.NVMLError(ret)
    return values


class FieldSet:
    """The batched field values of one GPU and the rates of its counters."""

    def __init__(self, handle: Any, links: list[int]) -> None:
        self.handle = handle
        self.links = list(links)
        self._fields = _fields(self.links)
        self._request: tuple[Any, Any] | None = None  # (nvmlFieldValue_t array, its view)
        self._dropped: dict[str, Unavailable] = {}
        self._previous: dict[str, tuple[float | int, int]] = {}  # key -> (raw value, timestamp us)
        self._last_rate: dict[str, Metric[float]] = {}
        #: PCIe counter key -> 32 or 64 once known (value type, a value >= 2**32, or a wrap seen)
        self.counter_bits: dict[str, int] = {}
        #: None until known; False when the driver returns the GPU-wide counter for every link.
        self.scope_honoured: bool | None = None if len(self.links) > 1 else True
        self.opened = False

    def _raw(self, field: _Field, field_value: Any) -> Metric[float | int]:
        code = int(field_value.nvmlReturn)
        if code != pynvml.NVML_SUCCESS:
            if code == pynvml.NVML_ERROR_INVALID_ARGUMENT and not self.opened and field.key in _PCIE_KEYS:
                return Unavailable(
                    Reason.DRIVER_TOO_OLD,
                    f"{field.key} (field {field.field_id}): this driver does not know the PCIe byte counters "
                    "(drivers 560 and newer have them)",
                )
            return unavailable_from_error(
                pynvml.NVMLError(code), f"{field.key.partition(':')[0]} (field {field.field_id})"
            )
        return _value(field_value)

    def read(self) -> dict[str, Metric[float]]:
        """One batched call. Keys: ``energy_j``, ``temperature_memory_c``, ``ecc_*_errors``,
        ``pcie_tx/rx_bytes_per_s``, ``nvlink_tx/rx_bytes_per_s`` and ``...:<link>``.
        Raises GpuLostError."""
        result: dict[str, Metric[float]] = dict(self._dropped)
        if not self._fields:
            return result
        if self._request is None:
            self._request = _request(self._fields)
        values, view = self._request
        got = call("nvmlDeviceGetFieldValues", _get_field_values, self.handle, values, len(self._fields))
        if isinstance(got, Unavailable):
            for field in self._fields:
                result[field.key] = got
            if not self.opened and got.reason in (Reason.NOT_SUPPORTED, Reason.DRIVER_TOO_OLD):
                self._dropped.update({field.key: got for field in self._fields})
                self._fields, self._request = [], None
            self.opened = True
            return result
        raw: dict[str, float | int] | None = {} if self.scope_honoured is None else None
        keep: list[_Field] = []  # the fields still asked for (unsupported ones drop at open)
        opened = self.opened
        previous_of, last_rate = self._previous, self._last_rate
        for slot, (field, (_, _, stamp_us, _, kind, code, number)) in enumerate(zip(self._fields, _rows(values, view))):
            key = field.key
            if not opened:
                keep.append(field)
            if code != _SUCCESS:
                value = self._raw(field, view[slot])
                assert isinstance(value, Unavailable)
                result[key] = value
                if not opened and value.reason in (Reason.NOT_SUPPORTED, Reason.DRIVER_TOO_OLD):
                    self._dropped[key] = value
                    keep.pop()
                continue
            reading: float | int = number if kind == _ULL else _value(view[slot])
            if raw is not None:
                raw[key] = reading
            if field.pcie:
                result[key] = self._pcie_rate(field, int(reading), stamp_us, kind == _UINT)
            elif field.counter:
                previous = previous_of.get(key)
                if kind == _ULL and previous is not None and stamp_us > previous[1] and reading >= previous[0]:
                    # the usual case, as _rate computes it: a 64-bit counter that moved on
                    previous_of[key] = (reading, stamp_us)
                    result[key] = last_rate[key] = (
                        (reading - previous[0]) * field.scale / ((stamp_us - previous[1]) / 1e6)
                    )
                else:
                    result[key] = self._rate(field, reading, stamp_us, _WRAP_32 if kind == _UINT else None)
            else:
                result[key] = reading * field.scale
        if not opened and len(keep) != len(self._fields):
            self._fields, self._request = keep, None
        self.opened = True
        if raw is not None:
            self._check_scope(raw)
        if self.scope_honoured is False:
            ignored = Unavailable(
                Reason.NOT_SUPPORTED, "this driver reports the GPU-wide NVLink counter for every link"
            )
            for link in self.links:
                result[f"nvlink_tx_bytes_per_s:{link}"] = ignored
                result[f"nvlink_rx_bytes_per_s:{link}"] = ignored
        return result

    def _rate(self, field: _Field, value: float | int, stamp_us: int, wraps_at: int | None = None) -> Metric[float]:
        """Rate of a counter over its own timestamps. A 32-bit counter that went back wrapped
        once (more wraps between two reads cannot be seen); a 64-bit one was reset."""
        previous = self._previous.get(field.key)
        if previous is None:
            self._previous[field.key] = (value, stamp_us)
            return _WARMING
        seconds = (stamp_us - previous[1]) / 1e6
        if seconds <= 0:  # the driver served the same cached reading
            last = self._last_rate.get(field.key)
            return _WARMING if last is None else last
        self._previous[field.key] = (value, stamp_us)
        delta = value - previous[0]
        if delta < 0 and wraps_at is not None:
            delta += wraps_at
        if delta < 0:
            self._last_rate.pop(field.key, None)
            return Unavailable(Reason.WARMING_UP, "the counter went back (driver reload or reset)")
        rate = delta * field.scale / seconds
        self._last_rate[field.key] = rate
        return rate

    def _pcie_rate(self, field: _Field, value: int, stamp_us: int, uint: bool) -> Metric[float]:
        """Rate of a PCIe byte counter that may be 32-bit and wrap (see the module docstring)."""
        key = field.key
        if uint:
            self.counter_bits[key] = 32
        elif value >= _WRAP_32:
            self.counter_bits[key] = 64
        previous = self._previous.get(key)
        if previous is None:
            self._previous[key] = (value, stamp_us)
            return _WARMING
        seconds = (stamp_us - previous[1]) / 1e6
        if seconds <= 0:
            return self._last_rate.get(key, _WARMING)
        self._previous[key] = (value, stamp_us)
        bits = self.counter_bits.get(key)
        delta = value - int(previous[0])
        if delta < 0 and bits is None and previous[0] < _WRAP_32:
            bits = self.counter_bits[key] = 32  # it dropped while both fit in 32 bits: it wrapped
        if bits == 64:
            if delta < 0:
                self._last_rate.pop(key, None)
                return Unavailable(Reason.WARMING_UP, "the counter went back (driver reload or reset)")
            rate = delta * field.scale / seconds
        else:
            limit_s = _WRAP_32 / PCIE_MAX_BYTES_PER_S
            if seconds > limit_s:
                width = (
                    "a 32-bit counter" if bits == 32 else "possibly a 32-bit counter (all values so far below 2**32)"
                )
                rate_or_reason: Metric[float] = Unavailable(
                    Reason.NOT_SUPPORTED,
                    f"{key}: {width} that wraps every 4 GiB; reads {seconds:.3g} s apart could alias "
                    f"(safe below {limit_s * 1e3:.0f} ms at {PCIE_MAX_BYTES_PER_S / 1e9:.0f} GB/s)",
                )
                self._last_rate[key] = rate_or_reason
                return rate_or_reason
            if delta < 0:
                delta += _WRAP_32
            rate = delta * field.scale / seconds
        self._last_rate[key] = rate
        return rate

    def _check_scope(self, raw: dict[str, float | int]) -> None:
        if self.scope_honoured is not None:
            return
        for direction in ("tx", "rx"):
            total = raw.get(f"nvlink_{direction}_bytes_per_s")
            per_link = [raw.get(f"nvlink_{direction}_bytes_per_s:{link}") for link in self.links]
            if total is None or not total or any(value is None for value in per_link):
                continue
            self.scope_honoured = not all(value == total for value in per_link)
            return
