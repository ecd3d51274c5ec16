"""How GPUs, CPUs, NUMA nodes and NICs are wired, as typed records (``gpuscope topo``).

The records are read by :func:`gpuscope.telemetry.topology_read.read_topology` (NVML through
:mod:`gpuscope.telemetry.nvml.topology`, the rest from sysfs through
:mod:`gpuscope.telemetry.topology_sysfs`), judged by :mod:`gpuscope.telemetry.topology_health`
and drawn by :mod:`gpuscope.telemetry.topology_render`. Rates are bytes/s in one direction
(GB = 1e9 bytes). Connection names are ``nvidia-smi topo -m``'s:

- ``X`` the device itself; ``NV#`` bonded NVLink links (through NVSwitch: the smaller of the
  two GPUs' switch links);
- ``PIX`` at most one PCIe switch; ``PXB`` several PCIe switches, no host bridge;
- ``PHB`` a PCIe host bridge (the CPU's root complex); ``NODE`` between host bridges of one
  NUMA node; ``SYS`` across NUMA nodes (QPI/UPI/Infinity Fabric); ``?`` not known.

This module is pure data and arithmetic (no NVML, no file access).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

__all__ = [
    "TOPOLOGY_SCHEMA_VERSION",
    "LEVELS",
    "NVML_LEVELS",
    "PCIE_LANE_BYTES_PER_S",
    "PcieLink",
    "NvLinkLink",
    "GpuNode",
    "GpuPair",
    "NumaNode",
    "NicPort",
    "Nic",
    "Topology",
    "pcie_bytes_per_s",
    "level_from_nvml",
    "level_from_paths",
    "parse_cpulist",
    "format_cpulist",
    "nvlink_between",
    "gpu_connection",
]

TOPOLOGY_SCHEMA_VERSION = 1

#: Connection names from nearest to farthest (``NV#`` sits before all of them).
LEVELS: tuple[str, ...] = ("X", "PIX", "PXB", "PHB", "NODE", "SYS")

#: nvmlGpuTopologyLevel_t -> connection name (nvml.h: INTERNAL 0, SINGLE 10, MULTIPLE 20,
#: HOSTBRIDGE 30, NODE 40, SYSTEM 50).
NVML_LEVELS: dict[int, str] = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}

#: PCIe data rate per lane per direction by generation: transfer rate x encoding / 8 bits.
#: Gen1-2: 2.5/5 GT/s with 8b/10b; Gen3-5: 8/16/32 GT/s with 128b/130b; Gen6: 64 GT/s, FLIT
#: mode 242/256. Packet headers are not subtracted (a x16 Gen5 link: 63.0 GB/s each way).
PCIE_LANE_BYTES_PER_S: dict[int, float] = {
    1: 2.5e9 * 8 / 10 / 8,
    2: 5.0e9 * 8 / 10 / 8,
    3: 8.0e9 * 128 / 130 / 8,
    4: 16.0e9 * 128 / 130 / 8,
    5: 32.0e9 * 128 / 130 / 8,
    6: 64.0e9 * 242 / 256 / 8,
}


class PcieLink(msgspec.Struct, kw_only=True):
    """A GPU's PCIe link: as trained now and the most the device and slot allow."""

    generation: int | None = None
    width: int | None = None
    max_generation: int | None = None
    max_width: int | None = None
    #: one direction, at the current generation and width
    current_bytes_per_s: float | None = None
    #: one direction, at the maximum generation and width (the link's expected rate)
    expected_bytes_per_s: float | None = None
    #: NVML's PCIe replay counter (link-level retransmissions since boot)
    replay_count: int | None = None


class NvLinkLink(msgspec.Struct, kw_only=True):
    """One NVLink link of a GPU and what is at its other end."""

    link: int
    active: bool
    #: NVLink generation (1-6), from nvmlDeviceGetNvLinkVersion's enum
    version: int | None = None
    #: data rate of this link, one direction (0 when the link is down)
    bytes_per_s: float | None = None
    remote_pci_bus_id: str | None = None
    #: ``gpu``, ``nvswitch``, ``cpu`` (IBM NPU) or ``unknown``
    remote_kind: str = "unknown"
    #: the NVML index of the GPU at the other end (``remote_kind`` gpu)
    remote_gpu: int | None = None
    crc_flit_errors: int | None = None
    crc_data_errors: int | None = None
    replay_errors: int | None = None
    recovery_errors: int | None = None


