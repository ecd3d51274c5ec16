"""``gpuscope roofline``: the roofline chart of one or more results files, printed once."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import textwrap

from gpuscope.commands.options import add_results_inputs
from gpuscope.errors import UsageError

__all__ = ["configure", "run", "chart_size", "MIN_WIDTH", "MAX_WIDTH", "MIN_HEIGHT", "MAX_HEIGHT"]

MIN_WIDTH = 60
#: Larger charts are never drawn: plotext's time and memory grow with the canvas.
MAX_WIDTH = 1000
MIN_HEIGHT = 12
MAX_HEIGHT = 500


def configure(parser: argparse.ArgumentParser) -> None:
    add_results_inputs(
        parser,
        "results file from `gpuscope probe` or `gpuscope measure`; repeat to combine several on one chart",
        required=True,
    )
    parser.add_argument(
        "--json", action="store_true", help="print the model (roofs, ridge points, placed points) as JSON"
    )
    parser.add_argument(
        "--width", type=int, metavar="N", help=f"chart width in columns (default: the terminal's; at least {MIN_WIDTH})"
    )
    parser.add_argument(
        "--height", type=int, metavar="N", help="chart height in rows (default: fits the terminal, 16-40)"
    )
    parser.add_argument("--no-datasheet", action="store_true", help="leave out the built-in datasheet roofs")
    parser.add_argument(
        "--all-roofs",
        action="store_true",
        help="also draw every other dtype, cache level and datasheet roof (default: per device the envelope "
        "of the dtypes its workloads use, plus DRAM; the tables list every roof)",
    )
    color = parser.add_mutually_exclusive_group()
    color.add_argument(
        "--color", dest="color", action="store_const", const=True, help="colour even when not a terminal"
    )
    no_color = "no colour (also NO_COLOR=1 or not a terminal)"
    color.add_argument("--no-color", dest="color", action="store_const", const=False, help=no_color)


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


def run(args: argparse.Namespace) -> int:
    from gpuscope.roofline.loading import load_model, model_to_json
    from gpuscope.roofline.paint_text import DEFAULT_PALETTE, MONOCHROME_PALETTE, render_roofline
    from gpuscope.roofline.tables import bandwidth_table, devices_lines, points_table, roofs_table, stragglers_lines
    from gpuscope.schema.core import encode_json

    width, height = chart_size(args.width, args.height)  # a bad option fails before any file is read
    model = load_model(args.probes, datasheet=not args.no_datasheet)
    if args.json:
        print(encode_json(model_to_json(model), indent=2).decode())
        return 0
    palette = DEFAULT_PALETTE if _want_color(args.color) else MONOCHROME_PALETTE
    out = sys.stdout
    for warning in model.warnings:
        print(f"gpuscope: warning: {warning}", file=sys.stderr)
    lines = devices_lines(model, width)
    lines.append("")
    stragglers = stragglers_lines(model, width)
    if stragglers:
        lines.extend([*stragglers, ""])
    lines.append(render_roofline(model, width, height, palette=palette, all_roofs=args.all_roofs))
    lines.append("")
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
    from gpuscope.textsafe import write_styled  # the chart's colours reach the terminal

    write_styled(out, "\n".join(lines) + "\n")
    out.flush()
    return 0
