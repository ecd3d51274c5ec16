"""AMD Instinct GPUs through AMD SMI, into the same :class:`GpuSample` records as NVML's.

What AMD SMI gives and how it lands (``docs/telemetry-schema.md``, "AMD GPUs"):

- GFX activity -> ``utilization_percent``; memory-controller (UMC) activity -> ``memory_busy_percent``
  (time busy, like NVML's, not bandwidth); VRAM used and total; GFX and memory clocks (current
  and maximum) -> ``sm_clock_mhz``/``memory_clock_mhz``; socket power, its limit and the energy
  counter; edge, hotspot (junction) and HBM temperatures; the throttle flag; ECC totals; processes.
- PCIe: AMD SMI's metrics table gives one instantaneous bandwidth for both directions
  (``pcie_bytes_per_s``), so the per-direction fields say so instead of guessing a split.
- XGMI (Infinity Fabric) is AMD's GPU link, named as such: the per-link read and write counters
  (kilobytes, taken as KiB) become ``xgmi_rx/tx_bytes_per_s``, the link speed times width the
  per-link peak. NVLink fields are "not applicable" on an AMD GPU.
- What the metrics table marks unsupported (all bits set, "N/A" in ``amdsmi``) is "not supported"
  with the field named: e.g. MI300X has no edge sensor, an MI250X reports power on its first die only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeAlias

from gpuscope.telemetry.process_identity import process_identity
from gpuscope.telemetry.records import NOT_COLLECTED, GpuProcessSample, GpuSample
from gpuscope.telemetry.values import Metric, Reason, Unavailable

__all__ = ["AmdSmiCollector", "AmdSide", "load_amdsmi", "AMD_INSTALL_HINT"]

AMD_INSTALL_HINT = "pip install 'gpuscope[amd]', or ROCm's own: pip install /opt/rocm/share/amd_smi"

#: amdsmi_status_t codes (amdsmi.h) and what they mean for a reading.
_REASONS: dict[int, Reason] = {
    2: Reason.NOT_SUPPORTED,  # AMDSMI_STATUS_NOT_SUPPORTED
    3: Reason.NOT_SUPPORTED,  # NOT_YET_IMPLEMENTED
    10: Reason.NO_PERMISSION,  # NO_PERM
    31: Reason.GPU_LOST,  # NOT_FOUND: the device went away
    54: Reason.GPU_LOST,  # AMDGPU_RESTART_ERR
    34: Reason.NO_DRIVER,  # DRIVER_NOT_LOADED
    51: Reason.NO_DRIVER,  # NO_DRV
}
_ARCHITECTURES = {"gfx942": "cdna3", "gfx950": "cdna4", "gfx90a": "cdna2", "gfx908": "cdna1"}
_MODELS = (("MI35", "cdna4"), ("MI3", "cdna3"), ("MI2", "cdna2"), ("MI100", "cdna1"))
_KIB = 1024
_NOT_AMD = Unavailable(Reason.NOT_APPLICABLE, "an AMD GPU: its GPU links are XGMI (the xgmi_* fields)")


def load_amdsmi() -> tuple[ModuleType | None, Unavailable | None]:
    """The ``amdsmi`` module, or why it cannot be used (package missing, no library, a mismatch)."""
    if os.environ.get("GPUSCOPE_FAKE_AMDSMI"):  # simulated AMD GPUs: the fake's one door
        from gpuscope.testing.fake_amdsmi import install_from_environment

        install_from_environment()
    try:
        if importlib.util.find_spec("amdsmi") is None:
            return None, Unavailable(Reason.NO_DRIVER, f"the amdsmi package is not installed ({AMD_INSTALL_HINT})")
    except ValueError:  # a half-imported module left behind
        pass
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # amdsmi prints when the library is missing
            import amdsmi
    except AttributeError as exc:
        symbol = re.search(r"amdsmi_\w+", str(exc))
        return None, Unavailable(
            Reason.DRIVER_TOO_OLD,
            f"libamd_smi.so lacks {symbol.group(0) if symbol else 'symbols'} that this amdsmi package needs: "
            "install the amdsmi package of the ROCm on this machine (pip install /opt/rocm/share/amd_smi)",
        )
    except (KeyError, OSError):
        return None, Unavailable(Reason.NO_DRIVER, "no libamd_smi.so (ROCm's amd-smi-lib) on this machine")
    except Exception as exc:  # noqa: BLE001 - a broken binding must not stop the CPU side
        return None, Unavailable(Reason.ERROR, f"amdsmi failed to import: {exc}")
    return amdsmi, None


@dataclass
class AmdSide:
    """Everything AMD SMI says at one instant."""

    gpus: list[GpuSample]
    driver_version: Metric[str]
    library_version: Metric[str]
    unavailable: Unavailable | None = None


def _why(exc: BaseException, what: str) -> Unavailable:
    code_of = getattr(exc, "get_error_code", None)
    if code_of is not None:
        code = int(code_of())
        reason = _REASONS.get(code, Reason.ERROR)
        text = str(getattr(exc, "err_info", "") or f"status {code}")  # e.g. "AMDSMI_STATUS_NOT_SUPPORTED - ..."
        return Unavailable(reason, f"AMD SMI {what}: {text.split(' - ')[0]}")
    return Unavailable(Reason.ERROR, f"AMD SMI {what}: {exc}")


#: A value of amdsmi's GPU metrics table (``amdsmi_get_gpu_metrics_info``): a number, ``"N/A"``
#: where the GPU does not give it, or a list of them (per XCD, per XGMI link).
MetricsValue: TypeAlias = int | float | str | list[int | str] | None
MetricsTable: TypeAlias = dict[str, MetricsValue]


def _ints(table: MetricsTable, key: str) -> list[int]:
    """The whole numbers of the list at ``key`` (a per-XCD or per-link value; "N/A" entries left out)."""
    value = table.get(key)
    return [v for v in value if isinstance(v, int) and not isinstance(v, bool)] if isinstance(value, list) else []


def _number(table: MetricsTable, key: str, scale: float = 1.0) -> Metric[float]:
    value = table.get(key, "N/A")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return Unavailable(Reason.NOT_SUPPORTED, f"AMD SMI marks {key} unsupported on this GPU")
    return value if scale == 1.0 else value * scale


class _AmdGpu:
    def __init__(self, index: int, handle: Any) -> None:
        self.index = index
        self.handle = handle
        self.name = "unknown"
        self.uuid = ""
        self.pci_bus_id = "unknown"
        self.architecture = "unknown"
        self.power_limit_w: Metric[float] = NOT_COLLECTED
        self.gfx_clock_max_mhz: Metric[float] = NOT_COLLECTED
        self.memory_clock_max_mhz: Metric[float] = NOT_COLLECTED
        self.xgmi_previous: tuple[float, float, float] | None = None  # (seconds, tx KiB, rx KiB)
        self.ecc_at: float | None = None  # ECC totals change rarely: re-read every SLOW_INTERVAL_S
        self.ecc: tuple[Metric[int], Metric[int]] = (NOT_COLLECTED, NOT_COLLECTED)
        self.processes_at: float | None = None
        self.processes: Metric[list[GpuProcessSample]] = NOT_COLLECTED


class AmdSmiCollector:
    """AMD GPUs as :class:`GpuSample` records (``vendor="amd"``), indices from ``first_index``.

    Read as the NVML collector reads: the ECC totals every ``SLOW_INTERVAL_S``, process lists every
    ``PROCESS_INTERVAL_S`` while shown and every ``PROCESS_BACKGROUND_INTERVAL_S`` when not."""

    SLOW_INTERVAL_S = 5.0
    PROCESS_INTERVAL_S = 1.0
    PROCESS_BACKGROUND_INTERVAL_S = 5.0

    def __init__(
        self, *, processes: bool = True, first_index: int = 0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._processes = processes
        self._first_index = first_index
        self._clock = clock
        self._amdsmi: Any = None
        self._gpus: list[_AmdGpu] = []
        self._driver_version: Metric[str] = NOT_COLLECTED
        self._library_version: Metric[str] = NOT_COLLECTED
        self._process_interval_s = self.PROCESS_INTERVAL_S

    def open(self) -> Unavailable | None:
        """Load and initialise AMD SMI; why there are no AMD GPUs, or None."""
        amdsmi, missing = load_amdsmi()
        if amdsmi is None:
            return missing
        try:
            amdsmi.amdsmi_init(amdsmi.AmdSmiInitFlags.INIT_AMD_GPUS)
        except Exception as exc:  # noqa: BLE001
            why = _why(exc, "init")
            if why.reason is Reason.NO_PERMISSION:
                why = Unavailable(
                    Reason.NO_PERMISSION,
                    "AMD SMI init: permission denied on /dev/kfd or /dev/dri: "
                    "add the user to the render and video groups",
                )
            return why
        self._amdsmi = amdsmi
        try:
            handles = amdsmi.amdsmi_get_processor_handles()
        except Exception as exc:  # noqa: BLE001
            self.close()
            return _why(exc, "processor handles")
        if not handles:
            self.close()
            return Unavailable(Reason.NO_DRIVER, "AMD SMI found no AMD GPU (is the amdgpu driver loaded?)")
        self._gpus = [self._identify(_AmdGpu(self._first_index + i, handle)) for i, handle in enumerate(handles)]
        try:
            version = amdsmi.amdsmi_get_lib_version()
            self._library_version = f"{version['major']}.{version['minor']}.{version['release']}"
        except Exception as exc:  # noqa: BLE001
            self._library_version = _why(exc, "library version")
        try:
            self._driver_version = str(amdsmi.amdsmi_get_gpu_driver_info(handles[0])["driver_version"])
        except Exception as exc:  # noqa: BLE001
            self._driver_version = _why(exc, "driver version")
        return None

    def _identify(self, gpu: _AmdGpu) -> _AmdGpu:
        amdsmi = self._amdsmi
        with contextlib.suppress(Exception):
            asic = amdsmi.amdsmi_get_gpu_asic_info(gpu.handle)
            gpu.name = str(asic.get("market_name") or "AMD GPU")
            gpu.architecture = _ARCHITECTURES.get(str(asic.get("target_graphics_version")), "unknown")
            if gpu.architecture == "unknown":  # amdsmi < 6.4 gives no graphics version: the model says it
                gpu.architecture = next((arch for model, arch in _MODELS if model in gpu.name.upper()), "unknown")
        with contextlib.suppress(Exception):
            gpu.uuid = str(amdsmi.amdsmi_get_gpu_device_uuid(gpu.handle))
        with contextlib.suppress(Exception):
            gpu.pci_bus_id = str(amdsmi.amdsmi_get_gpu_device_bdf(gpu.handle)).upper()
        try:
            gpu.power_limit_w = _number(amdsmi.amdsmi_get_power_info(gpu.handle), "power_limit")
        except Exception as exc:  # noqa: BLE001
            gpu.power_limit_w = _why(exc, "power limit")
        for kind, attribute in (("GFX", "gfx_clock_max_mhz"), ("MEM", "memory_clock_max_mhz")):  # static: read once
            try:
                info = amdsmi.amdsmi_get_clock_info(gpu.handle, getattr(amdsmi.AmdSmiClkType, kind))
                setattr(gpu, attribute, _number(info, "max_clk"))
            except Exception as exc:  # noqa: BLE001
                setattr(gpu, attribute, _why(exc, f"{kind} clock"))
        return gpu

    @property
    def gpu_count(self) -> int:
        return len(self._gpus)

    def set_processes_shown(self, shown: bool) -> None:
        """Process lists on screen are read every second, off screen every five (as NVML's)."""
        self._process_interval_s = self.PROCESS_INTERVAL_S if shown else self.PROCESS_BACKGROUND_INTERVAL_S

    def sample(self) -> AmdSide:
        if self._amdsmi is None:
            return AmdSide([], self._driver_version, self._library_version, Unavailable(Reason.ERROR, "not open"))
        return AmdSide([self._read(gpu) for gpu in self._gpus], self._driver_version, self._library_version)

    def close(self) -> None:
        if self._amdsmi is not None:
            with contextlib.suppress(Exception):
                self._amdsmi.amdsmi_shut_down()
        self._amdsmi = None

    # -- one GPU ---------------------------------------------------------------------------------

    def _read(self, gpu: _AmdGpu) -> GpuSample:
        amdsmi = self._amdsmi
        sample = GpuSample(
            index=gpu.index, name=gpu.name, uuid=gpu.uuid, pci_bus_id=gpu.pci_bus_id,
            architecture=gpu.architecture, state="ok", vendor="amd",
        )  # fmt: skip
        now = self._clock()
        try:
            metrics: MetricsTable = amdsmi.amdsmi_get_gpu_metrics_info(gpu.handle)
        except Exception as exc:  # noqa: BLE001
            why = _why(exc, "metrics table")
            if why.reason is Reason.GPU_LOST:
                sample.state = "lost"
                gpu.xgmi_previous = None
                return _fill_missing(sample, why)
            metrics = {}
            missing_metrics: Unavailable | None = why
        else:
            missing_metrics = None

        def from_metrics(key: str, scale: float = 1.0) -> Metric[float]:
            return missing_metrics if missing_metrics is not None else _number(metrics, key, scale)

        sample.utilization_percent = from_metrics("average_gfx_activity")
        sample.memory_busy_percent = from_metrics("average_umc_activity")
        sample.temperature_gpu_c = from_metrics("temperature_edge")
        sample.temperature_hotspot_c = from_metrics("temperature_hotspot")
        sample.temperature_memory_c = from_metrics("temperature_mem")
        sample.power_w = from_metrics("current_socket_power")
        if isinstance(sample.power_w, Unavailable) and missing_metrics is None:
            sample.power_w = from_metrics("average_socket_power")
        if isinstance(sample.power_w, Unavailable) and missing_metrics is None and "MI250" in gpu.name:
            sample.power_w = Unavailable(
                Reason.NOT_SUPPORTED, "an MI250X reports the card's power on its first die only"
            )
        sample.power_limit_w = gpu.power_limit_w
        throttled = metrics.get("throttle_status")
        sample.throttle_reasons = (
            (["amd_throttle_status"] if throttled else [])
            if isinstance(throttled, bool)
            else (missing_metrics or Unavailable(Reason.NOT_SUPPORTED, "AMD SMI marks throttle_status unsupported"))
        )
        sample.pcie_bytes_per_s = from_metrics("pcie_bandwidth_inst", 1e9)
        direction = Unavailable(
            Reason.NOT_SUPPORTED, "AMD SMI gives PCIe bandwidth as one total of both directions (pcie_bytes_per_s)"
        )
        sample.pcie_tx_bytes_per_s = sample.pcie_rx_bytes_per_s = direction
        self._xgmi(gpu, sample, metrics, missing_metrics, now)
        for name in ("nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s", "nvlink_active_links", "nvlink_version",
                     "nvlink_link_peak_bytes_per_s"):  # fmt: skip
            setattr(sample, name, _NOT_AMD)
        self._memory(gpu, sample)
        self._clocks_and_link(gpu, sample, metrics, missing_metrics)
        self._energy_and_ecc(gpu, sample, now)
        if self._processes:
            if gpu.processes_at is None or now - gpu.processes_at >= self._process_interval_s:
                gpu.processes_at, gpu.processes = now, self._process_list(gpu)
            sample.processes = gpu.processes
        else:
            sample.processes = Unavailable(Reason.NOT_APPLICABLE, "process collection is off")
        return _fill_missing(sample, None)

    def _xgmi(
        self, gpu: _AmdGpu, sample: GpuSample, metrics: MetricsTable, missing: Unavailable | None, now: float
    ) -> None:
        if missing is not None:
            sample.xgmi_tx_bytes_per_s = sample.xgmi_rx_bytes_per_s = sample.xgmi_active_links = missing
            return
        reads = _ints(metrics, "xgmi_read_data_acc")
        writes = _ints(metrics, "xgmi_write_data_acc")
        status = _ints(metrics, "xgmi_link_status")
        if not reads:
            none = Unavailable(Reason.NOT_SUPPORTED, "AMD SMI gives no XGMI counters for this GPU")
            sample.xgmi_tx_bytes_per_s = sample.xgmi_rx_bytes_per_s = sample.xgmi_active_links = none
            return
        sample.xgmi_active_links = sum(1 for value in status if value == 1) if status else len(reads)
        speed, width = metrics.get("xgmi_link_speed"), metrics.get("xgmi_link_width")
        if isinstance(speed, int) and isinstance(width, int) and not isinstance(speed, bool):
            sample.xgmi_link_peak_bytes_per_s = speed * width / 8 * 1e9  # Gbit/s per lane x lanes
        stamp_ns = metrics.get("system_clock_counter")  # when the table was read: the device's clock
        if isinstance(stamp_ns, int) and not isinstance(stamp_ns, bool):
            now = stamp_ns / 1e9
        current = (now, float(sum(writes)), float(sum(reads)))
        previous, gpu.xgmi_previous = gpu.xgmi_previous, current
        if previous is None or current[0] <= previous[0]:
            warming = Unavailable(Reason.WARMING_UP, "a rate needs two reads")
            sample.xgmi_tx_bytes_per_s = sample.xgmi_rx_bytes_per_s = warming
            return
        seconds = current[0] - previous[0]
        if current[1] < previous[1] or current[2] < previous[2]:  # a driver reload reset the counters
            reset = Unavailable(Reason.WARMING_UP, "the XGMI counters restarted")
            sample.xgmi_tx_bytes_per_s = sample.xgmi_rx_bytes_per_s = reset
            return
        sample.xgmi_tx_bytes_per_s = (current[1] - previous[1]) * _KIB / seconds
        sample.xgmi_rx_bytes_per_s = (current[2] - previous[2]) * _KIB / seconds

    def _memory(self, gpu: _AmdGpu, sample: GpuSample) -> None:
        try:
            usage = self._amdsmi.amdsmi_get_gpu_vram_usage(gpu.handle)
        except Exception as exc:  # noqa: BLE001
            sample.memory_used_bytes = sample.memory_total_bytes = _why(exc, "VRAM usage")
            return
        sample.memory_used_bytes = int(usage["vram_used"]) * 2**20  # MB as AMD SMI means it: MiB
        sample.memory_total_bytes = int(usage["vram_total"]) * 2**20
        note = Unavailable(
            Reason.NOT_SUPPORTED, "AMD SMI gives memory-controller activity (memory_busy_percent), not bytes"
        )
        sample.dram_bandwidth_bytes_per_s = sample.dram_bandwidth_percent_of_peak = note

    def _clocks_and_link(
        self, gpu: _AmdGpu, sample: GpuSample, metrics: MetricsTable, missing: Unavailable | None
    ) -> None:
        """Current clocks and the PCIe link from the metrics table already read (one call a GPU);
        the maximum clocks were read once when the collector opened."""
        sample.sm_clock_max_mhz, sample.memory_clock_max_mhz = gpu.gfx_clock_max_mhz, gpu.memory_clock_max_mhz
        if missing is not None:
            sample.sm_clock_mhz = sample.memory_clock_mhz = missing
            sample.pcie_link_generation = sample.pcie_link_width = missing
            return
        per_xcd = _ints(metrics, "current_gfxclks")
        gfx = metrics.get("current_gfxclk")
        if isinstance(gfx, int) and not isinstance(gfx, bool):
            sample.sm_clock_mhz = gfx
        elif per_xcd:
            sample.sm_clock_mhz = max(per_xcd)  # MI300: one clock per XCD; the fastest, as rocm-smi shows
        else:
            sample.sm_clock_mhz = Unavailable(Reason.NOT_SUPPORTED, "AMD SMI marks current_gfxclk unsupported")
        sample.memory_clock_mhz = _number(metrics, "current_uclk")
        width = metrics.get("pcie_link_width")
        sample.pcie_link_width = (
            width
            if isinstance(width, int) and not isinstance(width, bool)
            else Unavailable(Reason.NOT_SUPPORTED, "AMD SMI marks pcie_link_width unsupported")
        )
        speed = metrics.get("pcie_link_speed")  # 0.1 GT/s per lane
        generations = {25: 1, 50: 2, 80: 3, 160: 4, 320: 5, 640: 6}
        if isinstance(speed, int) and speed in generations:
            sample.pcie_link_generation = generations[speed]
        else:
            sample.pcie_link_generation = Unavailable(Reason.NOT_SUPPORTED, f"AMD SMI PCIe link speed {speed!r}")

    def _energy_and_ecc(self, gpu: _AmdGpu, sample: GpuSample, now: float) -> None:
        amdsmi = self._amdsmi
        try:
            energy = amdsmi.amdsmi_get_energy_count(gpu.handle)
            counts = energy.get("energy_accumulator", energy.get("power"))  # amdsmi < 6.4 named the count "power"
            sample.energy_j = counts * energy["counter_resolution"] * 1e-6  # counts x uJ
        except Exception as exc:  # noqa: BLE001
            sample.energy_j = _why(exc, "energy counter")
            if "MI250" in gpu.name and sample.energy_j.reason is Reason.NOT_SUPPORTED:
                sample.energy_j = Unavailable(
                    Reason.NOT_SUPPORTED, "an MI250X counts the card's energy on its first die only"
                )
        if gpu.ecc_at is None or now - gpu.ecc_at >= self.SLOW_INTERVAL_S:
            gpu.ecc_at = now
            try:
                ecc = amdsmi.amdsmi_get_gpu_total_ecc_count(gpu.handle)
                gpu.ecc = (int(ecc["correctable_count"]), int(ecc["uncorrectable_count"]))
            except Exception as exc:  # noqa: BLE001
                gpu.ecc = (_why(exc, "ECC counts"), _why(exc, "ECC counts"))
        sample.ecc_corrected_errors, sample.ecc_uncorrected_errors = gpu.ecc

    def _process_list(self, gpu: _AmdGpu) -> Metric[list[GpuProcessSample]]:
        try:
            entries = self._amdsmi.amdsmi_get_gpu_process_list(gpu.handle)
        except Exception as exc:  # noqa: BLE001
            return _why(exc, "process list")
        no_activity = Unavailable(Reason.NOT_SUPPORTED, "AMD SMI gives no per-process GFX activity here")
        out: list[GpuProcessSample] = []
        for entry in entries:
            pid = int(entry["pid"])
            name, user = process_identity(pid)
            if isinstance(name, Unavailable) and entry.get("name") not in (None, "N/A"):
                name = str(entry["name"])
            vram = entry.get("memory_usage", {}).get("vram_mem", entry.get("mem"))
            out.append(
                GpuProcessSample(
                    pid=pid,
                    name=name,
                    user=user,
                    gpu_memory_bytes=int(vram)
                    if isinstance(vram, int)
                    else Unavailable(Reason.NOT_SUPPORTED, "no VRAM figure"),
                    sm_percent=no_activity,
                    kind="compute",
                )  # fmt: skip
            )
        return out


def _fill_missing(sample: GpuSample, lost: Unavailable | None) -> GpuSample:
    """Every field still at its default gets a reason: the GPU was lost, or AMD SMI has no such reading."""
    fallback = lost or Unavailable(Reason.NOT_SUPPORTED, "AMD SMI has no such reading (an NVIDIA-only metric)")
    for item in dataclasses.fields(sample):
        value = getattr(sample, item.name)
        if value is NOT_COLLECTED or (lost is not None and isinstance(value, Unavailable)):
            setattr(sample, item.name, fallback)
    return sample
