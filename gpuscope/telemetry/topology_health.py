"""Link health: what each link should carry, and the links whose present state falls short.

Expected rates (one direction, GB = 1e9 bytes): a GPU's PCIe link at its maximum generation
and width (what device and slot allow, nvmlDeviceGetMaxPcieLinkGeneration/Width); its NVLink
as the version's per-link rate x the links present; a NIC's reported rate (Ethernet ``speed``,
an InfiniBand port's ``rate``).

Findings (:func:`link_findings`), one per link, each a rule stated here:

- ``pcie_width``: a PCIe link trained narrower than its maximum (always: width does not drop to
  save power);
- ``pcie_generation``: trained below its maximum generation while the GPU is busy (utilization
  at least :data:`BUSY_PERCENT`; an idle GPU rests at a low generation on purpose);
- ``nvlink_down``: NVLink links present but not active, one finding per GPU pair (both ends of a
  bridge) or per GPU (links to an NVSwitch);
- ``nvlink_errors`` / ``pcie_replays``: an NVLink CRC, replay or recovery counter, or the PCIe
  replay counter, rising between two reads (counters since boot are not judged by their size);
- ``ib_port``: an InfiniBand/RoCE port not ACTIVE, or active below the fastest active port of the
  node's HCAs (the fabric is expected to be uniform);
- ``numa_far``: a GPU or NIC whose CPUs are none of the CPUs this process may use, judged only
  when the process is confined to part of the host (cpuset, taskset, numactl) and the device's
  CPUs are CPUs of this host.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import msgspec

from gpuscope.telemetry.topology import GpuNode, Nic, Topology, format_cpulist

__all__ = ["BUSY_PERCENT", "LinkFinding", "LinkRate", "link_findings", "link_rates", "gb"]

#: A GPU at or above this utilization is busy: its PCIe link should run at its maximum generation.
BUSY_PERCENT = 20.0
_COUNTERS = {
    "crc_flit_errors": "CRC flit",
    "crc_data_errors": "CRC data",
    "replay_errors": "replay",
    "recovery_errors": "recovery",
}


class LinkFinding(msgspec.Struct, kw_only=True):
    """One link whose present state falls short. ``line`` is what ``gpuscope doctor`` prints."""

    kind: str
    subject: str
    line: str
    expected_bytes_per_s: float | None = None
    present_bytes_per_s: float | None = None


class LinkRate(msgspec.Struct, kw_only=True):
    """A link's expected rate and its present one (one direction, bytes/s; None: not known)."""

    subject: str
    kind: str
    expected_bytes_per_s: float | None
    present_bytes_per_s: float | None
    state: str


def gb(value: float | None) -> str:
    """Bytes/s as ``63.0 GB/s`` (``?`` when unknown)."""
    if value is None:
        return "?"
    return f"{value / 1e9:.0f} GB/s" if value >= 100e9 else f"{value / 1e9:.1f} GB/s"


def _pcie_text(generation: int | None, width: int | None) -> str:
    return f"x{width if width is not None else '?'} Gen{generation if generation is not None else '?'}"


def link_rates(topology: Topology) -> list[LinkRate]:
    """Every GPU's PCIe and NVLink and every NIC, with expected and present rates."""
    rates: list[LinkRate] = []
    for gpu in topology.gpus:
        pcie = gpu.pcie
        rates.append(
            LinkRate(
                subject=f"GPU{gpu.index} PCIe",
                kind="pcie",
                expected_bytes_per_s=pcie.expected_bytes_per_s,
                present_bytes_per_s=pcie.current_bytes_per_s,
                state=f"{_pcie_text(pcie.generation, pcie.width)} of {_pcie_text(pcie.max_generation, pcie.max_width)}",
            )
        )
        if gpu.nvlinks:
            active = sum(link.active for link in gpu.nvlinks)
            version = next((link.version for link in gpu.nvlinks if link.version), None)
            rates.append(
                LinkRate(
                    subject=f"GPU{gpu.index} NVLink",
                    kind="nvlink",
                    expected_bytes_per_s=gpu.nvlink_expected_bytes_per_s,
                    present_bytes_per_s=gpu.nvlink_active_bytes_per_s,
                    state=f"{active} of {len(gpu.nvlinks)} links" + (f", NVLink {version}" if version else ""),
                )
            )
    for nic in topology.nics:
        rates.append(
            LinkRate(
                subject=nic.name,
                kind=nic.kind,
                expected_bytes_per_s=nic.rate_bytes_per_s,
                present_bytes_per_s=nic.rate_bytes_per_s if _nic_up(nic) else 0.0,
                state=nic.state,
            )
        )
    return rates


