"""The report's topology section: for each results file that carries the topology read when its
run started (``topology``, :class:`gpuscope.telemetry.topology.Topology`), the GPU x GPU and
GPU x NIC matrix as ``nvidia-smi topo -m`` prints it with CPU and NUMA affinity, the GPUs and
NICs, each link's expected and present rate, and the links that fall short.

Findings come from one read (:func:`gpuscope.telemetry.topology_health.link_findings`): error
counters need two reads and are judged by ``gpuscope doctor``, a PCIe link below its maximum
generation only counts when its GPU was busy at the read, and the NUMA rule (about the process
that reads) is not applied to a file read elsewhere. Every name from outside (NIC and GPU names,
file labels) reaches the page through the report's escaping (:func:`escape_text`,
:func:`table_html`, the Markdown renderer's ``md_escape``), after :func:`safe_text`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpuscope.report.fmt import clean_text
from gpuscope.report.html_blocks import escape_text, table_html
from gpuscope.report.tables import Table
from gpuscope.schema.report import EmbeddedResults
from gpuscope.telemetry.topology import Topology, format_cpulist
from gpuscope.telemetry.topology_health import LinkFinding, gb, link_findings, link_rates
from gpuscope.telemetry.topology_render import LEGEND, matrix_rows

__all__ = ["TOPOLOGY_TITLE", "TopologyBlock", "topology_blocks", "topology_section_html", "topology_markdown_lines"]

TOPOLOGY_TITLE = "Topology"


@dataclass
class TopologyBlock:
    """One results file's topology as the section shows it."""

    label: str
    notes: list[str]
    matrix: Table
    devices: Table
    links: Table
    findings: list[LinkFinding]


def _affinity(topology: Topology) -> list[tuple[str, str]]:
    nodes = {node.node: node.cpus for node in topology.numa_nodes}
    out = [
        (format_cpulist(gpu.cpu_affinity) or "N/A", ",".join(str(n) for n in gpu.numa_nodes) or "N/A")
        for gpu in topology.gpus
    ]
    for nic in topology.nics:
        cpus = nodes.get(nic.numa_node, []) if nic.numa_node is not None else []
        out.append((format_cpulist(cpus) or "N/A", "N/A" if nic.numa_node is None else str(nic.numa_node)))
    return out


def _matrix(topology: Topology) -> Table:
    columns, rows = matrix_rows(topology)
    legend = "; ".join(f"{name} = {meaning}" for name, meaning in LEGEND)
    headers = ["", *columns, "CPU Affinity", "NUMA Affinity"]
    table = Table("topology-matrix", "Matrix (as nvidia-smi topo -m)", headers, note=legend)
    for row, (cpus, numa) in zip(rows, _affinity(topology), strict=False):
        table.add([*row, cpus, numa])
    return table


def _devices(topology: Topology) -> Table:
    table = Table("topology-devices", "GPUs and NICs", ["Device", "Name", "PCI", "NUMA", "Link", "State"])
    for gpu in topology.gpus:
        pcie = gpu.pcie
        now = f"x{pcie.width or '?'} Gen{pcie.generation or '?'}"
        link = f"PCIe {now} of x{pcie.max_width or '?'} Gen{pcie.max_generation or '?'}"
        if gpu.nvlinks:
            link += f", NVLink {sum(x.active for x in gpu.nvlinks)}/{len(gpu.nvlinks)} active"
        numa = ",".join(str(n) for n in gpu.numa_nodes) or "N/A"
        table.add([f"GPU{gpu.index}", gpu.name, gpu.pci_bus_id or "unknown", numa, link, ""])
    for number, nic in enumerate(topology.nics):
        rate = f"{nic.rate_bytes_per_s * 8 / 1e9:g} Gb/s" if nic.rate_bytes_per_s else "rate ?"
        numa = "N/A" if nic.numa_node is None else str(nic.numa_node)
        table.add([f"NIC{number}", nic.name, nic.pci_address or "unknown", numa, f"{nic.kind}, {rate}", nic.state])
    return table


