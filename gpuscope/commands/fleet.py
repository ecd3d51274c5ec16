"""``gpuscope fleet``: every node and GPU of a cluster, from a Prometheus server
(``--prometheus URL``) or straight from ``gpuscope serve`` exporters (``--hosts``). ``--once``
prints one line per node, ``--once --json`` the fleet snapshot (docs/fleet.md); without
``--once`` the fleet screen opens.

Exit codes: 0; 2 bad options; 3 an unreadable hosts, credentials or TLS file; 4 the Prometheus
server cannot be read (unreachable, not Prometheus, refused).
"""

from __future__ import annotations

import argparse
import sys

from gpuscope.errors import ResourceError, UsageError
from gpuscope.fleet.http import FetchError
from gpuscope.fleet.options import source_from_args
from gpuscope.fleet.text import fleet_summary, node_line, node_names
from gpuscope.schema.core import encode_json

__all__ = ["run"]

MIN_INTERVAL_S = 0.5


def run(args: argparse.Namespace) -> int:
    if args.json and not args.once:
        raise UsageError("--json needs --once (the screen is interactive)")
    if not MIN_INTERVAL_S <= args.interval <= 3600:
        raise UsageError(f"--interval {args.interval:g} must be between {MIN_INTERVAL_S:g} and 3600 seconds")
    source = source_from_args(args)
    try:
        if not args.once:
            from gpuscope.tui.screens.fleet_app import run_fleet_app  # the one Textual import, for the screen only

            return run_fleet_app(source, interval_s=args.interval, theme=args.theme)
        try:
            snapshot = source.refresh()
        except FetchError as exc:
            raise ResourceError(str(exc)) from None
        if args.json:
            sys.stdout.write(encode_json(snapshot, indent=2).decode("utf-8") + "\n")
            return 0
        names = node_names(snapshot.nodes)
        for node in snapshot.nodes:
            print(node_line(node, names[node.instance]))
        print(f"gpuscope: {fleet_summary(snapshot)}", file=sys.stderr)
        return 0
    finally:
        source.close()
