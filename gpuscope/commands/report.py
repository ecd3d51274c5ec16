"""``gpuscope report``: a snapshot report (self-contained HTML, Markdown or versioned JSON) of
results files and an optional telemetry log.

Exit codes: 0 written; 2 bad option (unknown format, nothing to report); 3 bad input file
(missing, corrupt, wrong schema); 1 the output could not be written.
"""

from __future__ import annotations

import argparse
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    from gpuscope.commands.options import add_results_inputs, path_option

    add_results_inputs(
        parser, "results file from `gpuscope probe` or `gpuscope measure` (a report.json works too); repeat for several"
    )
    parser.add_argument(
        "--from",
        dest="from_report",
        metavar="REPORT.json",
        type=path_option,
        help="re-render a report.json written earlier (same data, same HTML byte for byte)",
    )
    parser.add_argument(
        "--log",
        metavar="TELEMETRY.jsonl",
        type=path_option,
        help="telemetry log from `gpuscope log` recorded alongside the probes",
    )
    parser.add_argument(
        "--output",
        "-o",
        metavar="PATH",
        type=path_option,
        required=True,
        help="where to write: report.html, report.md or report.json",
    )
    parser.add_argument(
        "--format",
        dest="fmt",
        choices=("html", "md", "markdown", "json"),
        help="output format (default: from the extension of --output)",
    )
    parser.add_argument(
        "--redact", action="store_true", help="drop hostnames, usernames and command lines everywhere in the report"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace --output even when it holds results, a telemetry log, a suite or a theme",
    )


def run(args: argparse.Namespace) -> int:
    from gpuscope.batchgc import few_collections
    from gpuscope.errors import UsageError
    from gpuscope.report import format_for, write_report
    from gpuscope.schema.kinds import REPORT, existing_output, reading_as

    inputs = list(args.probes)
    if args.from_report:
        inputs.insert(0, args.from_report)
    if not inputs:
        raise UsageError("nothing to report: give --probes RESULTS.json (or --from REPORT.json)")
    fmt = format_for(args.output, args.fmt)  # a bad format fails before any input is read
    existing = None if args.force else existing_output(args.output)
    if existing is not None and existing[0] not in ("other", REPORT):
        raise UsageError(f"{args.output} already exists ({existing[1]}); use --force to replace it, or -o another path")
    from gpuscope.fileio import check_output

    check_output(args.output, [*inputs, args.log])  # never a device, FIFO or one of the inputs
    with reading_as("report"), few_collections():  # a large file: see gpuscope.batchgc
        path = write_report(args.output, inputs, log_path=args.log, fmt=fmt, redact=args.redact)
    print(f"gpuscope: wrote {fmt} report {path}", file=sys.stderr)
    return 0
