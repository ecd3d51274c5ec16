"""What a GPU is, read once at open: identity, max clocks, bus width, NVLink links and
version, MIG mode and MIG devices. None of this is read again per sample."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuscope.telemetry.nvml.session import call, pynvml
from gpuscope.telemetry.values import Metric, Reason, Unavailable

__all__ = [
    "ARCHITECTURES",
    "NVLINK_VERSIONS",
    "DeviceInfo",
    "MigInfo",
    "architecture_name",
    "dram_peak_bytes_per_s",
    "read_device_info",
    "read_mig_devices",
]

#: nvmlDeviceGetArchitecture -> name.
ARCHITECTURES: dict[int, str] = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada",
    9: "Hopper",
    10: "Blackwell",
    13: "Rubin",
}

#: nvmlDeviceGetNvLinkVersion returns an nvmlNvlinkVersion_t enum (A100 answers 4 or 5, not 3):
#: enum -> (NVLink generation, data bytes/s per link per direction, or None when not known).
#: NVLink 1: 20 GB/s; 2 (V100), 3 (A100, 12 links = 600 GB/s both ways) and 4 (H100, 18 links
#: = 900 GB/s both ways) all carry 25 GB/s per link per direction; NVLink 5 (B200) 50 GB/s.
NVLINK_VERSIONS: dict[int, tuple[int, float | None]] = {
    1: (1, 20e9),
    2: (2, 25e9),
    3: (2, 25e9),  # 2.2
    4: (3, 25e9),
    5: (3, 25e9),  # 3.1
    6: (4, 25e9),
    7: (5, 50e9),
    8: (6, None),
}

_MAX_LINKS = 18  # NVLink 4 and 5 GPUs have 18; used when NVML_FI_DEV_NVLINK_LINK_COUNT is missing


def architecture_name(code: int) -> str:
    return ARCHITECTURES.get(int(code), f"unknown ({int(code)})")


def dram_peak_bytes_per_s(bus_width_bits: int, max_memory_clock_mhz: float) -> float:
    """Theoretical DRAM bandwidth: bus width x max memory clock x 2 (double data rate) / 8."""
    return bus_width_bits * max_memory_clock_mhz * 1e6 * 2 / 8


@dataclass
class DeviceInfo:
    """Static facts about one full GPU."""

    index: int
    name: str
    uuid: str
    pci_bus_id: str
    architecture: str
    architecture_code: int | None
    mig_mode: Metric[bool]
    sm_clock_max_mhz: Metric[float]
    memory_clock_max_mhz: Metric[float]
    memory_bus_width_bits: Metric[int]
    dram_peak_bytes_per_s: Metric[float]
    nvlink_links: list[int] = field(default_factory=list)  # active links
    nvlink_active_links: Metric[int] = Unavailable(Reason.NOT_SUPPORTED, "no NVLink")
    nvlink_version: Metric[int] = Unavailable(Reason.NOT_SUPPORTED, "no NVLink")
    nvlink_link_peak_bytes_per_s: Metric[float] = Unavailable(Reason.NOT_SUPPORTED, "no NVLink")
    #: transient failures while reading these facts (the collector reads them again later)
    problems: list[Unavailable] = field(default_factory=list)


@dataclass
class MigInfo:
    """Static facts about one MIG device (a compute instance inside a GPU instance)."""

    slot: int  # index for nvmlDeviceGetMigDeviceHandleByIndex
    handle: Any
    name: str
    uuid: str
    gpu_instance_id: Metric[int]
    compute_instance_id: Metric[int]


def _transient(value: Any, problems: list[Unavailable]) -> Any:
    """``value``; an Unavailable that may go away on a retry (ERROR) is noted in ``problems``."""
    if isinstance(value, Unavailable) and value.reason is Reason.ERROR:
        problems.append(value)
    return value


def _text(what: str, fn: Any, handle: Any, problems: list[Unavailable], default: str = "unknown") -> str:
    value = _transient(call(what, fn, handle), problems)
    return default if isinstance(value, Unavailable) else str(value)


def _nvlink(handle: Any, info: DeviceInfo) -> None:
    """Active links (state read per link, once), their NVLink generation and per-link peak."""
    count = _MAX_LINKS
    values = call(
        "nvmlDeviceGetFieldValues", pynvml.nvmlDeviceGetFieldValues, handle, [pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT]
    )
    if not isinstance(values, Unavailable) and values[0].nvmlReturn == pynvml.NVML_SUCCESS:
        count = int(values[0].value.uiVal)
    active: list[int] = []
    first_error: Unavailable | None = None
    for link in range(count):
        state = call("nvmlDeviceGetNvLinkState", pynvml.nvmlDeviceGetNvLinkState, handle, link)
        if isinstance(state, Unavailable):
            if link == 0:
                first_error = state
            if link == 0 or state.reason is Reason.ERROR:  # InvalidArgument: past the last link
                break
            continue
        if state:
            active.append(link)
    if not active:
        if first_error is not None and first_error.reason is Reason.NOT_SUPPORTED:
            first_error = Unavailable(Reason.NOT_SUPPORTED, "this GPU has no NVLink")
        if first_error is not None:
            info.nvlink_active_links = info.nvlink_version = info.nvlink_link_peak_bytes_per_s = first_error
        else:
            info.nvlink_active_links = 0
            info.nvlink_version = info.nvlink_link_peak_bytes_per_s = Unavailable(
                Reason.NOT_APPLICABLE, "no active NVLink link"
            )
        return
    info.nvlink_links = active
    info.nvlink_active_links = len(active)
    version = call("nvmlDeviceGetNvLinkVersion", pynvml.nvmlDeviceGetNvLinkVersion, handle, active[0])
    if isinstance(version, Unavailable):
        info.nvlink_version = info.nvlink_link_peak_bytes_per_s = version
        return
    generation, peak = NVLINK_VERSIONS.get(int(version), (None, None))
    if generation is None:
        info.nvlink_version = Unavailable(Reason.NOT_SUPPORTED, f"unknown NVLink version enum {int(version)}")
    else:
        info.nvlink_version = generation
    info.nvlink_link_peak_bytes_per_s = (
        peak
        if peak is not None
        else Unavailable(Reason.NOT_SUPPORTED, f"per-link peak of NVLink enum {int(version)} not known")
    )


def read_device_info(index: int, handle: Any) -> DeviceInfo:
    """Static facts of GPU ``index``. Raises :class:`GpuLostError` if the GPU is lost."""
    problems: list[Unavailable] = []
    pci = _transient(call("nvmlDeviceGetPciInfo", pynvml.nvmlDeviceGetPciInfo, handle), problems)
    bus_id = "unknown" if isinstance(pci, Unavailable) else _decode(pci.busId)
    arch = _transient(call("nvmlDeviceGetArchitecture", pynvml.nvmlDeviceGetArchitecture, handle), problems)
    mig = _transient(call("nvmlDeviceGetMigMode", pynvml.nvmlDeviceGetMigMode, handle), problems)
    sm_max = _transient(
        call("nvmlDeviceGetMaxClockInfo", pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_SM), problems
    )
    mem_max = _transient(
        call("nvmlDeviceGetMaxClockInfo", pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_MEM), problems
    )
    width = _transient(call("nvmlDeviceGetMemoryBusWidth", pynvml.nvmlDeviceGetMemoryBusWidth, handle), problems)
    if isinstance(width, Unavailable):
        peak: Metric[float] = width
    elif isinstance(mem_max, Unavailable):
        peak = mem_max
    elif not width or not mem_max:
        peak = Unavailable(Reason.NOT_SUPPORTED, "bus width or max memory clock reads 0")
    else:
        peak = dram_peak_bytes_per_s(int(width), float(mem_max))
    info = DeviceInfo(
        index=index,
        name=_text("nvmlDeviceGetName", pynvml.nvmlDeviceGetName, handle, problems),
        uuid=_text("nvmlDeviceGetUUID", pynvml.nvmlDeviceGetUUID, handle, problems, ""),
        pci_bus_id=bus_id,
        architecture="unknown" if isinstance(arch, Unavailable) else architecture_name(arch),
        architecture_code=None if isinstance(arch, Unavailable) else int(arch),
        mig_mode=mig if isinstance(mig, Unavailable) else bool(mig[0] == pynvml.NVML_DEVICE_MIG_ENABLE),
        sm_clock_max_mhz=sm_max if isinstance(sm_max, Unavailable) else float(sm_max),
        memory_clock_max_mhz=mem_max if isinstance(mem_max, Unavailable) else float(mem_max),
        memory_bus_width_bits=width if isinstance(width, Unavailable) else int(width),
        dram_peak_bytes_per_s=peak,
        problems=problems,
    )
    _nvlink(handle, info)
    for value in (info.nvlink_active_links, info.nvlink_version):
        _transient(value, problems)
    return info


def _decode(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def read_mig_devices(handle: Any, problems: list[Unavailable]) -> list[MigInfo]:
    """The MIG devices of a GPU in MIG mode (empty slots skipped); transient failures are
    appended to ``problems``. Raises GpuLostError."""
    count = _transient(call("nvmlDeviceGetMaxMigDeviceCount", pynvml.nvmlDeviceGetMaxMigDeviceCount, handle), problems)
    if isinstance(count, Unavailable):
        return []
    found: list[MigInfo] = []
    for slot in range(int(count)):
        mig = call(
            "nvmlDeviceGetMigDeviceHandleByIndex",
            pynvml.nvmlDeviceGetMigDeviceHandleByIndex,
            handle,
            slot,
            not_found=None,
        )
        if mig is None:
            continue  # an empty slot
        if isinstance(mig, Unavailable):
            _transient(mig, problems)
            continue
        gi = _transient(call("nvmlDeviceGetGpuInstanceId", pynvml.nvmlDeviceGetGpuInstanceId, mig), problems)
        ci = _transient(call("nvmlDeviceGetComputeInstanceId", pynvml.nvmlDeviceGetComputeInstanceId, mig), problems)
        found.append(
            MigInfo(
                slot=slot,
                handle=mig,
                name=_text("nvmlDeviceGetName", pynvml.nvmlDeviceGetName, mig, problems),
                uuid=_text("nvmlDeviceGetUUID", pynvml.nvmlDeviceGetUUID, mig, problems, ""),
                gpu_instance_id=gi if isinstance(gi, Unavailable) else int(gi),
                compute_instance_id=ci if isinstance(ci, Unavailable) else int(ci),
            )
        )
    return found
