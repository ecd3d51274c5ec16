"""``gpuscope tui`` (also plain ``gpuscope``): the interactive dashboard.

Options: ``--theme NAME`` (remembered), ``--interval SECONDS`` (default 1, minimum 0.1),
``--probes results.json`` (repeatable; preloads roofline points), ``--demo`` (fake NVML with two
GPUs, to try the UI on a machine without GPUs). Imports Textual only in :func:`run`.
"""

from __future__ import annotations

import argparse

from gpuscope.commands.options import add_interval, add_repeatable

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--theme",
        metavar="NAME",
        help="colour theme (shipped: gpuscope-dark, gpuscope-light, gpuscope-high-contrast; "
        "user themes in $XDG_CONFIG_HOME/gpuscope/themes); remembered for later runs",
    )
    add_interval(parser)
    add_repeatable(
        parser,
        "--probes",
        "RESULTS_JSON",
        "a probe results file whose ceilings and points to show on the roofline (repeatable)",
    )
    add_repeatable(
        parser,
        "--suite",
        "SUITE_TOML",
        "an extra probe suite file to offer on the probes screen (repeatable; shipped suites are always there)",
    )
    parser.add_argument(
        "--demo", action="store_true", help="use a fake NVML with two GPUs (try the UI on a machine without GPUs)"
    )


def run(args: argparse.Namespace) -> int:
    from gpuscope.results import read_results_file
    from gpuscope.telemetry.sampler import check_interval

    interval_s = check_interval(args.interval)
    files = [read_results_file(path) for path in args.probes]  # one-line BadInputError on a bad file

    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.sources import LiveSource, TelemetrySource
    from gpuscope.tui.terminal import run_in_terminal

    source: TelemetrySource
    if args.demo:
        from gpuscope.tui.demo import DemoSource

        source = DemoSource()
    else:
        source = LiveSource()
    from pathlib import Path

    from gpuscope.errors import BadInputError

    suites = [Path(path) for path in args.suite]
    for path in suites:
        if not path.is_file():
            raise BadInputError(f"{path}: no such suite file")
    app = GpuscopeApp(source, interval_s=interval_s, theme=args.theme, probe_results=files, extra_suites=suites)
    return run_in_terminal(app)
