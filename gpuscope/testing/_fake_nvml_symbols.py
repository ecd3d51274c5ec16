"""The C symbols of :class:`gpuscope.testing.fake_nvml.FakeNvml`: system, identity, clocks,
power, temperatures, PCIe, NVLink and field values (processes, MIG and GPM: ``_fake_nvml_gpm``).

Each ``_sym_<name>`` receives exactly the ctypes arguments the real pynvml wrapper passes and
returns an NVML return code (``nvmlErrorString`` returns bytes, as the C function does).
Handles are fake addresses: GPU ``i`` is ``(i + 1) << 16``; its MIG device ``k`` adds
``(k + 1) << 8``; GPM samples live at ``0x7F000000 + 16 n``. Nothing is ever dereferenced.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypeVar

import pynvml

from gpuscope.telemetry.nvml import compat
from gpuscope.testing._fake_nvml_model import (
    ENERGY_MJ,
    PCIE_RX_BYTES,
    PCIE_TX_BYTES,
    FakeGpu,
    FakeMig,
    _Meter,
    error_code,
    link_bytes,
)

__all__ = [
    "SymbolsMixin",
    "Handle",
    "Ref",
    "handle_address",
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
_POWER_AVERAGE = pynvml.NVML_FI_DEV_POWER_AVERAGE
_POWER_FIELDS = frozenset({_POWER_AVERAGE, pynvml.NVML_FI_DEV_POWER_INSTANT})
#: the first compute capability with NVML_FI_DEV_POWER_AVERAGE (GA10x; GA100 is 8.0)
_POWER_AVERAGE_SINCE = (8, 6)
#: field id -> 0 (tx) or 1 (rx) for the NVLink data counters
_NVLINK_SLOT = {
    pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: 0,
    pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: 1,
}

T = TypeVar("T", covariant=True)

#: A device handle or GPM sample as pynvml passes it: a ctypes pointer holding a fake address.
Handle: TypeAlias = "ctypes._Pointer[ctypes.Structure]"


class Ref(Protocol[T]):
    """What ``ctypes.byref(x)`` passes to a C function: ``x`` is its ``_obj``."""

    @property
    def _obj(self) -> T: ...


class FakeReturn(Exception):
    """Raised inside a symbol to return ``code`` at once."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def handle_address(handle: Handle | ctypes.c_void_p) -> int:
    """The fake address inside a ctypes pointer (a device handle, a GPM sample, an event set)."""
    return ctypes.cast(handle, ctypes.c_void_p).value or 0


def write_pointer(ref: Ref[Handle], address: int) -> None:
    """Make the pointer ``ref`` points to hold ``address``."""
    ctypes.c_void_p.from_buffer(ref._obj).value = address


def as_int(value: ctypes._SimpleCData[int] | int) -> int:
    """A ctypes integer argument (or a plain int, as some wrappers pass) as an int."""
    return int(value) if isinstance(value, int) else int(value.value)


def put(ref: Ref[ctypes._SimpleCData[int]], value: int) -> int:
    """Store ``value`` where ``ref`` points; success."""
    ref._obj.value = value
    return _OK


def _put_text(buffer: ctypes.Array[ctypes.c_char], size: ctypes.c_uint, text: str) -> int:
    data = text.encode()
    if len(data) + 1 > as_int(size):
        return pynvml.NVML_ERROR_INSUFFICIENT_SIZE
    buffer.value = data
    return _OK


