"""A working-set sweep as plain text: bandwidth (log scale) against working set (log2), one mark
per kernel, the OS-reported cache sizes as dotted columns, then each kernel's levels (plateau,
extent, OS size, flags, or "unavailable: no plateau"). Used by ``gpuscope roofline --sweep``, the
TUI's probes screen and the report. Pure text, no colour, no plotext.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpuscope.roofline.sweep import derive_sweeps
from gpuscope.schema.results import Results
from gpuscope.schema.sweeps import Sweep

__all__ = ["MARKS", "sweeps_of", "sweep_chart_lines", "sweep_level_lines", "sweep_lines"]

#: the mark of each kernel on the chart (others get their first letter)
MARKS = {"copy": "c", "scale": "s", "add": "a", "triad": "t", "read": "r"}
_LEFT = 8  # the y axis labels' width


def sweeps_of(document: Results) -> list[Sweep]:
    """The file's ``sweeps``, or (a file written before the field) those its measurements make."""
    return list(document.sweeps) if document.sweeps else derive_sweeps(document.measurements, document.devices)


def _size(nbytes: float) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:.0f}{unit}" if value >= 10 or value == int(value) else f"{value:.1f}{unit}"
    return f"{nbytes:.0f}B"


def _rate(bytes_per_s: float) -> str:
    value = bytes_per_s / 1e9
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"


def sweep_chart_lines(sweeps: Sequence[Sweep], width: int = 80, height: int = 16) -> list[str]:
    """The chart of one device's sweeps (every kernel on the same axes), ``width`` columns."""
    points = [(p.footprint_bytes, p.bytes_per_s) for s in sweeps for p in s.points if p.footprint_bytes > 0]
    points = [(x, y) for x, y in points if y > 0]
    if not points:
        return ["(no sweep points)"]
    plot_width = max(20, width - _LEFT - 1)
    rows = max(6, height)
    x_lo, x_hi = math.log2(min(x for x, _ in points)), math.log2(max(x for x, _ in points))
    y_lo, y_hi = math.log10(min(y for _, y in points)), math.log10(max(y for _, y in points))
    y_lo, y_hi = (y_lo - 0.05, y_hi + 0.05) if y_hi - y_lo > 1e-9 else (y_lo - 0.5, y_hi + 0.5)
    x_span = max(x_hi - x_lo, 1e-9)

    def column(x: float) -> int:
        return min(plot_width - 1, max(0, round((math.log2(x) - x_lo) / x_span * (plot_width - 1))))

    def row(y: float) -> int:
        return min(rows - 1, max(0, round((y_hi - math.log10(y)) / (y_hi - y_lo) * (rows - 1))))

    grid = [[" "] * plot_width for _ in range(rows)]
    # the OS-reported caches: a dotted column where the working set (all threads) fills each
    marks_at: dict[int, str] = {}
    for sweep in sweeps[:1]:
        threads = sweep.threads or 1
        for level in sweep.levels:
            if level.os_cache_bytes:
                total = level.os_cache_bytes * (threads if level.level in ("l1", "l2") else 1)
                if 2**x_lo <= total <= 2**x_hi:
                    col = column(total)
                    marks_at[col] = level.level.upper()
                    for r in range(rows):
                        grid[r][col] = ":"
    for sweep in sweeps:
        mark = MARKS.get(sweep.kernel, sweep.kernel[:1] or "?")
        for p in sweep.points:
            if p.footprint_bytes > 0 and p.bytes_per_s > 0:
                r, c = row(p.bytes_per_s), column(p.footprint_bytes)
                grid[r][c] = mark if grid[r][c] in (" ", ":", mark) else "*"
    lines = []
    for r in range(rows):
        label = ""
        if r in (0, rows // 2, rows - 1):
            label = _rate(10 ** (y_hi - r / (rows - 1) * (y_hi - y_lo)))
        lines.append(f"{label:>{_LEFT - 1}} |" + "".join(grid[r]).rstrip())
    lines.append(" " * _LEFT + "+" + "-" * plot_width)
    axis = [" "] * plot_width
    for col, text in sorted(marks_at.items()):  # the cache names under their columns
        for i, ch in enumerate(text):
            if col + i < plot_width:
                axis[col + i] = ch
    lines.append(" " * (_LEFT + 1) + "".join(axis).rstrip())
    first, last = _size(2**x_lo), _size(2**x_hi)
    gap = max(1, plot_width - len(first) - len(last))
    lines.append(" " * (_LEFT + 1) + first + " " * gap + last)
    kernels = ", ".join(f"{MARKS.get(s.kernel, s.kernel[:1])} {s.kernel}" for s in sweeps)
    lines.append(f"{'GB/s':>{_LEFT - 1}}  working set, all threads (log2); {kernels}; * several; : OS cache size")
    return lines


def sweep_level_lines(sweep: Sweep) -> list[str]:
    """One line per level of one kernel's sweep: plateau and its extent, or why there is none."""
    out = []
    for level in sweep.levels:
        head = f"  {sweep.kernel:<6} {level.level:<5}"
        os_text = f", OS {_size(level.os_cache_bytes)}" if level.os_cache_bytes else ""
        if level.status != "ok" or level.plateau_bytes_per_s is None:
            out.append(f"{head} {level.status}{os_text}")
            continue
        extent = f"{_size(level.first_footprint_bytes or 0)}-{_size(level.last_footprint_bytes or 0)}"
        ratio = f" (plateau ends at {level.capacity_ratio:.2f}x it)" if level.capacity_ratio is not None else ""
        text = f"{head} {_rate(level.plateau_bytes_per_s):>6} GB/s over {extent} ({level.points} sizes){os_text}{ratio}"
        if level.note:
            text += f"; {level.note}"
        if level.out_of_order:
            text += f"  !! {level.out_of_order}"
        out.append(text)
    return out


def sweep_lines(sweeps: Sequence[Sweep], width: int = 80, height: int = 16) -> list[str]:
    """Chart and level lines per device; empty when there is no sweep."""
    out: list[str] = []
    devices = sorted({s.device for s in sweeps})
    for device in devices:
        mine = [s for s in sweeps if s.device == device]
        threads = mine[0].threads
        title = f"Working-set sweep, {device}" + (f", {threads} threads" if threads else "")
        dtypes = sorted({s.dtype for s in mine if s.dtype})
        out.append(title + (f", {', '.join(dtypes)}" if dtypes else "") + " (STREAM byte count, best of N):")
        out.extend(sweep_chart_lines(mine, width, height))
        out.append("Levels (plateaus of the sweep, checked against the OS cache sizes):")
        for sweep in mine:
            out.extend(sweep_level_lines(sweep))
        if mine[0].rule:
            out.append(f"  rule: {mine[0].rule}")
        out.append("")
    return out[:-1] if out else out
