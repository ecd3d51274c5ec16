"""The C symbols of :class:`gpuscope.testing.fake_nvml.FakeNvml`: system, identity, clocks,
power, temperatures, PCIe, NVLink and field values (processes, MIG and GPM: ``_fake_nvml_gpm``).

Each ``_sym_<name>`` receives exactly the ctypes arguments the real pynvml wrapper passes and
returns an NVML return code (``nvmlErrorString`` returns bytes, as the C function does).
Handles are fake addresses: GPU ``i`` is ``(i + 1) << 16``; its MIG device ``k`` adds
``(k + 1) << 8``; GPM samples live at ``0x7F000000 + 16 n``. Nothing is ever dereferenced.
"""

from __future__ import annotations

import ctypes
import struct
from typing import TYPE_CHECKING, Any, NamedTuple

import pynvml

from gpuscope.telemetry.nvml import compat
from gpuscope.testing._fake_nvml_model import ENERGY_MJ, PCIE_RX_BYTES, PCIE_TX_BYTES, LinkBytes, error_code

if TYPE_CHECKING:  # pragma: no cover
    from gpuscope.testing._fake_nvml_model import FakeGpu, FakeMig, _Meter

__all__ = [
    "SymbolsMixin",
    "handle_address",
    "unpack_pointer",
    "FakeReturn",
    "write_pointer",
    "as_int",
    "put",
]

_OK = pynvml.NVML_SUCCESS
_NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
_INVALID = pynvml.NVML_ERROR_INVALID_ARGUMENT
_SCOPE_ALL = 0xFFFFFFFF
_ULL = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
_UINT = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
_DOUBLE = pynvml.NVML_VALUE_TYPE_DOUBLE
_ULL_MASK = (1 << 64) - 1
#: nvml.h's nvmlFieldValue_t (40 bytes): fieldId, scopeId, timestamp, latencyUsec, valueType,
#: nvmlReturn and the value union, as an unsigned long long or as a double
_FIELD_ROW = struct.Struct("=IIqqIIQ")
_FIELD_ROW_DOUBLE = struct.Struct("=IIqqIId")
_POWER_AVERAGE = pynvml.NVML_FI_DEV_POWER_AVERAGE
_POWER_FIELDS = frozenset({_POWER_AVERAGE, pynvml.NVML_FI_DEV_POWER_INSTANT})
#: the first compute capability with NVML_FI_DEV_POWER_AVERAGE (GA10x; GA100 is 8.0)
_POWER_AVERAGE_SINCE = (8, 6)
_CLOCK_MEM = pynvml.NVML_CLOCK_MEM
_ECC_SBE = pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL
_ECC_DBE = pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL
_MEMORY_TEMP = pynvml.NVML_FI_DEV_MEMORY_TEMP
_ENERGY = pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION
_NVLINK_LINK_COUNT = pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT
#: field id -> 0 (tx) or 1 (rx) for the NVLink data counters
_NVLINK_SLOT = {
    pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: 0,
    pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: 1,
}


class FakeReturn(Exception):
    """Raised inside a symbol to return ``code`` at once."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


#: a pointer's own bytes as an address (``unpack(handle)[0]``): four times as fast as
#: ``c_void_p.from_buffer(handle).value``, ten times ``ctypes.cast``; this runs on every call
unpack_pointer = struct.Struct("P").unpack


def handle_address(handle: Any) -> int:
    """The fake address inside a ctypes pointer (a device handle or a GPM sample)."""
    try:
        address: int = unpack_pointer(handle)[0]
        return address
    except (TypeError, struct.error):  # not a pointer-sized ctypes object (byref(), a structure)
        return ctypes.cast(handle, ctypes.c_void_p).value or 0


def write_pointer(ref: Any, address: int) -> None:
    ctypes.c_void_p.from_buffer(ref._obj).value = address


def as_int(value: Any) -> int:
    return int(value.value) if hasattr(value, "value") else int(value)


def put(ref: Any, value: Any) -> int:
    ref._obj.value = value
    return _OK


#: nvml.h's nvmlUtilization_t (gpu, memory), nvmlMemory_t (total, free, used) and
#: nvmlTemperature_t v1 (version, sensorType, temperature)
_UTILIZATION = struct.Struct("=II")
_MEMORY = struct.Struct("=QQQ")
_TEMPERATURE = struct.Struct("=IIi")


def _write(target: Any, row: struct.Struct, values: tuple[int, ...], names: tuple[str, ...]) -> int:
    """Write ``values`` into a ctypes structure laid out as ``row`` (one C-speed pack; pynvml's
    structures set each attribute through a Python call), or by name (``""``: left as it is)
    where the binding's structure has another size."""
    if ctypes.sizeof(target) == row.size:
        row.pack_into(target, 0, *values)
    else:
        for name, value in zip(names, values):
            if name:
                setattr(target, name, value)
    return _OK


