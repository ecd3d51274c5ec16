"""``gpuscope profile module:function``: where one step's time goes, op by op, against the roofline
(the command-line face of ``gpuscope.profile``).

The function is one step (e.g. a training step); it is called ``--warmup`` + 1 + ``--steps``
times. Arguments come from ``--args-json`` exactly as for ``gpuscope measure``. Prints the step
summary, the top groups by time lost and the roofline of the groups; ``--output`` appends the
profile to a results file as a workload (``gpuscope report`` shows it).
"""

from __future__ import annotations

import argparse
import os
import sys

from gpuscope.commands.measure import check_output, load_function, parse_arguments, torch_device_of
from gpuscope.commands.options import call_user
from gpuscope.errors import UsageError
from gpuscope.extras import require_probes
from gpuscope.profiling.api import profile
from gpuscope.profiling.render import module_table, render_chart, summary_lines, top_table
from gpuscope.schema.core import encode_json
from gpuscope.textsafe import write_styled


def run(args: argparse.Namespace) -> int:
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
    require_probes("profile")
    function = load_function(args.target)
    positional, keywords = parse_arguments(args.args_json, torch_device_of(args.device))

    result = call_user(args.target, lambda: profile(
        function, *positional, kwargs=keywords, name=args.name or args.target, device=args.device,
        steps=args.steps, warmup=args.warmup, roofs=roofs, results=args.output, energy=not args.no_energy,
        telemetry=not args.no_telemetry,
    ))  # fmt: skip
    if args.json:
        print(encode_json(result.to_workload(), indent=2).decode())
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

        write_styled(out, render_chart(result, width=args.width, height=22, color=out.isatty()) + "\n")
    if args.output is None:
        print("  not saved: add --output RESULTS.json to keep it", file=out)
    return 0
