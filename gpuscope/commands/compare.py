"""``gpuscope compare``: ceilings and workloads of two or more runs or machines side by side,
with differences beyond the measured spread flagged.

Exit codes: 0 compared (flags are information, not failure); 2 bad option or fewer than two
things to compare; 3 bad input file; 1 the output could not be written.
"""

from __future__ import annotations

import argparse
import json
import sys

from gpuscope.batchgc import few_collections
from gpuscope.errors import GpuscopeError, UsageError
from gpuscope.fileio import check_output, write_text_atomic
from gpuscope.profiling.compare import profile_comparison, render_profile_comparison
from gpuscope.report.compare import compare_results, render_compare_markdown, render_compare_text
from gpuscope.report.io import load_input, results_inputs
from gpuscope.schema.kinds import reading_as


def run(args: argparse.Namespace) -> int:
    if args.output:
        check_output(args.output, args.results)  # never a device, FIFO or one of the inputs
    with reading_as("compare"), few_collections():
        loaded = [load_input(path, position) for position, path in enumerate(args.results)]
        inputs = results_inputs(loaded, args.results)
        result = compare_results([(item.label, item.results) for item in inputs])

    profiles = profile_comparison([(item.label, item.results) for item in inputs])
    if profiles:
        result["profiles"] = profiles
    cells = sum(len(row["values"]) for table in ("ceilings", "workloads") for row in result[table])
    if len(result["runs"]) < 2 and cells == len(result["ceilings"]) + len(result["workloads"]) and not profiles:
        raise UsageError(
            "nothing to compare: give two or more results files (or one with several devices, hosts or ranks)"
        )
    fmt = {"markdown": "md"}.get(args.fmt, args.fmt)
    if fmt == "json":
        text = json.dumps(result, indent=2, allow_nan=False) + "\n"
    elif fmt == "md":
        text = render_compare_markdown(result)
    else:
        text = render_compare_text(result)
    if fmt != "json" and profiles:
        text += "\n" + render_profile_comparison(profiles)
    if args.output:
        try:
            write_text_atomic(args.output, text)
        except OSError as exc:
            raise GpuscopeError(f"{args.output}: cannot write ({exc.strerror or exc})") from None
    else:
        sys.stdout.write(text)
    return 0