def _put_text(buffer: Any, size: Any, text: str) -> int:
    data = text.encode()
    if len(data) + 1 > as_int(size):
        return pynvml.NVML_ERROR_INSUFFICIENT_SIZE
    buffer.value = data
    return _OK


class GpmSample(NamedTuple):
    """A GPM sample buffer once sampled: the meter's integrals at that time."""

    t_s: float
    gpu_index: int
    gpu_instance_id: int | None
    totals: tuple[float, ...]  # _Meter.totals
    nvlink_tx_bytes: LinkBytes
    nvlink_rx_bytes: LinkBytes


class SymbolsMixin:
    """NVML C symbols over the scripted GPUs of a FakeNvml (``self``)."""

    # set by FakeNvml.__init__
    gpus: list[FakeGpu]
    _handle: Any
    _address: int
    _gpm_samples: dict[int, GpmSample | None]
    init_error: int | None
    initialized: int
    driver_version: str
    nvml_version: str
    cuda_driver_version: int

    if TYPE_CHECKING:  # defined by FakeNvml

        def now(self) -> float: ...

        def _gauge(self, gpu_index: int, target: FakeGpu | FakeMig, name: str, now: float | None = None) -> float: ...

        def _settle(self, gpu: FakeGpu, target: FakeGpu | FakeMig, now: float) -> _Meter: ...

        def _power_fault(self, gpu_index: int, gpu: FakeGpu) -> int: ...

    # --- helpers ----------------------------------------------------------------------------

    def _target(self, handle: Any) -> tuple[int, FakeGpu, FakeMig | None]:
        address = self._address if handle is self._handle else handle_address(handle)
        index, slot = (address >> 16) - 1, ((address >> 8) & 0xFF) - 1
        if not 0 <= index < len(self.gpus) or address & 0xFF:
            raise FakeReturn(_INVALID)
        gpu = self.gpus[index]
        if slot < 0:
            return index, gpu, None
        if slot >= len(gpu.mig):
            raise FakeReturn(_INVALID)
        return index, gpu, gpu.mig[slot]

    def _gpu_only(self, handle: Any) -> tuple[int, FakeGpu]:
        """The GPU of a full-GPU handle; a MIG handle gets NotSupported."""
        address = self._address if handle is self._handle else handle_address(handle)
        index = (address >> 16) - 1
        if address & 0xFFFF or not 0 <= index < len(self.gpus):  # a MIG handle, or not a handle
            self._target(handle)  # InvalidArgument, unless it is a MIG device's handle
            raise FakeReturn(_NOT_SUPPORTED)
        return index, self.gpus[index]

    def _now_us(self) -> int:
        return int(round(self.now() * 1e6))

    # --- system ------------------------------------------------------------------------------

    def _sym_nvmlInitWithFlags(self, flags: Any) -> int:
        if self.init_error is not None:
            return self.init_error
        self.initialized += 1
        return _OK

    def _sym_nvmlInit_v2(self) -> int:
        return self._sym_nvmlInitWithFlags(0)

    def _sym_nvmlShutdown(self) -> int:
        self.initialized = max(0, self.initialized - 1)
        return _OK

    def _sym_nvmlErrorString(self, code: Any) -> bytes:
        cls = pynvml.NVMLError._valClassMapping.get(as_int(code))
        return (cls.__name__.removeprefix("NVMLError_") if cls else f"NVML error {as_int(code)}").encode()

    def _sym_nvmlSystemGetDriverVersion(self, buffer: Any, size: Any) -> int:
        return _put_text(buffer, size, self.driver_version)

    def _sym_nvmlSystemGetNVMLVersion(self, buffer: Any, size: Any) -> int:
        return _put_text(buffer, size, self.nvml_version)

    def _sym_nvmlSystemGetCudaDriverVersion(self, ref: Any) -> int:
        return put(ref, self.cuda_driver_version)

    def _sym_nvmlSystemGetCudaDriverVersion_v2(self, ref: Any) -> int:
        return put(ref, self.cuda_driver_version)

    # --- identity --------------------------------------------------------------------------------

    def _sym_nvmlDeviceGetCount_v2(self, ref: Any) -> int:
        return put(ref, len(self.gpus))

    def _sym_nvmlDeviceGetHandleByIndex_v2(self, index: Any, ref: Any) -> int:
        number = as_int(index)
        if not 0 <= number < len(self.gpus):
            return _INVALID
        write_pointer(ref, (number + 1) << 16)
        return _OK

    def _sym_nvmlDeviceGetIndex(self, handle: Any, ref: Any) -> int:
        return put(ref, self._gpu_only(handle)[0])

    def _sym_nvmlDeviceGetName(self, handle: Any, buffer: Any, size: Any) -> int:
        _, gpu, mig = self._target(handle)
        return _put_text(buffer, size, str(mig.name if mig else gpu.name))

    def _sym_nvmlDeviceGetUUID(self, handle: Any, buffer: Any, size: Any) -> int:
        _, gpu, mig = self._target(handle)
        return _put_text(buffer, size, str(mig.uuid if mig else gpu.uuid))

    def _sym_nvmlDeviceGetPciInfo_v3(self, handle: Any, ref: Any) -> int:
        _, gpu, _mig = self._target(handle)
        info = ref._obj
        bus_id = str(gpu.pci_bus_id)
        domain, bus, rest = bus_id.split(":")
        info.busId = bus_id.encode()
        info.busIdLegacy = bus_id[4:].encode()
        info.domain, info.bus, info.device = int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16)
        info.pciDeviceId = 0x233010DE
        return _OK

    def _sym_nvmlDeviceGetArchitecture(self, handle: Any, ref: Any) -> int:
        return put(ref, self._target(handle)[1].architecture)

    def _sym_nvmlDeviceGetCudaComputeCapability(self, handle: Any, major: Any, minor: Any) -> int:
        gpu = self._target(handle)[1]
        put(major, gpu.compute_capability[0])
        return put(minor, gpu.compute_capability[1])

    def _sym_nvmlDeviceGetMemoryBusWidth(self, handle: Any, ref: Any) -> int:
        return put(ref, self._gpu_only(handle)[1].memory_bus_width_bits)

    # --- clocks, power, temperatures -------------------------------------------------------------

    def _sym_nvmlDeviceGetMaxClockInfo(self, handle: Any, clock_type: Any, ref: Any) -> int:
        gpu = self._gpu_only(handle)[1]
        kind = as_int(clock_type)
        if kind in (pynvml.NVML_CLOCK_GRAPHICS, pynvml.NVML_CLOCK_SM):
            return put(ref, gpu.max_sm_clock_mhz)
        if kind == pynvml.NVML_CLOCK_MEM:
            return put(ref, gpu.max_memory_clock_mhz)
        return put(ref, 1755)

    def _sym_nvmlDeviceGetClockInfo(self, handle: Any, clock_type: Any, ref: Any) -> int:
        index, gpu = self._gpu_only(handle)
        kind = as_int(clock_type)
        if kind == _CLOCK_MEM:
            return put(ref, int(round(min(gpu.max_memory_clock_mhz, self._gauge(index, gpu, "memory_clock_mhz")))))
        value = min(gpu.max_sm_clock_mhz, self._gauge(index, gpu, "sm_clock_mhz"))
        return put(ref, int(round(value)))

    def _sym_nvmlDeviceGetUtilizationRates(self, handle: Any, ref: Any) -> int:
        index, gpu, mig = self._target(handle)
        if mig is not None or gpu.mig:
            return _NOT_SUPPORTED  # as on real GPUs in MIG mode
        now = self.now() if gpu.wobble else None  # one reading for both gauges
        busy = int(round(self._gauge(index, gpu, "gpu_util_percent", now)))
        memory = int(round(self._gauge(index, gpu, "memory_busy_percent", now)))
        return _write(ref._obj, _UTILIZATION, (busy, memory), ("gpu", "memory"))

    def _memory(self, handle: Any) -> tuple[int, int]:
        _, gpu, mig = self._target(handle)
        target = mig if mig is not None else gpu
        total = int(target.memory_total_bytes)  # type: ignore[arg-type]
        return total, min(total, int(target.load.memory_used_bytes))

    def _sym_nvmlDeviceGetMemoryInfo(self, handle: Any, ref: Any) -> int:
        total, used = self._memory(handle)
        return _write(ref._obj, _MEMORY, (total, total - used, used), ("total", "free", "used"))

    def _sym_nvmlDeviceGetMemoryInfo_v2(self, handle: Any, ref: Any) -> int:
        if ref._obj.version != pynvml.nvmlMemory_v2:
            return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        total, used = self._memory(handle)
        ref._obj.total, ref._obj.used, ref._obj.free, ref._obj.reserved = total, used, total - used, 0
        return _OK

    def _sym_nvmlDeviceGetPowerUsage(self, handle: Any, ref: Any) -> int:
        index, gpu = self._gpu_only(handle)
        return put(ref, int(round(self._gauge(index, gpu, "power_w") * 1000)))

    def _sym_nvmlDeviceGetEnforcedPowerLimit(self, handle: Any, ref: Any) -> int:
        return put(ref, int(round(self._gpu_only(handle)[1].power_limit_w * 1000)))

    def _sym_nvmlDeviceGetPowerManagementLimit(self, handle: Any, ref: Any) -> int:
        return self._sym_nvmlDeviceGetEnforcedPowerLimit(handle, ref)

    def _sym_nvmlDeviceGetTotalEnergyConsumption(self, handle: Any, ref: Any) -> int:
        _, gpu = self._gpu_only(handle)
        return put(ref, int(self._settle(gpu, gpu, self.now()).totals[ENERGY_MJ]))

    def _temperature(self, handle: Any, sensor: int) -> int:
        index, gpu = self._gpu_only(handle)
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            raise FakeReturn(_NOT_SUPPORTED)
        return int(round(self._gauge(index, gpu, "temperature_gpu_c")))

    def _sym_nvmlDeviceGetTemperature(self, handle: Any, sensor: Any, ref: Any) -> int:
        return put(ref, self._temperature(handle, as_int(sensor)))

    def _sym_nvmlDeviceGetTemperatureV(self, handle: Any, ref: Any) -> int:
        request = ref._obj
        if ctypes.sizeof(request) == _TEMPERATURE.size:  # nvmlTemperature_v1_t, read at C speed
            version, sensor, _ = _TEMPERATURE.unpack(request)
        else:
            version, sensor = request.version, int(request.sensorType)
        if version != compat.TEMPERATURE_V1:
            return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        return _write(
            request, _TEMPERATURE, (version, sensor, self._temperature(handle, sensor)), ("", "", "temperature")
        )

    def _sym_nvmlDeviceGetFanSpeed(self, handle: Any, ref: Any) -> int:
        index, gpu = self._gpu_only(handle)
        return put(ref, int(round(self._gauge(index, gpu, "fan_speed_percent"))))

    def _sym_nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any, ref: Any) -> int:
        return put(ref, int(self._gpu_only(handle)[1].load.throttle_reasons))

    def _sym_nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any, ref: Any) -> int:
        return self._sym_nvmlDeviceGetCurrentClocksEventReasons(handle, ref)

    def _sym_nvmlDeviceGetTotalEccErrors(self, handle: Any, error_type: Any, counter: Any, ref: Any) -> int:
        gpu = self._gpu_only(handle)[1]
        if not gpu.ecc:
            return _NOT_SUPPORTED
        corrected = as_int(error_type) == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
        return put(ref, gpu.ecc_corrected if corrected else gpu.ecc_uncorrected)

    def _sym_nvmlDeviceGetEccMode(self, handle: Any, current: Any, pending: Any) -> int:
        gpu = self._gpu_only(handle)[1]
        put(current, int(gpu.ecc))
        return put(pending, int(gpu.ecc))

    # --- PCIe and NVLink ----------------------------------------------------------------------------

    def _sym_nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Any, ref: Any) -> int:
        return put(ref, self._gpu_only(handle)[1].pcie_generation)

    def _sym_nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Any, ref: Any) -> int:
        return put(ref, self._gpu_only(handle)[1].pcie_generation)

    def _sym_nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any, ref: Any) -> int:
        return put(ref, self._gpu_only(handle)[1].pcie_width)

    def _sym_nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any, ref: Any) -> int:
        return put(ref, self._gpu_only(handle)[1].pcie_width)

    def _sym_nvmlDeviceGetPcieThroughput(self, handle: Any, counter: Any, ref: Any) -> int:
        """The real call blocks ~20 ms; the fake answers at once (tests count the calls)."""
        gpu = self._gpu_only(handle)[1]
        rate = (
            gpu.load.pcie_tx_bytes_per_s
            if as_int(counter) == pynvml.NVML_PCIE_UTIL_TX_BYTES
            else gpu.load.pcie_rx_bytes_per_s
        )
        return put(ref, int(rate / 1000))

    def _link(self, handle: Any, link: Any) -> tuple[FakeGpu, int]:
        gpu = self._gpu_only(handle)[1]
        number = as_int(link)
        if gpu.nvlink_links == 0:
            raise FakeReturn(_NOT_SUPPORTED)
        if not 0 <= number < gpu.nvlink_links:
            raise FakeReturn(_INVALID)
        return gpu, number

    def _sym_nvmlDeviceGetNvLinkState(self, handle: Any, link: Any, ref: Any) -> int:
        gpu, number = self._link(handle, link)
        return put(ref, 0 if number in gpu.nvlink_inactive else 1)

    def _sym_nvmlDeviceGetNvLinkVersion(self, handle: Any, link: Any, ref: Any) -> int:
        gpu, _number = self._link(handle, link)
        return put(ref, gpu.nvlink_version)

    # --- field values ----------------------------------------------------------------------------

    def _sym_nvmlDeviceGetFieldValues(self, handle: Any, count: Any, ref: Any) -> int:
        index, gpu, mig = self._target(handle)
        # one clock reading for the counters, the timestamps and the gauges: a C call is one instant
        # (a manual FakeClock cannot move within a call; with a real one they now agree exactly)
        now = self.now()
        meter = self._settle(gpu, gpu, now)
        stamp = int(round(now * 1e6))
        # per-link NVLink counters (most of a batch with per-link fields) take the short path;
        # the rest go to _field
        per_link = mig is None and not gpu.field_errors and not gpu.nvlink_scope_ignored
        links = gpu.nvlink_links
        link_bytes = (meter.nvlink_tx_bytes, meter.nvlink_rx_bytes)
        size = _FIELD_ROW.size
        entries = memoryview(ref._obj).cast("B")[: as_int(count) * size]
        pack = _FIELD_ROW.pack_into
        # read and written as nvml.h lays out nvmlFieldValue_t, whatever struct the caller built
        for offset, (field_id, scope, _, _, old_type, _, old_value) in zip(
            range(0, len(entries), size), _FIELD_ROW.iter_unpack(entries)
        ):
            slot = _NVLINK_SLOT.get(field_id) if per_link else None
            if slot is not None and scope < links:
                kib = int(link_bytes[slot].at(scope) // 1024)
                pack(entries, offset, field_id, scope, stamp, 0, _ULL, _OK, kib)
                continue
            code, value_type, value = self._field(index, gpu, mig, field_id, scope, meter, now)
            if code != _OK:  # the value is left as it was
                pack(entries, offset, field_id, scope, stamp, 0, old_type, code, old_value)
            elif value_type == _DOUBLE:
                _FIELD_ROW_DOUBLE.pack_into(entries, offset, field_id, scope, stamp, 0, value_type, _OK, float(value))
            elif value_type == _UINT:  # uiVal: the low 4 bytes of the union
                value = (old_value & ~0xFFFFFFFF) | (int(value) & 0xFFFFFFFF)
                pack(entries, offset, field_id, scope, stamp, 0, value_type, _OK, value)
            else:
                pack(entries, offset, field_id, scope, stamp, 0, value_type, _OK, int(value) & _ULL_MASK)
        return _OK

    def _field(
        self, index: int, gpu: FakeGpu, mig: FakeMig | None, field_id: int, scope: int, meter: _Meter, now: float
    ) -> tuple[int, int, float]:
        if field_id in gpu.field_errors:
            return error_code(gpu.field_errors[field_id]), 0, 0
        if mig is not None:
            return _NOT_SUPPORTED, 0, 0
        if field_id == _ECC_SBE or field_id == _ECC_DBE:
            if not gpu.ecc:
                return _NOT_SUPPORTED, 0, 0
            return _OK, _ULL, gpu.ecc_corrected if field_id == _ECC_SBE else gpu.ecc_uncorrected
        if field_id == _MEMORY_TEMP:
            return _OK, _UINT, round(self._gauge(index, gpu, "temperature_memory_c", now))
        if field_id == _ENERGY:
            return _OK, _ULL, int(meter.totals[ENERGY_MJ])
        if field_id in _POWER_FIELDS:
            # nvml.h: the 1 s average on Ampere except GA100 (compute capability 8.0) and newer
            if field_id == _POWER_AVERAGE and gpu.compute_capability < _POWER_AVERAGE_SINCE:
                return _NOT_SUPPORTED, 0, 0
            fault = self._power_fault(index, gpu)
            if fault != _OK:
                return fault, 0, 0
            return _OK, _UINT, round(self._gauge(index, gpu, "power_w", now) * 1000)  # mW, as the call
        links = gpu.nvlink_links
        if field_id == _NVLINK_LINK_COUNT:
            return (_OK, _UINT, links) if links else (_NOT_SUPPORTED, 0, 0)
        if field_id in _NVLINK_SLOT:
            if links == 0:
                return _NOT_SUPPORTED, 0, 0
            totals = meter.nvlink_rx_bytes if _NVLINK_SLOT[field_id] else meter.nvlink_tx_bytes
            counted: float
            if scope == _SCOPE_ALL or gpu.nvlink_scope_ignored:
                counted = totals.total(links, gpu.nvlink_inactive)
            elif scope < links:
                counted = totals.at(scope)
            else:
                return _INVALID, 0, 0
            return _OK, _ULL, int(counted // 1024)  # KiB
        if field_id == compat.FI_PCIE_COUNT_TX_BYTES or field_id == compat.FI_PCIE_COUNT_RX_BYTES:
            if not gpu.pcie_counters:
                return error_code(gpu.pcie_counters_error), 0, 0
            moved = meter.totals[PCIE_TX_BYTES if field_id == compat.FI_PCIE_COUNT_TX_BYTES else PCIE_RX_BYTES]
            total = int(gpu.pcie_counter_start_bytes + moved)
            if gpu.pcie_counter_bits == 32:
                return _OK, _UINT, total % (1 << 32)
            if gpu.pcie_counter_bits == "ull32":
                return _OK, _ULL, total % (1 << 32)
            return _OK, _ULL, total
        return _NOT_SUPPORTED, 0, 0
