"""Processes, MIG and GPM symbols of :class:`gpuscope.testing.fake_nvml.FakeNvml` (see
``_fake_nvml_symbols`` for the conventions)."""

from __future__ import annotations

import ctypes
import functools
import re
import struct
from itertools import repeat
from typing import TYPE_CHECKING, Any

import pynvml

from gpuscope.testing._fake_nvml_model import error_code
from gpuscope.testing._fake_nvml_symbols import (
    FakeReturn,
    GpmSample,
    active_link_keys,
    as_int,
    handle_address,
    put,
    write_pointer,
)

if TYPE_CHECKING:  # pragma: no cover
    from gpuscope.testing._fake_nvml_model import FakeGpu, FakeMig, _Meter

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
# GPM metric id -> ("tx"|"rx", link) for the per-link NVLink MiB/s metrics.
_GPM_LINK: dict[int, tuple[str, int]] = {}
for _name in dir(pynvml):
    _match = re.fullmatch(r"NVML_GPM_METRIC_NVLINK_L(\d+)_(RX|TX)_PER_SEC", _name)
    if _match:
        _GPM_LINK[int(getattr(pynvml, _name))] = (_match.group(2).lower(), int(_match.group(1)))
#: GPM metric id -> (link, meter key) for the per-link metrics.
_GPM_LINK_KEY = {metric: (link, f"nvl_{direction}:{link}") for metric, (direction, link) in _GPM_LINK.items()}
#: activity metric id -> its meter key
_GPM_ACTIVITY_KEY = {metric: "act:" + attr for metric, attr in _GPM_ACTIVITY.items()}


#: nvml.h's nvmlGpmMetricsGet_t: version, numMetrics, sample1, sample2 (pointers), then
#: NVML_GPM_METRIC_MAX nvmlGpmMetric_t (metricId, nvmlReturn, value, three name pointers), of
#: which the driver reads the id and writes the return code and the value
_GPM_HEADER = struct.Struct("=IIQQ")