class SymbolsMixin:
    """NVML C symbols over the scripted GPUs of a FakeNvml (``self``)."""

    # set by FakeNvml.__init__
    gpus: list[FakeGpu]
    init_error: int | None
    initialized: int
    driver_version: str
    nvml_version: str
    cuda_driver_version: int

    if TYPE_CHECKING:  # defined by FakeNvml and FaultsMixin

        def now(self) -> float: ...

        def _gauge(self, gpu_index: int, target: FakeGpu | FakeMig, name: str, now: float | None = None) -> float: ...

        def _settle(self, gpu: FakeGpu, target: FakeGpu | FakeMig, now: float) -> _Meter: ...

        def _power_fault(self, gpu_index: int, gpu: FakeGpu) -> int: ...

    # --- helpers ----------------------------------------------------------------------------

    def _target(self, handle: Handle) -> tuple[int, FakeGpu, FakeMig | None]:
        """(GPU index, GPU, MIG device or None) of a handle; InvalidArgument for anything else."""
        address = handle_address(handle)
        index, slot = (address >> 16) - 1, ((address >> 8) & 0xFF) - 1
        if not 0 <= index < len(self.gpus) or address & 0xFF:
            raise FakeReturn(_INVALID)
        gpu = self.gpus[index]
        if slot < 0:
            return index, gpu, None
        if slot >= len(gpu.mig):
            raise FakeReturn(_INVALID)
        return index, gpu, gpu.mig[slot]

    def _gpu_only(self, handle: Handle) -> tuple[int, FakeGpu]:
        """The GPU of a full-GPU handle; a MIG handle gets NotSupported."""
        index, gpu, mig = self._target(handle)
        if mig is not None:
            raise FakeReturn(_NOT_SUPPORTED)
        return index, gpu

    def _now_us(self) -> int:
        return int(round(self.now() * 1e6))

    # --- system ------------------------------------------------------------------------------

    def _sym_nvmlInitWithFlags(self, flags: ctypes.c_uint) -> int:
        if self.init_error is not None:
            return self.init_error
        self.initialized += 1
        return _OK

    def _sym_nvmlInit_v2(self) -> int:
        return self._sym_nvmlInitWithFlags(ctypes.c_uint(0))

    def _sym_nvmlShutdown(self) -> int:
        self.initialized = max(0, self.initialized - 1)
        return _OK

    def _sym_nvmlErrorString(self, code: ctypes.c_int) -> bytes:
        cls = pynvml.NVMLError._valClassMapping.get(as_int(code))
        return (cls.__name__.removeprefix("NVMLError_") if cls else f"NVML error {as_int(code)}").encode()

    def _sym_nvmlSystemGetDriverVersion(self, buffer: ctypes.Array[ctypes.c_char], size: ctypes.c_uint) -> int:
        return _put_text(buffer, size, self.driver_version)

    def _sym_nvmlSystemGetNVMLVersion(self, buffer: ctypes.Array[ctypes.c_char], size: ctypes.c_uint) -> int:
        return _put_text(buffer, size, self.nvml_version)

    def _sym_nvmlSystemGetCudaDriverVersion(self, ref: Ref[ctypes.c_int]) -> int:
        return put(ref, self.cuda_driver_version)

    def _sym_nvmlSystemGetCudaDriverVersion_v2(self, ref: Ref[ctypes.c_int]) -> int:
        return put(ref, self.cuda_driver_version)

    # --- identity --------------------------------------------------------------------------------

    def _sym_nvmlDeviceGetCount_v2(self, ref: Ref[ctypes.c_uint]) -> int:
        return put(ref, len(self.gpus))

    def _sym_nvmlDeviceGetHandleByIndex_v2(self, index: ctypes.c_uint, ref: Ref[Handle]) -> int:
        number = as_int(index)
        if not 0 <= number < len(self.gpus):
            return _INVALID
        write_pointer(ref, (number + 1) << 16)
        return _OK

    def _sym_nvmlDeviceGetIndex(self, handle: Handle, ref: Ref[ctypes.c_uint]) -> int:
        return put(ref, self._gpu_only(handle)[0])

    def _sym_nvmlDeviceGetName(self, handle: Handle, buffer: ctypes.Array[ctypes.c_char], size: ctypes.c_uint) -> int:
        _, gpu, mig = self._target(handle)
        return _put_text(buffer, size, str(mig.name if mig else gpu.name))

    def _sym_nvmlDeviceGetUUID(self, handle: Handle, buffer: ctypes.Array[ctypes.c_char], size: ctypes.c_uint) -> int:
        _, gpu, mig = self._target(handle)
        return _put_text(buffer, size, str(mig.uuid if mig else gpu.uuid))

    def _sym_nvmlDeviceGetPciInfo_v3(self, handle: Handle, ref: Ref[ctypes.Structure]) -> int:  # nvmlPciInfo_t
        _, gpu, _mig = self._target(handle)
        info = ref._obj
        bus_id = str(gpu.pci_bus_id)
        domain, bus, rest = bus_id.split(":")
        info.busId = bus_id.encode()
        info.busIdLegacy = bus_id[4:].encode()
        info.domain, info.bus, info.device = int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16)
        info.pciDeviceId = 0x233010DE
        return _OK

    def _sym_nvmlDeviceGetArchitecture(self, handle: Handle, ref: Ref[ctypes.c_uint]) -> int:
        return put(ref, self._target(handle)[1].architecture)

    def _sym_nvmlDeviceGetCudaComputeCapability(
        self, handle: Handle, major: Ref[ctypes.c_int], minor: Ref[ctypes.c_int]
    ) -> int:
        gpu = self._target(handle)[1]
        put(major, gpu.compute_capability[0])
        return put(minor, gpu.compute_capability[1])

    def _sym_nvmlDeviceGetMemoryBusWidth(self, handle: Handle, ref: Ref[ctypes.c_uint]) -> int:
        return put(ref, self._gpu_only(handle)[1].memory_bus_width_bits)

    # --- clocks, power, temperatures -------------------------------------------------------------

    def _sym_nvmlDeviceGetMaxClockInfo(self, handle: Handle, clock_type: ctypes.c_uint, ref: Ref[ctypes.c_uint]) -> int:
        gpu = self._gpu_only(handle)[1]
        kind = as_int(clock_type)
        if kind in (pynvml.NVML_CLOCK_GRAPHICS, pynvml.NVML_CLOCK_SM):
            return put(ref, gpu.max_sm_clock_mhz)
        if kind == pynvml.NVML_CLOCK_MEM:
            return put(ref, gpu.max_memory_clock_mhz)
        return put(ref, 1755)

    def _sym_nvmlDeviceGetClockInfo(self, handle: Handle, clock_type: ctypes.c_uint, ref: Ref[ctypes.c_uint]) -> int:
        index, gpu = self._gpu_only(handle)
        if as_int(clock_type) == pynvml.NVML_CLOCK_MEM:
            return put(ref, int(round(min(gpu.max_memory_clock_mhz, self._gauge(index, gpu, "memory_clock_mhz")))))
        return put(ref, int(round(min(gpu.max_sm_clock_mhz, self._gauge(index, gpu, "sm_clock_mhz")))))

    def _sym_nvmlDeviceGetUtilizationRates(self, handle: Handle, ref: Ref[pynvml.c_nvmlUtilization_t]) -> int:
        index, gpu, mig = self._target(handle)
        if mig is not None or gpu.mig:
            return _NOT_SUPPORTED  # as on real GPUs in MIG mode
        now = self.now()  # one reading for both gauges
        ref._obj.gpu = int(round(self._gauge(index, gpu, "gpu_util_percent", now)))
        ref._obj.memory = int(round(self._gauge(index, gpu, "memory_busy_percent", now)))
        return _OK

    def _memory(self, handle: Handle) -> tuple[int, int]:
        """(total, used) bytes of a GPU or MIG device."""
        _, gpu, mig = self._target(handle)
        target = mig if mig is not None else gpu
        total = int(target.memory_total_bytes or 0)
        return total, min(total, int(target.load.memory_used_bytes))

    def _sym_nvmlDeviceGetMemoryInfo(self, handle: Handle, ref: Ref[pynvml.c_nvmlMemory_t]) -> int:
        total, used = self._memory(handle)
        ref._obj.total, ref._obj.free, ref._obj.used = total, total - used, used
        return _OK

    def _sym_nvmlDeviceGetMemoryInfo_v2(self, handle: Handle, ref: Ref[pynvml.c_nvmlMemory_v2_t]) -> int:
        if ref._obj.version != pynvml.nvmlMemory_v2:
            return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        total, used = self._memory(handle)
        ref._obj.total, ref._obj.used, ref._obj.free, ref._obj.reserved = total, used, total - used, 0
        return _OK

    def _sym_nvmlDeviceGetPowerUsage(self, handle: Handle, ref: Ref[ctypes.c_uint]) -> int:
        index, gpu = self._gpu_only(handle)
        return put(ref, int(round(self._gauge(index, gpu, "power_w") * 1000)))

    def _sym_nvmlDeviceGetEnforcedPowerLimit(self, handle: Handle, ref: Ref[ctypes.c_uint]) -> int:
        return put(ref, int(round(self._gpu_only(handle)[1].power_limit_w * 1000)))

    def _sym_nvmlDeviceGetPowerManagementLimit(self, handle: Handle, ref: Ref[ctypes.c_uint]) -> int:
        return self._sym_nvmlDeviceGetEnforcedPowerLimit(handle, ref)

    def _sym_nvmlDeviceGetTotalEnergyConsumption(self, handle: Handle, ref: Ref[ctypes.c_ulonglong]) -> int:
        _, gpu = self._gpu_only(handle)
        return put(ref, int(self._settle(gpu, gpu, self.now()).totals[ENERGY_MJ]))

    def _temperature(self, handle: Handle, sensor: int) -> int:
        index, gpu = self._gpu_only(handle)
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            raise FakeReturn(_NOT_SUPPORTED)
        return int(round(self._gauge(index, gpu, "temperature_gpu_c")))

    def _sym_nvmlDeviceGetTemperature(self, handle: Handle, sensor: ctypes.c_uint, ref: Ref[ctypes.c_uint]) -> int:
        return put(ref, self._temperature(handle, as_int(sensor)))

    # ref is an nvmlTemperature_t (nvidia-ml-py 12.570+).
    def _sym_nvmlDeviceGetTemperatureV(self, handle: Handle, ref: Ref[ctypes.Structure]) -> int:
        request = ref._obj
        if request.version != compat.TEMPERATURE_V1:
            return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        request.temperature = self._temperature(handle, int(request.sensorType))
        return _OK

    def _sym_nvmlDeviceGetFanSpeed(self, handle: Handle, ref: Ref[ctypes.c_uint]) -> int:
        index, gpu = self._gpu_only(handle)
        return put(ref, int(round(self._gauge(index, gpu, "fan_speed_percent"))))

    def _sym_nvmlDeviceGetCurrentClocksEventReasons(self, handle: Handle, ref: Ref[ctypes.c_ulonglong]) -> int:
        return put(ref, int(self._gpu_only(handle)[1].load.throttle_reasons))

    def _sym_nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Handle, ref: Ref[ctypes.c_ulonglong]) -> int:
        return self._sym_nvmlDeviceGetCurrentClocksEventReasons(handle, ref)

    def _sym_nvmlDeviceGetTotalEccErrors(
        self, handle: Handle, error_type: ctypes.c_uint, counter: ctypes.c_uint, ref: Ref[ctypes.c_ulonglong]
    ) -> int:
        gpu = self._gpu_only(handle)[1]
        if not gpu.ecc:
            return _NOT_SUPPORTED
        corrected = as_int(error_type) == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
        return put(ref, gpu.ecc_corrected if corrected else gpu.ecc_uncorrected)

    def _sym_nvmlDeviceGetEccMode(
        self, handle: Handle, current: Ref[ctypes.c_uint], pending: Ref[ctypes.c_uint]
    ) -> int:
        gpu = self._gpu_only(handle)[1]
        put(current, int(gpu.ecc))
        return put(pending, int(gpu.ecc))

    # --- PCIe and NVLink ----------------------------------------------------------------------------

    def _sym_nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Handle, ref: Ref[ctypes.c_uint]) -> int:
        return put(ref, self._gpu_only(handle)[1].pcie_generation)

    def _sym_nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Handle, ref: Ref[ctypes.c_uint]) -> int:
        gpu = self._gpu_only(handle)[1]
        return put(ref, gpu.pcie_max_generation or gpu.pcie_generation)

    def _sym_nvmlDeviceGetCurrPcieLinkWidth(self, handle: Handle, ref: Ref[ctypes.c_uint]) -> int:
        return put(ref, self._gpu_only(handle)[1].pcie_width)

    def _sym_nvmlDeviceGetMaxPcieLinkWidth(self, handle: Handle, ref: Ref[ctypes.c_uint]) -> int:
        gpu = self._gpu_only(handle)[1]
        return put(ref, gpu.pcie_max_width or gpu.pcie_width)

    def _sym_nvmlDeviceGetPcieThroughput(self, handle: Handle, counter: ctypes.c_uint, ref: Ref[ctypes.c_uint]) -> int:
        """The real call blocks ~20 ms; the fake answers at once (tests count the calls)."""
        gpu = self._gpu_only(handle)[1]
        rate = (
            gpu.load.pcie_tx_bytes_per_s
            if as_int(counter) == pynvml.NVML_PCIE_UTIL_TX_BYTES
            else gpu.load.pcie_rx_bytes_per_s
        )
        return put(ref, int(rate / 1000))

    def _link(self, handle: Handle, link: ctypes.c_uint) -> tuple[FakeGpu, int]:
        gpu = self._gpu_only(handle)[1]
        number = as_int(link)
        if gpu.nvlink_links == 0:
            raise FakeReturn(_NOT_SUPPORTED)
        if not 0 <= number < gpu.nvlink_links:
            raise FakeReturn(_INVALID)
        return gpu, number

    def _sym_nvmlDeviceGetNvLinkState(self, handle: Handle, link: ctypes.c_uint, ref: Ref[ctypes.c_uint]) -> int:
        gpu, number = self._link(handle, link)
        return put(ref, 0 if number in gpu.nvlink_inactive else 1)

    def _sym_nvmlDeviceGetNvLinkVersion(self, handle: Handle, link: ctypes.c_uint, ref: Ref[ctypes.c_uint]) -> int:
        gpu, _number = self._link(handle, link)
        return put(ref, gpu.nvlink_version)

    # --- field values ----------------------------------------------------------------------------

    def _sym_nvmlDeviceGetFieldValues(
        self, handle: Handle, count: ctypes.c_int32, ref: Ref[ctypes.Array[pynvml.c_nvmlFieldValue_t]]
    ) -> int:
        index, gpu, mig = self._target(handle)
        now = self.now()  # one instant for the counters, the timestamps and the gauges
        meter = self._settle(gpu, gpu, now)
        stamp = int(round(now * 1e6))
        for entry in ref._obj[: as_int(count)]:
            code, value_type, value = self._field(index, gpu, mig, entry.fieldId, entry.scopeId, meter, now)
            entry.timestamp, entry.latencyUsec, entry.nvmlReturn = stamp, 0, code
            if code != _OK:  # the value is left as it was
                continue
            entry.valueType = value_type
            if value_type == _DOUBLE:
                entry.value.dVal = float(value)
            elif value_type == _UINT:
                entry.value.uiVal = int(value) & 0xFFFFFFFF
            else:
                entry.value.ullVal = int(value) & _ULL_MASK
        return _OK

    def _field(
        self, index: int, gpu: FakeGpu, mig: FakeMig | None, field_id: int, scope: int, meter: _Meter, now: float
    ) -> tuple[int, int, float]:
        """(return code, value type, value) of one field."""
        if field_id in gpu.field_errors:
            return error_code(gpu.field_errors[field_id]), 0, 0
        if mig is not None:
            return _NOT_SUPPORTED, 0, 0
        if field_id in (pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL, pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL):
            if not gpu.ecc:
                return _NOT_SUPPORTED, 0, 0
            corrected = field_id == pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL
            return _OK, _ULL, gpu.ecc_corrected if corrected else gpu.ecc_uncorrected
        if field_id == pynvml.NVML_FI_DEV_MEMORY_TEMP:
            return _OK, _UINT, round(self._gauge(index, gpu, "temperature_memory_c", now))
        if field_id == pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
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
        if field_id == pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT:
            return (_OK, _UINT, links) if links else (_NOT_SUPPORTED, 0, 0)
        if field_id in _NVLINK_SLOT:
            if links == 0:
                return _NOT_SUPPORTED, 0, 0
            totals = meter.nvlink_rx_bytes if _NVLINK_SLOT[field_id] else meter.nvlink_tx_bytes
            counted: float
            if scope == _SCOPE_ALL or gpu.nvlink_scope_ignored:
                counted = sum(link_bytes(totals, link) for link in range(links) if link not in gpu.nvlink_inactive)
            elif scope < links:
                counted = link_bytes(totals, scope)
            else:
                return _INVALID, 0, 0
            return _OK, _ULL, int(counted // 1024)  # KiB
        if field_id in (compat.FI_PCIE_COUNT_TX_BYTES, compat.FI_PCIE_COUNT_RX_BYTES):
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
