"""NvmlCollector: every NVIDIA GPU (and MIG device) as a GpuSample, one call per sample.

Cost per GPU per sample: two GPM calls on Hopper and newer, then one batched field-values call
(into an array built once per set of fields) for power and what GPM did not give (on Hopper
with GPM: 5 fields instead of 46; see :mod:`.fields`), utilization, memory, two clocks,
temperature, throttle reasons and (when supported) fan speed. ``nvmlDeviceGetPowerUsage`` is
called only where the batch has no power reading (drivers without the power fields, or a
failed batch). Power limit and PCIe link width/generation are re-read every
``SLOW_INTERVAL_S``; the process list every ``PROCESS_INTERVAL_S`` (every
``PROCESS_BACKGROUND_INTERVAL_S`` while the TUI shows no process list). A metric the GPU does
not support costs one call per run. ``nvmlDeviceGetPcieThroughput`` (it blocks ~20 ms)
is never called. A GPU that answers GpuIsLost shows ``state="lost"`` with every metric
``gpu_lost`` while the others keep updating; it is retried every ``lost_retry_interval_s``.
When NVML cannot be opened at all, ``sample`` tries again every ``OPEN_RETRY_INTERVAL_S``.
Xid errors: one ``nvmlEventSetWait_v2`` per sample for all GPUs together (:mod:`.events`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuscope.telemetry.nvml import session
from gpuscope.telemetry.nvml.device import (
    DeviceInfo,
    MigInfo,
    read_device_info,
    read_mig_devices,
)
from gpuscope.telemetry.nvml.events import XidReader
from gpuscope.telemetry.nvml.fields import POWER_AVERAGE, POWER_INSTANT, FieldSet
from gpuscope.telemetry.nvml.gpm import ACTIVITY_METRICS, GpmReader
from gpuscope.telemetry.nvml.link_counters import LinkErrors, apply_link_errors, read_link_errors
from gpuscope.telemetry.nvml.processes import ProcessReader
from gpuscope.telemetry.nvml.readings import (
    MetricCalls,
    fill_missing,
    link_keys,
    prefer,
    throttle_reason_names,
)
from gpuscope.telemetry.nvml.session import GpuLostError, call, pynvml
from gpuscope.telemetry.records import GpuProcessSample, GpuSample, NvLinkLinkSample
from gpuscope.telemetry.values import Metric, Reason, Unavailable

__all__ = ["NvmlCollector", "GpuSide", "DeviceStatus", "LOST_RETRY_INTERVAL_S"]

#: How often a lost GPU is retried by default, seconds.
LOST_RETRY_INTERVAL_S = 5.0


@dataclass
class GpuSide:
    """Everything NVML says at one instant."""

    gpus: list[GpuSample]  # full GPUs first, then MIG devices
    driver_version: Metric[str]
    nvml_version: Metric[str]
    cuda_driver_version: Metric[str]
    unavailable: Unavailable | None = None  # set when there is no GPU side at all


@dataclass
class DeviceStatus:
    """What the collector found out about one GPU (for ``gpuscope doctor`` and the TUI)."""

    index: int
    info: DeviceInfo | None  # None when the GPU was lost before it could be identified
    lost: bool
    problem: Unavailable | None  # the GPU cannot be opened at all (e.g. no permission)
    gpm: Unavailable | None  # None: GPM works here (or at least is supported)
    #: None until a total NVLink counter has counted traffic (the check compares it with every
    #: link in one read), then whether the driver gives per-link counters
    nvlink_scope_honoured: bool | None
    process_utilization: Unavailable | None
    mig_devices: int
    static_unavailable: dict[str, Unavailable] = field(default_factory=dict)


class _Mig:
    def __init__(self, info: MigInfo) -> None:
        self.info = info
        self.processes = ProcessReader(info.handle, utilization=False)
        self.last_processes: Metric[list[GpuProcessSample]] = Unavailable(Reason.WARMING_UP, "not read yet")
        self.processes_at: float | None = None
        self.memory = MetricCalls(info.handle)


class _Gpu:
    """Runtime state of one full GPU."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.handle: Any = None
        self.info: DeviceInfo | None = None
        self.problem: Unavailable | None = None
        self.lost = False
        self.next_retry_s = 0.0
        self.calls: MetricCalls | None = None
        self.fields: FieldSet | None = None
        self.links: list[int] = []  # the active NVLink links
        self.link_value_keys: list[str] = []  # their tx and rx keys in GPM and field readings, in turn
        #: the field-value keys GPM can give instead: link_value_keys, then PCIe and NVLink totals
        self.gpm_field_keys: list[str] = []
        self.gpm_field_set: frozenset[str] = frozenset()
        self.gpm: GpmReader | None = None
        self.gpm_status: Unavailable | None = Unavailable(Reason.NOT_APPLICABLE, "GPM collection is off")
        self.gi_gpm: dict[int, GpmReader] = {}
        self.gi_status: dict[int, Unavailable] = {}  # why a GPU instance has no GPM reader
        self.migs: list[_Mig] = []
        self.processes: ProcessReader | None = None
        self.last_processes: Metric[list[GpuProcessSample]] = Unavailable(Reason.WARMING_UP, "not read yet")
        self.processes_at: float | None = None
        #: (power limit W, PCIe generation, PCIe width) as of slow_at (re-read every SLOW_INTERVAL_S)
        self.slow: tuple[Metric[float], Metric[int], Metric[int]] = (NOT_OPEN, NOT_OPEN, NOT_OPEN)
        self.slow_at: float | None = None
        self.link_errors: LinkErrors | None = None  # NVLink/PCIe error counters as of slow_at
        #: a static read failed transiently at open: open again at this clock time
        self.reopen_at_s: float | None = None
        self.reopen_delay_s = 5.0

    def close(self) -> None:
        for reader in [self.gpm, *self.gi_gpm.values()]:
            if reader is not None:
                reader.close()
        self.gpm = None
        self.gi_gpm = {}


