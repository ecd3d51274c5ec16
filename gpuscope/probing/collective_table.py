"""The interconnect tables of a results file (pure data, no torch): the collectives as nccl-tests
prints them (one row per op, size and group: time, algbw, busbw, p50, p99, the per-rank spread
and the straggler), the device-pair matrix and the small-copy latencies the transfer probe
measured. :func:`interconnect_text` is what ``gpuscope probe`` prints; the report builds its
tables from :func:`collective_rows`, :func:`matrices_of` and :func:`latency_rows`."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from gpuscope.probing.transfer_matrix import (
    HostTransfer,
    PairCell,
    PairMatrix,
    render_host_transfers,
    render_pair_matrix,
)
from gpuscope.schema.core import detail_map
from gpuscope.schema.results import Measurement

__all__ = [
    "COLLECTIVE_HEADERS",
    "collective_rows",
    "matrices_of",
    "host_rows_of",
    "latency_rows",
    "render_table",
    "interconnect_text",
]

#: The collectives table's columns (GB = 1e9 bytes; times per call).
COLLECTIVE_HEADERS = [
    "op", "size", "ranks", "time us", "algbw GB/s", "busbw GB/s", "p50 us", "p99 us", "rank min-max us", "spread",
    "straggler",
]  # fmt: skip


def _size(nbytes: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g}{unit}"
    return f"{nbytes:g}B"


def _us(value: object) -> str:
    return f"{float(value) * 1e6:,.0f}" if isinstance(value, (int, float)) else "-"


def _gb(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1e9:.3f}" if value < 10e9 else f"{value / 1e9:.1f}"


def collective_rows(measurements: Sequence[Measurement]) -> list[tuple[list[str], bool]]:
    """(cells under :data:`COLLECTIVE_HEADERS`, straggler named) per collective measurement, in
    file order; a failed or skipped one says so in the time column."""
    rows: list[tuple[list[str], bool]] = []
    for m in measurements:
        if m.kind != "collective":
            continue
        p, t = detail_map(m.parameters), detail_map(m.timing)
        ranks = p.get("group_size") or p.get("world_size") or "-"
        size = _size(float(m.bytes)) if m.bytes else "-"
        if m.status != "ok":
            rows.append(
                ([str(p.get("op", "?")), size, str(ranks), f"{m.status}: {m.error or ''}".strip(), *[""] * 7], False)
            )
            continue
        straggler = t.get("straggler")
        named = ""
        if isinstance(straggler, dict):
            fraction = straggler.get("fraction_of_median")
            share = f" ({float(fraction):.0%} of median)" if isinstance(fraction, (int, float)) else ""
            named = f"rank {straggler.get('rank')}{share}"
        low, high = t.get("rank_min_s"), t.get("rank_max_s")
        spread = t.get("rank_spread")
        rows.append(
            (
                [
                    str(p.get("op", "?")),
                    size,
                    str(ranks),
                    _us(m.time_s),
                    _gb(m.algbw_bytes_per_s),
                    _gb(m.busbw_bytes_per_s),
                    _us(t.get("iteration_p50_s")),
                    _us(t.get("iteration_p99_s")),
                    f"{_us(low)}-{_us(high)}" if low is not None and high is not None else "-",
                    f"{float(spread):.0%}" if isinstance(spread, (int, float)) else "-",
                    named or "-",
                ],  # fmt: skip
                bool(named),
            )
        )
    return rows


def matrices_of(measurements: Sequence[Measurement]) -> list[PairMatrix]:
    """The device-pair matrices the transfer probe measured (``parameters.matrix``)."""
    out: list[PairMatrix] = []
    for m in measurements:
        p = detail_map(m.parameters)
        if m.kind != "transfer" or "matrix" not in p or m.status != "ok":
            continue
        t = detail_map(m.timing)
        try:
            cells = msgspec.convert(t.get("cells") or [], type=list[PairCell])
            devices = msgspec.convert(p.get("devices") or [], type=list[int])
        except msgspec.ValidationError:
            continue
        out.append(
            PairMatrix(
                mode=str(p.get("matrix")),
                engine=str(p.get("engine", "copy engine")),
                size_bytes=int(_number(p.get("size_bytes"))),
                repeats=int(_number(p.get("repeats"))),
                devices=devices,
                cells=cells,
                seconds=_number(t.get("seconds")),
            )  # fmt: skip
        )
    return out


def _number(value: object) -> float:
    """A free-detail value as a number (0 when it is not one)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def host_rows_of(measurements: Sequence[Measurement]) -> list[HostTransfer]:
    """The host-device rows (nvbandwidth's names) the transfer probe measured (``parameters.host_table``)."""
    out: list[HostTransfer] = []
    for m in measurements:
        if m.kind != "transfer" or "host_table" not in detail_map(m.parameters) or m.status != "ok":
            continue
        try:
            out.extend(msgspec.convert(detail_map(m.timing).get("host") or [], type=list[HostTransfer]))
        except msgspec.ValidationError:
            continue
    return out


