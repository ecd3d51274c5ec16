"""``gpuscope replay FILE [--speed X]``: play a ``gpuscope log`` recording through the dashboard,
with pause (space), step (left/right), seek ([ ], home, end, click the bar) and speed (+/-)."""

from __future__ import annotations

import argparse
import math

from gpuscope.commands.options import add_repeatable, path_option

__all__ = ["configure", "run"]


def _speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"speed {text!r} is not a number") from None
    if not math.isfinite(value) or not 1 / 16 <= value <= 64:
        raise argparse.ArgumentTypeError(f"speed {text} must be between 0.0625 and 64")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", metavar="FILE", type=path_option, help="a telemetry log written by `gpuscope log` (JSON lines or CSV)"
    )
    parser.add_argument(
        "--speed", type=_speed, default=1.0, metavar="X", help="playback speed, 1 = as recorded (0.0625 to 64)"
    )
    parser.add_argument("--theme", metavar="NAME", help="colour theme (see `gpuscope tui --help`)")
    add_repeatable(parser, "--probes", "RESULTS_JSON", "results file to show on the roofline (repeatable)")


def run(args: argparse.Namespace) -> int:
    from gpuscope.results import read_results_file
    from gpuscope.schema.kinds import reading_as
    from gpuscope.tui.sources import ReplayCursor, load_replay

    with reading_as("replay"):
        samples, stride = load_replay(args.file)  # BadInputError names the file and line
    with reading_as("replay --probes"):
        files = [read_results_file(path) for path in args.probes]

    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.terminal import run_in_terminal

    app = GpuscopeApp(
        replay=ReplayCursor(samples, speed=args.speed),
        theme=args.theme,
        probe_results=files,
    )
    if stride > 1:
        message = f"{args.file} is long: the replay shows every {stride}th sample ({len(samples)} of them)"
        app.add_startup_message(message)
    return run_in_terminal(app)
