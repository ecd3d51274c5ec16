"""``gpuscope replay FILE [--speed X]``: play a ``gpuscope log`` recording through the dashboard,
with pause (space), step (left/right), seek ([ ], home, end, click the bar) and speed (+/-)."""

from __future__ import annotations

import argparse

from gpuscope.results import read_results_file
from gpuscope.schema.kinds import reading_as
from gpuscope.tui.sources import ReplayCursor, load_replay

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
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
