"""Benchmark: gpuscope's CPU fp32 and fp64 GEMM ceilings against the best BLAS reachable in this
process, measured in the same run.

The reference times numpy.matmul (numpy's BLAS) and torch.mm (torch's BLAS) directly, square
shapes 1024-3072, best of 5 calls each, and keeps the best of everything. gpuscope runs its
ceiling search with the quick suite's shapes and libraries. Rounds alternate the two. Target:
gpuscope / reference >= 0.95 for fp32 and fp64.

    .venv/bin/python benchmarks/bench_probes_gemm.py [--rounds 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DTYPES = ("fp32", "fp64")


def reference(dtype: str, sizes: tuple[int, ...] = (1024, 2048, 3072)) -> dict[str, float | str]:
    import numpy as np
    import torch

    best: dict[str, float | str] = {"value": 0.0, "library": ""}
    for n in sizes:
        flops = 2 * n**3
        np_dtype = np.float32 if dtype == "fp32" else np.float64
        a = np.random.default_rng(0).random((n, n), dtype=np_dtype) + 0.5
        b = np.random.default_rng(1).random((n, n), dtype=np_dtype) + 0.5
        c = np.empty_like(a)
        ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
        calls = (
            ("numpy", functools.partial(np.matmul, a, b, out=c)),
            ("torch", functools.partial(torch.mm, ta, tb, out=tc)),
        )
        for library, call in calls:
            call()
            fastest = min(_timed(call) for _ in range(5))
            if flops / fastest > float(best["value"]):
                best = {"value": flops / fastest, "library": library, "shape": n}
    return best


def _timed(call) -> float:  # noqa: ANN001
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def gpuscope_ceiling(dtype: str) -> dict[str, float | str]:
    from gpuscope.probing.context import ProbeContext
    from gpuscope.probing.environment import MemoryBudget, parse_device, versions
    from gpuscope.probing.matmul import matmul_ceiling
    from gpuscope.probing.suite import load_suite
    from gpuscope.probing.timing import TimingPolicy

    suite = load_suite("quick")
    from gpuscope.schema.suites import MatmulOptions

    options = next(p.options for p in suite.probes if isinstance(p.options, MatmulOptions) and p.runs_on("cpu"))
    settings = suite.settings
    device = parse_device("cpu")
    ctx = ProbeContext(
        device=device,
        budget=MemoryBudget(device),
        ceiling_policy=TimingPolicy(
            samples=settings.samples, target_sample_s=settings.target_sample_s, warmup_max_s=settings.warmup_max_s
        ),
        cancel=threading.Event(),
        versions=versions(device),
        max_call_s=settings.max_call_s,
    )
    best = matmul_ceiling(dtype, options.matmul_shapes(), list(options.libraries), ctx, lambda record: None)
    if best is None or best.flop_per_s is None:
        raise SystemExit(f"gpuscope found no {dtype} ceiling")
    return {"value": best.flop_per_s, "library": best.library or "?", "shape": best.name or "?"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=60.0,
        metavar="S",
        help="before each round wait up to S seconds for an idle CPU",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _quiet import wait_for_quiet

    ref: dict[str, dict] = {d: {"value": 0.0} for d in DTYPES}
    ours: dict[str, dict] = {d: {"value": 0.0} for d in DTYPES}
    for round_index in range(args.rounds):
        for dtype in DTYPES:
            busy = wait_for_quiet(args.wait_quiet)
            print(f"round {round_index + 1} {dtype}: CPU {busy}% busy before it", flush=True)
            r = reference(dtype)
            g = gpuscope_ceiling(dtype)
            ref[dtype] = max(ref[dtype], r, key=lambda x: x["value"])
            ours[dtype] = max(ours[dtype], g, key=lambda x: x["value"])
            print(
                f"round {round_index + 1} {dtype}: reference {r['value'] / 1e9:.1f} GFLOP/s "
                f"({r['library']} {r['shape']}), gpuscope {g['value'] / 1e9:.1f} ({g['library']})",
                flush=True,
            )
    ok = True
    print(f"\n{'dtype':<6}{'best BLAS GFLOP/s':>19}{'gpuscope GFLOP/s':>18}{'ratio':>8}  winner")
    report = {}
    for dtype in DTYPES:
        ratio = ours[dtype]["value"] / ref[dtype]["value"]
        ok &= ratio >= 0.95
        report[dtype] = {"reference": ref[dtype], "gpuscope": ours[dtype], "ratio": ratio}
        print(
            f"{dtype:<6}{ref[dtype]['value'] / 1e9:>19.1f}{ours[dtype]['value'] / 1e9:>18.1f}{ratio:>8.3f}  "
            f"reference {ref[dtype]['library']}, gpuscope {ours[dtype]['library']}"
        )
    print("target (ratio >= 0.95):", "met" if ok else "NOT met")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