_XGMI_NOT_HERE = Unavailable(Reason.NOT_APPLICABLE, "an NVIDIA GPU: its GPU links are NVLink (the nvlink_* fields)")
_AMD_ONLY: dict[str, Unavailable] = {
    "pcie_bytes_per_s": Unavailable(Reason.NOT_APPLICABLE, "NVML gives PCIe per direction (pcie_tx/rx_bytes_per_s)"),
    "xgmi_tx_bytes_per_s": _XGMI_NOT_HERE,
    "xgmi_rx_bytes_per_s": _XGMI_NOT_HERE,
    "xgmi_active_links": _XGMI_NOT_HERE,
    "xgmi_link_peak_bytes_per_s": _XGMI_NOT_HERE,
    "temperature_hotspot_c": Unavailable(Reason.NOT_SUPPORTED, "NVML reads no hotspot sensor"),
}


def _nvidia(sample: GpuSample) -> GpuSample:
    """The AMD-only fields say why NVML has none (never "not collected")."""
    for name, why in _AMD_ONLY.items():
        setattr(sample, name, why)
    return sample


def _identity(gpu: _Gpu, state: str) -> GpuSample:
    info = gpu.info
    if info is None:
        return _nvidia(
            GpuSample(
                index=gpu.index, name="unknown", uuid="", pci_bus_id="unknown", architecture="unknown", state=state
            )
        )
    return _nvidia(
        GpuSample(
            index=info.index,
            name=info.name,
            uuid=info.uuid,
            pci_bus_id=info.pci_bus_id,
            architecture=info.architecture,
            state=state,
        )
    )


def _mig_identity(gpu: _Gpu, mig: _Mig, state: str) -> GpuSample:
    info = gpu.info
    return _nvidia(
        GpuSample(
            index=mig.info.slot,
            name=mig.info.name,
            uuid=mig.info.uuid,
            pci_bus_id=info.pci_bus_id if info else "unknown",
            architecture=info.architecture if info else "unknown",
            state=state,
            mig_parent_index=gpu.index,
            mig_gpu_instance_id=None if isinstance(mig.info.gpu_instance_id, Unavailable) else mig.info.gpu_instance_id,
            mig_compute_instance_id=None
            if isinstance(mig.info.compute_instance_id, Unavailable)
            else mig.info.compute_instance_id,
        )
    )


