"""Field values: one batched ``nvmlDeviceGetFieldValues`` call per GPU per sample.

The batch holds energy, memory temperature, volatile ECC totals, the PCIe byte counters and
the NVLink data counters (total and per active link). Counters are differenced over their
own timestamps (microseconds, stamped by the driver), not over the sampler's clock.
Fields the GPU does not support are found on the first read (at open) and dropped from the
batch, so their cost is paid once.

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

from dataclasses import dataclass
from typing import Any

from gpuscope.telemetry.nvml import compat
from gpuscope.telemetry.nvml.session import call, pynvml, unavailable_from_error
from gpuscope.telemetry.nvml.structs import field_values_view
from gpuscope.telemetry.values import Metric, Reason, Unavailable

__all__ = ["FieldSet", "SCOPE_ALL_LINKS"]

SCOPE_ALL_LINKS = 0xFFFFFFFF
_WARMING = Unavailable(Reason.WARMING_UP, "a rate needs two reads")
_WRAP_32 = 1 << 32
#: The fastest a PCIe byte counter can move (PCIe 6.0 x16, one direction, bytes/s): a 32-bit
#: counter read more than 2**32 / this apart (34 ms) may have wrapped more than once.
PCIE_MAX_BYTES_PER_S = 128e9
_PCIE_KEYS = frozenset({"pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"})


@dataclass(frozen=True)
class _Field:
    key: str  # the name in FieldSet.read()'s result ("nvlink_tx_bytes_per_s:3" per link)
    field_id: int
    scope: int
    scale: float  # value unit in SI units (KiB -> 1024 bytes, mJ -> 0.001 J)
    counter: bool  # a cumulative counter: the result is its rate per second


def _fid(name: str, default: int) -> int:
    return int(getattr(pynvml, name, default))


def _fields(links: list[int]) -> list[_Field]:
    tx, rx = _fid("NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", 138), _fid("NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", 139)
    fields = [
        _Field("energy_j", _fid("NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 83), 0, 1e-3, False),
        _Field("temperature_memory_c", _fid("NVML_FI_DEV_MEMORY_TEMP", 82), 0, 1.0, False),
        _Field("ecc_corrected_errors", _fid("NVML_FI_DEV_ECC_SBE_VOL_TOTAL", 3), 0, 1.0, False),
        _Field("ecc_uncorrected_errors", _fid("NVML_FI_DEV_ECC_DBE_VOL_TOTAL", 4), 0, 1.0, False),
        _Field("pcie_tx_bytes_per_s", _fid("NVML_FI_DEV_PCIE_COUNT_TX_BYTES", 197), 0, 1.0, True),
        _Field("pcie_rx_bytes_per_s", _fid("NVML_FI_DEV_PCIE_COUNT_RX_BYTES", 198), 0, 1.0, True),
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
    union = field_value.value
    if kind == pynvml.NVML_VALUE_TYPE_DOUBLE:
        return float(union.dVal)
    if kind == pynvml.NVML_VALUE_TYPE_UNSIGNED_INT:
        return int(union.uiVal)
    if kind == pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG:
        return int(union.ulVal)
    if kind == pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG:
        return int(union.sllVal)
    if kind == compat.VALUE_TYPE_SIGNED_INT:
        return int(union.siVal)
    if kind == compat.VALUE_TYPE_UNSIGNED_SHORT:
        return int(union.usVal)
    return int(union.ullVal)


class FieldSet:
    """The batched field values of one GPU and the rates of its counters."""

    def __init__(self, handle: Any, links: list[int]) -> None:
        self.handle = handle
        self.links = list(links)
        self._fields = _fields(self.links)
        self._request: list[tuple[int, int]] | None = None
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
            self._request = [(field.field_id, field.scope) for field in self._fields]
        values = call("nvmlDeviceGetFieldValues", pynvml.nvmlDeviceGetFieldValues, self.handle, self._request)
        if isinstance(values, Unavailable):
            for field in self._fields:
                result[field.key] = values
            if not self.opened and values.reason in (Reason.NOT_SUPPORTED, Reason.DRIVER_TOO_OLD):
                self._dropped.update({field.key: values for field in self._fields})
                self._fields, self._request = [], None
            self.opened = True
            return result
        raw: dict[str, float | int] = {}
        keep: list[_Field] = []
        for field, field_value in zip(self._fields, field_values_view(values, len(values))):
            value = self._raw(field, field_value)
            if isinstance(value, Unavailable):
                result[field.key] = value
                if not self.opened and value.reason in (Reason.NOT_SUPPORTED, Reason.DRIVER_TOO_OLD):
                    self._dropped[field.key] = value
                    continue
                keep.append(field)
                continue
            keep.append(field)
            raw[field.key] = value
            if field.counter:
                uint = int(field_value.valueType) == pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
                if field.key in _PCIE_KEYS:
                    result[field.key] = self._pcie_rate(field, int(value), int(field_value.timestamp), uint)
                else:
                    result[field.key] = self._rate(field, value, int(field_value.timestamp), _WRAP_32 if uint else None)
            else:
                result[field.key] = value * field.scale
        if len(keep) != len(self._fields):
            self._fields, self._request = keep, None
        self.opened = True
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
