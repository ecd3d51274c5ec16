"""Processes, MIG and GPM symbols of :class:`gpuscope.testing.fake_nvml.FakeNvml` (see
``_fake_nvml_symbols`` for the conventions)."""

from __future__ import annotations

import ctypes
import re
import struct
from typing import TYPE_CHECKING, NamedTuple

import pynvml

from gpuscope.testing._fake_nvml_model import (
    ACTIVITY,
    DRAM_BYTES,
    PCIE_RX_BYTES,
    PCIE_TX_BYTES,
    FakeGpu,
    FakeMig,
    FakeProcess,
    _Meter,
    error_code,
    link_bytes,
)
from gpuscope.testing._fake_nvml_symbols import (
    FakeReturn,
    Handle,
    Ref,
    as_int,
    handle_address,
    put,
    write_pointer,
)

__all__ = ["GpmMigProcessSymbols"]

MIB = 1 << 20
_OK = pynvml.NVML_SUCCESS
_NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
_INVALID = pynvml.NVML_ERROR_INVALID_ARGUMENT
_NOT_AVAILABLE_ULL = (1 << 64) - 1
_GPM_SAMPLE_BASE = 0x7F000000

# GPM metric id -> FakeLoad attribute averaged over the window.
_GPM_ACTIVITY = {
    pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL: "gpu_util_percent",
    pynvml.NVML_GPM_METRIC_SM_UTIL: "sm_activity_percent",
    pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: "sm_occupancy_percent",
    pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: "tensor_activity_percent",
    pynvml.NVML_GPM_METRIC_DFMA_TENSOR_UTIL: "dfma_tensor_activity_percent",
    pynvml.NVML_GPM_METRIC_HMMA_TENSOR_UTIL: "hmma_tensor_activity_percent",
    pynvml.NVML_GPM_METRIC_IMMA_TENSOR_UTIL: "imma_tensor_activity_percent",
    pynvml.NVML_GPM_METRIC_FP64_UTIL: "fp64_activity_percent",
    pynvml.NVML_GPM_METRIC_FP32_UTIL: "fp32_activity_percent",
    pynvml.NVML_GPM_METRIC_FP16_UTIL: "fp16_activity_percent",
}
# GPM metric id -> (0 tx | 1 rx, link) for the per-link NVLink MiB/s metrics.
_GPM_LINK: dict[int, tuple[int, int]] = {}
for _name in dir(pynvml):
    _match = re.fullmatch(r"NVML_GPM_METRIC_NVLINK_L(\d+)_(RX|TX)_PER_SEC", _name)
    if _match:
        _GPM_LINK[int(getattr(pynvml, _name))] = (int(_match.group(2) == "RX"), int(_match.group(1)))
#: activity metric id -> its position in the meter's totals
_GPM_ACTIVITY_AT = {metric: ACTIVITY[attr] for metric, attr in _GPM_ACTIVITY.items()}
_DRAM_BW_UTIL = pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL
#: PCIe metric id -> its byte total in the meter
_GPM_PCIE = {
    pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC: PCIE_TX_BYTES,
    pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC: PCIE_RX_BYTES,
}
#: NVLink total metric id -> 0 (tx) or 1 (rx)
_GPM_NVLINK_TOTAL = {
    pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: 0,
    pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC: 1,
}


#: nvmlGpmMetricsGet refuses samples this close or closer (InvalidArgument).
GPM_MIN_WINDOW_S = 0.1


#: The driver's layouts, from nvml.h and kept apart from the reader's ctypes structs so that a
#: wrong struct there reads garbage here too: nvmlProcessInfo_v1_t (16 bytes: pid, usedGpuMemory)
#: and nvmlProcessInfo_v2_t (24 bytes: + gpuInstanceId, computeInstanceId; the _v2 and _v3 calls).
_PROCESS_INFO_V1 = struct.Struct("=I4xQ")
_PROCESS_INFO_V2 = struct.Struct("=I4xQII")


class GpmSample(NamedTuple):
    """A GPM sample buffer once sampled: the meter's integrals at that time."""

    t_s: float
    gpu_index: int
    gpu_instance_id: int | None
    totals: tuple[float, ...]  # _Meter.totals
    nvlink_tx_bytes: tuple[float, ...]  # per link
    nvlink_rx_bytes: tuple[float, ...]