class NvmlCollector:
    """Samples every NVIDIA GPU through NVML. ``open``/``sample``/``close`` never raise.

    ``clock`` (seconds, monotonic) paces GPM windows, slow re-reads and lost-GPU retries;
    tests pass the fake NVML's clock. ``lost_retry_interval_s``: how often a lost GPU is asked
    whether it answers again.
    """

    SLOW_INTERVAL_S = 5.0
    PROCESS_INTERVAL_S = 1.0
    #: ... while nothing on screen shows the process lists (:meth:`set_processes_shown`): they
    #: cost two calls per GPU (real drivers: among the slowest queries) and stay fresh for reports
    PROCESS_BACKGROUND_INTERVAL_S = 5.0
    MAX_REOPEN_DELAY_S = 300.0
    OPEN_RETRY_INTERVAL_S = 30.0

    def __init__(
        self,
        gpm: bool = True,
        processes: bool = True,
        *,
        nvlink_per_link: bool = True,
        clock: Callable[[], float] = time.monotonic,
        lost_retry_interval_s: float = LOST_RETRY_INTERVAL_S,
    ) -> None:
        self._gpm_enabled = gpm
        self.lost_retry_interval_s = lost_retry_interval_s
        self._processes_enabled = processes
        #: per-link NVLink rates (36 GPM metrics or counters per H200); False leaves every
        #: GpuSample.nvlink_links empty (the TUI shows the totals only)
        self._per_link = nvlink_per_link
        self._clock = clock
        self._lock = threading.RLock()
        self._opened = False
        self._initialized = False
        self._unavailable: Unavailable | None = None
        self._opened_at = 0.0
        self._versions: tuple[Metric[str], Metric[str], Metric[str]] = (NOT_OPEN, NOT_OPEN, NOT_OPEN)
        self._gpus: list[_Gpu] = []
        self._xids = XidReader(clock)
        self._process_interval_s = self.PROCESS_INTERVAL_S
        self._processes_due = False  # read the lists at the next sample (they were just asked for)

    @property
    def gpu_count(self) -> int:
        """Full GPUs NVML gave (0 before open or without NVML); other vendors' GPUs are numbered after them."""
        return len(self._gpus)

    # --- lifecycle -------------------------------------------------------------------------

    def open(self) -> Unavailable | None:
        """Initialise NVML and read each GPU's static facts. None when NVML works; otherwise
        why there is no GPU side (no driver, driver mismatch, no GPU, ...)."""
        with self._lock:
            if self._opened:
                return self._unavailable
            self._opened = True
            self._opened_at = self._clock()
            try:
                self._unavailable = self._open()
            except Exception as exc:  # noqa: BLE001 - never raise
                self._unavailable = Unavailable(Reason.ERROR, f"opening NVML: {type(exc).__name__}: {exc}")
            if self._unavailable is not None:
                self._versions = (self._unavailable,) * 3
            return self._unavailable

    def _open(self) -> Unavailable | None:
        failed = session.init()
        if failed is not None:
            return failed
        self._initialized = True
        self._versions = session.system_versions()
        try:
            count = call("nvmlDeviceGetCount", pynvml.nvmlDeviceGetCount)
        except GpuLostError as exc:
            return Unavailable(Reason.GPU_LOST, str(exc))
        if isinstance(count, Unavailable):
            return count
        if count == 0:
            return Unavailable(Reason.NOT_APPLICABLE, "NVML works but reports no NVIDIA GPU")
        self._gpus = [self._open_gpu(index) for index in range(int(count))]
        self._xids.open(self._gpus)
        return None

    def _open_gpu(self, index: int, reopen_delay_s: float | None = None) -> _Gpu:
        gpu = _Gpu(index)
        gpu.reopen_delay_s = reopen_delay_s or self.SLOW_INTERVAL_S
        try:
            handle = call("nvmlDeviceGetHandleByIndex", pynvml.nvmlDeviceGetHandleByIndex, index)
            if isinstance(handle, Unavailable):
                gpu.problem = handle
                if handle.reason is Reason.ERROR:
                    gpu.reopen_at_s = self._clock() + gpu.reopen_delay_s
                return gpu
            gpu.handle = handle
            gpu.info = info = read_device_info(index, handle)
            gpu.calls = MetricCalls(handle)
            problems = list(info.problems)
            if info.mig_mode is True:
                gpu.migs = [_Mig(mig) for mig in read_mig_devices(handle, problems)]
            gpu.fields = FieldSet(handle, info.nvlink_links, per_link=self._per_link)
            gpu.links = list(info.nvlink_links) if self._per_link else []
            gpu.link_value_keys = [key for _, tx, rx in link_keys(gpu.links) for key in (tx, rx)]
            gpu.gpm_field_keys = [*gpu.link_value_keys, *_GPM_COUNTER_KEYS[: 4 if info.nvlink_links else 2]]
            gpu.gpm_field_set = frozenset(gpu.gpm_field_keys)
            gpu.fields.read()  # the first read: drops unsupported fields, starts the counters
            if self._gpm_enabled:
                gpu.gpm = GpmReader(handle, self._clock, links=gpu.links)
                gpu.gpm_status = gpu.gpm.open()
                if gpu.gpm_status is not None:
                    gpu.gpm = None
                # per GPU instance, whether or not the whole GPU answers GPM in MIG mode
                for gi in sorted(
                    {m.info.gpu_instance_id for m in gpu.migs if not isinstance(m.info.gpu_instance_id, Unavailable)}
                ):
                    reader = GpmReader(handle, self._clock, gpu_instance_id=gi)
                    status = reader.open()
                    if status is None:
                        gpu.gi_gpm[gi] = reader
                    else:
                        gpu.gi_status[gi] = status
            if self._processes_enabled:
                gpu.processes = ProcessReader(handle)
            if gpu.gpm_status is not None and gpu.gpm_status.reason is Reason.ERROR:
                problems.append(gpu.gpm_status)
            if problems:  # read them again later, backing off: a reopen restarts the rates
                gpu.reopen_at_s = self._clock() + gpu.reopen_delay_s
        except GpuLostError:
            gpu.close()
            gpu.lost = True
            gpu.next_retry_s = self._clock() + self.lost_retry_interval_s
        except Exception as exc:  # noqa: BLE001 - one GPU that cannot be opened spoils only itself
            gpu.close()
            gpu.problem = Unavailable(Reason.ERROR, f"opening GPU {index}: {type(exc).__name__}: {exc}")
            gpu.reopen_at_s = self._clock() + gpu.reopen_delay_s
        return gpu

    def close(self) -> None:
        """Free GPM samples and shut NVML down. ``open`` may be called again."""
        with self._lock:
            for gpu in self._gpus:
                try:
                    gpu.close()
                except Exception:  # noqa: BLE001
                    pass
            self._xids.close()
            self._gpus = []
            if self._initialized:
                session.shutdown()
            self._initialized = False
            self._opened = False
            self._unavailable = None
            self._versions = (NOT_OPEN, NOT_OPEN, NOT_OPEN)

    def set_processes_shown(self, shown: bool) -> None:
        """Whether someone looks at the GPU process lists: then they are read every
        ``PROCESS_INTERVAL_S``, else every ``PROCESS_BACKGROUND_INTERVAL_S``. Becoming shown reads
        them at the next sample. Safe to call from another thread (no lock: two plain stores)."""
        interval_s = self.PROCESS_INTERVAL_S if shown else self.PROCESS_BACKGROUND_INTERVAL_S
        if interval_s < self._process_interval_s:
            self._processes_due = True
        self._process_interval_s = interval_s

    # --- sampling --------------------------------------------------------------------------

    def sample(self) -> GpuSide:
        """Every GPU, then every MIG device, now. Never raises."""
        with self._lock:
            if not self._opened:
                self.open()
            elif self._unavailable is not None and self._clock() - self._opened_at >= self.OPEN_RETRY_INTERVAL_S:
                self.close()  # no GPU side yet: try again now and then (a driver may get loaded)
                self.open()
            driver, nvml, cuda = self._versions
            if self._unavailable is not None:
                return GpuSide([], driver, nvml, cuda, unavailable=self._unavailable)
            now = self._clock()
            gpus: list[GpuSample] = []
            migs: list[GpuSample] = []
            for position, gpu in enumerate(self._gpus):
                try:
                    if gpu.lost and now >= gpu.next_retry_s:
                        gpu = self._gpus[position] = self._retry(gpu, now)
                    elif gpu.reopen_at_s is not None and now >= gpu.reopen_at_s:
                        gpu.close()  # static facts were incomplete: read them again
                        delay = min(self.MAX_REOPEN_DELAY_S, gpu.reopen_delay_s * 2)
                        gpu = self._gpus[position] = self._open_gpu(gpu.index, delay)
                    full, parts = self._sample_gpu(gpu, now)
                except Exception as exc:  # noqa: BLE001 - a bug in one GPU's sample spoils only that GPU
                    full = _identity(gpu, "ok")
                    fill_missing(full, Unavailable(Reason.ERROR, f"{type(exc).__name__}: {exc}"))
                    parts = []
                gpus.append(full)
                migs.extend(parts)
            self._xids.fill(gpus, self._gpus)
            self._processes_due = False
            return GpuSide(gpus + migs, driver, nvml, cuda)

    def _retry(self, gpu: _Gpu, now: float) -> _Gpu:
        """One cheap call to see whether a lost GPU answers again; if so, open it afresh."""
        try:
            handle = call("nvmlDeviceGetHandleByIndex", pynvml.nvmlDeviceGetHandleByIndex, gpu.index)
            if not isinstance(handle, Unavailable):
                call("nvmlDeviceGetUUID", pynvml.nvmlDeviceGetUUID, handle)
                fresh = self._open_gpu(gpu.index)
                if fresh.info is None and fresh.lost:
                    fresh.info = gpu.info
                return fresh
        except GpuLostError:
            pass
        gpu.next_retry_s = now + self.lost_retry_interval_s
        return gpu

    def _lost(self, gpu: _Gpu) -> tuple[GpuSample, list[GpuSample]]:
        gone = Unavailable(
            Reason.GPU_LOST,
            f"GPU {gpu.index} fell off the bus or stopped answering; retried every {self.lost_retry_interval_s:g} s",
        )
        full = _identity(gpu, "lost")
        fill_missing(full, gone)
        parts = []
        for mig in gpu.migs:
            part = _mig_identity(gpu, mig, "lost")
            fill_missing(part, gone)
            parts.append(part)
        for sample in (full, *parts):  # lost: every metric says so, the AMD-only ones too
            for name in _AMD_ONLY:
                setattr(sample, name, gone)
        return full, parts

    def _sample_gpu(self, gpu: _Gpu, now: float) -> tuple[GpuSample, list[GpuSample]]:
        if gpu.lost:
            return self._lost(gpu)
        if gpu.problem is not None or gpu.info is None:
            full = _identity(gpu, "ok")
            fill_missing(full, gpu.problem or Unavailable(Reason.ERROR, "GPU not opened"))
            return full, []
        try:
            full = self._read_gpu(gpu, now)
            # several compute instances share one GPU instance: read its GPM once per sample
            per_instance = {gi: reader.read() for gi, reader in gpu.gi_gpm.items()}
            parts = [self._read_mig(gpu, mig, now, per_instance) for mig in gpu.migs]
        except GpuLostError:
            gpu.close()
            gpu.lost = True
            gpu.next_retry_s = now + self.lost_retry_interval_s
            return self._lost(gpu)
        return full, parts

    def _read_gpu(self, gpu: _Gpu, now: float) -> GpuSample:
        info, calls = gpu.info, gpu.calls
        assert info is not None and calls is not None and gpu.fields is not None
        sample = _identity(gpu, "ok")
        sample.mig_mode = info.mig_mode
        util, memory, sm_clock, mem_clock, fan, temperature, throttle = calls.read()
        if gpu.slow_at is None or now - gpu.slow_at >= self.SLOW_INTERVAL_S:
            gpu.slow_at = now
            gpu.slow = (
                _number(calls.get("power_limit", pynvml.nvmlDeviceGetEnforcedPowerLimit), float, 1e-3),
                _number(calls.get("pcie_generation", pynvml.nvmlDeviceGetCurrPcieLinkGeneration), int),
                _number(calls.get("pcie_width", pynvml.nvmlDeviceGetCurrPcieLinkWidth), int),
            )
            gpu.link_errors = read_link_errors(gpu.handle, info.nvlink_links, info.nvlink_active_links)
        gpm = gpu.gpm.read() if gpu.gpm is not None else gpu.gpm_status or _GPM_OFF
        # the counters GPM gave a number for this sample are not asked of the field values
        found: list[Metric[float] | None] = []
        covered = _NOTHING
        if not isinstance(gpm, Unavailable):
            found = list(map(gpm.get, gpu.gpm_field_keys))
            if set(map(type, found)) == _ONLY_FLOAT:
                covered = gpu.gpm_field_set  # the usual case: the same set every sample
            else:
                covered = frozenset(
                    key
                    for key, value in zip(gpu.gpm_field_keys, found)
                    if value is not None and not isinstance(value, Unavailable)
                )
        fields = gpu.fields.read(covered)
        dram_percent, gpm_util, pcie_tx, pcie_rx, nvlink_tx, nvlink_rx, *activity = _gpm_values(gpm)

        if isinstance(util, Unavailable):
            sample.utilization_percent = sample.memory_busy_percent = util
        else:
            gpu_percent, memory_percent = util
            sample.utilization_percent, sample.memory_busy_percent = float(gpu_percent), float(memory_percent)
        if isinstance(sample.utilization_percent, Unavailable) and info.mig_mode is True:
            sample.utilization_percent = prefer(gpm_util, sample.utilization_percent)
        _set_memory(sample, memory)
        _set_dram(sample, dram_percent, info.dram_peak_bytes_per_s)
        # _ACTIVITY_FIELDS in order, stored directly (a setattr() call each cost four times as much)
        (
            sample.sm_activity_percent,
            sample.sm_occupancy_percent,
            sample.tensor_activity_percent,
            sample.dfma_tensor_activity_percent,
            sample.hmma_tensor_activity_percent,
            sample.imma_tensor_activity_percent,
            sample.fp64_activity_percent,
            sample.fp32_activity_percent,
            sample.fp16_activity_percent,
        ) = activity
        # GPM's number where it has one (the usual case), else _pcie() and prefer() decide
        sample.pcie_tx_bytes_per_s = (
            _pcie(pcie_tx, fields["pcie_tx_bytes_per_s"]) if isinstance(pcie_tx, Unavailable) else pcie_tx
        )
        sample.pcie_rx_bytes_per_s = (
            _pcie(pcie_rx, fields["pcie_rx_bytes_per_s"]) if isinstance(pcie_rx, Unavailable) else pcie_rx
        )
        sample.power_limit_w, sample.pcie_link_generation, sample.pcie_link_width = gpu.slow
        sample.nvlink_active_links = info.nvlink_active_links
        sample.nvlink_version = info.nvlink_version
        sample.nvlink_link_peak_bytes_per_s = info.nvlink_link_peak_bytes_per_s
        if info.nvlink_links:
            sample.nvlink_tx_bytes_per_s = (
                prefer(nvlink_tx, fields["nvlink_tx_bytes_per_s"]) if isinstance(nvlink_tx, Unavailable) else nvlink_tx
            )
            sample.nvlink_rx_bytes_per_s = (
                prefer(nvlink_rx, fields["nvlink_rx_bytes_per_s"]) if isinstance(nvlink_rx, Unavailable) else nvlink_rx
            )
        else:
            sample.nvlink_tx_bytes_per_s = sample.nvlink_rx_bytes_per_s = info.nvlink_version
        if info.nvlink_links and gpu.links:  # per-link rates asked for (else nvlink_links stays [])
            # prefer(GPM's key, fields[key]) for 36 links per GPU: GPM's number where it has
            # one (the usual case, decided in one pass), else the rules of prefer()
            values: list[Any]  # Metric[float] each (no typing.cast: a Python call per GPU per sample)
            if covered is gpu.gpm_field_set:
                values = found[: len(gpu.link_value_keys)]
            else:
                found = found or [None] * len(gpu.link_value_keys)

                def link_value(key: str, value: Metric[float] | None) -> Metric[float]:
                    if value is not None and not isinstance(value, Unavailable):
                        return value
                    field = fields[key]
                    if value is None and not isinstance(field, Unavailable):
                        return field
                    return prefer(_gpm_metric(gpm, key), field)

                values = [link_value(key, value) for key, value in zip(gpu.link_value_keys, found)]
            sample.nvlink_links = [
                NvLinkLinkSample(link, tx, rx) for link, tx, rx in zip(gpu.links, values[::2], values[1::2])
            ]
        # _number(value, float) inlined for the readings every sample takes
        sample.sm_clock_mhz = sm_clock if isinstance(sm_clock, Unavailable) else float(sm_clock)
        sample.sm_clock_max_mhz = info.sm_clock_max_mhz
        sample.memory_clock_mhz = mem_clock if isinstance(mem_clock, Unavailable) else float(mem_clock)
        sample.memory_clock_max_mhz = info.memory_clock_max_mhz
        # what nvmlDeviceGetPowerUsage means (see .fields), from the batch; the call where it has none
        power_w = fields[POWER_AVERAGE]
        if isinstance(power_w, Unavailable):
            power_w = prefer(power_w, fields[POWER_INSTANT])
            if isinstance(power_w, Unavailable):
                power_w = _number(calls.get("power", pynvml.nvmlDeviceGetPowerUsage), float, 1e-3)
        sample.power_w = power_w
        sample.energy_j = fields["energy_j"]
        sample.temperature_gpu_c = temperature if isinstance(temperature, Unavailable) else float(temperature)
        sample.temperature_memory_c = fields["temperature_memory_c"]
        sample.fan_speed_percent = fan if isinstance(fan, Unavailable) else float(fan)
        sample.throttle_reasons = (
            throttle if isinstance(throttle, Unavailable) else throttle_reason_names(int(throttle))
        )
        corrected, uncorrected = fields["ecc_corrected_errors"], fields["ecc_uncorrected_errors"]
        sample.ecc_corrected_errors = corrected if isinstance(corrected, Unavailable) else int(corrected)
        sample.ecc_uncorrected_errors = uncorrected if isinstance(uncorrected, Unavailable) else int(uncorrected)
        apply_link_errors(sample, gpu.link_errors)
        sample.processes = self._processes(gpu.processes, gpu, now)
        return sample

    def _processes(self, reader: ProcessReader | None, holder: Any, now: float) -> Metric[list[GpuProcessSample]]:
        if reader is None:
            return Unavailable(Reason.NOT_APPLICABLE, "process collection is off")
        if holder.processes_at is None or self._processes_due or now - holder.processes_at >= self._process_interval_s:
            holder.processes_at = now
            holder.last_processes = reader.read()
        processes: Metric[list[GpuProcessSample]] = holder.last_processes
        return processes

    def _read_mig(self, gpu: _Gpu, mig: _Mig, now: float, per_instance: dict[int, Any]) -> GpuSample:
        sample = _mig_identity(gpu, mig, "ok")
        sample.mig_mode = True
        memory = mig.memory.get("memory", pynvml.nvmlDeviceGetMemoryInfo)
        _set_memory(
            sample,
            memory if isinstance(memory, Unavailable) else (int(memory.total), int(memory.free), int(memory.used)),
        )
        gi = mig.info.gpu_instance_id
        gpm: dict[str, Metric[float]] | Unavailable
        if isinstance(gi, Unavailable):
            gpm = gi
        elif gi in per_instance:
            gpm = per_instance[gi]
        else:
            gpm = gpu.gi_status.get(gi, Unavailable(Reason.NOT_APPLICABLE, "GPM collection is off"))
        for name in ACTIVITY_METRICS:
            value = (
                gpm
                if isinstance(gpm, Unavailable)
                else gpm.get(name, Unavailable(Reason.NOT_SUPPORTED, f"GPM has no {name}"))
            )
            setattr(sample, name, value)
        no_peak = Unavailable(Reason.NOT_SUPPORTED, "NVML gives no peak DRAM bandwidth per MIG instance")
        sample.dram_bandwidth_bytes_per_s = sample.dram_peak_bytes_per_s = no_peak
        if self._processes_enabled:
            sample.processes = self._processes(mig.processes, mig, now)
        else:
            sample.processes = Unavailable(Reason.NOT_APPLICABLE, "process collection is off")
        fill_missing(sample, Unavailable(Reason.NOT_APPLICABLE, f"reported for the parent GPU {gpu.index}"))
        return sample

    # --- introspection -----------------------------------------------------------------------

    def device_status(self) -> list[DeviceStatus]:
        """What was found out about each GPU (for doctor and the TUI's capability view)."""
        with self._lock:
            return [
                DeviceStatus(
                    index=gpu.index,
                    info=gpu.info,
                    lost=gpu.lost,
                    problem=gpu.problem,
                    gpm=gpu.gpm_status,
                    nvlink_scope_honoured=gpu.fields.scope_honoured if gpu.fields else None,
                    process_utilization=gpu.processes.utilization_status if gpu.processes else None,
                    mig_devices=len(gpu.migs),
                    static_unavailable=dict(gpu.calls.static) if gpu.calls else {},
                )
                for gpu in self._gpus
            ]