class GpuNode(msgspec.Struct, kw_only=True):
    """One GPU: where it sits (PCI, CPUs, NUMA) and its links."""

    index: int
    name: str
    uuid: str = ""
    pci_bus_id: str = ""
    #: logical CPUs near the GPU (nvmlDeviceGetCpuAffinity); empty when not known
    cpu_affinity: list[int] = msgspec.field(default_factory=list)
    #: NUMA nodes near the GPU (nvmlDeviceGetMemoryAffinity); empty when not known
    numa_nodes: list[int] = msgspec.field(default_factory=list)
    pcie: PcieLink = msgspec.field(default_factory=PcieLink)
    nvlinks: list[NvLinkLink] = msgspec.field(default_factory=list)
    #: NVML "GPU utilization" when read (a PCIe link may rest at a low generation while idle)
    utilization_percent: float | None = None
    #: PCI path in sysfs, host bridge first (``pci0000:00``, ``0000:00:01.0``, ...); empty when not found
    pci_path: list[str] = msgspec.field(default_factory=list)
    #: what could not be read, one line each
    unavailable: list[str] = msgspec.field(default_factory=list)

    @property
    def nvlink_expected_bytes_per_s(self) -> float | None:
        """NVLink data rate of the links present, one direction (version rate x links)."""
        rates = [link.bytes_per_s for link in self.nvlinks if link.active and link.bytes_per_s]
        if not rates:
            return None
        per_link = max(rates)
        return per_link * len(self.nvlinks)

    @property
    def nvlink_active_bytes_per_s(self) -> float | None:
        """NVLink data rate of the active links, one direction (version rate x active links)."""
        rates = [link.bytes_per_s for link in self.nvlinks if link.active and link.bytes_per_s]
        return sum(rates) if rates else None


class GpuPair(msgspec.Struct, kw_only=True):
    """How two GPUs reach each other: the PCIe common ancestor and the NVLink links between them."""

    a: int
    b: int
    #: PCIe level (``PIX`` ... ``SYS``, ``?``), from nvmlDeviceGetTopologyCommonAncestor
    pcie_level: str
    #: active NVLink links joining them (direct, or through NVSwitch), 0: none
    nvlink_links: int = 0
    via_nvswitch: bool = False
    #: what ``nvidia-smi topo -m`` prints: ``NV#`` when NVLink joins them, else the PCIe level
    connection: str = "?"
    #: what the pair should carry, one direction: the NVLink links present (active or not) x the
    #: per-link rate, else the slower PCIe link at its maximum; None: not known
    expected_bytes_per_s: float | None = None


class NumaNode(msgspec.Struct, kw_only=True):
    """A NUMA node of the host and its logical CPUs (sysfs ``devices/system/node``)."""

    node: int
    cpus: list[int] = msgspec.field(default_factory=list)


class NicPort(msgspec.Struct, kw_only=True):
    """One port of an InfiniBand/RoCE HCA (sysfs ``class/infiniband/*/ports/*``)."""

    port: int
    state: str
    active: bool
    #: the port's rate, one direction (``rate``: "200 Gb/sec (4X HDR)" -> 25e9)
    rate_bytes_per_s: float | None = None
    #: ``InfiniBand`` or ``Ethernet`` (RoCE)
    link_layer: str = ""


class Nic(msgspec.Struct, kw_only=True):
    """A network device with a PCI function: an Ethernet NIC or an InfiniBand/RoCE HCA."""

    name: str
    #: ``ethernet``, ``infiniband`` or ``roce``
    kind: str
    pci_address: str = ""
    numa_node: int | None = None
    pci_path: list[str] = msgspec.field(default_factory=list)
    #: operstate of an Ethernet interface (``up``, ``down``...), or the best port's state of an HCA
    state: str = ""
    #: Ethernet: ``speed`` (Mb/s) as bytes/s one direction; HCA: the fastest active port's rate
    rate_bytes_per_s: float | None = None
    ports: list[NicPort] = msgspec.field(default_factory=list)
    #: network interfaces of an HCA (RoCE) or the interface itself
    netdevs: list[str] = msgspec.field(default_factory=list)


class Topology(msgspec.Struct, kw_only=True):
    """The node's wiring: GPUs and their pairs, NUMA nodes, NICs and how each GPU reaches each NIC."""

    schema_version: int = TOPOLOGY_SCHEMA_VERSION
    gpus: list[GpuNode] = msgspec.field(default_factory=list)
    #: every unordered GPU pair (a < b)
    gpu_pairs: list[GpuPair] = msgspec.field(default_factory=list)
    numa_nodes: list[NumaNode] = msgspec.field(default_factory=list)
    nics: list[Nic] = msgspec.field(default_factory=list)
    #: ``gpu_nic[g][n]``: how GPU ``g`` reaches NIC ``n`` (``PIX`` ... ``SYS``, ``?``)
    gpu_nic: list[list[str]] = msgspec.field(default_factory=list)
    #: the sysfs root read (``--sysfs``)
    sysfs_root: str = "/sys"
    #: why the GPU side is missing (no driver...), or None
    gpu_unavailable: str | None = None
    #: the simulated scenario, when the GPUs are the fake NVML's
    simulated: str | None = None

    def pair(self, a: int, b: int) -> GpuPair | None:
        """The pair of GPUs ``a`` and ``b`` (either order), or None."""
        low, high = min(a, b), max(a, b)
        return next((p for p in self.gpu_pairs if p.a == low and p.b == high), None)


