"""``gpuscope roofline``: the roofline chart of one or more results files, printed once."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import textwrap

import msgspec

from gpuscope.commands.parsers import MAX_HEIGHT, MAX_WIDTH, MIN_HEIGHT, MIN_WIDTH
from gpuscope.errors import UsageError
from gpuscope.roofline.loading import load_model
from gpuscope.roofline.model_json import model_to_json
from gpuscope.roofline.paint_text import DEFAULT_PALETTE, MONOCHROME_PALETTE, render_roofline
from gpuscope.roofline.tables import bandwidth_table, devices_lines, points_table, roofs_table, stragglers_lines
from gpuscope.schema.core import encode_json
from gpuscope.textsafe import write_styled

__all__ = ["run", "chart_size"]


def _want_color(choice: bool | None) -> bool:
    if choice is not None:
        return choice
    if os.environ.get("NO_COLOR"):
        return False
    return sys.stdout.isatty()


def chart_size(width: int | None, height: int | None) -> tuple[int, int]:
    """``(columns, rows)`` of the chart: ``width``/``height`` (``--width``/``--height``) when given,
    else the terminal's size ($COLUMNS/$LINES or the terminal, 100 x 32 when neither), held to
    MIN_WIDTH..MAX_WIDTH and MIN_HEIGHT..MAX_HEIGHT. The one size rule: an option outside the
    bounds is refused (:class:`UsageError`); the environment is held inside them, since
    ``COLUMNS=1000000`` is no request for a million-column chart."""
    if width is not None and width < MIN_WIDTH:
        raise UsageError(f"--width {width} is too narrow: the chart needs at least {MIN_WIDTH} columns")
    if width is not None and width > MAX_WIDTH:
        raise UsageError(f"--width {width} is too wide: at most {MAX_WIDTH} columns")
    if height is not None and height < MIN_HEIGHT:
        raise UsageError(f"--height {height} is too short: the chart needs at least {MIN_HEIGHT} rows")
    if height is not None and height > MAX_HEIGHT:
        raise UsageError(f"--height {height} is too tall: at most {MAX_HEIGHT} rows")
    terminal = shutil.get_terminal_size((100, 32))
    columns = width if width is not None else min(MAX_WIDTH, max(MIN_WIDTH, terminal.columns))
    rows = height if height is not None else min(40, max(16, terminal.lines - 6))  # fits the terminal
    return columns, rows


def _run_sweep(args: argparse.Namespace, width: int, height: int) -> int:
    """``--sweep``: each file's working-set sweeps as text charts (JSON with ``--json``)."""
    from gpuscope.results import read_results
    from gpuscope.roofline.sweep_chart import sweep_lines, sweeps_of

    sweeps = [sweep for path in args.probes for sweep in sweeps_of(read_results(path))]
    if args.json:
        print(encode_json([msgspec.to_builtins(sweep) for sweep in sweeps], indent=2).decode())
        return 0
    if not sweeps:
        raise UsageError(
            "no working-set sweep in " + ", ".join(map(str, args.probes))
            + ": run `gpuscope probe --suite sweep` (or `full`) first"
        )  # fmt: skip
    sys.stdout.write("\n".join(sweep_lines(sweeps, width, max(8, height - 10))) + "\n")
    return 0


def run(args: argparse.Namespace) -> int:
    width, height = chart_size(args.width, args.height)  # a bad option fails before any file is read
    if getattr(args, "sweep", False):
        return _run_sweep(args, width, height)
    model = load_model(args.probes, datasheet=not args.no_datasheet)
    if args.json:
        print(encode_json(model_to_json(model), indent=2).decode())
        return 0
    palette = DEFAULT_PALETTE if _want_color(args.color) else MONOCHROME_PALETTE
    out = sys.stdout
    for warning in model.warnings:
        print(f"gpuscope: warning: {warning}", file=sys.stderr)
    # The tables are plain text: written through standard output's guard, which escapes every
    # control character; only the chart, whose names the layout made safe, keeps its colours.
    head = devices_lines(model, width)
    head.append("")
    stragglers = stragglers_lines(model, width)
    if stragglers:
        head.extend([*stragglers, ""])
    out.write("\n".join(head) + "\n")
    write_styled(out, render_roofline(model, width, height, palette=palette, all_roofs=args.all_roofs) + "\n")
    lines = [""]
    lines.extend(
        textwrap.wrap(
            "Workloads (# = the tag on the chart; efficiency against the roof that bounds each point):", width
        )
    )
    lines.extend(points_table(model, width))
    lines.append("")
    lines.append("Roofs:")
    lines.extend(roofs_table(model, width))
    bandwidths = bandwidth_table(model, width)
    if bandwidths:
        lines.append("")
        lines.extend(textwrap.wrap("Interconnect bandwidths (data movement, not FLOP roofs; not drawn):", width))
        lines.extend(bandwidths)
    out.write("\n".join(lines) + "\n")
    out.flush()
    return 0