class GpmMigProcessSymbols:
    """Process, MIG and GPM symbols (mixed into FakeNvml after SymbolsMixin)."""

    # set by FakeNvml.__init__
    gpus: list[FakeGpu]
    _gpm_samples: dict[int, GpmSample | None]
    _next_gpm_sample: int

    if TYPE_CHECKING:  # defined by SymbolsMixin and FakeNvml

        def _target(self, handle: Handle) -> tuple[int, FakeGpu, FakeMig | None]: ...

        def _gpu_only(self, handle: Handle) -> tuple[int, FakeGpu]: ...

        def _now_us(self) -> int: ...

        def now(self) -> float: ...

        def _settle(self, gpu: FakeGpu, target: FakeGpu | FakeMig, now: float) -> _Meter: ...

    # --- processes -----------------------------------------------------------------------------

    def _processes(self, handle: Handle, kind: str) -> list[tuple[FakeProcess, int, int]]:
        """(process, gpu instance id, compute instance id) on this handle."""
        _, gpu, mig = self._target(handle)
        none = 0xFFFFFFFF
        if mig is not None:
            return [(p, mig.gpu_instance_id, mig.compute_instance_id) for p in mig.processes if p.kind == kind]
        found = [(p, none, none) for p in gpu.processes if p.kind == kind]
        for item in gpu.mig:
            found += [(p, item.gpu_instance_id, item.compute_instance_id) for p in item.processes if p.kind == kind]
        return found

    def _running(
        self,
        handle: Handle,
        ref_count: Ref[ctypes.c_uint],
        array: ctypes.Array[ctypes.Structure] | None,
        kind: str,
        layout: struct.Struct,
    ) -> int:
        """The two-call protocol. Entries are written in the driver's own ``layout``
        (nvml.h's nvmlProcessInfo_v1_t or _v2_t), whatever struct the caller allocated, as the
        real library does: a binding with a wrong struct reads garbage (nvidia-ml-py 12.535.77
        passes a 32-byte struct to the 24-byte _v3 call)."""
        found = self._processes(handle, kind)
        count = ref_count._obj
        if array is None:
            count.value = len(found)
            return pynvml.NVML_ERROR_INSUFFICIENT_SIZE if found else _OK
        if count.value < len(found):
            count.value = len(found)
            return pynvml.NVML_ERROR_INSUFFICIENT_SIZE
        if ctypes.sizeof(array) < len(found) * layout.size:
            return pynvml.NVML_ERROR_INSUFFICIENT_SIZE  # the real call would write past the buffer
        memory = (ctypes.c_char * (len(found) * layout.size)).from_address(ctypes.addressof(array))
        for slot, (process, gi_id, ci_id) in enumerate(found):
            used = _NOT_AVAILABLE_ULL if process.used_gpu_memory_bytes is None else process.used_gpu_memory_bytes
            ids = (gi_id, ci_id) if layout is _PROCESS_INFO_V2 else ()
            layout.pack_into(memory, slot * layout.size, process.pid, used, *ids)
        count.value = len(found)
        return _OK

    def _sym_nvmlDeviceGetComputeRunningProcesses(
        self, handle: Handle, count: Ref[ctypes.c_uint], array: ctypes.Array[ctypes.Structure] | None
    ) -> int:
        return self._running(handle, count, array, "compute", _PROCESS_INFO_V1)

    def _sym_nvmlDeviceGetComputeRunningProcesses_v2(
        self, handle: Handle, count: Ref[ctypes.c_uint], array: ctypes.Array[ctypes.Structure] | None
    ) -> int:
        return self._running(handle, count, array, "compute", _PROCESS_INFO_V2)

    _sym_nvmlDeviceGetComputeRunningProcesses_v3 = _sym_nvmlDeviceGetComputeRunningProcesses_v2

    def _sym_nvmlDeviceGetGraphicsRunningProcesses(
        self, handle: Handle, count: Ref[ctypes.c_uint], array: ctypes.Array[ctypes.Structure] | None
    ) -> int:
        return self._running(handle, count, array, "graphics", _PROCESS_INFO_V1)

    def _sym_nvmlDeviceGetGraphicsRunningProcesses_v2(
        self, handle: Handle, count: Ref[ctypes.c_uint], array: ctypes.Array[ctypes.Structure] | None
    ) -> int:
        return self._running(handle, count, array, "graphics", _PROCESS_INFO_V2)

    _sym_nvmlDeviceGetGraphicsRunningProcesses_v3 = _sym_nvmlDeviceGetGraphicsRunningProcesses_v2

    def _sym_nvmlDeviceGetProcessUtilization(
        self,
        handle: Handle,
        samples: ctypes.Array[pynvml.c_nvmlProcessUtilizationSample_t] | None,
        ref_count: Ref[ctypes.c_uint],
        last_seen: ctypes.c_ulonglong,
    ) -> int:
        _, gpu, mig = self._target(handle)
        if mig is not None or gpu.mig:
            return _NOT_SUPPORTED
        stamp = self._now_us()
        found = [p for p in gpu.processes if p.sm_percent is not None] if stamp > as_int(last_seen) else []
        if not found:
            return pynvml.NVML_ERROR_NOT_FOUND
        count = ref_count._obj
        if samples is None or count.value < len(found):
            count.value = len(found)
            return pynvml.NVML_ERROR_INSUFFICIENT_SIZE
        for slot, process in enumerate(found):
            samples[slot].pid = process.pid
            samples[slot].timeStamp = stamp
            samples[slot].smUtil = int(process.sm_percent or 0)  # found holds only sampled processes
            samples[slot].memUtil = samples[slot].encUtil = samples[slot].decUtil = 0
        count.value = len(found)
        return _OK

    def _sym_nvmlDeviceGetAccountingMode(self, handle: Handle, ref: Ref[ctypes.c_uint]) -> int:
        return put(ref, int(self._gpu_only(handle)[1].accounting))

    # --- MIG ---------------------------------------------------------------------------------------

    def _sym_nvmlDeviceGetMigMode(
        self, handle: Handle, current: Ref[ctypes.c_uint], pending: Ref[ctypes.c_uint]
    ) -> int:
        gpu = self._gpu_only(handle)[1]
        if not gpu.mig_capable:
            return _NOT_SUPPORTED
        put(current, int(bool(gpu.mig)))
        return put(pending, int(bool(gpu.mig)))

    def _sym_nvmlDeviceGetMaxMigDeviceCount(self, handle: Handle, ref: Ref[ctypes.c_uint]) -> int:
        gpu = self._gpu_only(handle)[1]
        if not gpu.mig_capable:
            return _NOT_SUPPORTED
        return put(ref, 7)

    def _sym_nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Handle, index: ctypes.c_uint, ref: Ref[Handle]) -> int:
        gpu_index, gpu = self._gpu_only(handle)
        if not gpu.mig_capable:
            return _NOT_SUPPORTED
        slot = as_int(index)
        if not 0 <= slot < len(gpu.mig):
            return pynvml.NVML_ERROR_NOT_FOUND
        write_pointer(ref, ((gpu_index + 1) << 16) | ((slot + 1) << 8))
        return _OK

    def _sym_nvmlDeviceIsMigDeviceHandle(self, handle: Handle, ref: Ref[ctypes.c_uint]) -> int:
        return put(ref, int(self._target(handle)[2] is not None))

    def _sym_nvmlDeviceGetGpuInstanceId(self, handle: Handle, ref: Ref[ctypes.c_uint]) -> int:
        mig = self._target(handle)[2]
        if mig is None:
            return _NOT_SUPPORTED
        return put(ref, mig.gpu_instance_id)

    def _sym_nvmlDeviceGetComputeInstanceId(self, handle: Handle, ref: Ref[ctypes.c_uint]) -> int:
        mig = self._target(handle)[2]
        if mig is None:
            return _NOT_SUPPORTED
        return put(ref, mig.compute_instance_id)

    def _sym_nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle: Handle, ref: Ref[Handle]) -> int:
        index, _gpu, mig = self._target(handle)
        if mig is None:
            return _INVALID
        write_pointer(ref, (index + 1) << 16)
        return _OK

    # --- GPM ---------------------------------------------------------------------------------------

    def _sym_nvmlGpmQueryDeviceSupport(self, handle: Handle, ref: Ref[pynvml.c_nvmlGpmSupport_t]) -> int:
        gpu = self._target(handle)[1]
        if ref._obj.version != pynvml.NVML_GPM_SUPPORT_VERSION:
            return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        ref._obj.isSupportedDevice = int(gpu.gpm)
        return _OK

    def _sym_nvmlGpmSampleAlloc(self, ref: Ref[Handle]) -> int:
        address = _GPM_SAMPLE_BASE + 16 * self._next_gpm_sample
        self._next_gpm_sample += 1
        self._gpm_samples[address] = None
        write_pointer(ref, address)
        return _OK

    def _sym_nvmlGpmSampleFree(self, sample: Handle) -> int:
        if handle_address(sample) not in self._gpm_samples:
            return _INVALID
        del self._gpm_samples[handle_address(sample)]
        return _OK

    def _gpm_check(self, gpu: FakeGpu, sample: Handle) -> int:
        """The address of a GPM sample buffer GPU ``gpu`` may fill, or the error it answers."""
        if not gpu.gpm:
            raise FakeReturn(_NOT_SUPPORTED)
        if gpu.gpm_no_permission:
            raise FakeReturn(pynvml.NVML_ERROR_NO_PERMISSION)
        address = handle_address(sample)
        if address not in self._gpm_samples:
            raise FakeReturn(_INVALID)
        return address

    def _sym_nvmlGpmSampleGet(self, handle: Handle, sample: Handle) -> int:
        index, gpu, mig = self._target(handle)
        if mig is not None:
            return _NOT_SUPPORTED
        address = self._gpm_check(gpu, sample)
        now = self.now()
        meter = self._settle(gpu, gpu, now)
        self._gpm_samples[address] = GpmSample(
            now, index, None, tuple(meter.totals), tuple(meter.nvlink_tx_bytes), tuple(meter.nvlink_rx_bytes)
        )
        return _OK

    def _sym_nvmlGpmMigSampleGet(self, handle: Handle, gpu_instance_id: ctypes.c_uint, sample: Handle) -> int:
        index, gpu = self._gpu_only(handle)
        if not gpu.mig:
            return _NOT_SUPPORTED
        address = self._gpm_check(gpu, sample)
        wanted = as_int(gpu_instance_id)
        mig = next((item for item in gpu.mig if item.gpu_instance_id == wanted), None)
        if mig is None:
            return pynvml.NVML_ERROR_NOT_FOUND
        now = self.now()
        meter = self._settle(gpu, mig, now)
        self._gpm_samples[address] = GpmSample(now, index, wanted, tuple(meter.totals), (), ())
        return _OK

    def _sym_nvmlGpmMetricsGet(self, ref: Ref[pynvml.c_nvmlGpmMetricsGet_t]) -> int:
        request = ref._obj
        if request.version != pynvml.NVML_GPM_METRICS_GET_VERSION:
            return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        first = self._gpm_samples.get(handle_address(request.sample1))
        second = self._gpm_samples.get(handle_address(request.sample2))
        if (
            first is None
            or second is None
            or first.gpu_index != second.gpu_index
            or first.gpu_instance_id != second.gpu_instance_id
            or second.t_s <= first.t_s
        ):
            return _INVALID
        if round((second.t_s - first.t_s) * 1e6) <= round(GPM_MIN_WINDOW_S * 1e6):  # more than 100 ms, in driver us
            return _INVALID
        gpu = self.gpus[first.gpu_index]
        for metric in request.metrics[: min(int(request.numMetrics), len(request.metrics))]:
            metric.nvmlReturn, metric.value = _gpm_metric(int(metric.metricId), gpu, first, second)
        return _OK


