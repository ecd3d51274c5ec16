"""``gpuscope topo`` as text: the matrix as ``nvidia-smi topo -m`` users read it (GPU x GPU and
GPU x NIC with NV#/PIX/PXB/PHB/NODE/SYS, CPU and NUMA affinity), the legends, and each link's
expected and present rate. Every line fits ``width`` columns without cutting a cell: when the
affinity columns do not fit they move to a table of their own, and NIC columns that do not fit
go to a second matrix. Names from outside (NICs, GPUs) pass through :func:`safe_text`.
"""

from __future__ import annotations

import textwrap

from gpuscope.telemetry.topology import Topology, format_cpulist, level_from_paths
from gpuscope.telemetry.topology_health import LinkFinding, gb, link_rates
from gpuscope.textsafe import safe_text

__all__ = ["render_topology", "matrix_rows", "LEGEND"]

LEGEND: tuple[tuple[str, str], ...] = (
    ("X", "self"),
    ("SYS", "through PCIe and the interconnect between NUMA nodes (QPI/UPI/Infinity Fabric)"),
    ("NODE", "through PCIe and the interconnect between host bridges of one NUMA node"),
    ("PHB", "through PCIe and a PCIe host bridge (typically the CPU)"),
    ("PXB", "through several PCIe bridges, without a host bridge"),
    ("PIX", "through at most one PCIe bridge (one switch)"),
    ("NV#", "through a bonded set of # NVLinks"),
    ("?", "not known"),
)


def _labels(topology: Topology) -> tuple[list[str], list[str]]:
    return [f"GPU{gpu.index}" for gpu in topology.gpus], [f"NIC{number}" for number in range(len(topology.nics))]


def matrix_rows(topology: Topology) -> tuple[list[str], list[list[str]]]:
    """(column labels, rows): each row is its label then one cell per column (GPUs, then NICs)."""
    gpu_labels, nic_labels = _labels(topology)
    columns = gpu_labels + nic_labels
    rows: list[list[str]] = []
    for g, gpu in enumerate(topology.gpus):
        cells = [gpu_labels[g]]
        for other in topology.gpus:
            if other.index == gpu.index:
                cells.append("X")
            else:
                pair = topology.pair(gpu.index, other.index)
                cells.append(pair.connection if pair is not None else "?")
        cells.extend(topology.gpu_nic[g][n] if g < len(topology.gpu_nic) else "?" for n in range(len(nic_labels)))
        rows.append(cells)
    for n, nic in enumerate(topology.nics):
        cells = [nic_labels[n]]
        cells.extend(topology.gpu_nic[g][n] if g < len(topology.gpu_nic) else "?" for g in range(len(gpu_labels)))
        for m, peer in enumerate(topology.nics):
            cells.append(
                "X" if m == n else level_from_paths(nic.pci_path, peer.pci_path, nic.numa_node, peer.numa_node)
            )
        rows.append(cells)
    return columns, rows


def _affinity(topology: Topology) -> list[tuple[str, str]]:
    """(CPU affinity, NUMA affinity) of each GPU row; NICs: their node's CPUs and the node."""
    nodes = {node.node: node.cpus for node in topology.numa_nodes}
    out = [
        (format_cpulist(gpu.cpu_affinity) or "N/A", ",".join(str(n) for n in gpu.numa_nodes) or "N/A")
        for gpu in topology.gpus
    ]
    for nic in topology.nics:
        cpus = nodes.get(nic.numa_node, []) if nic.numa_node is not None else []
        out.append((format_cpulist(cpus) or "N/A", "N/A" if nic.numa_node is None else str(nic.numa_node)))
    return out


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in [header, *rows]]


