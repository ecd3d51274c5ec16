"""``gpuscope report``: a snapshot report (self-contained HTML, Markdown or versioned JSON) of
results files and an optional telemetry log.

Exit codes: 0 written; 2 bad option (unknown format, nothing to report); 3 bad input file
(missing, corrupt, wrong schema); 1 the output could not be written.
"""

from __future__ import annotations

import argparse
import sys

from gpuscope.batchgc import few_collections
from gpuscope.errors import UsageError
from gpuscope.fileio import check_output, write_text_atomic
from gpuscope.report import format_for, write_report
from gpuscope.report.fleet import read_fleet_snapshot, render_fleet_report
from gpuscope.schema.kinds import REPORT, existing_output, reading_as


def run(args: argparse.Namespace) -> int:
    if getattr(args, "fleet", None):
        return _fleet(args)
    inputs = list(args.probes)
    if args.from_report:
        inputs.insert(0, args.from_report)
    if not inputs and not args.log:  # --log alone: a telemetry-only report
        raise UsageError("nothing to report: give --probes RESULTS.json, --from REPORT.json or --log LOG")
    fmt = format_for(args.output, args.fmt)  # a bad format fails before any input is read
    existing = None if args.force else existing_output(args.output)
    if existing is not None and existing[0] not in ("other", REPORT):
        raise UsageError(f"{args.output} already exists ({existing[1]}); use --force to replace it, or -o another path")

    check_output(args.output, [*inputs, args.log])  # never a device, FIFO or one of the inputs
    with reading_as("report"), few_collections():  # a large file: see gpuscope.batchgc
        path = write_report(args.output, inputs, log_path=args.log, fmt=fmt, redact=args.redact)
    print(f"gpuscope: wrote {fmt} report {path}", file=sys.stderr)
    return 0


def _fleet(args: argparse.Namespace) -> int:
    """``report --fleet FLEET.json``: the fleet snapshot as HTML, Markdown or JSON."""
    if args.probes or args.from_report or args.log or args.redact:
        raise UsageError("--fleet reports a fleet snapshot alone: leave out --probes, --from, --log and --redact")
    fmt = format_for(args.output, args.fmt)
    existing = None if args.force else existing_output(args.output)
    if existing is not None and existing[0] != "other":
        raise UsageError(f"{args.output} already exists ({existing[1]}); use --force to replace it, or -o another path")
    check_output(args.output, [args.fleet])
    text = render_fleet_report(read_fleet_snapshot(args.fleet), fmt)
    write_text_atomic(args.output, text, inputs=[args.fleet])
    print(f"gpuscope: wrote {fmt} fleet report {args.output}", file=sys.stderr)
    return 0
