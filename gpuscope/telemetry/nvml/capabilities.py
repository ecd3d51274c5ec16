"""What gpuscope can read from each GPU, and for each thing it cannot, the cause and the fix.

:func:`probe` opens an :class:`NvmlCollector`, waits just over one GPM window, takes one
sample and turns what it saw into :class:`Check` lines (``gpuscope doctor`` prints them).
:func:`gpu_checks` does the same for a sample the TUI already has.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpuscope.telemetry.nvml.collector import DeviceStatus, NvmlCollector
from gpuscope.telemetry.nvml.gpm import GPM_MIN_INTERVAL_S
from gpuscope.telemetry.nvml.readings import METRIC_FIELDS
from gpuscope.telemetry.nvml.session import (
    DRIVER_TOO_OLD_FIX,
    MISMATCH_FIX,
    PROFILING_CAUSE,
    PROFILING_FIX,
    PROFILING_REMEDY,
    GpuLostError,
    call,
    pynvml,
)
from gpuscope.telemetry.records import GpuSample, JsonObject
from gpuscope.telemetry.values import Metric, Reason, Unavailable

__all__ = ["Check", "GpuReport", "NvmlReport", "probe", "gpu_checks", "check_from_unavailable", "MARKERS"]

#: Check status -> the marker printed in front of it.
MARKERS = {"ok": "OK", "unavailable": "--", "problem": "!!"}

_FIXES: dict[Reason, str] = {
    Reason.NO_PERMISSION: "run gpuscope as root (or as a user the driver allows)",
    Reason.DRIVER_TOO_OLD: DRIVER_TOO_OLD_FIX,
    Reason.DRIVER_MISMATCH: MISMATCH_FIX,
    Reason.NO_DRIVER: "install the NVIDIA driver if this machine has an NVIDIA GPU",
    Reason.GPU_LOST: "check `dmesg` for Xid errors; reset the GPU (nvidia-smi -r) or reboot",
}
_HARMLESS = (Reason.NOT_SUPPORTED, Reason.NOT_APPLICABLE, Reason.WARMING_UP)
_PARAMS = Path("/proc/driver/nvidia/params")


@dataclass
class Check:
    """One line of the report: ``status`` is "ok", "unavailable" (--) or "problem" (!!)."""

    name: str
    status: str
    detail: str
    fix: str = ""

    @property
    def marker(self) -> str:
        return MARKERS[self.status]

    def to_dict(self) -> JsonObject:
        return {"name": self.name, "status": self.status, "marker": self.marker, "detail": self.detail, "fix": self.fix}


@dataclass
class GpuReport:
    """The checks of one GPU or MIG device."""

    index: int
    name: str
    architecture: str
    pci_bus_id: str
    uuid: str
    state: str
    mig_parent_index: int | None
    checks: list[Check] = field(default_factory=list)

    def to_dict(self) -> JsonObject:
        data: JsonObject = asdict(self)
        data["checks"] = [check.to_dict() for check in self.checks]
        return data


@dataclass
class NvmlReport:
    """The NVIDIA side: library, versions and each GPU."""

    library: Check
    versions: list[Check]
    gpus: list[GpuReport]

    def to_dict(self) -> JsonObject:
        return {
            "library": self.library.to_dict(),
            "versions": [check.to_dict() for check in self.versions],
            "gpus": [gpu.to_dict() for gpu in self.gpus],
        }


def check_from_unavailable(name: str, value: Unavailable, *, fix: str = "") -> Check:
    """A check for something unavailable: "--" when the hardware simply lacks it, "!!" when
    it can be fixed (permission, driver, lost GPU, error), with the fix."""
    status = "unavailable" if value.reason in _HARMLESS else "problem"
    text = value.detail
    if PROFILING_FIX in text:
        text, fix = text.replace(PROFILING_FIX, PROFILING_CAUSE), fix or PROFILING_REMEDY
    fix = fix or _FIXES.get(value.reason, "")
    if fix and fix in text:  # the detail carries the fix: print it on its own line
        text = text.replace(f"; {fix}", "").replace(f": {fix}", "")
    detail = value.reason.value.replace("_", " ") + (f": {text}" if text else "")
    return Check(name, status, detail, fix)


def _gb(value: float) -> str:
    return f"{value / 1e9:,.0f} GB/s" if value >= 1e10 else f"{value / 1e9:.2f} GB/s"


def _profiling_note(params_path: Path) -> str:
    try:
        text = params_path.read_text()
    except OSError:
        return ""
    for line in text.splitlines():
        if line.startswith("RmProfilingAdminOnly:"):
            return f" ({line.strip()} in {params_path})"
    return ""


def _metric_check(name: str, value: Metric[Any], ok: Callable[[Any], str], *, note: str = "") -> Check:
    if isinstance(value, Unavailable):
        check = check_from_unavailable(name, value)
        if value.reason is Reason.NO_PERMISSION and note:
            check.detail += note
        return check
    return Check(name, "ok", ok(value))


def gpu_checks(
    sample: GpuSample,
    status: DeviceStatus | None = None,
    *,
    accounting: Metric[bool] | None = None,
    profiling_note: str = "",
) -> list[Check]:
    """What is readable on one GPU (or MIG device) given one sample of it."""
    if sample.state == "lost":
        return [
            check_from_unavailable(
                "state", Unavailable(Reason.GPU_LOST, "the GPU fell off the bus or stopped answering")
            )
        ]
    checks: list[Check] = []
    if status is not None and sample.mig_parent_index is None:
        gpm = status.gpm
        checks.append(Check("GPM", "ok", "supported") if gpm is None else check_from_unavailable("GPM", gpm))
    checks.append(
        _metric_check(
            "profiling",
            sample.sm_activity_percent,
            lambda v: (
                f"SM activity {v:.0f} %, tensor {_pct(sample.tensor_activity_percent)}, "
                f"occupancy {_pct(sample.sm_occupancy_percent)}"
            ),
            note=profiling_note,
        )
    )
    if sample.mig_parent_index is None:
        peak = sample.dram_peak_bytes_per_s
        peak_text = "" if isinstance(peak, Unavailable) else f" of {_gb(peak)} peak"
        checks.append(
            _metric_check(
                "DRAM bandwidth",
                sample.dram_bandwidth_bytes_per_s,
                lambda v: f"{_gb(v)}{peak_text}",
                note=profiling_note,
            )
        )
        checks.append(_nvlink_check(sample, status))
        source = "GPM" if status is not None and status.gpm is None else "field counters"
        link = ""
        if not isinstance(sample.pcie_link_generation, Unavailable) and not isinstance(
            sample.pcie_link_width, Unavailable
        ):
            link = f", link Gen{sample.pcie_link_generation} x{sample.pcie_link_width}"
        rx = sample.pcie_rx_bytes_per_s
        rx_text = "unavailable" if isinstance(rx, Unavailable) else _gb(rx)
        checks.append(
            _metric_check(
                "PCIe counters",
                sample.pcie_tx_bytes_per_s,
                lambda v: f"TX {_gb(v)}, RX {rx_text} (via {source}){link}",
            )
        )
    processes = sample.processes
    checks.append(_metric_check("processes", processes, lambda v: f"{len(v)} running"))
    if status is not None and sample.mig_parent_index is None:
        utilization = status.process_utilization
        checks.append(
            Check("process SM %", "ok", "readable")
            if utilization is None
            else check_from_unavailable("process SM %", utilization)
        )
    if accounting is not None:
        if isinstance(accounting, Unavailable):
            checks.append(check_from_unavailable("accounting", accounting))
        elif accounting:
            checks.append(Check("accounting", "ok", "per-process accounting is on"))
        else:
            checks.append(
                Check(
                    "accounting",
                    "unavailable",
                    "per-process accounting is off",
                    f"sudo nvidia-smi -i {sample.index} -am 1",
                )
            )
    if sample.mig_parent_index is None:
        checks.append(_xid_check(sample))
    checks.append(_others_check(sample))
    return checks


def _xid_check(sample: GpuSample) -> Check:
    """Whether Xid errors (the driver's fault reports) will reach the log and the alert line."""
    recent = sample.xid_recent
    if isinstance(recent, Unavailable):
        return check_from_unavailable("Xid events", recent)
    if not recent:
        return Check("Xid events", "ok", "watched (critical Xid errors reach the log and the alert line)")
    seen = ", ".join(
        f"Xid {event.xid}" + (f" ({event.meaning})" if event.meaning else "") + f" x{event.count}" for event in recent
    )
    return Check("Xid events", "problem", f"reported while doctor ran: {seen}", "see `dmesg | grep -i xid`")


def _pct(value: Metric[float]) -> str:
    return "unavailable" if isinstance(value, Unavailable) else f"{value:.0f} %"


def _nvlink_check(sample: GpuSample, status: DeviceStatus | None) -> Check:
    links = sample.nvlink_active_links
    if isinstance(links, Unavailable):
        return check_from_unavailable("NVLink", links)
    if not links:
        return Check("NVLink", "unavailable", "no active NVLink link")
    version = sample.nvlink_version
    peak = sample.nvlink_link_peak_bytes_per_s
    detail = f"{links} active links"
    if not isinstance(version, Unavailable):
        detail += f", NVLink {version}"
    if not isinstance(peak, Unavailable):
        detail += f", {peak / 1e9:g} GB/s per link each way"
    if isinstance(sample.nvlink_tx_bytes_per_s, Unavailable):
        check = check_from_unavailable("NVLink", sample.nvlink_tx_bytes_per_s)
        check.detail = f"{detail}; counters: {check.detail}"
        return check
    if status is not None and status.nvlink_scope_honoured is False:
        detail += "; per-link rates unavailable (the driver reports GPU-wide counters for every link)"
    return Check("NVLink", "ok", detail + "; counters readable")


_COVERED = (
    "dram_",
    "sm_activity",
    "sm_occupancy",
    "tensor",
    "hmma",
    "imma",
    "dfma",
    "fp",
    "pcie_tx",
    "pcie_rx",
    "nvlink_",
    "processes",
    "xid_",
)


def _others_check(sample: GpuSample) -> Check:
    missing = []
    worst = "ok"
    for name in METRIC_FIELDS:
        value = getattr(sample, name)
        if not isinstance(value, Unavailable) or name.startswith(_COVERED):
            continue
        if value.reason is Reason.NOT_APPLICABLE and sample.mig_parent_index is not None:
            continue  # per-GPU metrics of a MIG device: shown on the parent
        missing.append(f"{name} ({value.reason.value.replace('_', ' ')})")
        if value.reason not in _HARMLESS:
            worst = "problem"
        elif worst == "ok":
            worst = "unavailable"
    if not missing:
        return Check("other metrics", "ok", "all readable")
    return Check("other metrics", worst, "unavailable: " + ", ".join(missing))


def _accounting(index: int) -> Metric[bool]:
    try:
        handle = call("nvmlDeviceGetHandleByIndex", pynvml.nvmlDeviceGetHandleByIndex, index)
        if isinstance(handle, Unavailable):
            return handle
        mode = call("nvmlDeviceGetAccountingMode", pynvml.nvmlDeviceGetAccountingMode, handle)
    except GpuLostError as exc:
        return Unavailable(Reason.GPU_LOST, str(exc))
    return mode if isinstance(mode, Unavailable) else bool(mode == pynvml.NVML_FEATURE_ENABLED)


def _library_version() -> str:
    try:
        from importlib.metadata import version

        return f"nvidia-ml-py {version('nvidia-ml-py')}"
    except Exception:  # noqa: BLE001
        return "nvidia-ml-py"


def probe(
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    params_path: Path = _PARAMS,
) -> NvmlReport:
    """Open NVML, wait one GPM window, sample once, and report what is readable. Never raises."""
    collector = NvmlCollector(clock=clock)
    try:
        failed = collector.open()
        if failed is not None:
            library = check_from_unavailable("library", failed)
            if failed.reason is Reason.NO_DRIVER:  # a host without an NVIDIA GPU: a finding, not a fault
                library.status = "unavailable"
            if failed.reason is Reason.NOT_APPLICABLE:  # NVML works, no GPU
                library = Check(
                    "library", "unavailable", f"libnvidia-ml loaded ({_library_version()}); {failed.detail}"
                )
            return NvmlReport(library, [], [])
        sleep(GPM_MIN_INTERVAL_S * 1.2)
        side = collector.sample()
        statuses = {status.index: status for status in collector.device_status()}
        accounting = {gpu.index: _accounting(gpu.index) for gpu in side.gpus if gpu.mig_parent_index is None}
    except Exception as exc:  # noqa: BLE001
        return NvmlReport(Check("library", "problem", f"{type(exc).__name__}: {exc}"), [], [])
    finally:
        collector.close()
    note = _profiling_note(params_path)
    versions = [
        _metric_check(label, value, str)
        for label, value in (
            ("driver", side.driver_version),
            ("NVML", side.nvml_version),
            ("CUDA driver", side.cuda_driver_version),
        )
    ]
    gpus = []
    for sample in side.gpus:
        full = sample.mig_parent_index is None
        gpus.append(
            GpuReport(
                index=sample.index,
                name=sample.name,
                architecture=sample.architecture,
                pci_bus_id=sample.pci_bus_id,
                uuid=sample.uuid,
                state=sample.state,
                mig_parent_index=sample.mig_parent_index,
                checks=gpu_checks(
                    sample,
                    statuses.get(sample.index) if full else None,
                    accounting=accounting.get(sample.index) if full else None,
                    profiling_note=note,
                ),
            )
        )
    return NvmlReport(Check("library", "ok", f"libnvidia-ml loaded ({_library_version()})"), versions, gpus)