def pcie_bytes_per_s(generation: int | None, width: int | None) -> float | None:
    """One direction of a PCIe link of ``generation`` and ``width`` lanes; None when unknown."""
    if generation is None or width is None or width <= 0:
        return None
    lane = PCIE_LANE_BYTES_PER_S.get(int(generation))
    return None if lane is None else lane * int(width)


def level_from_nvml(value: int) -> str:
    """An nvmlGpuTopologyLevel_t value as a connection name (``?`` for an unknown value)."""
    return NVML_LEVELS.get(int(value), "?")


def level_from_paths(a: Sequence[str], b: Sequence[str], numa_a: int | None = None, numa_b: int | None = None) -> str:
    """How two PCI functions reach each other, from their sysfs paths (host bridge first, the
    function itself last), as ``nvidia-smi topo -m`` names it.

    Different host bridges: ``NODE`` on one NUMA node, ``SYS`` across nodes (``?`` when a node
    is unknown). Same host bridge, different root ports: ``PHB``. Below one root port: ``PIX``
    when at most one more bridge lies between the deepest common bridge and each function (one
    PCIe switch, or a multi-function device), else ``PXB``.
    """
    if not a or not b:
        return "?"
    if a[0] != b[0]:
        if numa_a is None or numa_b is None or numa_a < 0 or numa_b < 0:
            return "?"
        return "NODE" if numa_a == numa_b else "SYS"
    common = 0
    for left, right in zip(a[1:], b[1:], strict=False):
        if left != right:
            break
        common += 1
    if common == 0:
        return "PHB"
    # components below the common prefix, minus the two functions themselves: bridges crossed
    crossed = (len(a) - 1 - common - 1) + (len(b) - 1 - common - 1)
    return "PIX" if crossed <= 2 else "PXB"


def parse_cpulist(text: str) -> list[int]:
    """A kernel cpulist (``0-3,8,10-11``) as sorted CPU numbers. Raises ValueError when malformed."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        low, sep, high = part.partition("-")
        start, end = int(low), int(high) if sep else int(low)
        if end < start or end - start > 1 << 16:
            raise ValueError(f"bad CPU range {part!r}")
        cpus.update(range(start, end + 1))
    return sorted(cpus)


def format_cpulist(cpus: Iterable[int]) -> str:
    """CPU numbers as a kernel cpulist (``0-3,8``); ``""`` for none."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    index = 0
    while index < len(ordered):
        end = index
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[end] + 1:
            end += 1
        low, high = ordered[index], ordered[end]
        parts.append(str(low) if low == high else f"{low}-{high}")
        index = end + 1
    return ",".join(parts)


def nvlink_between(a: GpuNode, b: GpuNode) -> tuple[int, bool]:
    """(active NVLink links joining ``a`` and ``b``, whether through NVSwitch).

    Direct links: ``a``'s active links whose far end is ``b``. Through NVSwitch (when there are
    no direct ones): the smaller of the two GPUs' active switch links, as ``nvidia-smi topo -m``
    prints NV18 for every pair of an HGX H100.
    """
    direct = sum(1 for link in a.nvlinks if link.active and link.remote_kind == "gpu" and link.remote_gpu == b.index)
    if direct:
        return direct, False
    to_switch_a = sum(1 for link in a.nvlinks if link.active and link.remote_kind == "nvswitch")
    to_switch_b = sum(1 for link in b.nvlinks if link.active and link.remote_kind == "nvswitch")
    if to_switch_a and to_switch_b:
        return min(to_switch_a, to_switch_b), True
    return 0, False


def gpu_connection(a: GpuNode, b: GpuNode, pcie_level: str) -> GpuPair:
    """The :class:`GpuPair` of ``a`` and ``b`` (``a.index < b.index``) given their PCIe level."""
    links, switched = nvlink_between(a, b)
    expected: float | None
    if links:
        rates = [link.bytes_per_s for link in a.nvlinks if link.active and link.bytes_per_s]
        if switched:
            present = min(sum(1 for link in gpu.nvlinks if link.remote_kind == "nvswitch") for gpu in (a, b))
        else:
            present = sum(1 for link in a.nvlinks if link.remote_kind == "gpu" and link.remote_gpu == b.index)
        expected = max(rates) * max(present, links) if rates else None
        connection = f"NV{links}"
    else:
        ends = [a.pcie.expected_bytes_per_s, b.pcie.expected_bytes_per_s]
        known = [rate for rate in ends if rate]
        expected = min(known) if len(known) == 2 else None
        connection = pcie_level
    return GpuPair(
        a=a.index,
        b=b.index,
        pcie_level=pcie_level,
        nvlink_links=links,
        via_nvswitch=switched,
        connection=connection,
        expected_bytes_per_s=expected,
    )