def _nic_up(nic: Nic) -> bool:
    if nic.kind == "ethernet":
        return nic.state.lower() == "up"
    return any(port.active for port in nic.ports)


def _pcie_findings(gpu: GpuNode, busy_percent: float) -> list[LinkFinding]:
    pcie = gpu.pcie
    narrow = pcie.width is not None and pcie.max_width is not None and pcie.width < pcie.max_width
    busy = gpu.utilization_percent is not None and gpu.utilization_percent >= busy_percent
    slow = pcie.generation is not None and pcie.max_generation is not None and pcie.generation < pcie.max_generation
    if not narrow and not (slow and busy):
        return []
    why = "" if not slow or not busy else f" while busy ({gpu.utilization_percent:.0f}% utilization)"
    line = (
        f"GPU {gpu.index} PCIe trained at {_pcie_text(pcie.generation, pcie.width)} under its "
        f"{_pcie_text(pcie.max_generation, pcie.max_width)} maximum{why}: "
        f"{gb(pcie.current_bytes_per_s)} of {gb(pcie.expected_bytes_per_s)} each way"
    )
    return [
        LinkFinding(
            kind="pcie_width" if narrow else "pcie_generation",
            subject=f"GPU{gpu.index} PCIe",
            line=line,
            expected_bytes_per_s=pcie.expected_bytes_per_s,
            present_bytes_per_s=pcie.current_bytes_per_s,
        )
    ]


def _nvlink_down(topology: Topology) -> list[LinkFinding]:
    findings: list[LinkFinding] = []
    by_pair: dict[tuple[int, int], list[tuple[int, int]]] = {}  # pair -> (gpu, link) down
    for gpu in topology.gpus:
        down = [link for link in gpu.nvlinks if not link.active]
        if not down:
            continue
        to_gpu = [link for link in down if link.remote_gpu is not None]
        for link in to_gpu:
            assert link.remote_gpu is not None
            pair = (min(gpu.index, link.remote_gpu), max(gpu.index, link.remote_gpu))
            by_pair.setdefault(pair, []).append((gpu.index, link.link))
        others = [link for link in down if link.remote_gpu is None]
        if others:
            active = sum(link.active for link in gpu.nvlinks)
            names = ", ".join(str(link.link) for link in others)
            findings.append(
                LinkFinding(
                    kind="nvlink_down",
                    subject=f"GPU{gpu.index} NVLink",
                    line=f"GPU {gpu.index} NVLink link(s) {names} down: {active} of {len(gpu.nvlinks)} links active, "
                    f"{gb(gpu.nvlink_active_bytes_per_s)} of {gb(gpu.nvlink_expected_bytes_per_s)} each way",
                    expected_bytes_per_s=gpu.nvlink_expected_bytes_per_s,
                    present_bytes_per_s=gpu.nvlink_active_bytes_per_s,
                )
            )
    gpus = {gpu.index: gpu for gpu in topology.gpus}
    for (a, b), ends_down in sorted(by_pair.items()):
        first = gpus[a]
        joined = [link for link in first.nvlinks if link.remote_gpu == b]
        active = sum(link.active for link in joined)
        per_link = max((link.bytes_per_s or 0.0 for link in first.nvlinks if link.active), default=0.0) or None
        expected = per_link * len(joined) if per_link else None
        present = per_link * active if per_link else None
        ends = ", ".join(f"GPU {end} link {number}" for end, number in ends_down)
        findings.append(
            LinkFinding(
                kind="nvlink_down",
                subject=f"GPU{a}-GPU{b} NVLink",
                line=f"NVLink GPU {a} - GPU {b}: {active} of {len(joined)} links active (down: {ends}), "
                f"{gb(present)} of {gb(expected)} each way",
                expected_bytes_per_s=expected,
                present_bytes_per_s=present,
            )
        )
    return findings


def _rising(before: Topology, after: Topology, window_s: float | None) -> list[LinkFinding]:
    findings: list[LinkFinding] = []
    earlier = {gpu.index: gpu for gpu in before.gpus}
    during = f" in {window_s:.2g} s" if window_s else ""
    for gpu in after.gpus:
        old = earlier.get(gpu.index)
        if old is None:
            continue
        old_links = {link.link: link for link in old.nvlinks}
        for link in gpu.nvlinks:
            previous = old_links.get(link.link)
            if previous is None:
                continue
            grown = []
            for name, label in _COUNTERS.items():
                now, then = getattr(link, name), getattr(previous, name)
                if now is not None and then is not None and now > then:
                    grown.append(f"{label} +{now - then}")
            if grown:
                findings.append(
                    LinkFinding(
                        kind="nvlink_errors",
                        subject=f"GPU{gpu.index} NVLink {link.link}",
                        line=f"GPU {gpu.index} NVLink link {link.link}: "
                        f"error counters rising ({', '.join(grown)}{during})",
                    )
                )
        now_replays, then_replays = gpu.pcie.replay_count, old.pcie.replay_count
        if now_replays is not None and then_replays is not None and now_replays > then_replays:
            findings.append(
                LinkFinding(
                    kind="pcie_replays",
                    subject=f"GPU{gpu.index} PCIe",
                    line=f"GPU {gpu.index} PCIe replay counter rising (+{now_replays - then_replays}{during}): "
                    "the link retransmits; check the slot, riser and cabling",
                )
            )
    return findings


