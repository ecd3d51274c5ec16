"""Processes on a GPU: compute and graphics contexts (v3, else v2, else v1 functions), GPU
memory, SM % from ``nvmlDeviceGetProcessUtilization`` since the last read, and name and user
from psutil. Inside a container NVML reports host PIDs that the container cannot see: their
name and user are unavailable ("process in another PID namespace"), nothing crashes."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from gpuscope.telemetry.nvml.session import c_function, call, pynvml
from gpuscope.telemetry.process_identity import process_identity
from gpuscope.telemetry.records import GpuProcessSample
from gpuscope.telemetry.values import Metric, Reason, Unavailable

__all__ = ["ProcessReader", "process_identity"]

_NOT_AVAILABLE_ULL = (1 << 64) - 1


class _ProcessInfoV1(ctypes.Structure):
    """nvml.h nvmlProcessInfo_v1_t (16 bytes): what the unversioned functions fill."""

    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


class _ProcessInfoV2(ctypes.Structure):
    """nvml.h nvmlProcessInfo_v2_t (24 bytes): what the _v2 and _v3 functions fill."""

    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


def _running_raw(symbol: str, entry: type[ctypes.Structure], handle: Any) -> list[Any]:
    """The two-call protocol on the C symbol with nvml.h's own entry struct. pynvml's wrappers
    are not used: nvidia-ml-py 12.535.77 passes a 32-byte struct to the 24-byte _v3 call (every
    pid after the first is garbage), 12.535 has no _v2 wrapper and none has a v1 wrapper."""
    fn = c_function(symbol)
    count = ctypes.c_uint(0)
    ret = fn(handle, ctypes.byref(count), None)
    if ret == pynvml.NVML_SUCCESS:
        return []
    if ret != pynvml.NVML_ERROR_INSUFFICIENT_SIZE:
        raise pynvml.NVMLError(ret)
    count.value = count.value * 2 + 5
    array = (entry * count.value)()
    ret = fn(handle, ctypes.byref(count), array)
    if ret != pynvml.NVML_SUCCESS:
        raise pynvml.NVMLError(ret)
    return [array[i] for i in range(count.value)]


class ProcessReader:
    """The processes of one GPU or MIG device."""

    def __init__(self, handle: Any, *, utilization: bool = True) -> None:
        self.handle = handle
        self._utilization = utilization
        self._versions: dict[str, list[tuple[str, Callable[..., list[Any]]]]] = {
            kind: [
                (f"nvmlDevice{prefix}_v3", lambda h, _s=f"nvmlDevice{prefix}_v3": _running_raw(_s, _ProcessInfoV2, h)),
                (f"nvmlDevice{prefix}_v2", lambda h, _s=f"nvmlDevice{prefix}_v2": _running_raw(_s, _ProcessInfoV2, h)),
                (f"nvmlDevice{prefix}", lambda h, _s=f"nvmlDevice{prefix}": _running_raw(_s, _ProcessInfoV1, h)),
            ]
            for kind, prefix in (("compute", "GetComputeRunningProcesses"), ("graphics", "GetGraphicsRunningProcesses"))
        }
        self._last_seen_us = 0
        #: how the last utilization call went: None (fine), or why SM % is missing
        self.utilization_status: Unavailable | None = None
        self._static_util: Unavailable | None = None

    def _running(self, kind: str) -> Metric[list[Any]]:
        versions = self._versions[kind]
        while versions:
            what, fn = versions[0]
            result = call(what, fn, self.handle)
            if isinstance(result, Unavailable) and result.reason is Reason.DRIVER_TOO_OLD and len(versions) > 1:
                versions.pop(0)  # remembered: the next read starts at the version that exists
                continue
            return result
        return Unavailable(Reason.DRIVER_TOO_OLD, "no running-process function in this driver")

    def _sm_percent(self) -> dict[int, float] | Unavailable:
        if not self._utilization:
            return Unavailable(Reason.NOT_APPLICABLE, "not read for MIG devices")
        if self._static_util is not None:
            return self._static_util
        samples: Metric[list[Any]] = call(  # pynvml's c_nvmlProcessUtilizationSample_t entries
            "nvmlDeviceGetProcessUtilization",
            pynvml.nvmlDeviceGetProcessUtilization,
            self.handle,
            self._last_seen_us,
            not_found=[],  # NotFound: no sample since the last read
        )
        if isinstance(samples, Unavailable):
            if samples.reason in (Reason.NOT_SUPPORTED, Reason.DRIVER_TOO_OLD):
                self._static_util = samples
            self.utilization_status = samples
            return samples
        self.utilization_status = None
        sums: dict[int, list[float]] = {}
        for sample in samples:
            sums.setdefault(int(sample.pid), []).append(float(sample.smUtil))
            self._last_seen_us = max(self._last_seen_us, int(sample.timeStamp))
        return {pid: sum(values) / len(values) for pid, values in sums.items()}

    def read(self) -> Metric[list[GpuProcessSample]]:
        """The processes now on this device. Raises GpuLostError."""
        compute = self._running("compute")
        if isinstance(compute, Unavailable):
            return compute
        graphics = self._running("graphics")
        entries: list[tuple[Any, str]] = [(entry, "compute") for entry in compute]
        if not isinstance(graphics, Unavailable):
            seen = {int(entry.pid) for entry in compute}
            entries += [(entry, "graphics") for entry in graphics if int(entry.pid) not in seen]
        sm = self._sm_percent() if entries else {}
        out: list[GpuProcessSample] = []
        for entry, kind in entries:
            pid = int(entry.pid)
            used = getattr(entry, "usedGpuMemory", None)
            memory: Metric[int] = (
                Unavailable(Reason.NOT_SUPPORTED, "the driver does not report per-process memory here")
                if used is None or used == _NOT_AVAILABLE_ULL
                else int(used)
            )
            if isinstance(sm, Unavailable):
                sm_percent: Metric[float] = sm
            elif pid in sm:
                sm_percent = sm[pid]
            else:
                sm_percent = Unavailable(Reason.NOT_APPLICABLE, "no utilization sample since the last read")
            name, user = process_identity(pid)
            out.append(
                GpuProcessSample(
                    pid=pid, name=name, user=user, gpu_memory_bytes=memory, sm_percent=sm_percent, kind=kind
                )
            )
        return out
