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

from gpuscope.errors import GpuscopeError, UsageError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        metavar="MODULE:FUNCTION",
        help="one step to profile: a module (dotted name or path/to/file.py) and a function in it",
    )
    parser.add_argument(
        "--args-json",
        metavar="JSON",
        help='arguments as for `gpuscope measure`: a JSON list, or {"args": [...], "kwargs": {...}}; '
        '{"tensor": [shape], "dtype": "float32"} makes a random tensor',
    )
    parser.add_argument("--name", help="label of the profile (default: MODULE:FUNCTION)")
    parser.add_argument(
        "--device",
        help="cpu, cuda or cuda:N, where --args-json tensors are made "
        "(default: cpu when --args-json makes tensors, else cuda when available, else cpu)",
    )
    parser.add_argument("--steps", type=int, default=3, metavar="N", help="profiled steps (default 3)")
    parser.add_argument(
        "--warmup",
        type=int,
        default=1,
        metavar="N",
        help="warm-up steps before the counting step (default 1)",
    )
    parser.add_argument(
        "--roofs",
        action="append",
        default=[],
        metavar="RESULTS.json",
        help="probe results whose measured ceilings judge the ops (repeatable; default: datasheet roofs)",
    )
    parser.add_argument(
        "--output",
        "-o",
        metavar="RESULTS.json",
        help="results file to append the profile to (created when absent); its own ceilings are used as roofs too",
    )
    parser.add_argument(
        "--top",
        type=int,
        default=10,
        metavar="N",
        help="groups in the table (default 10)",
    )
    parser.add_argument(
        "--width",
        type=int,
        default=80,
        metavar="COLUMNS",
        help="width of the table and chart (default 80)",
    )
    parser.add_argument("--no-chart", action="store_true", help="do not draw the roofline")
    parser.add_argument(
        "--modules",
        type=int,
        default=1,
        metavar="DEPTH",
        help="module totals down to this depth (default 1; 0 hides them)",
    )
    parser.add_argument("--no-energy", action="store_true", help="do not read the energy counters")
    parser.add_argument(
        "--no-telemetry",
        action="store_true",
        help="do not measure DRAM bytes with GPM telemetry",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the workload entry (with the groups) as JSON",
    )


def run(args: argparse.Namespace) -> int:
    import json
    import os

    from gpuscope.commands.measure import _check_output, load_function, parse_arguments

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
        _check_output(args.output)  # a bad results file fails before torch loads
        if os.path.isfile(args.output) and args.output not in roofs:
            roofs.append(args.output)
    function = load_function(args.target)
    import torch

    if args.device is not None:
        try:
            torch_device = torch.device(args.device)
        except (RuntimeError, TypeError):
            raise UsageError(f"--device {args.device!r} is not a device (cpu, cuda, cuda:N)") from None
    else:
        torch_device = torch.device("cpu")
    positional, keywords = parse_arguments(args.args_json, torch_device)

    from gpuscope.profiling.api import profile
    from gpuscope.profiling.render import (
        module_table,
        render_chart,
        summary_lines,
        top_table,
    )

    try:
        result = profile(
            function,
            *positional,
            kwargs=keywords,
            name=args.name or args.target,
            device=args.device,
            steps=args.steps,
            warmup=args.warmup,
            roofs=roofs,
            results=args.output,
            energy=not args.no_energy,
            telemetry=not args.no_telemetry,
        )
    except GpuscopeError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's step failed
        message = str(exc).splitlines()[0] if str(exc) else ""
        raise GpuscopeError(f"{args.target} raised {type(exc).__name__}: {message}") from None
    if args.json:
        print(json.dumps(result.to_workload(), indent=2, allow_nan=False, default=str))
        return 0
    out = sys.stdout
    print("\n".join(summary_lines(result)), file=out)
    print(file=out)
    print("\n".join(top_table(result, limit=args.top, width=args.width)), file=out)
    if args.modules > 0:
        print(file=out)
        print(
            "\n".join(module_table(result, depth=args.modules, width=args.width)),
            file=out,
        )
    if not args.no_chart:
        print(file=out)
        print(
            render_chart(result, width=args.width, height=22, color=out.isatty()),
            file=out,
        )
    if args.output is None:
        print("  not saved: add --output RESULTS.json to keep it", file=out)
    return 0
