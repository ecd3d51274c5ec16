"""The device-pair matrix as nvbandwidth reports it, and the host-device transfer table: typed
records, the expected figure of each cell from the topology, the 80% flag, and the text tables
(pure data; the CUDA measurements are :mod:`gpuscope.probing.transfer_cuda`).

A cell ``(src, dst)`` is a copy from GPU ``src`` to GPU ``dst`` on a copy engine (one direction;
``bidirectional``: this direction while ``dst -> src`` runs at the same time). Its expected
figure is the pair's link in the topology, one direction: NV# x the NVLink version's per-link
rate, else the slower PCIe link at its maximum (:class:`gpuscope.telemetry.topology.GpuPair`).
A cell is flagged when it measures under :data:`FLAG_FRACTION` (80%) of the best cell of the
same connection (NV18 with NV18, SYS with SYS...), "the best comparable link".
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from gpuscope.telemetry.topology import Topology

__all__ = [
    "FLAG_FRACTION",
    "PairCell",
    "PairMatrix",
    "HostTransfer",
    "TransferReport",
    "expected_cell",
    "flag_cells",
    "render_pair_matrix",
    "render_host_transfers",
]

#: A cell under this fraction of the best comparable cell is flagged.
FLAG_FRACTION = 0.8


class PairCell(msgspec.Struct, kw_only=True):
    """One ordered device pair."""

    src: int
    dst: int
    #: measured, one direction (bytes/s); None when it could not be measured
    bytes_per_s: float | None = None
    #: the topology's figure for this pair, one direction
    expected_bytes_per_s: float | None = None
    #: ``NV18``, ``PIX``, ... (``?`` without a topology)
    connection: str = "?"
    #: measured / best measured cell of the same connection
    fraction_of_best: float | None = None
    flagged: bool = False
    error: str | None = None


class PairMatrix(msgspec.Struct, kw_only=True):
    """Every ordered pair of ``devices``, one direction or bidirectional."""

    mode: str  # "unidirectional" or "bidirectional"
    engine: str  # "copy engine"
    size_bytes: int
    repeats: int
    devices: list[int]
    cells: list[PairCell]
    seconds: float = 0.0  # wall time of the whole matrix
    rule: str = (
        f"one direction per cell, GB = 1e9 bytes; flagged under {FLAG_FRACTION:.0%} of the best cell of the same "
        "connection; expected: the topology's link (NV# x per-link rate, else the slower PCIe link at its maximum)"
    )

    def cell(self, src: int, dst: int) -> PairCell | None:
        return next((c for c in self.cells if c.src == src and c.dst == dst), None)


class HostTransfer(msgspec.Struct, kw_only=True):
    """One host-device measurement as nvbandwidth names it."""

    name: str  # e.g. "h2d.ce.pinned", "d2h.sm.pinned", "h2d.ce.pinned.bidir"
    direction: str  # "h2d" or "d2h"
    engine: str  # "ce" (copy engine) or "sm" (a copy kernel)
    memory: str  # "pinned" or "pageable"
    bidirectional: bool
    size_bytes: int
    bytes_per_s: float | None = None
    expected_bytes_per_s: float | None = None
    error: str | None = None


class TransferReport(msgspec.Struct, kw_only=True):
    """What ``python -m gpuscope.probing.transfer_cuda`` writes."""

    device: int
    host: list[HostTransfer] = msgspec.field(default_factory=list)
    matrices: list[PairMatrix] = msgspec.field(default_factory=list)
    #: median seconds of one small copy and its synchronize: "h2d", "d2h", "d2d <src>-><dst>"
    latency_s: dict[str, float] = msgspec.field(default_factory=dict)
    latency_rule: str = "median of N synchronous 8-byte copies (copy + synchronize), not a pointer chase"
    notes: list[str] = msgspec.field(default_factory=list)


def expected_cell(topology: Topology | None, src: int, dst: int) -> tuple[str, float | None]:
    """(connection, expected bytes/s one direction) of the pair in ``topology`` (``?``/None when unknown)."""
    if topology is None:
        return "?", None
    pair = topology.pair(src, dst)
    if pair is None:
        return "?", None
    return pair.connection, pair.expected_bytes_per_s


def flag_cells(cells: Sequence[PairCell], fraction: float = FLAG_FRACTION) -> list[PairCell]:
    """``cells`` with ``fraction_of_best`` and ``flagged`` set (best of the same connection)."""
    best: dict[str, float] = {}
    for cell in cells:
        if cell.bytes_per_s:
            best[cell.connection] = max(best.get(cell.connection, 0.0), cell.bytes_per_s)
    out: list[PairCell] = []
    for cell in cells:
        top = best.get(cell.connection)
        if cell.bytes_per_s is None or not top:
            out.append(msgspec.structs.replace(cell, fraction_of_best=None, flagged=cell.error is not None))
            continue
        share = cell.bytes_per_s / top
        out.append(msgspec.structs.replace(cell, fraction_of_best=share, flagged=share < fraction))
    return out


def _gb(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1e9:.0f}" if value >= 10e9 else f"{value / 1e9:.1f}"


def render_pair_matrix(matrix: PairMatrix) -> str:
    """The matrix as text: measured GB/s per cell (``*`` flagged), then expected GB/s per cell."""
    devices = matrix.devices
    size_mib = matrix.size_bytes / 2**20
    lines = [f"{matrix.mode} copy-engine copies, {size_mib:g} MiB, GB/s (rows: source, columns: destination)"]
    for title in ("measured", "expected"):
        rows = [[title] + [f"GPU{d}" for d in devices]]
        for src in devices:
            row = [f"GPU{src}"]
            for dst in devices:
                cell = matrix.cell(src, dst)
                if src == dst or cell is None:
                    row.append("-")
                    continue
                text = _gb(cell.bytes_per_s if title == "measured" else cell.expected_bytes_per_s)
                row.append(text + ("*" if title == "measured" and cell.flagged else ""))
            rows.append(row)
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines.extend("  ".join(c.rjust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows)
    flagged = [c for c in matrix.cells if c.flagged]
    if flagged:
        lines.append(f"* under {FLAG_FRACTION:.0%} of the best comparable cell:")
        for c in flagged:
            share = "" if c.fraction_of_best is None else f" ({c.fraction_of_best:.0%} of the best {c.connection})"
            lines.append(
                f"  GPU{c.src} -> GPU{c.dst}: {_gb(c.bytes_per_s)} GB/s{share}" + (f" {c.error}" if c.error else "")
            )
    return "\n".join(lines)


def render_host_transfers(rows: Sequence[HostTransfer]) -> str:
    """The host-device table: name, measured and expected GB/s."""
    table = [["transfer", "size", "GB/s", "expected"]]
    for row in rows:
        measured = row.error or _gb(row.bytes_per_s)
        table.append([row.name, f"{row.size_bytes / 2**20:g} MiB", measured, _gb(row.expected_bytes_per_s)])
    widths = [max(len(r[i]) for r in table) for i in range(4)]
    return "\n".join("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in table)
