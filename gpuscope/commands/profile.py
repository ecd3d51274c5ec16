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

import msgspec

from gpuscope.commands.measure import check_output, load_function, parse_arguments, torch_device_of
from gpuscope.commands.options import call_user
from gpuscope.errors import UsageError
from gpuscope.extras import require_probes
from gpuscope.profiling.api import profile
from gpuscope.profiling.render import module_table, render_chart, summary_lines, top_table
from gpuscope.profiling.result import ProfileResult
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

    if getattr(args, "generate", None) is not None:  # the target builds (model, inputs[, generate kwargs])
        from gpuscope.profiling.generation import profile_built

        if getattr(args, "compare_eager", False):
            raise UsageError("--generate and --compare-eager: one at a time")
        result = call_user(args.target, lambda: profile_built(
            function(*positional, **keywords), max_new_tokens=args.generate, name=args.name or args.target,
            device=args.device, steps=args.steps, warmup=args.warmup, roofs=roofs, results=args.output,
            energy=not args.no_energy, telemetry=not args.no_telemetry,
        ))  # fmt: skip
    else:
        # with --compare-eager both profiles are written once the comparison is in the compiled one
        save_to = None if getattr(args, "compare_eager", False) else args.output
        result = call_user(args.target, lambda: profile(
            function, *positional, kwargs=keywords, name=args.name or args.target, device=args.device,
            steps=args.steps, warmup=args.warmup, roofs=roofs, results=save_to, energy=not args.no_energy,
            telemetry=not args.no_telemetry,
        ))  # fmt: skip
    compared = None
    if getattr(args, "compare_eager", False):  # the same step with torch.compile off, in this process
        from gpuscope.profiling.build import append_profile
        from gpuscope.profiling.compiled import run_eager
        from gpuscope.profiling.compiled_compare import compare_eager, time_unprofiled

        def eager_profile() -> ProfileResult:
            with run_eager():
                return profile(
                    function, *positional, kwargs=keywords, name=f"{args.name or args.target} (eager)",
                    device=args.device, steps=args.steps, warmup=args.warmup, roofs=roofs, results=None,
                    energy=not args.no_energy, telemetry=not args.no_telemetry,
                )  # fmt: skip

        def unprofiled() -> tuple[float, float]:  # the same step without a profiler, each way
            import torch

            def step() -> object:
                return function(*positional, **keywords)

            cuda = result.device.startswith("cuda")
            synchronize = torch.cuda.synchronize if cuda else (lambda: None)
            compiled_s = time_unprofiled(step, args.steps, synchronize)
            with run_eager():
                eager_s = time_unprofiled(step, args.steps, synchronize)
            return compiled_s, eager_s

        try:
            eager = call_user(args.target, eager_profile)
            compared = compare_eager(result, eager, call_user(args.target, unprofiled))
        except BaseException:
            if args.output:  # the compiled profile is kept even when the eager side fails
                append_profile(os.path.abspath(args.output), result)
            raise
        if result.compiled is not None:  # the report reads it from the compiled profile
            result.compiled.compare_eager = compared
        if args.output:
            for written in (result, eager):
                append_profile(os.path.abspath(args.output), written)
                written.results_path = str(args.output)
    if args.json:
        if compared is not None:
            document = {
                "compiled": msgspec.json.decode(encode_json(result.to_workload())),  # as --json alone prints it
                "eager": msgspec.json.decode(encode_json(eager.to_workload())),
                "compare_eager": [row.to_json() for row in compared],
            }
            print(encode_json(document, indent=2).decode())
            return 0
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
        if result.generation is not None:  # prefill and decode as two points (gpuscope.profiling.generation)
            from gpuscope.profiling.generation_result import render_generation_chart

            chart = render_generation_chart(result.generation, result.device_key, result.device_roofs,
                                            width=args.width, color=out.isatty())  # fmt: skip
            print(file=out)
            write_styled(out, chart + "\n")
    if compared is not None:
        from gpuscope.profiling.compiled_compare import compare_lines

        print(file=out)
        print("\n".join(compare_lines(compared, width=args.width)), file=out)
    if args.output is None:
        print("  not saved: add --output RESULTS.json to keep it", file=out)
    return 0
