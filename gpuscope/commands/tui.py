"""``gpuscope tui`` (also plain ``gpuscope``): the interactive dashboard.

Options: ``--theme NAME`` (remembered), ``--interval SECONDS`` (default 1, minimum 0.1),
``--probes results.json`` (repeatable; preloads roofline points), ``--demo [nvidia|amd|both]``
(simulated GPUs, to try the UI on a machine without GPUs). Imports Textual only in :func:`run`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuscope.errors import BadInputError
from gpuscope.results import read_results_file
from gpuscope.telemetry.sampler import check_interval
from gpuscope.tui.demo import DemoSource
from gpuscope.tui.sources import LiveSource, TelemetrySource

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    interval_s = check_interval(args.interval)
    files = [read_results_file(path) for path in args.probes]  # one-line BadInputError on a bad file

    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.terminal import run_in_terminal

    source: TelemetrySource
    if args.demo:
        source = DemoSource(args.demo)
    else:
        source = LiveSource()

    suites = [Path(path) for path in args.suite]
    for path in suites:
        if not path.is_file():
            raise BadInputError(f"{path}: no such suite file")
    app = GpuscopeApp(source, interval_s=interval_s, theme=args.theme, probe_results=files, extra_suites=suites)
    return run_in_terminal(app)