NOT_OPEN = Unavailable(Reason.ERROR, "the NVML collector is not open")
_NOTHING: frozenset[str] = frozenset()
_ONLY_FLOAT = {float}
_GPM_COUNTER_KEYS = ("pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s")
_GPM_OFF = Unavailable(Reason.NOT_APPLICABLE, "GPM collection is off")
#: the GpuSample fields set straight from GPM's metric of the same name
_ACTIVITY_FIELDS = tuple(
    name for name in ACTIVITY_METRICS if name not in ("dram_bandwidth_percent_of_peak", "utilization_percent")
)
#: the GPM keys a full GPU's sample takes, in the order _read_gpu unpacks them
_GPM_KEYS = ("dram_bandwidth_percent_of_peak", "utilization_percent", *_GPM_COUNTER_KEYS, *_ACTIVITY_FIELDS)


def _gpm_metric(gpm: dict[str, Metric[float]] | Unavailable, key: str) -> Metric[float]:
    """GPM's reading of ``key``, or why there is none."""
    if isinstance(gpm, Unavailable):
        return gpm
    value = gpm.get(key)
    return Unavailable(Reason.NOT_SUPPORTED, f"GPM has no {key}") if value is None else value


def _gpm_values(gpm: dict[str, Metric[float]] | Unavailable) -> list[Metric[float]]:
    """:func:`_gpm_metric` of each of :data:`_GPM_KEYS` (one C-speed lookup pass when GPM has
    them all, as a full GPU's reader does)."""
    if isinstance(gpm, Unavailable):
        return [gpm] * len(_GPM_KEYS)
    values: list[Any] = list(map(gpm.get, _GPM_KEYS))
    if None in values:
        return [_gpm_metric(gpm, key) for key in _GPM_KEYS]
    return values


