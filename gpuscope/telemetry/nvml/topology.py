"""The GPU side of the topology through NVML: each GPU's PCIe link (current and maximum),
CPU and NUMA affinity, NVLink links (state, version, far end, error counters) and the PCIe
common ancestor of every GPU pair.

Every call goes through :func:`gpuscope.telemetry.nvml.session.call` (pynvml's wrappers as they
are); what cannot be read is left None and named in ``GpuNode.unavailable``. A lost GPU is kept
with what was read before it went.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuscope.telemetry.nvml import compat
from gpuscope.telemetry.nvml.device import _MAX_LINKS, NVLINK_VERSIONS
from gpuscope.telemetry.nvml.session import GpuLostError, call, init, pynvml, shutdown
from gpuscope.telemetry.topology import GpuNode, NvLinkLink, PcieLink, level_from_nvml, pcie_bytes_per_s
from gpuscope.telemetry.values import Reason, Unavailable

__all__ = [
    "NvmlTopology",
    "read_nvml_topology",
    "normalize_bus_id",
    "AFFINITY_WORDS",
    "read_link_error_counters",
    "read_pcie_replay_counter",
]

#: 64-bit words asked for in the CPU and NUMA affinity masks (1024 CPUs, 1024 nodes).
AFFINITY_WORDS = 16

#: nvmlNvLinkDeviceType_t (nvml.h): 0 GPU, 1 IBM NPU (a CPU), 2 NVSwitch, 0xFF unknown.
_REMOTE_KINDS = {0: "gpu", 1: "cpu", 2: "nvswitch"}
#: NVLink error counters read per link: nvmlNvLinkErrorCounter_t value -> NvLinkLink field.
_ERROR_COUNTERS = {
    int(getattr(pynvml, "NVML_NVLINK_ERROR_DL_CRC_FLIT", 2)): "crc_flit_errors",
    int(getattr(pynvml, "NVML_NVLINK_ERROR_DL_CRC_DATA", 3)): "crc_data_errors",
    int(getattr(pynvml, "NVML_NVLINK_ERROR_DL_REPLAY", 0)): "replay_errors",
    int(getattr(pynvml, "NVML_NVLINK_ERROR_DL_RECOVERY", 1)): "recovery_errors",
}


@dataclass
class NvmlTopology:
    """What NVML says: the GPUs, the PCIe level of each pair ``(a, b)`` with ``a < b``, and why
    the GPU side is missing (None when it is there)."""

    gpus: list[GpuNode] = field(default_factory=list)
    levels: dict[tuple[int, int], str] = field(default_factory=dict)
    unavailable: str | None = None


def normalize_bus_id(bus_id: str) -> str:
    """A PCI address as sysfs spells it: ``00000000:18:00.0`` -> ``0000:18:00.0`` (lower case)."""
    text = bus_id.strip().lower()
    parts = text.split(":")
    if len(parts) == 3:
        domain = parts[0][-4:].rjust(4, "0")
        return f"{domain}:{parts[1]}:{parts[2]}"
    if len(parts) == 2:
        return f"0000:{parts[0]}:{parts[1]}"
    return text


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _bits(words: Any) -> list[int]:
    """The set bits of an array of 64-bit mask words, as numbers."""
    found: list[int] = []
    for number, word in enumerate(words):
        value = int(word)
        bit = 0
        while value:
            if value & 1:
                found.append(number * 64 + bit)
            value >>= 1
            bit += 1
    return found


def _value(gpu: GpuNode, what: str, fn: Any, *args: Any) -> Any:
    """``fn(*args)`` through :func:`call`; an Unavailable is noted (unless harmless) and read as None."""
    value = call(what, fn, *args)
    if isinstance(value, Unavailable):
        if value.reason not in (Reason.NOT_SUPPORTED, Reason.NOT_APPLICABLE):
            gpu.unavailable.append(value.detail)
        return None
    return value


def _pcie(gpu: GpuNode, handle: Any) -> PcieLink:
    def number(what: str) -> int | None:
        value = _value(gpu, what, getattr(pynvml, what), handle)
        return None if value is None else int(value)

    generation, width = number("nvmlDeviceGetCurrPcieLinkGeneration"), number("nvmlDeviceGetCurrPcieLinkWidth")
    max_generation, max_width = number("nvmlDeviceGetMaxPcieLinkGeneration"), number("nvmlDeviceGetMaxPcieLinkWidth")
    return PcieLink(
        generation=generation,
        width=width,
        max_generation=max_generation,
        max_width=max_width,
        current_bytes_per_s=pcie_bytes_per_s(generation, width),
        expected_bytes_per_s=pcie_bytes_per_s(max_generation, max_width),
        replay_count=number("nvmlDeviceGetPcieReplayCounter"),
    )


def read_link_error_counters(handle: Any, link: int) -> dict[str, Unavailable | int]:
    """One NVLink link's error counters (counts since the driver loaded), by field name
    (``crc_flit_errors``, ``crc_data_errors``, ``replay_errors``, ``recovery_errors``); each an
    int or the :class:`Unavailable` NVML gave. Raises GpuLostError."""
    out: dict[str, Unavailable | int] = {}
    for counter, name in _ERROR_COUNTERS.items():
        value = call("nvmlDeviceGetNvLinkErrorCounter", pynvml.nvmlDeviceGetNvLinkErrorCounter, handle, link, counter)
        out[name] = value if isinstance(value, Unavailable) else int(value)
    return out


def read_pcie_replay_counter(handle: Any) -> Unavailable | int:
    """The PCIe replay counter (replays since the driver loaded), or why not. Raises GpuLostError."""
    value = call("nvmlDeviceGetPcieReplayCounter", pynvml.nvmlDeviceGetPcieReplayCounter, handle)
    return value if isinstance(value, Unavailable) else int(value)


def _link_count(gpu: GpuNode, handle: Any) -> int:
    values = call(
        "nvmlDeviceGetFieldValues", pynvml.nvmlDeviceGetFieldValues, handle, [pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT]
    )
    if not isinstance(values, Unavailable) and values[0].nvmlReturn == pynvml.NVML_SUCCESS:
        return int(values[0].value.uiVal)
    return _MAX_LINKS


def _nvlinks(gpu: GpuNode, handle: Any, bus_ids: dict[str, int]) -> list[NvLinkLink]:
    """Each link the GPU has: state, version, far end and error counters."""
    links: list[NvLinkLink] = []
    remote_type = compat.function("nvmlDeviceGetNvLinkRemoteDeviceType")
    for number in range(_link_count(gpu, handle)):
        state = call("nvmlDeviceGetNvLinkState", pynvml.nvmlDeviceGetNvLinkState, handle, number)
        if isinstance(state, Unavailable):
            if number == 0 and state.reason not in (Reason.NOT_SUPPORTED, Reason.ERROR):
                gpu.unavailable.append(state.detail)
            break  # NotSupported: no NVLink; InvalidArgument: past the last link
        link = NvLinkLink(link=number, active=bool(state))
        if link.active:
            version = _value(gpu, "nvmlDeviceGetNvLinkVersion", pynvml.nvmlDeviceGetNvLinkVersion, handle, number)
            if version is not None:
                link.version, link.bytes_per_s = NVLINK_VERSIONS.get(int(version), (None, None))
        else:
            link.bytes_per_s = 0.0
        remote = call("nvmlDeviceGetNvLinkRemotePciInfo", pynvml.nvmlDeviceGetNvLinkRemotePciInfo, handle, number)
        if not isinstance(remote, Unavailable):
            link.remote_pci_bus_id = _text(remote.busId)
            link.remote_gpu = bus_ids.get(normalize_bus_id(link.remote_pci_bus_id))
        kind = None if remote_type is None else call("nvmlDeviceGetNvLinkRemoteDeviceType", remote_type, handle, number)
        if kind is not None and not isinstance(kind, Unavailable):
            link.remote_kind = _REMOTE_KINDS.get(int(kind), "unknown")
        elif link.remote_pci_bus_id is not None:  # an old driver: a GPU is one of ours, else a switch
            link.remote_kind = "gpu" if link.remote_gpu is not None else "nvswitch"
        if link.remote_kind != "gpu":
            link.remote_gpu = None
        for name, value in read_link_error_counters(handle, number).items():
            if not isinstance(value, Unavailable):
                setattr(link, name, value)
        links.append(link)
    return links


def _read_gpu(index: int, handle: Any, gpu: GpuNode, bus_ids: dict[str, int]) -> None:
    """Fill ``gpu`` (identity already set) from NVML. Raises GpuLostError."""
    gpu.pcie = _pcie(gpu, handle)
    utilization = _value(gpu, "nvmlDeviceGetUtilizationRates", pynvml.nvmlDeviceGetUtilizationRates, handle)
    gpu.utilization_percent = None if utilization is None else float(utilization.gpu)
    cpus = _value(gpu, "nvmlDeviceGetCpuAffinity", pynvml.nvmlDeviceGetCpuAffinity, handle, AFFINITY_WORDS)
    gpu.cpu_affinity = [] if cpus is None else _bits(cpus)
    scope = int(getattr(pynvml, "NVML_AFFINITY_SCOPE_NODE", 0))
    nodes = _value(
        gpu, "nvmlDeviceGetMemoryAffinity", pynvml.nvmlDeviceGetMemoryAffinity, handle, AFFINITY_WORDS, scope
    )
    gpu.numa_nodes = [] if nodes is None else _bits(nodes)
    gpu.nvlinks = _nvlinks(gpu, handle, bus_ids)


def read_nvml_topology() -> NvmlTopology:
    """Initialise NVML, read every GPU and pair, shut NVML down. Never raises."""
    failed = init()
    if failed is not None:
        return NvmlTopology(unavailable=failed.detail)
    try:
        return _read_all()
    finally:
        shutdown()


def _read_all() -> NvmlTopology:
    result = NvmlTopology()
    count = call("nvmlDeviceGetCount", pynvml.nvmlDeviceGetCount)
    if isinstance(count, Unavailable):
        result.unavailable = count.detail
        return result
    handles: dict[int, Any] = {}
    for index in range(int(count)):
        try:
            handle = call("nvmlDeviceGetHandleByIndex", pynvml.nvmlDeviceGetHandleByIndex, index)
        except GpuLostError as exc:
            result.gpus.append(GpuNode(index=index, name="unknown", unavailable=[str(exc)]))
            continue
        if isinstance(handle, Unavailable):
            result.gpus.append(GpuNode(index=index, name="unknown", unavailable=[handle.detail]))
            continue
        gpu = GpuNode(index=index, name="unknown")
        try:
            gpu.name = _text(_value(gpu, "nvmlDeviceGetName", pynvml.nvmlDeviceGetName, handle) or "unknown")
            gpu.uuid = _text(_value(gpu, "nvmlDeviceGetUUID", pynvml.nvmlDeviceGetUUID, handle) or "")
            pci = _value(gpu, "nvmlDeviceGetPciInfo", pynvml.nvmlDeviceGetPciInfo, handle)
            gpu.pci_bus_id = "" if pci is None else _text(pci.busId)
            handles[index] = handle
        except GpuLostError as exc:
            gpu.unavailable.append(str(exc))
        result.gpus.append(gpu)
    bus_ids = {normalize_bus_id(gpu.pci_bus_id): gpu.index for gpu in result.gpus if gpu.pci_bus_id}
    for gpu in result.gpus:
        if gpu.index not in handles:
            continue
        try:
            _read_gpu(gpu.index, handles[gpu.index], gpu, bus_ids)
        except GpuLostError as exc:
            gpu.unavailable.append(str(exc))
            handles.pop(gpu.index)
    ordered = sorted(handles)
    for position, a in enumerate(ordered):
        for b in ordered[position + 1 :]:
            try:
                level = call(
                    "nvmlDeviceGetTopologyCommonAncestor",
                    pynvml.nvmlDeviceGetTopologyCommonAncestor,
                    handles[a],
                    handles[b],
                )
            except GpuLostError:
                level = Unavailable(Reason.GPU_LOST, "lost")
            result.levels[(a, b)] = "?" if isinstance(level, Unavailable) else level_from_nvml(int(level))
    return result