def _names(subject: str, link: str) -> bool:
    """Whether a finding's ``subject`` is about ``link`` (``GPU2 NVLink``): the same, one of its
    links (``GPU5 NVLink 3``), or a pair it is an end of (``GPU2-GPU3 NVLink``)."""
    if subject == link or subject.startswith(link + " "):
        return True
    ends, _, kind = subject.partition(" ")
    head, _, link_kind = link.partition(" ")
    return "-" in ends and kind == link_kind and head in ends.split("-")


def _links(topology: Topology, findings: list[LinkFinding]) -> Table:
    short = {finding.subject for finding in findings}
    table = Table(
        "topology-links",
        "Links",
        ["Link", "State", "Present", "Expected", "Flag"],
        numeric={2, 3},
        note="One direction, GB = 1e9 bytes; present: as trained when the run started (not traffic).",
    )
    for rate in link_rates(topology):
        flagged = any(_names(subject, rate.subject) for subject in short)
        present, expected = gb(rate.present_bytes_per_s), gb(rate.expected_bytes_per_s)
        flag = "short" if flagged else ""
        table.add([rate.subject, rate.state, present, expected, flag], "low" if flagged else "")
    return table


def topology_blocks(results: Sequence[EmbeddedResults]) -> list[TopologyBlock]:
    """One block per results file with a topology, in file order."""
    blocks: list[TopologyBlock] = []
    for item in results:
        topology = getattr(item.document, "topology", None)
        if not isinstance(topology, Topology):
            continue
        notes = []
        if topology.simulated:
            notes.append(f"SIMULATED GPUs ({topology.simulated}), not real hardware")
        if topology.gpu_unavailable:
            notes.append(f"no GPUs: {topology.gpu_unavailable}")
        findings = link_findings(topology, process_cpus=set())
        blocks.append(
            TopologyBlock(
                label=clean_text(item.label or "", 200),
                notes=[clean_text(note, 400) for note in notes],
                matrix=_matrix(topology),
                devices=_devices(topology),
                links=_links(topology, findings),
                findings=findings,
            )
        )
    return blocks


_RULE = (
    "Read once, when the run started: error counters need two reads (gpuscope doctor); "
    "a PCIe link below its maximum generation counts only while its GPU was busy."
)


def topology_section_html(results: Sequence[EmbeddedResults]) -> str:
    """The section body as HTML; empty when no file has a topology."""
    parts: list[str] = []
    for block in topology_blocks(results):
        parts.append(f'<p class="meta">{escape_text(block.label)}</p>\n')
        parts.extend(f'<p class="note">{escape_text(note)}</p>\n' for note in block.notes)
        for table in (block.matrix, block.devices, block.links):
            parts.append(f'<p class="meta"><strong>{escape_text(table.title)}</strong></p>\n')
            parts.append(table_html(table))
        if block.findings:
            items = "".join(f"<li>{escape_text(finding.line)}</li>" for finding in block.findings)
            parts.append(f'<div class="warnings"><strong>Links that fall short</strong><ul>{items}</ul></div>\n')
        else:
            parts.append('<p class="empty">Every link at its expected state and rate.</p>\n')
        parts.append(f'<p class="note">{escape_text(_RULE)}</p>\n')
    return "".join(parts)


def topology_markdown_lines(
    results: Sequence[EmbeddedResults], md_escape: Callable[[object], str], md_table: Callable[[Table], str]
) -> list[str]:
    """The section as Markdown lines (names through the report's ``md_escape``, tables through
    its table renderer); empty when no file has a topology."""
    out: list[str] = []
    for block in topology_blocks(results):
        out.extend([f"_{md_escape(block.label)}_", ""])
        out.extend(f"_{md_escape(note)}_\n" for note in block.notes)
        for table in (block.matrix, block.devices, block.links):
            out.extend([f"**{md_escape(table.title)}**", "", md_table(table)])
        if block.findings:
            out.append("Links that fall short:")
            out.append("")
            out.extend(f"- {md_escape(finding.line)}" for finding in block.findings)
        else:
            out.append("Every link at its expected state and rate.")
        out.extend(["", f"_{md_escape(_RULE)}_", ""])
    return out