def _set_memory(sample: GpuSample, memory: Metric[tuple[int, int, int]]) -> None:
    """Used and total bytes from ``nvmlDeviceGetMemoryInfo``'s (total, free, used) (or its reason)."""
    if isinstance(memory, Unavailable):
        sample.memory_used_bytes = sample.memory_total_bytes = memory
    else:
        total, _free, used = memory
        sample.memory_used_bytes, sample.memory_total_bytes = used, total


def _number(value: Metric[Any], kind: Callable[[Any], Any], scale: float = 1.0) -> Metric[Any]:
    if isinstance(value, Unavailable):
        return value
    return kind(value * scale) if scale != 1.0 else kind(value)


def _pcie(gpm: Metric[float], counter: Metric[float]) -> Metric[float]:
    """PCIe bytes/s from GPM, else from the field counters; when neither has a number, the
    reason names both (GPM refused *and* the counters absent, or 32-bit and too slow to read)."""
    value = prefer(gpm, counter)
    if isinstance(gpm, Unavailable) and isinstance(counter, Unavailable) and counter.reason is not Reason.WARMING_UP:
        gpm_absent = gpm.reason in (Reason.NOT_SUPPORTED, Reason.NOT_APPLICABLE, Reason.DRIVER_TOO_OLD)
        first, other = (counter, gpm) if gpm_absent else (gpm, counter)
        return Unavailable(first.reason, f"{first.detail}; and {other.detail}" if other.detail else first.detail)
    return value


def _set_dram(sample: GpuSample, percent: Metric[float], peak: Metric[float]) -> None:
    """DRAM % from GPM; bytes/s = percent x theoretical peak."""
    sample.dram_bandwidth_percent_of_peak = percent
    sample.dram_peak_bytes_per_s = peak
    if isinstance(percent, Unavailable):
        sample.dram_bandwidth_bytes_per_s = percent
    elif isinstance(peak, Unavailable):
        sample.dram_bandwidth_bytes_per_s = peak
    else:
        sample.dram_bandwidth_bytes_per_s = percent / 100.0 * peak