def _matrix_blocks(topology: Topology, width: int) -> list[str]:
    columns, rows = matrix_rows(topology)
    affinity = _affinity(topology)
    label_width = max([len(row[0]) for row in rows] + [0])
    cell_width = max([len(cell) for row in rows for cell in row[1:]] + [len(c) for c in columns] + [1])
    step = cell_width + 2

    def fits(count: int, extra: int) -> bool:
        return label_width + 2 + count * step + extra <= width

    cpu_width = max([len("CPU Affinity")] + [len(cpu) for cpu, _ in affinity])
    numa_width = max([len("NUMA Affinity")] + [len(numa) for _, numa in affinity])
    affinity_width = cpu_width + 2 + numa_width
    inline = fits(len(columns), affinity_width)
    per_block = len(columns)
    while per_block > 1 and not fits(per_block, affinity_width if inline else 0):
        per_block -= 1
    lines: list[str] = []
    for start in range(0, len(columns), per_block):
        chunk = range(start, min(start + per_block, len(columns)))
        header = [""] + [columns[i] for i in chunk]
        body = [[row[0]] + [row[1 + i] for i in chunk] for row in rows]
        if inline:
            header += ["CPU Affinity", "NUMA Affinity"]
            body = [cells + list(affinity[r]) for r, cells in enumerate(body)]
        widths = [label_width] + [cell_width] * len(chunk) + ([cpu_width, numa_width] if inline else [])
        for cells in [header, *body]:
            lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(cells)).rstrip())
        lines.append("")
    if not inline:
        lines.extend(
            _table(["", "CPU Affinity", "NUMA Affinity"], [[rows[r][0], *affinity[r]] for r in range(len(rows))])
        )
        lines.append("")
    return lines


def _wrap(text: str, width: int, indent: str) -> list[str]:
    # textwrap keeps the spaces inside a line (the legend's aligned "=") and the paragraph's lead
    return textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)


def render_topology(topology: Topology, *, width: int = 80, findings: list[LinkFinding] | None = None) -> str:
    """The whole ``gpuscope topo`` text (no trailing newline)."""
    lines: list[str] = []
    if topology.simulated:
        lines.extend(_wrap(safe_text(f"SIMULATED GPUs ({topology.simulated}), not real hardware"), width, "  "))
    if topology.gpu_unavailable:
        lines.extend(_wrap(safe_text(f"no GPUs: {topology.gpu_unavailable}"), width, "  "))
    if topology.gpus or topology.nics:
        lines.extend(_matrix_blocks(topology, width))
    lines.append("Legend:")
    for name, meaning in LEGEND:
        lines.extend(_wrap(f"  {name:<4} = {meaning}", width, " " * 9))
    if topology.gpus:
        lines.append("")
        lines.append("GPUs:")
        for gpu in topology.gpus:
            lines.extend(
                _wrap(safe_text(f"  GPU{gpu.index}: {gpu.name} ({gpu.pci_bus_id or 'bus unknown'})"), width, "    ")
            )
    if topology.nics:
        lines.append("")
        lines.append("NIC Legend:")
        for number, nic in enumerate(topology.nics):
            rate = f"{nic.rate_bytes_per_s * 8 / 1e9:g} Gb/s" if nic.rate_bytes_per_s else "rate ?"
            node = "?" if nic.numa_node is None else str(nic.numa_node)
            text = f"  NIC{number}: {nic.name} ({nic.kind}, {nic.pci_address}, NUMA {node}, {rate}, {nic.state})"
            lines.extend(_wrap(safe_text(text), width, "    "))
    rates = link_rates(topology)
    if rates:
        short = {finding.subject for finding in findings or []}
        lines.append("")
        lines.append("Links (one direction; !! falls short, see `gpuscope doctor`):")
        body = [
            [
                "!!" if rate.subject in short else "",
                safe_text(rate.subject),
                safe_text(rate.state),
                gb(rate.present_bytes_per_s),
                "of",
                gb(rate.expected_bytes_per_s),
            ]
            for rate in rates
        ]
        table = _table(["", "link", "state", "now", "", "expected"], body)
        lines.extend("  " + line if len(line) + 2 <= width else line for line in table)
    return "\n".join(line.rstrip() for line in lines).rstrip()
