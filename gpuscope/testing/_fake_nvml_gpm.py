"""Processes, MIG and GPM symbols of :class:`gpuscope.testing.fake_nvml.FakeNvml` (see
``_fake_nvml_symbols`` for the conventions)."""

from __future__ import annotations

import ctypes
import functools
import re
import struct
from array import array
from itertools import repeat
from operator import sub, truediv
from typing import TYPE_CHECKING, Any, NamedTuple

import pynvml

from gpuscope.testing._fake_nvml_model import (
    ACTIVITY,
    DRAM_BYTES,
    METER_RATES,
    PCIE_RX_BYTES,
    PCIE_TX_BYTES,
    LinkBytes,
    error_code,
)
from gpuscope.testing._fake_nvml_symbols import (
    FakeReturn,
    GpmSample,
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
# GPM metric id -> (0 tx | 1 rx, link) for the per-link NVLink MiB/s metrics.
_GPM_LINK: dict[int, tuple[int, int]] = {}
for _name in dir(pynvml):
    _match = re.fullmatch(r"NVML_GPM_METRIC_NVLINK_L(\d+)_(RX|TX)_PER_SEC", _name)
    if _match:
        _GPM_LINK[int(getattr(pynvml, _name))] = (int(_match.group(2) == "RX"), int(_match.group(1)))
#: activity metric id -> its position in the meter's totals
_GPM_ACTIVITY_AT = {metric: ACTIVITY[attr] for metric, attr in _GPM_ACTIVITY.items()}
_DRAM_BW_UTIL = pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL
_PCIE_TX_PER_SEC = pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC
_PCIE_RX_PER_SEC = pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC
#: NVLink total metric id -> 0 (tx) or 1 (rx)
_GPM_NVLINK_TOTAL = {
    pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: 0,
    pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC: 1,
}


#: nvml.h's nvmlGpmMetricsGet_t: version, numMetrics, sample1, sample2 (pointers), then
#: NVML_GPM_METRIC_MAX nvmlGpmMetric_t (metricId, nvmlReturn, value, three name pointers), of
#: which the driver reads the id and writes the return code and the value
_GPM_HEADER = struct.Struct("=IIQQ")
_GPM_ENTRY_SIZE = 40
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

        def _settle(self, gpu: FakeGpu, target: FakeGpu | FakeMig, now: float) -> _Meter: ...

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
        now = self.now()
        meter = self._settle(gpu, gpu, now)
        self._gpm_samples[address] = GpmSample(
            now, index, None, tuple(meter.totals), meter.nvlink_tx_bytes.copy(), meter.nvlink_rx_bytes.copy()
        )
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
        now = self.now()
        meter = self._settle(gpu, mig, now)
        self._gpm_samples[address] = GpmSample(now, index, wanted, tuple(meter.totals), LinkBytes(), LinkBytes())
        return _OK

    def _sym_nvmlGpmMetricsGet(self, ref: Any) -> int:
        # read and written as nvml.h lays out nvmlGpmMetricsGet_t, whatever struct the caller built
        request = memoryview(ref._obj).cast("B")
        version, count, first_address, second_address = _GPM_HEADER.unpack_from(request)
        if version != pynvml.NVML_GPM_METRICS_GET_VERSION:
            return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        first = self._gpm_samples.get(first_address)
        second = self._gpm_samples.get(second_address)
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
        seconds = second.t_s - first.t_s
        # the metrics are read and written in place as strided views of the request: the ids
        # (every 10th 32-bit word from the 7th), return codes (the word after each id) and values
        # (every 5th double from the 5th); one C-speed copy each, not a Python call a metric
        count = min(count, _GPM_METRIC_MAX, (len(request) - _GPM_HEADER.size) // _GPM_ENTRY_SIZE)
        whole = request[: len(request) // 8 * 8]
        words, doubles = whole.cast("I"), whole.cast("d")
        errors = gpu.gpm_metric_errors
        plan = _gpm_plan(
            tuple(words[6 : 6 + 10 * count : 10].tolist()),
            first.gpu_instance_id is not None,
            gpu.nvlink_links,
            tuple(errors.items()),
        )
        words[7 : 7 + 10 * count : 10] = plan.codes
        window = self._gpm_window(plan, gpu, first, second, seconds)
        doubles[4 : 4 + 5 * count : 5] = memoryview(array("d", map(window.__getitem__, plan.at)))
        return _OK

    @staticmethod
    def _gpm_window(plan: _GpmPlan, gpu: FakeGpu, first: GpmSample, second: GpmSample, seconds: float) -> list[float]:
        """Every value a plan's metrics may take over the window, laid out as :class:`_GpmPlan`
        says; the values no metric of the plan takes are left 0.0."""
        # what each counter moved a second; the rest divides these further
        window = list(map(truediv, map(sub, second.totals, first.totals), repeat(seconds)))
        window.append(0.0)  # _ZERO_AT
        window.append(window[DRAM_BYTES] / gpu.dram_peak_bytes_per_s * 100.0 if plan.dram else 0.0)
        window += (window[PCIE_TX_BYTES] / MIB, window[PCIE_RX_BYTES] / MIB) if plan.pcie else (0.0, 0.0)
        link_bytes = ((first.nvlink_tx_bytes, second.nvlink_tx_bytes), (first.nvlink_rx_bytes, second.nvlink_rx_bytes))
        links = gpu.nvlink_links
        if plan.nvlink_totals:
            window += [after.moved(before, links, gpu.nvlink_inactive) / seconds / MIB for before, after in link_bytes]
        else:
            window += (0.0, 0.0)
        if plan.per_link:
            window += [
                (after.at(link) - before.at(link)) / seconds / MIB
                for before, after in link_bytes
                for link in range(links)
            ]
        return window


class _GpmPlan(NamedTuple):
    """What nvmlGpmMetricsGet answers for one list of metric ids on one kind of GPU: each
    metric's return code and the position of its value in the window's values
    (:meth:`GpmMigProcessSymbols._gpm_window`): the meter's totals moved a second (by
    METER_RATES position), then 0.0 (a metric that failed), DRAM percent of peak, PCIe TX and
    RX, NVLink TX and RX over all links (MiB/s), then each link's TX and each link's RX (MiB/s).
    The flags say which of those the plan uses (the others are not computed)."""

    codes: memoryview  # of unsigned ints, as the request's words
    at: tuple[int, ...]
    dram: bool
    pcie: bool
    nvlink_totals: bool
    per_link: bool


_ZERO_AT = len(METER_RATES)
_DRAM_AT = _ZERO_AT + 1
_PCIE_AT = {_PCIE_TX_PER_SEC: _ZERO_AT + 2, _PCIE_RX_PER_SEC: _ZERO_AT + 3}
_NVLINK_TOTAL_AT = _ZERO_AT + 4  # + 0 (tx) or 1 (rx)
_LINKS_AT = _ZERO_AT + 6  # + direction * links + link


@functools.lru_cache(maxsize=64)
def _gpm_plan(metric_ids: tuple[int, ...], is_mig: bool, links: int, errors: tuple[tuple[int, Any], ...]) -> _GpmPlan:
    """The plan for these metrics on a GPU (``is_mig``: a MIG GPU instance) with ``links``
    NVLink links and these ``FakeGpu.gpm_metric_errors`` items. Cached: a plan is a function of
    its arguments alone, so a GPU whose errors or links change gets another one."""
    failing = dict(errors)
    link_count = 0 if is_mig else links  # links with per-link metrics
    codes: list[int] = []
    at: list[int] = []
    for metric_id in metric_ids:
        code, position = _OK, _ZERO_AT
        if metric_id in failing:
            code = error_code(failing[metric_id])
        elif metric_id in _GPM_ACTIVITY_AT:
            position = _GPM_ACTIVITY_AT[metric_id]
        elif metric_id in _GPM_LINK and _GPM_LINK[metric_id][1] < link_count:
            direction, link = _GPM_LINK[metric_id]
            position = _LINKS_AT + direction * link_count + link
        elif metric_id == _DRAM_BW_UTIL:
            position = _DRAM_AT
        elif not is_mig and metric_id in _PCIE_AT:
            position = _PCIE_AT[metric_id]
        elif not is_mig and links and metric_id in _GPM_NVLINK_TOTAL:
            position = _NVLINK_TOTAL_AT + _GPM_NVLINK_TOTAL[metric_id]
        else:  # a MIG instance's interconnect, a link this GPU lacks, a metric the fake does not know
            code = _NOT_SUPPORTED
        codes.append(code)
        at.append(position)
    return _GpmPlan(
        memoryview(array("I", codes)),
        tuple(at),
        dram=_DRAM_AT in at,
        pcie=any(position in at for position in _PCIE_AT.values()),
        nvlink_totals=_NVLINK_TOTAL_AT in at or _NVLINK_TOTAL_AT + 1 in at,
        per_link=any(position >= _LINKS_AT for position in at),
    )