def _gpm_metric(metric_id: int, gpu: FakeGpu, first: GpmSample, second: GpmSample) -> tuple[int, float]:
    """(return code, value) of one GPM metric between two samples of ``gpu`` (a MIG GPU instance
    when they say so): activities in percent, PCIe and NVLink in MiB/s. A metric that failed or
    that the GPU lacks reads 0.0."""
    if metric_id in gpu.gpm_metric_errors:
        return error_code(gpu.gpm_metric_errors[metric_id]), 0.0
    seconds = second.t_s - first.t_s
    is_mig = first.gpu_instance_id is not None
    links = 0 if is_mig else gpu.nvlink_links

    def per_second(position: int) -> float:
        return (second.totals[position] - first.totals[position]) / seconds

    if metric_id in _GPM_ACTIVITY_AT:
        return _OK, per_second(_GPM_ACTIVITY_AT[metric_id])
    tx_rx = ((first.nvlink_tx_bytes, second.nvlink_tx_bytes), (first.nvlink_rx_bytes, second.nvlink_rx_bytes))
    if metric_id in _GPM_LINK and _GPM_LINK[metric_id][1] < links:
        direction, link = _GPM_LINK[metric_id]
        before, after = tx_rx[direction]
        return _OK, (link_bytes(after, link) - link_bytes(before, link)) / seconds / MIB
    if metric_id == _DRAM_BW_UTIL:
        return _OK, per_second(DRAM_BYTES) / gpu.dram_peak_bytes_per_s * 100.0
    if not is_mig and metric_id in _GPM_PCIE:
        return _OK, per_second(_GPM_PCIE[metric_id]) / MIB
    if not is_mig and links and metric_id in _GPM_NVLINK_TOTAL:
        before, after = tx_rx[_GPM_NVLINK_TOTAL[metric_id]]
        moved = sum(
            link_bytes(after, link) - link_bytes(before, link)
            for link in range(links)
            if link not in gpu.nvlink_inactive
        )
        return _OK, moved / seconds / MIB
    # a MIG instance's interconnect, a link this GPU lacks, a metric the fake does not know
    return _NOT_SUPPORTED, 0.0
