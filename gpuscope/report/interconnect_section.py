"""The report's interconnect section (issue 33): each results file's collectives as nccl-tests
prints them (op, size, ranks, time, algbw, busbw, p50/p99, the ranks' min-max, spread and the
straggler), the device-pair matrix with each cell's measured and expected GB/s (flagged cells
marked), and the small-copy latencies. Tables built from the same rows ``gpuscope probe`` prints
(:mod:`gpuscope.probing.collective_table`); empty when no file has any of them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpuscope.probing.collective_table import (
    COLLECTIVE_HEADERS,
    collective_rows,
    host_rows_of,
    latency_rows,
    matrices_of,
)
from gpuscope.probing.transfer_matrix import FLAG_FRACTION, PairMatrix
from gpuscope.report.fmt import clean_text
from gpuscope.report.html_blocks import escape_text, table_html
from gpuscope.report.tables import Table
from gpuscope.schema.core import detail_map
from gpuscope.schema.report import EmbeddedResults
from gpuscope.schema.results import Measurement

__all__ = ["INTERCONNECT_TITLE", "interconnect_tables", "interconnect_section_html", "interconnect_markdown_lines"]

INTERCONNECT_TITLE = "Interconnect"

_COLLECTIVE_NOTE = (
    "As nccl-tests reports them: time = the slowest rank's time per call (best sample); algbw = size / time; "
    "busbw = algbw x 2(n-1)/n (all-reduce), x (n-1)/n (all-gather, reduce-scatter, all-to-all), x 1 (broadcast); "
    "p50/p99 of each iteration's slowest-rank time; spread = (slowest rank's mean - fastest's) / slowest's. "
    "A straggler is late (more than 10% below the median rank's time in the call) in at least 80% of iterations. "
    "GB = 1e9 bytes."
)


def _collectives_title(measurements: Sequence[Measurement]) -> str:
    backends = sorted(
        {str(detail_map(m.parameters).get("backend")) for m in measurements if m.kind == "collective"} - {"None"}
    )
    return f"Collectives ({', '.join(backends)})" if backends else "Collectives"


def _gb(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1e9:.0f}" if value >= 10e9 else f"{value / 1e9:.1f}"


def _matrix_table(matrix: PairMatrix, index: int) -> Table:
    """Rows: source GPU; columns: destination GPU; each cell ``measured / expected`` GB/s."""
    title = (
        f"Device pairs, {matrix.mode} copy-engine copies of {matrix.size_bytes / 2**20:g} MiB "
        f"(GB/s measured / expected; rows: source, columns: destination)"
    )
    table = Table(
        id=f"pair-matrix-{index}", title=title, headers=["from \\ to", *[f"GPU{d}" for d in matrix.devices]],
        numeric=set(range(1, len(matrix.devices) + 1)),
        note=f"* under {FLAG_FRACTION:.0%} of the best cell of the same connection; expected: the topology's link, "
        f"one direction. {matrix.seconds:.1f} s for the matrix.",
    )  # fmt: skip
    for src in matrix.devices:
        cells: list[str] = [f"GPU{src}"]
        for dst in matrix.devices:
            cell = matrix.cell(src, dst)
            if src == dst or cell is None:
                cells.append("-")
                continue
            mark = "*" if cell.flagged else ""
            text = cell.error if cell.bytes_per_s is None and cell.error else _gb(cell.bytes_per_s)
            cells.append(f"{text}{mark} / {_gb(cell.expected_bytes_per_s)} {cell.connection}")
        table.add(cells)  # a row flag would mark the whole row: the flagged cells are named in the note
    flagged = [
        f"GPU{c.src} -> GPU{c.dst} {_gb(c.bytes_per_s)} GB/s"
        + (f" ({c.fraction_of_best:.0%} of the best {c.connection})" if c.fraction_of_best is not None else "")
        for c in matrix.cells
        if c.flagged
    ]
    if flagged:
        table.note += " Flagged: " + "; ".join(flagged) + "."
    return table


def interconnect_tables(results: Sequence[EmbeddedResults]) -> list[tuple[str, list[Table]]]:
    """(file label, tables) per results file with collectives, a pair matrix or latencies."""
    out: list[tuple[str, list[Table]]] = []
    for number, item in enumerate(results):
        measurements = item.document.measurements
        tables: list[Table] = []
        rows = collective_rows(measurements)
        if rows:
            table = Table(
                id=f"collectives-{number}", title=_collectives_title(measurements), headers=list(COLLECTIVE_HEADERS),
                numeric={1, 2, 3, 4, 5, 6, 7, 8, 9}, note=_COLLECTIVE_NOTE,
            )  # fmt: skip
            for cells, straggler in rows:
                table.add(cells, "straggler" if straggler else "")
            tables.append(table)
        host = host_rows_of(measurements)
        if host:
            table = Table(
                id=f"host-transfers-{number}", title="Host transfers", headers=["transfer", "size", "GB/s", "expected"],
                numeric={1, 2, 3},
                note="As nvbandwidth names them: ce = copy engine, sm = a copy kernel, bidir = while the opposite "
                "direction runs; expected: the GPU's PCIe link at its maximum, one direction.",
            )  # fmt: skip
            for row in host:
                measured = row.error or _gb(row.bytes_per_s)
                table.add([row.name, f"{row.size_bytes / 2**20:g} MiB", measured, _gb(row.expected_bytes_per_s)])
            tables.append(table)
        for index, matrix in enumerate(matrices_of(measurements)):
            tables.append(_matrix_table(matrix, number * 10 + index))
        latencies = latency_rows(measurements)
        if latencies:
            table = Table(
                id=f"latency-{number}", title="Small-copy latency", headers=["copy", "µs"], numeric={1},
                note="Median of 200 synchronous 8-byte copies (copy + synchronize).",
            )  # fmt: skip
            for latency in latencies:
                table.add(latency)
            tables.append(table)
        if tables:
            out.append((clean_text(item.label or "", 200), tables))
    return out


def interconnect_section_html(results: Sequence[EmbeddedResults]) -> str:
    """The section body as HTML; empty when no file has interconnect measurements."""
    parts: list[str] = []
    for label, tables in interconnect_tables(results):
        if label:
            parts.append(f'<p class="meta">{escape_text(label)}</p>\n')
        for table in tables:
            parts.append(f"<h3>{escape_text(table.title)}</h3>\n{table_html(table)}")
    return "".join(parts)


def interconnect_markdown_lines(
    results: Sequence[EmbeddedResults], md_escape: Callable[[object], str], md_table: Callable[[Table], str]
) -> list[str]:
    """The section as Markdown lines (the report's own escaping and table writer)."""
    out: list[str] = []
    for label, tables in interconnect_tables(results):
        if label:
            out.extend([f"_{md_escape(label)}_", ""])
        for table in tables:
            out.extend([f"### {md_escape(table.title)}", "", md_table(table).rstrip("\n"), ""])
    return out
