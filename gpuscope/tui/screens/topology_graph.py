"""The topology screen's drawing: CPUs/NUMA nodes, PCIe switches or host bridges, GPUs and NICs
as a tree (what hangs off what), the NVLink fabric beside it, and on each link its live rate
against its expected rate (:func:`gpuscope.telemetry.topology_health.link_rates`). No Textual:
the screen puts the Rich text in a widget.

Live rates come from the sample the TUI already polls: a GPU's PCIe and NVLink bytes/s (the
busier direction, against the one-direction expected rate), a NIC's rx/tx and an HCA's port
counters. The drawing picks the most detailed of three forms that fits the height (a line per
device with names and bars; a line per device without; a line per switch), and puts NUMA
nodes side by side when the width allows. Names from outside (GPU models, NIC names) pass
through :func:`gpuscope.textsafe.safe_text`; Rich markup in them is never interpreted (plain
:class:`rich.text.Text` appends).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field

from rich.text import Text

from gpuscope.schema.core import finite_or_none
from gpuscope.telemetry.records import GpuSample, Sample
from gpuscope.telemetry.topology import GpuNode, Nic, Topology, format_cpulist
from gpuscope.telemetry.topology_health import LinkFinding
from gpuscope.telemetry.topology_read import gpu_numa_node
from gpuscope.telemetry.topology_render import matrix_rows
from gpuscope.textsafe import safe_text
from gpuscope.tui.format import bar

__all__ = ["Branch", "NodeBlock", "LiveRates", "live_rates", "layout_blocks", "draw_topology", "DETAILS"]

#: Forms of the drawing, most detailed first.
DETAILS = ("full", "compact", "dense")
_SHORT = "red bold"
_NAME = "bold"
_DIM = "dim"


@dataclass
class Branch:
    """What hangs off one PCIe switch (or one root port of a host bridge) of a NUMA node."""

    label: str
    gpus: list[GpuNode] = field(default_factory=list)
    nics: list[int] = field(default_factory=list)  # indices into Topology.nics


@dataclass
class NodeBlock:
    """One NUMA node (``numa`` None: not known) and its CPUs and branches."""

    numa: int | None
    cpus: list[int]
    branches: list[Branch] = field(default_factory=list)


@dataclass
class LiveRates:
    """Present rates from a sample, bytes/s one direction (the busier one); missing: not known."""

    pcie: dict[int, float] = field(default_factory=dict)
    nvlink: dict[int, float] = field(default_factory=dict)
    nic: dict[str, float] = field(default_factory=dict)


def _busier(*values: object) -> float | None:
    known = [v for v in (finite_or_none(value) for value in values) if v is not None]
    return max(known) if known else None


def live_rates(sample: Sample | None) -> LiveRates:
    """The rates of ``sample`` by GPU index (whole GPUs only) and NIC name (HCAs: all ports)."""
    rates = LiveRates()
    if sample is None:
        return rates
    for gpu in sample.gpus:
        if gpu.mig_parent_index is not None:
            continue
        _gpu_rates(rates, gpu)
    for nic in sample.host.nics:
        value = _busier(nic.rx_bytes_per_s, nic.tx_bytes_per_s)
        if value is not None:
            rates.nic[nic.name] = value
    hcas: dict[str, tuple[float, float]] = {}
    for port in sample.host.infiniband_ports:
        rx, tx = finite_or_none(port.rx_bytes_per_s), finite_or_none(port.tx_bytes_per_s)
        old = hcas.get(port.device, (0.0, 0.0))
        hcas[port.device] = (old[0] + (rx or 0.0), old[1] + (tx or 0.0))
    for device, (rx, tx) in hcas.items():
        rates.nic[device] = max(rx, tx)
    return rates


def _gpu_rates(rates: LiveRates, gpu: GpuSample) -> None:
    pcie = _busier(gpu.pcie_tx_bytes_per_s, gpu.pcie_rx_bytes_per_s)
    if pcie is not None:
        rates.pcie[gpu.index] = pcie
    nvlink = _busier(gpu.nvlink_tx_bytes_per_s, gpu.nvlink_rx_bytes_per_s)
    if nvlink is not None:
        rates.nvlink[gpu.index] = nvlink


# --- structure -------------------------------------------------------------------------------


def _groups(topology: Topology) -> list[list[GpuNode]]:
    """GPUs under one PCIe switch tree (PIX/PXB pairs joined), in index order."""
    parent = {gpu.index: gpu.index for gpu in topology.gpus}

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    for pair in topology.gpu_pairs:
        if pair.pcie_level in ("PIX", "PXB") and pair.a in parent and pair.b in parent:
            parent[root(pair.b)] = root(pair.a)
    groups: dict[int, list[GpuNode]] = {}
    for gpu in topology.gpus:
        groups.setdefault(root(gpu.index), []).append(gpu)
    return list(groups.values())


def layout_blocks(topology: Topology) -> list[NodeBlock]:
    """NUMA nodes (sysfs's, then any a device names, unknown last), each with its branches: GPUs
    sharing a PCIe switch in one branch, a NIC under a GPU's switch (PIX/PXB) in that branch,
    any other NIC in a branch of its own."""
    cpus = {node.node: node.cpus for node in topology.numa_nodes}
    blocks: dict[int | None, NodeBlock] = {node: NodeBlock(node, list(c)) for node, c in sorted(cpus.items())}

    def block(numa: int | None, near_cpus: Iterable[int] = ()) -> NodeBlock:
        if numa not in blocks:
            blocks[numa] = NodeBlock(numa, sorted(set(near_cpus)))
        return blocks[numa]

    branch_of_gpu: dict[int, Branch] = {}
    for group in _groups(topology):
        first = group[0]
        label = "PCIe switch" if len(group) > 1 else "root port"
        branch = Branch(label, gpus=group)
        block(gpu_numa_node(first), first.cpu_affinity).branches.append(branch)
        for gpu in group:
            branch_of_gpu[gpu.index] = branch
    for number, nic in enumerate(topology.nics):
        near = next(
            (
                gpu.index
                for g, gpu in enumerate(topology.gpus)
                if g < len(topology.gpu_nic)
                and number < len(topology.gpu_nic[g])
                and topology.gpu_nic[g][number] in ("PIX", "PXB")
            ),
            None,
        )
        if near is not None and near in branch_of_gpu:
            branch_of_gpu[near].nics.append(number)
        else:
            block(nic.numa_node).branches.append(Branch("root port", nics=[number]))
    ordered = sorted(blocks.values(), key=lambda b: (b.numa is None, b.numa if b.numa is not None else 0))
    return [b for b in ordered if b.branches or b.cpus]


# --- drawing -------------------------------------------------------------------------------


def _gb(value: float | None) -> str:
    if value is None:
        return "?"
    if value >= 100e9:
        return f"{value / 1e9:.0f}"
    if value >= 0.1e9 or value == 0:
        return f"{value / 1e9:.1f}"
    return f"{value / 1e9:.2f}"


def _fraction_style(present: float | None, expected: float | None) -> str:
    if present is None or not expected:
        return _DIM
    share = present / expected
    return "red" if share >= 0.9 else "yellow" if share >= 0.6 else "green"


def _rate(
    line: Text, label: str, present: float | None, expected: float | None, short: bool, bar_width: int, state: str = ""
) -> None:
    """`` PCIe x16 Gen5 ██   3.4/63.0`` (GB/s; the bar on a grey ground), ``!`` when short."""
    line.append(f" {label}", style=_SHORT if short else _DIM)
    if state:
        line.append(f" {state}", style=_SHORT if short else "")
    if bar_width:
        fill = 0.0 if present is None or not expected else present / expected
        line.append(" ")
        line.append(bar(fill, bar_width), style=f"{_fraction_style(present, expected)} on grey23")
    line.append(f" {_gb(present)}/{_gb(expected)}")
    if short:
        line.append("!", style=_SHORT)


def _pcie_state(gpu: GpuNode) -> str:
    pcie = gpu.pcie
    now = f"x{pcie.width or '?'} Gen{pcie.generation or '?'}"
    if (pcie.width, pcie.generation) != (pcie.max_width, pcie.max_generation) and pcie.max_width:
        return f"{now} of x{pcie.max_width} Gen{pcie.max_generation or '?'}"
    return now


@dataclass
class _Marks:
    """Which links fall short (finding subjects), by what the drawing shows."""

    pcie: set[int] = field(default_factory=set)
    nvlink: set[int] = field(default_factory=set)
    gpu: set[int] = field(default_factory=set)
    nic: set[str] = field(default_factory=set)


def _marks(topology: Topology, findings: Iterable[LinkFinding]) -> _Marks:
    marks = _Marks()
    names = {nic.name for nic in topology.nics}
    for finding in findings:
        subject = finding.subject
        head = subject.split(" ")[0]
        if subject.endswith(" PCIe") and head.startswith("GPU"):
            marks.pcie.add(int(head[3:]))
        elif " NVLink" in subject:
            for end in head.split("-"):
                if end.startswith("GPU") and end[3:].isdigit():
                    marks.nvlink.add(int(end[3:]))
        elif head.startswith("GPU") and head[3:].isdigit():
            marks.gpu.add(int(head[3:]))
        for name in names:
            if subject == name or subject.startswith(f"{name} port"):
                marks.nic.add(name)
    return marks


def _dense_rate(line: Text, label: str, present: float | None, expected: float | None, short: bool) -> None:
    line.append(f" {label}", style=_SHORT if short else _DIM)
    line.append(f"{_gb(present)}/{_gb(expected)}", style=_SHORT if short else "")


def _gpu_line(gpu: GpuNode, rates: LiveRates, marks: _Marks, detail: str, bar_width: int) -> Text:
    line = Text(no_wrap=True)
    line.append(f"GPU{gpu.index}", style=_SHORT if gpu.index in marks.gpu else _NAME)
    if detail == "dense":  # GPU0 P6.3/63.0 N115/450
        _dense_rate(line, "P", rates.pcie.get(gpu.index), gpu.pcie.expected_bytes_per_s, gpu.index in marks.pcie)
        if gpu.nvlinks:
            expected = gpu.nvlink_expected_bytes_per_s
            _dense_rate(line, "N", rates.nvlink.get(gpu.index), expected, gpu.index in marks.nvlink)
        return line
    if detail == "full":
        line.append(f" {safe_text(gpu.name).removeprefix('NVIDIA ')}")
    _rate(
        line,
        "PCIe",
        rates.pcie.get(gpu.index),
        gpu.pcie.expected_bytes_per_s,
        gpu.index in marks.pcie,
        bar_width,
        _pcie_state(gpu) if detail == "full" or gpu.index in marks.pcie else "",
    )
    if gpu.nvlinks:
        active = sum(link.active for link in gpu.nvlinks)
        _rate(
            line,
            "NVLink" if detail == "full" else "NVL",
            rates.nvlink.get(gpu.index),
            gpu.nvlink_expected_bytes_per_s,
            gpu.index in marks.nvlink,
            bar_width,
            f"{active}/{len(gpu.nvlinks)}",
        )
    line.append(" GB/s", style=_DIM)
    return line


def _nic_line(number: int, nic: Nic, rates: LiveRates, marks: _Marks, detail: str, bar_width: int) -> Text:
    line = Text(no_wrap=True)
    short = nic.name in marks.nic
    line.append(f"NIC{number} ", style=_DIM)
    line.append(safe_text(nic.name), style=_SHORT if short else _NAME)
    present = rates.nic.get(nic.name)
    if present is None:
        present = next((rates.nic[dev] for dev in nic.netdevs if dev in rates.nic), None)
    if detail == "dense":
        _dense_rate(line, f" {safe_text(nic.state or '?')} ", present, nic.rate_bytes_per_s, short)
        return line
    kind = {"ethernet": "eth", "infiniband": "IB", "roce": "RoCE"}.get(nic.kind, safe_text(nic.kind))
    state = safe_text(nic.state or "?")
    if detail == "full":
        line.append(f" {kind}")
    _rate(line, state, present, nic.rate_bytes_per_s, short, bar_width)
    line.append(" GB/s", style=_DIM)
    return line


def _block_lines(
    topology: Topology, block: NodeBlock, rates: LiveRates, marks: _Marks, detail: str, bar_width: int
) -> list[Text]:
    head = Text(no_wrap=True)
    head.append("CPU", style="bold")
    head.append(f" NUMA {'?' if block.numa is None else block.numa}", style="bold")
    if block.cpus:
        head.append(f" · CPUs {format_cpulist(block.cpus)}", style=_DIM)
    lines = [head]
    for position, branch in enumerate(block.branches):
        last = position == len(block.branches) - 1
        fork, rail = ("└─" if last else "├─"), ("  " if last else "│ ")
        members = [("gpu", gpu) for gpu in branch.gpus] + [("nic", number) for number in branch.nics]
        if detail == "dense":
            line = Text(no_wrap=True)
            line.append(f"{fork}", style=_DIM)
            line.append("sw" if branch.label == "PCIe switch" else "rp", style=_DIM)
            for kind, member in members:
                line.append(" ")
                if kind == "gpu":
                    assert isinstance(member, GpuNode)
                    line.append_text(_gpu_line(member, rates, marks, "dense", 0))
                else:
                    assert isinstance(member, int)
                    line.append_text(_nic_line(member, topology.nics[member], rates, marks, "dense", 0))
                if (kind, member) != members[-1]:
                    line.append(" │", style=_DIM)
            lines.append(line)
            continue
        if detail == "full" or len(members) > 1:
            lines.append(Text(f"{fork} {branch.label}", style=_DIM, no_wrap=True))
            for inner, (kind, member) in enumerate(members):
                twig = "└─" if inner == len(members) - 1 else "├─"
                line = Text(f"{rail} {twig} ", style=_DIM, no_wrap=True)
                line.append_text(_member(topology, kind, member, rates, marks, detail, bar_width))
                lines.append(line)
        else:
            kind, member = members[0]
            line = Text(f"{fork} ", style=_DIM, no_wrap=True)
            line.append_text(_member(topology, kind, member, rates, marks, detail, bar_width))
            lines.append(line)
    return lines


def _member(
    topology: Topology, kind: str, member: GpuNode | int, rates: LiveRates, marks: _Marks, detail: str, bar_width: int
) -> Text:
    if kind == "gpu":
        assert isinstance(member, GpuNode)
        return _gpu_line(member, rates, marks, detail, bar_width)
    assert isinstance(member, int)
    return _nic_line(member, topology.nics[member], rates, marks, detail, bar_width)


def _fabric_lines(topology: Topology, marks: _Marks) -> list[Text]:
    """The NVLink fabric: the GPUs on NVSwitches, and each directly bridged pair."""
    lines: list[Text] = []
    switched = [gpu for gpu in topology.gpus if any(link.remote_kind == "nvswitch" for link in gpu.nvlinks)]
    if switched:
        bridges = {link.remote_pci_bus_id for gpu in switched for link in gpu.nvlinks if link.remote_pci_bus_id}
        links = sorted({sum(link.active for link in gpu.nvlinks) for gpu in switched})
        line = Text("NVSwitch", style=_NAME, no_wrap=True)
        line.append(f" ×{len(bridges)}" if bridges else "", style=_DIM)
        line.append(" ══", style=_DIM)
        for gpu in switched:
            line.append(f" GPU{gpu.index}", style=_SHORT if gpu.index in marks.nvlink else "")
        line.append(f" ({'/'.join(str(n) for n in links)} links each)", style=_DIM)
        lines.append(line)
    for pair in topology.gpu_pairs:
        if pair.nvlink_links and not pair.via_nvswitch:
            short = pair.a in marks.nvlink and pair.b in marks.nvlink
            line = Text(f"GPU{pair.a} ", style=_NAME, no_wrap=True)
            line.append(f"══{pair.connection}══", style=_SHORT if short else "")
            line.append(f" GPU{pair.b}", style=_NAME)
            present = topology.pair(pair.a, pair.b)
            expected = present.expected_bytes_per_s if present else None
            line.append(f" {_gb(expected)} GB/s expected", style=_DIM)
            lines.append(line)
    return lines


def _side_by_side(columns: list[list[Text]], column_width: int) -> list[Text]:
    rows = max((len(column) for column in columns), default=0)
    out: list[Text] = []
    for row in range(rows):
        line = Text(no_wrap=True)
        for position, column in enumerate(columns):
            cell = column[row].copy() if row < len(column) else Text()
            cell.truncate(column_width)
            if position < len(columns) - 1:
                cell.pad_right(column_width - cell.cell_len + 2)
            line.append_text(cell)
        out.append(line)
    return out


def _finding_lines(findings: list[LinkFinding], width: int, room: int) -> list[Text]:
    """The findings, wrapped at ``width``, in at most ``room`` lines (at least two) when that can
    be done: the ones that do not fit are counted on a last line."""
    if not findings:
        return [Text("Every link at its expected state and rate.", style="green", no_wrap=True)]
    lines = [Text(f"{len(findings)} link(s) fall short:", style=_SHORT, no_wrap=True)]
    room = max(2, room)
    for number, finding in enumerate(findings):
        parts = textwrap.wrap(safe_text(finding.line), max(20, width - 2)) or [""]
        rest = len(findings) - number
        if len(lines) + len(parts) + (1 if rest > 1 else 0) > room:
            lines.append(Text(f"  +{rest} more (on the alert line; gpuscope doctor)", style=_DIM, no_wrap=True))
            break
        for position, part in enumerate(parts):
            line = Text("! " if position == 0 else "  ", style=_SHORT, no_wrap=True)
            line.append(part)
            lines.append(line)
    return lines


def draw_topology(
    topology: Topology, sample: Sample | None, findings: list[LinkFinding], width: int, height: int
) -> tuple[list[Text], str]:
    """The drawing in ``width`` x ``height`` cells (lines cut at ``width``; more lines than
    ``height`` only when even the densest form does not fit: the screen scrolls) and the form
    used (:data:`DETAILS`)."""
    rates, marks = live_rates(sample), _marks(topology, findings)
    blocks = layout_blocks(topology)
    fabric = _fabric_lines(topology, marks)
    header: list[Text] = []
    if topology.simulated:
        header.append(Text(safe_text(f"SIMULATED GPUs ({topology.simulated})"), style="yellow", no_wrap=True))
    if topology.gpu_unavailable:
        header.append(Text(safe_text(f"no GPUs: {topology.gpu_unavailable}"), style=_DIM, no_wrap=True))
    candidates = [
        (detail, bar_width, side)
        for detail, bars in (("full", (6, 3)), ("compact", (0,)), ("dense", (0,)))
        for side in (True, False)
        for bar_width in bars
    ]
    chosen: list[Text] = []
    used = DETAILS[-1]
    for number, (detail, bar_width, side) in enumerate(candidates):
        columns = [_block_lines(topology, block, rates, marks, detail, bar_width) for block in blocks]
        column_width = max((line.cell_len for column in columns for line in column), default=0)
        if side and len(columns) < 2:
            continue
        if side:
            if column_width * len(columns) + 2 * (len(columns) - 1) > width:
                continue
            body = _side_by_side(columns, column_width)
        else:
            body = [line for column in columns for line in column]
        lines = header + body + fabric
        room = height - len(lines)
        last = number == len(candidates) - 1
        found = _finding_lines(findings, width, room)
        fits = all(line.cell_len <= width for line in lines) and min(3, len(findings) + 1) <= len(found) <= room
        if fits or last:
            chosen, used = lines + found, detail
            break
    matrix = _matrix_lines(topology)
    if matrix and len(chosen) + 1 + len(matrix) <= height and all(line.cell_len <= width for line in matrix):
        chosen += [Text(), *matrix]
    for line in chosen:
        line.truncate(width)
    return chosen, used


def _matrix_lines(topology: Topology) -> list[Text]:
    """The ``nvidia-smi topo -m`` matrix (GPUs and NICs), when there is room for it."""
    columns, rows = matrix_rows(topology)
    if not rows:
        return []
    widths = [max(len(row[0]) for row in rows)] + [
        max(len(columns[i]), *(len(row[i + 1]) for row in rows)) for i in range(len(columns))
    ]
    out = []
    header = Text(
        " ".join(["".ljust(widths[0]), *(c.ljust(widths[i + 1]) for i, c in enumerate(columns))]), style=_NAME
    )
    out.append(header)
    for row in rows:
        line = Text(row[0].ljust(widths[0]), style=_NAME, no_wrap=True)
        for i, cell in enumerate(row[1:]):
            line.append(" ")
            line.append(
                cell.ljust(widths[i + 1]), style="green" if cell.startswith("NV") else _DIM if cell == "X" else ""
            )
        out.append(line)
    return out
