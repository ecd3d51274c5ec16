"""``gpuscope profile module:function``: where one step's time goes, op by op, against the roofline
(the command-line face of ``gpuscope.profile``).

The function is one step (e.g. a training step); it is called ``--warmup`` + 1 + ``--steps``
times. Arguments come from ``--args-json`` exactly as for ``gpuscope measure``. Prints the step
summary, the top groups by time lost and the roofline of the groups; ``--output`` appends the
profile to a results file as a workload (``gpuscope report`` shows it).
"""

from __future__ import annotations

import argparse
import sys

from gpuscope.commands.options import add_function_target, add_value, call_user, path_option
from gpuscope.errors import UsageError


def configure(parser: argparse.ArgumentParser) -> None:
    add_function_target(
        parser,
        "one step to profile",
        'arguments as for `gpuscope measure`: a JSON list, or {"args": [...], "kwargs": {...}}; '
        '{"tensor": [shape], "dtype": "float32"} makes a random tensor',
    )
    parser.add_argument("--name", help="label of the profile (default: MODULE:FUNCTION)")
    parser.add_argument(
        "--device",
        help="cpu, cuda or cuda:N, where --args-json tensors are made "
        "(default: cpu when --args-json makes tensors, else cuda when available, else cpu)",
    )
    add_value(parser, "--steps", 3, "N", "profiled steps (default 3)")
    add_value(parser, "--warmup", 1, "N", "warm-up steps before the counting step (default 1)")
    roofs_help = "probe results whose measured ceilings judge the ops (repeatable; default: datasheet roofs)"
    parser.add_argument(
        "--roofs", action="append", default=[], metavar="RESULTS.json", type=path_option, help=roofs_help
    )
    output_help = "results file to append the profile to (created when absent); its own ceilings are used as roofs too"
    parser.add_argument("--output", "-o", metavar="RESULTS.json", type=path_option, help=output_help)
    add_value(parser, "--top", 10, "N", "groups in the table (default 10)")
    add_value(parser, "--width", 80, "COLUMNS", "width of the table and chart (default 80)")
    parser.add_argument("--no-chart", action="store_true", help="do not draw the roofline")
    add_value(parser, "--modules", 1, "DEPTH", "module totals down to this depth (default 1; 0 hides them)")
    parser.add_argument("--no-energy", action="store_true", help="do not read the energy counters")
    parser.add_argument("--no-telemetry", action="store_true", help="do not measure DRAM bytes with GPM telemetry")
    parser.add_argument("--json", action="store_true", help="print the workload entry (with the groups) as JSON")


def run(args: argparse.Namespace) -> int:
    import json
    import os

    from gpuscope.commands.measure import check_output, load_function, parse_arguments, torch_device_of

    if args.steps < 1:
        raise UsageError(f"--steps {args.steps}: must be at least 1")
    if args.warmup < 0:
        raise UsageError(f"--warmup {args.warmup}: must not be negative")
    if args.top < 1 or args.width < 40:
        raise UsageError("--top must be at least 1 and --width at least 40")
    roofs = list(args.roofs)
    for path in roofs:
        if not os.path.isfile(path):
            raise UsageError(f"--roofs {path}: no such file")
    if args.output:
        check_output(args.output)  # a bad results file fails before torch loads
        if os.path.isfile(args.output) and args.output not in roofs:
            roofs.append(args.output)
    function = load_function(args.target)
    positional, keywords = parse_arguments(args.args_json, torch_device_of(args.device))

    from gpuscope.profiling.api import profile
    from gpuscope.profiling.render import module_table, render_chart, summary_lines, top_table

    result = call_user(args.target, lambda: profile(
        function, *positional, kwargs=keywords, name=args.name or args.target, device=args.device,
        steps=args.steps, warmup=args.warmup, roofs=roofs, results=args.output, energy=not args.no_energy,
        telemetry=not args.no_telemetry,
    ))  # fmt: skip
    if args.json:
        print(json.dumps(result.to_workload(), indent=2, allow_nan=False, default=str))
        return 0
    out = sys.stdout
    print("\n".join(summary_lines(result)), file=out)
    print(file=out)
    print("\n".join(top_table(result, limit=args.top, width=args.width)), file=out)
    if args.modules > 0:
        print(file=out)
        print("\n".join(module_table(result, depth=args.modules, width=args.width)), file=out)
    if not args.no_chart:
        print(file=out)
        from gpuscope.textsafe import write_styled  # the chart's colours reach the terminal

        write_styled(out, render_chart(result, width=args.width, height=22, color=out.isatty()) + "\n")
    if args.output is None:
        print("  not saved: add --output RESULTS.json to keep it", file=out)
    return 0
