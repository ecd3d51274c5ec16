"""Field values: one batched ``nvmlDeviceGetFieldValues`` call per GPU per sample.

The batch holds energy, memory temperature, volatile ECC totals, GPU power, the PCIe byte
counters and the NVLink data counters (total and per active link). Counters are differenced
over their own timestamps (microseconds, stamped by the driver), not over the sampler's clock.
Fields the GPU does not support are found on the first read (at open) and dropped from the
batch, so their cost is paid once.

Counters another source already gives (GPM: PCIe, NVLink totals and per link) are not asked:
``read(covered=...)`` names the keys that source had a number for *this* sample, and only the
rest go to the driver (on Hopper with GPM that leaves 5 of 46 fields per GPU; each field is
driver work). A counter that was skipped forgets its last reading, so when it is asked again
(GPM failed, lost a metric, or is unavailable) it restarts: one read warming up, then rates
over one interval, never an average over the time it was not read. A key GPM gave before
and then missed stays asked for :data:`KEEP_READS` reads after GPM has it again, so an
intermittent GPM failure finds the counter running. While ``scope_honoured`` is unknown the
two NVLink totals are asked every read; once a total has counted traffic the per-link
counters are asked next to it once, which decides the check.

Power (mW, read as W): ``NVML_FI_DEV_POWER_AVERAGE`` (the 1 s average; nvml.h: Ampere except
GA100, and newer) and ``NVML_FI_DEV_POWER_INSTANT`` (all architectures) are asked at open; where
the average answers, the instantaneous field is dropped like an unsupported one. Together they
mean what ``nvmlDeviceGetPowerUsage`` returns (nvml.h: the 1 s average on Ampere except GA100
and newer, instantaneous power on GA100 and older), in the same batch instead of one more call
per GPU. Drivers that predate the field ids answer them InvalidArgument at open: they drop as
``driver_too_old`` and the collector calls ``nvmlDeviceGetPowerUsage`` instead.

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
from typing import Protocol

from gpuscope.telemetry.nvml import compat
from gpuscope.telemetry.nvml.session import call, pynvml, unavailable_from_error
from gpuscope.telemetry.values import Metric, Reason, Unavailable

__all__ = ["FieldSet", "KEEP_READS", "SCOPE_ALL_LINKS"]

SCOPE_ALL_LINKS = 0xFFFFFFFF
_WARMING = Unavailable(Reason.WARMING_UP, "a rate needs two reads")
_WRAP_32 = 1 << 32
#: The fastest a PCIe byte counter can move (PCIe 6.0 x16, one direction, bytes/s): a 32-bit
#: counter read more than 2**32 / this apart (34 ms) may have wrapped more than once.
PCIE_MAX_BYTES_PER_S = 128e9
#: reads a counter GPM missed stays asked after GPM gives it again (see the module docstring)
KEEP_READS = 30
_NOT_READ = Unavailable(Reason.NOT_APPLICABLE, "not read: another source (GPM) gave this value")
_NOTHING: frozenset[str] = frozenset()
_SCOPE_IGNORED = Unavailable(Reason.NOT_SUPPORTED, "this driver reports the GPU-wide NVLink counter for every link")
#: GPU power in W: the 1 s average (Ampere except GA100, and newer) and the instantaneous reading
POWER_AVERAGE = "power_average_w"
POWER_INSTANT = "power_instant_w"
_PCIE_SINCE = "the PCIe byte counters (drivers 560 and newer have them)"
_POWER_SINCE = "the power fields (NVML_FI_DEV_POWER_AVERAGE/INSTANT)"


@dataclass(frozen=True)
class _Field:
    key: str  # the name in FieldSet.read()'s result ("nvlink_tx_bytes_per_s:3" per link)
    field_id: int
    scope: int
    scale: float  # value unit in SI units (KiB -> 1024 bytes, mJ -> 0.001 J)
    counter: bool  # a cumulative counter: the result is its rate per second
    pcie: bool = False  # a PCIe byte counter, which may be 32 bits wide
    link: bool = False  # a per-link NVLink counter
    #: which drivers know this field id, when old ones do not (they answer InvalidArgument)
    since: str = ""
    #: the key of a field that gives the same value better: when it answers at open, this one
    #: is dropped (its cost is paid once, as for an unsupported field)
    spare_for: str = ""

    @property
    def coverable(self) -> bool:
        """Whether GPM can give this value instead (PCIe and NVLink counters)."""
        return self.pcie or self.key.startswith("nvlink_")


def _fid(name: str, default: int) -> int:
    return int(getattr(pynvml, name, default))


def _fields(links: list[int], per_link: bool = True) -> list[_Field]:
    tx, rx = _fid("NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", 138), _fid("NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", 139)
    fields = [
        _Field("energy_j", _fid("NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 83), 0, 1e-3, False),
        _Field("temperature_memory_c", _fid("NVML_FI_DEV_MEMORY_TEMP", 82), 0, 1.0, False),
        _Field("ecc_corrected_errors", _fid("NVML_FI_DEV_ECC_SBE_VOL_TOTAL", 3), 0, 1.0, False),
        _Field("ecc_uncorrected_errors", _fid("NVML_FI_DEV_ECC_DBE_VOL_TOTAL", 4), 0, 1.0, False),
        _Field(POWER_AVERAGE, _fid("NVML_FI_DEV_POWER_AVERAGE", 185), 0, 1e-3, False, since=_POWER_SINCE),
        _Field(
            POWER_INSTANT,
            _fid("NVML_FI_DEV_POWER_INSTANT", 186),
            0,
            1e-3,
            False,
            since=_POWER_SINCE,
            spare_for=POWER_AVERAGE,
        ),
        _Field(
            "pcie_tx_bytes_per_s", _fid("NVML_FI_DEV_PCIE_COUNT_TX_BYTES", 197), 0, 1.0, True, True, since=_PCIE_SINCE
        ),
        _Field(
            "pcie_rx_bytes_per_s", _fid("NVML_FI_DEV_PCIE_COUNT_RX_BYTES", 198), 0, 1.0, True, True, since=_PCIE_SINCE
        ),
    ]
    if links:
        fields.append(_Field("nvlink_tx_bytes_per_s", tx, SCOPE_ALL_LINKS, 1024.0, True))
        fields.append(_Field("nvlink_rx_bytes_per_s", rx, SCOPE_ALL_LINKS, 1024.0, True))
        for link in links if per_link else []:
            fields.append(_Field(f"nvlink_tx_bytes_per_s:{link}", tx, link, 1024.0, True, link=True))
            fields.append(_Field(f"nvlink_rx_bytes_per_s:{link}", rx, link, 1024.0, True, link=True))
    return fields


class _FieldValue(Protocol):
    """What this module reads of one pynvml ``c_nvmlFieldValue_t``."""

    timestamp: int
    valueType: int
    nvmlReturn: int
    value: object


def _value(field_value: _FieldValue) -> float | int:
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


@dataclass
class _Selection:
    """The fields one read asks for, and what the others read as."""

    fields: list[_Field]
    ids: list[tuple[int, int]]  # (field id, scope id) of each, as nvmlDeviceGetFieldValues takes them
    not_read: dict[str, Metric[float]]  # key -> _NOT_READ for each field left out


class FieldSet:
    """The batched field values of one GPU and the rates of its counters."""

    def __init__(self, handle: object, links: list[int], *, per_link: bool = True) -> None:
        self.handle = handle
        #: the links asked one by one (none when ``per_link`` is off: the totals only)
        self.links = list(links) if per_link else []
        self._fields = _fields(list(links), per_link)
        self._dropped: dict[str, Unavailable] = {}
        self._previous: dict[str, tuple[float | int, int]] = {}  # key -> (raw value, timestamp us)
        self._last_rate: dict[str, Metric[float]] = {}
        #: PCIe counter key -> 32 or 64 once known (value type, a value >= 2**32, or a wrap seen)
        self.counter_bits: dict[str, int] = {}
        #: None until known (or never asked: ``per_link`` off); False when the driver returns
        #: the GPU-wide counter for every link.
        self.scope_honoured: bool | None = None if len(self.links) > 1 or not per_link else True
        self._scope_check = len(self.links) > 1
        self.opened = False
        self._reads = 0
        self._selection: _Selection | None = None  # the last read's
        self._skipped: frozenset[str] = _NOTHING  # keys the last read did not ask
        self._covered: frozenset[str] = _NOTHING  # the keys of the last ``covered`` that are fields here
        self._coverable = frozenset(field.key for field in self._fields if field.coverable)
        self._ever_covered: set[str] = set()
        self._kept_until: dict[str, int] = {}  # key -> read number up to which it is asked anyway
        self._scope_probe = False  # ask the per-link counters next read (a total counted traffic)

    @property
    def asked(self) -> list[str]:
        """The keys the last read asked the driver for."""
        return [field.key for field in self._selection.fields] if self._selection else []

    def _select(self, given: frozenset[str]) -> _Selection:
        """The fields to ask, given the keys another source had a number for this read."""
        covered = given & self._coverable
        if covered != self._covered:
            # keys GPM had before, missed, and has again: keep them running for a while
            back = (covered - self._covered) & self._ever_covered
            self._kept_until.update(dict.fromkeys(back, self._reads + KEEP_READS))
            self._ever_covered.update(covered)
            self._covered = covered
        for key in [key for key, until in self._kept_until.items() if until < self._reads]:
            del self._kept_until[key]
        skip = covered.difference(self._kept_until)
        if self.scope_honoured is None and self._scope_check:  # the check needs the totals (and, once, each link)
            skip = frozenset(
                key for key in skip if not key.startswith("nvlink_") or (":" in key and not self._scope_probe)
            )
        elif self.scope_honoured is False:  # per-link counters are the total: never asked
            skip = skip | {field.key for field in self._fields if field.link}
        for key in skip - self._skipped:  # not read from now on: forget the last reading
            self._previous.pop(key, None)
            self._last_rate.pop(key, None)
        self._skipped = skip
        asked = [field for field in self._fields if field.key not in skip]
        not_read: dict[str, Metric[float]] = dict.fromkeys(skip, _NOT_READ)
        if self.scope_honoured is False:
            not_read.update(dict.fromkeys((field.key for field in self._fields if field.link), _SCOPE_IGNORED))
        return _Selection(asked, [(field.field_id, field.scope) for field in asked], not_read)

    def _raw(self, field: _Field, field_value: _FieldValue) -> Metric[float | int]:
        code = int(field_value.nvmlReturn)
        if code != pynvml.NVML_SUCCESS:
            if code == pynvml.NVML_ERROR_INVALID_ARGUMENT and not self.opened and field.since:
                return Unavailable(
                    Reason.DRIVER_TOO_OLD,
                    f"{field.key} (field {field.field_id}): this driver does not know {field.since}",
                )
            return unavailable_from_error(
                pynvml.NVMLError(code), f"{field.key.partition(':')[0]} (field {field.field_id})"
            )
        return _value(field_value)

    def read(self, covered: frozenset[str] = _NOTHING) -> dict[str, Metric[float]]:
        """One batched call. Keys: ``energy_j``, ``temperature_memory_c``, ``ecc_*_errors``,
        ``power_average_w``, ``power_instant_w`` (W), ``pcie_tx/rx_bytes_per_s``,
        ``nvlink_tx/rx_bytes_per_s`` and ``...:<link>``.
        ``covered``: keys another source (GPM) gave a number for in this sample; their counters
        are not asked and read as not applicable (see the module docstring). The first read
        asks every field. Raises GpuLostError."""
        result: dict[str, Metric[float]] = dict(self._dropped)
        if not self._fields:
            return result
        self._reads += 1
        selection = self._selection = self._select(covered if self.opened else _NOTHING)
        result.update(selection.not_read)
        asked = selection.fields
        if not asked:
            return result
        got = call("nvmlDeviceGetFieldValues", pynvml.nvmlDeviceGetFieldValues, self.handle, selection.ids)
        if isinstance(got, Unavailable):
            for field in asked:
                result[field.key] = got
            if not self.opened and got.reason in (Reason.NOT_SUPPORTED, Reason.DRIVER_TOO_OLD):
                self._dropped.update({field.key: got for field in self._fields})
                self._fields = []
                self._forget_fields()
            self.opened = True
            return result
        raw: dict[str, float | int] | None = {} if self.scope_honoured is None and self._scope_check else None
        keep: list[_Field] = []  # the fields still asked for (unsupported ones drop at open)
        opened = self.opened
        for field, field_value in zip(asked, got):
            key = field.key
            if not opened:
                keep.append(field)
            value = self._raw(field, field_value)
            if isinstance(value, Unavailable):
                result[key] = value
                if not opened and value.reason in (Reason.NOT_SUPPORTED, Reason.DRIVER_TOO_OLD):
                    self._dropped[key] = value
                    keep.pop()
                continue
            if raw is not None:
                raw[key] = value
            stamp_us = int(field_value.timestamp)
            uint = int(field_value.valueType) == _UINT
            if field.pcie:
                result[key] = self._pcie_rate(field, int(value), stamp_us, uint)
            elif field.counter:
                result[key] = self._rate(field, value, stamp_us, _WRAP_32 if uint else None)
            else:
                result[key] = value * field.scale
        if not opened:
            keep = self._drop_spares(keep, result)
        if not opened and len(keep) != len(self._fields):
            self._fields = keep
            self._forget_fields()
        self.opened = True
        if raw is not None:
            self._check_scope(raw)
        if raw is not None and self.scope_honoured is False:  # decided now (later reads skip the links)
            for link in self.links:
                result[f"nvlink_tx_bytes_per_s:{link}"] = _SCOPE_IGNORED
                result[f"nvlink_rx_bytes_per_s:{link}"] = _SCOPE_IGNORED
        return result

    def _drop_spares(self, keep: list[_Field], result: dict[str, Metric[float]]) -> list[_Field]:
        """``keep`` without the spare fields whose better field gave a number at open."""
        spares = [
            field
            for field in keep
            if field.spare_for and not isinstance(result.get(field.spare_for, _NOT_READ), Unavailable)
        ]
        for field in spares:
            self._dropped[field.key] = Unavailable(
                Reason.NOT_APPLICABLE, f"not read: {field.spare_for} gives this value on this GPU"
            )
        return [field for field in keep if field not in spares] if spares else keep

    def _forget_fields(self) -> None:
        """The field list changed: the keys another source may give are those left."""
        self._coverable = frozenset(field.key for field in self._fields if field.coverable)
        self._skipped = _NOTHING

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
        """Decide ``scope_honoured`` from one read of a total and every link beside it; a total
        that counted traffic while the links were not asked asks them in the next read."""
        if self.scope_honoured is not None:
            return
        for direction in ("tx", "rx"):
            total = raw.get(f"nvlink_{direction}_bytes_per_s")
            if total is None or not total:
                continue
            per_link = [raw.get(f"nvlink_{direction}_bytes_per_s:{link}") for link in self.links]
            if any(value is None for value in per_link):
                self._scope_probe = True
                continue
            self.scope_honoured = not all(value == total for value in per_link)
            self._scope_probe = False
            return