def latency_rows(measurements: Sequence[Measurement]) -> list[list[str]]:
    """(copy, microseconds) per small-copy latency the transfer probe measured."""
    rows: list[list[str]] = []
    for m in measurements:
        if m.kind != "transfer" or "latency" not in detail_map(m.parameters) or m.status != "ok":
            continue
        values = detail_map(m.timing).get("latency_s")
        if isinstance(values, dict):
            rows.extend([str(name), _us_fine(value)] for name, value in values.items())
    return rows


def _us_fine(value: object) -> str:
    return f"{float(value) * 1e6:.1f}" if isinstance(value, (int, float)) else "-"


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric_from: int = 1) -> list[str]:
    """Aligned text lines: the first ``numeric_from`` columns left-aligned, the others right."""
    table = [list(headers), *[list(row) for row in rows]]
    widths = [max(len(row[i]) for row in table) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        cells = [c.ljust(widths[i]) if i < numeric_from else c.rjust(widths[i]) for i, c in enumerate(row)]
        return "  ".join(cells).rstrip()

    return [line(row) for row in table]


#: Columns dropped, in this order, while the collectives table is wider than the terminal.
DROP_ORDER = ["rank min-max us", "p50 us", "algbw GB/s", "ranks", "time us", "spread"]


def fit_columns(
    headers: Sequence[str], rows: Sequence[Sequence[str]], width: int | None
) -> tuple[list[str], list[list[str]]]:
    """``headers`` and ``rows`` without the :data:`DROP_ORDER` columns needed to fit ``width``
    characters (None: all); whole columns go, a number is never cut."""
    keep = list(range(len(headers)))

    def shown() -> tuple[list[str], list[list[str]]]:
        return [headers[i] for i in keep], [[row[i] for i in keep] for row in rows]

    for name in DROP_ORDER:
        if width is None or max(len(line) for line in render_table(*shown())) <= width:
            break
        if name in headers:
            keep.remove(list(headers).index(name))
    return shown()


def interconnect_text(measurements: Sequence[Measurement], width: int | None = None) -> str | None:
    """The collectives table, the pair matrices and the latencies as text (the collectives'
    least needed columns dropped to fit ``width``); None when the results have none of them."""
    blocks: list[str] = []
    rows = collective_rows(measurements)
    if rows:
        backends = sorted(
            {str(detail_map(m.parameters).get("backend")) for m in measurements if m.kind == "collective"}
        )
        title = f"collectives ({', '.join(backends)}), as nccl-tests: busbw = algbw x factor (docs/interconnect.md)"
        body = render_table(*fit_columns(COLLECTIVE_HEADERS, [cells for cells, _ in rows], width))
        blocks.append("\n".join([title, *body]))
    host = host_rows_of(measurements)
    if host:
        blocks.append("host transfers, as nvbandwidth (ce: copy engine, sm: copy kernel; GB/s one direction)\n"
                      + render_host_transfers(host))  # fmt: skip
    for matrix in matrices_of(measurements):
        blocks.append(render_pair_matrix(matrix))
    latencies = latency_rows(measurements)
    if latencies:
        blocks.append(
            "\n".join(["small-copy latency (8 B copy + synchronize, median)", *render_table(["copy", "us"], latencies)])
        )
    return "\n\n".join(blocks) if blocks else None