def _ib_ports(nics: Iterable[Nic]) -> list[LinkFinding]:
    hcas = [nic for nic in nics if nic.kind in ("infiniband", "roce")]
    fastest = max(
        (port.rate_bytes_per_s for nic in hcas for port in nic.ports if port.active and port.rate_bytes_per_s),
        default=None,
    )
    findings: list[LinkFinding] = []
    for nic in hcas:
        for port in nic.ports:
            subject = f"{nic.name} port {port.port}"
            if not port.active:
                findings.append(
                    LinkFinding(
                        kind="ib_port",
                        subject=subject,
                        line=f"{nic.name} port {port.port} not active (state {port.state})",
                        expected_bytes_per_s=port.rate_bytes_per_s,
                        present_bytes_per_s=0.0,
                    )
                )
            elif fastest and port.rate_bytes_per_s and port.rate_bytes_per_s < fastest:
                findings.append(
                    LinkFinding(
                        kind="ib_port",
                        subject=subject,
                        line=f"{nic.name} port {port.port} active at {port.rate_bytes_per_s * 8 / 1e9:.0f} Gb/s, "
                        f"below the {fastest * 8 / 1e9:.0f} Gb/s of the node's fastest port",
                        expected_bytes_per_s=fastest,
                        present_bytes_per_s=port.rate_bytes_per_s,
                    )
                )
    return findings


def _numa_far(topology: Topology, process_cpus: set[int] | None) -> list[LinkFinding]:
    host_cpus = {cpu for node in topology.numa_nodes for cpu in node.cpus} or set(range(os.cpu_count() or 1))
    if process_cpus is None:
        try:
            process_cpus = set(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            return []
        if process_cpus >= set(range(os.cpu_count() or 1)):
            return []  # not confined: any CPU may feed any device
    if not process_cpus or process_cpus >= host_cpus:
        return []
    allowed = format_cpulist(process_cpus)
    nodes = {node.node: set(node.cpus) for node in topology.numa_nodes}
    findings: list[LinkFinding] = []
    for gpu in topology.gpus:
        cpus = set(gpu.cpu_affinity)
        if cpus and cpus <= host_cpus and not cpus & process_cpus:
            findings.append(
                LinkFinding(
                    kind="numa_far",
                    subject=f"GPU{gpu.index}",
                    line=f"GPU {gpu.index} is near CPUs {format_cpulist(cpus)}, none of which this process may use "
                    f"({allowed}): what feeds it crosses the CPU interconnect",
                )
            )
    for nic in topology.nics:
        cpus = nodes.get(nic.numa_node, set()) if nic.numa_node is not None else set()
        if cpus and cpus <= host_cpus and not cpus & process_cpus:
            findings.append(
                LinkFinding(
                    kind="numa_far",
                    subject=nic.name,
                    line=f"{nic.name} is on NUMA node {nic.numa_node} (CPUs {format_cpulist(cpus)}), none of which "
                    f"this process may use ({allowed})",
                )
            )
    return findings


def link_findings(
    before: Topology,
    after: Topology | None = None,
    *,
    window_s: float | None = None,
    busy_percent: float = BUSY_PERCENT,
    process_cpus: set[int] | None = None,
) -> list[LinkFinding]:
    """The links of ``after`` (or ``before``) that fall short, by the rules of this module;
    counters are judged rising between ``before`` and ``after`` (``window_s`` apart), not at all
    with one read. ``process_cpus``: the CPUs the fed work may use (default: this process's)."""
    now = after if after is not None else before
    findings: list[LinkFinding] = []
    for gpu in now.gpus:
        findings.extend(_pcie_findings(gpu, busy_percent))
    findings.extend(_nvlink_down(now))
    if after is not None:
        findings.extend(_rising(before, after, window_s))
    findings.extend(_ib_ports(now.nics))
    findings.extend(_numa_far(now, process_cpus))
    return findings