@functools.lru_cache(maxsize=64)
def _active_keys(links: int, inactive: frozenset[int]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The meter keys of the active links: (tx keys, rx keys), in link order."""
    keys = active_link_keys(links, inactive)
    return tuple(tx for _, tx, _ in keys), tuple(rx for _, _, rx in keys)


_GPM_METRIC = struct.Struct("=I36x")
_GPM_RESULT = struct.Struct("=Id")
_GPM_METRIC_MAX = int(pynvml.NVML_GPM_METRIC_MAX)

#: nvmlGpmMetricsGet refuses samples this close or closer (InvalidArgument).
GPM_MIN_WINDOW_S = 0.1


#: The driver's layouts, from nvml.h and kept apart from the reader's ctypes structs so that a
#: wrong struct there reads garbage here too: nvmlProcessInfo_v1_t (16 bytes: pid, usedGpuMemory)
#: and nvmlProcessInfo_v2_t (24 bytes: + gpuInstanceId, computeInstanceId; the _v2 and _v3 calls).
_PROCESS_INFO_V1 = struct.Struct("=I4xQ")
_PROCESS_INFO_V2 = struct.Struct("=I4xQII")


class GpmMigProcessSymbols:
    """Process, MIG and GPM symbols (mixed into FakeNvml after SymbolsMixin)."""

    # set by FakeNvml.__init__
    gpus: list[FakeGpu]
    _gpm_samples: dict[int, GpmSample | None]
    _next_gpm_sample: int

    if TYPE_CHECKING:  # defined by SymbolsMixin and FakeNvml

        def _target(self, handle: Any) -> tuple[int, FakeGpu, FakeMig | None]: ...

        def _gpu_only(self, handle: Any) -> tuple[int, FakeGpu]: ...

        def _now_us(self) -> int: ...

        def now(self) -> float: ...

        def _settle(self, gpu: FakeGpu, target: FakeGpu | FakeMig) -> _Meter: ...

    # --- processes -----------------------------------------------------------------------------

    def _processes(self, handle: Any, kind: str) -> list[tuple[Any, int, int]]:
        """(process, gpu instance id, compute instance id) on this handle."""
        _, gpu, mig = self._target(handle)
        none = 0xFFFFFFFF
        if mig is not None:
            return [(p, mig.gpu_instance_id, mig.compute_instance_id) for p in mig.processes if p.kind == kind]
        found = [(p, none, none) for p in gpu.processes if p.kind == kind]
        for item in gpu.mig:
            found += [(p, item.gpu_instance_id, item.compute_instance_id) for p in item.processes if p.kind == kind]
        return found

    def _running(self, handle: Any, ref_count: Any, array: Any, kind: str, layout: struct.Struct) -> int:
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

    def _sym_nvmlDeviceGetComputeRunningProcesses(self, handle: Any, count: Any, array: Any) -> int:
        return self._running(handle, count, array, "compute", _PROCESS_INFO_V1)

    def _sym_nvmlDeviceGetComputeRunningProcesses_v2(self, handle: Any, count: Any, array: Any) -> int:
        return self._running(handle, count, array, "compute", _PROCESS_INFO_V2)

    _sym_nvmlDeviceGetComputeRunningProcesses_v3 = _sym_nvmlDeviceGetComputeRunningProcesses_v2

    def _sym_nvmlDeviceGetGraphicsRunningProcesses(self, handle: Any, count: Any, array: Any) -> int:
        return self._running(handle, count, array, "graphics", _PROCESS_INFO_V1)

    def _sym_nvmlDeviceGetGraphicsRunningProcesses_v2(self, handle: Any, count: Any, array: Any) -> int:
        return self._running(handle, count, array, "graphics", _PROCESS_INFO_V2)

    _sym_nvmlDeviceGetGraphicsRunningProcesses_v3 = _sym_nvmlDeviceGetGraphicsRunningProcesses_v2

    def _sym_nvmlDeviceGetProcessUtilization(self, handle: Any, samples: Any, ref_count: Any, last_seen: Any) -> int:
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

    def _sym_nvmlDeviceGetAccountingMode(self, handle: Any, ref: Any) -> int:
        return put(ref, int(self._gpu_only(handle)[1].accounting))

    # --- MIG ---------------------------------------------------------------------------------------

    def _sym_nvmlDeviceGetMigMode(self, handle: Any, current: Any, pending: Any) -> int:
        gpu = self._gpu_only(handle)[1]
        if not gpu.mig_capable:
            return _NOT_SUPPORTED
        put(current, int(bool(gpu.mig)))
        return put(pending, int(bool(gpu.mig)))

    def _sym_nvmlDeviceGetMaxMigDeviceCount(self, handle: Any, ref: Any) -> int:
        gpu = self._gpu_only(handle)[1]
        if not gpu.mig_capable:
            return _NOT_SUPPORTED
        return put(ref, 7)

    def _sym_nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, index: Any, ref: Any) -> int:
        gpu_index, gpu = self._gpu_only(handle)
        if not gpu.mig_capable:
            return _NOT_SUPPORTED
        slot = as_int(index)
        if not 0 <= slot < len(gpu.mig):
            return pynvml.NVML_ERROR_NOT_FOUND
        write_pointer(ref, ((gpu_index + 1) << 16) | ((slot + 1) << 8))
        return _OK

    def _sym_nvmlDeviceIsMigDeviceHandle(self, handle: Any, ref: Any) -> int:
        return put(ref, int(self._target(handle)[2] is not None))

    def _sym_nvmlDeviceGetGpuInstanceId(self, handle: Any, ref: Any) -> int:
        mig = self._target(handle)[2]
        if mig is None:
            return _NOT_SUPPORTED
        return put(ref, mig.gpu_instance_id)

    def _sym_nvmlDeviceGetComputeInstanceId(self, handle: Any, ref: Any) -> int:
        mig = self._target(handle)[2]
        if mig is None:
            return _NOT_SUPPORTED
        return put(ref, mig.compute_instance_id)

    def _sym_nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle: Any, ref: Any) -> int:
        index, _gpu, mig = self._target(handle)
        if mig is None:
            return _INVALID
        write_pointer(ref, (index + 1) << 16)
        return _OK

    # --- GPM ---------------------------------------------------------------------------------------

    def _sym_nvmlGpmQueryDeviceSupport(self, handle: Any, ref: Any) -> int:
        gpu = self._target(handle)[1]
        if ref._obj.version != pynvml.NVML_GPM_SUPPORT_VERSION:
            return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        ref._obj.isSupportedDevice = int(gpu.gpm)
        return _OK

    def _sym_nvmlGpmSampleAlloc(self, ref: Any) -> int:
        address = _GPM_SAMPLE_BASE + 16 * self._next_gpm_sample
        self._next_gpm_sample += 1
        self._gpm_samples[address] = None
        write_pointer(ref, address)
        return _OK

    def _sym_nvmlGpmSampleFree(self, sample: Any) -> int:
        if self._gpm_samples.pop(handle_address(sample), "missing") == "missing":
            return _INVALID
        return _OK

    def _gpm_check(self, gpu: FakeGpu, sample: Any) -> int:
        if not gpu.gpm:
            raise FakeReturn(_NOT_SUPPORTED)
        if gpu.gpm_no_permission:
            raise FakeReturn(pynvml.NVML_ERROR_NO_PERMISSION)
        address = handle_address(sample)
        if address not in self._gpm_samples:
            raise FakeReturn(_INVALID)
        return address

    def _sym_nvmlGpmSampleGet(self, handle: Any, sample: Any) -> int:
        index, gpu, mig = self._target(handle)
        if mig is not None:
            return _NOT_SUPPORTED
        address = self._gpm_check(gpu, sample)
        meter = self._settle(gpu, gpu)
        self._gpm_samples[address] = (self.now(), index, None, dict(meter.acc))
        return _OK

    def _sym_nvmlGpmMigSampleGet(self, handle: Any, gpu_instance_id: Any, sample: Any) -> int:
        index, gpu = self._gpu_only(handle)
        if not gpu.mig:
            return _NOT_SUPPORTED
        address = self._gpm_check(gpu, sample)
        wanted = as_int(gpu_instance_id)
        mig = next((item for item in gpu.mig if item.gpu_instance_id == wanted), None)
        if mig is None:
            return pynvml.NVML_ERROR_NOT_FOUND
        meter = self._settle(gpu, mig)
        self._gpm_samples[address] = (self.now(), index, wanted, dict(meter.acc))
        return _OK

    def _sym_nvmlGpmMetricsGet(self, ref: Any) -> int:
        # read and written as nvml.h lays out nvmlGpmMetricsGet_t, whatever struct the caller built
        request = memoryview(ref._obj).cast("B")
        version, count, first_address, second_address = _GPM_HEADER.unpack_from(request)
        if version != pynvml.NVML_GPM_METRICS_GET_VERSION:
            return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        first = self._gpm_samples.get(first_address)
        second = self._gpm_samples.get(second_address)
        if first is None or second is None or first[1:3] != second[1:3] or second[0] <= first[0]:
            return _INVALID
        if round((second[0] - first[0]) * 1e6) <= round(GPM_MIN_WINDOW_S * 1e6):  # more than 100 ms, in driver us
            return _INVALID
        gpu = self.gpus[first[1]]
        is_mig = first[2] is not None
        seconds = second[0] - first[0]

        before, after = first[3], second[3]
        # what each counter moved in the window (a key missing in both moved 0)
        moved = {key: value - before.get(key, 0.0) for key, value in after.items()}
        start, size = _GPM_HEADER.size, _GPM_METRIC.size
        metrics = request[start : start + min(count, _GPM_METRIC_MAX) * size]
        errors = gpu.gpm_metric_errors
        links = 0 if is_mig else gpu.nvlink_links  # per-link NVLink metrics: the short path
        write = _GPM_RESULT.pack_into
        for offset, (metric_id,) in zip(range(start + 4, start + len(metrics), size), _GPM_METRIC.iter_unpack(metrics)):
            link_key = _GPM_LINK_KEY.get(metric_id)
            if link_key is not None and link_key[0] < links and metric_id not in errors:
                write(request, offset, _OK, moved.get(link_key[1], 0.0) / seconds / MIB)
            elif metric_id in _GPM_ACTIVITY_KEY and metric_id not in errors:  # as _gpm_metric, inline
                write(request, offset, _OK, moved.get(_GPM_ACTIVITY_KEY[metric_id], 0.0) / seconds)
            else:
                write(request, offset, *self._gpm_metric(gpu, is_mig, metric_id, moved, seconds))
        return _OK

    def _gpm_metric(
        self, gpu: FakeGpu, is_mig: bool, metric_id: int, moved: dict[str, float], seconds: float
    ) -> tuple[int, float]:
        if metric_id in gpu.gpm_metric_errors:
            return error_code(gpu.gpm_metric_errors[metric_id]), 0.0
        if metric_id in _GPM_ACTIVITY:
            return _OK, moved.get("act:" + _GPM_ACTIVITY[metric_id], 0.0) / seconds
        if metric_id == pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL:
            return _OK, moved.get("dram_bytes", 0.0) / seconds / gpu.dram_peak_bytes_per_s * 100.0
        if is_mig:
            return _NOT_SUPPORTED, 0.0
        if metric_id == pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC:
            return _OK, moved.get("pcie_tx_bytes", 0.0) / seconds / MIB
        if metric_id == pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC:
            return _OK, moved.get("pcie_rx_bytes", 0.0) / seconds / MIB
        if metric_id in (
            pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC,
            pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC,
        ):
            if gpu.nvlink_links == 0:
                return _NOT_SUPPORTED, 0.0
            transmit = metric_id == pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC
            keys = _active_keys(gpu.nvlink_links, frozenset(gpu.nvlink_inactive))[0 if transmit else 1]
            return _OK, sum(map(moved.get, keys, repeat(0.0))) / seconds / MIB
        if metric_id in _GPM_LINK_KEY:
            link, key = _GPM_LINK_KEY[metric_id]
            if link >= gpu.nvlink_links:
                return _NOT_SUPPORTED, 0.0
            return _OK, moved.get(key, 0.0) / seconds / MIB
        return _NOT_SUPPORTED, 0.0
