"""Collectives as nccl-tests reports them, checked against their own raw timings (issue 33).

Runs every op (all-reduce, all-gather, reduce-scatter, all-to-all, broadcast) with gloo between
``--world`` local processes (CPU, loopback) through ``gpuscope``'s collective probe, then, for each
op and size, recomputes busbw from the raw per-iteration times the results carry, by nccl-tests'
formulas written out again here (doc/PERFORMANCE.md: ``t`` = the slowest rank's time per call
(gpuscope: the best sample of the slowest rank's mean call), ``algbw = S / t``, ``busbw = algbw x
2(n-1)/n`` (all-reduce), ``x (n-1)/n`` (all-gather, reduce-scatter, all-to-all), ``x 1``
(broadcast)). Target: every ratio gpuscope / recomputed within 5%.

Then ``--straggler-runs`` (5) runs of all-reduce with one rank slowed on purpose (it sleeps
``--slow-ms`` before each timed call, outside its timer: a test-only keyword of the probe, not a
command-line option), a different rank each run; target: the slowed rank named the straggler (and
no other rank) in 5 of 5. Prints the ratios; exit 1 when a target is missed.

Usage: .venv/bin/python benchmarks/bench_collectives.py [--world 4] [--sizes 64KiB 1MiB] [--json OUT]
About a minute on a busy 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gpuscope.probing.collective import collective_probe  # noqa: E402
from gpuscope.probing.collective_stats import OPS, sample_times_s  # noqa: E402
from gpuscope.probing.context import ProbeContext  # noqa: E402
from gpuscope.probing.environment import MemoryBudget, parse_device  # noqa: E402
from gpuscope.probing.timing import TimingPolicy  # noqa: E402
from gpuscope.schema.core import detail_map  # noqa: E402
from gpuscope.schema.results import Measurement  # noqa: E402
from gpuscope.schema.suites import parse_size  # noqa: E402

TOLERANCE = 0.05


def nccl_tests_factor(op: str, n: int) -> float:
    """nccl-tests doc/PERFORMANCE.md, written out independently of gpuscope's bus_factor."""
    return {"allreduce": 2 * (n - 1) / n, "broadcast": 1.0}.get(op, (n - 1) / n)


def run(
    ops: list[str], sizes: list[int], world: int, samples: int, target_s: float, **slow: float | int
) -> list[Measurement]:
    device = parse_device("cpu")
    policy = TimingPolicy(samples=samples, target_sample_s=target_s)
    ctx = ProbeContext(device=device, budget=MemoryBudget(device), ceiling_policy=policy)
    records: list[Measurement] = []
    collective_probe(ops, sizes, world, ctx, records.append, timeout_s=300, **slow)  # type: ignore[arg-type]
    return records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, default=4)
    parser.add_argument("--sizes", nargs="+", default=["64KiB", "1MiB"])
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--straggler-runs", type=int, default=5)
    parser.add_argument("--slow-ms", type=float, default=4.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sizes = [int(parse_size(text) or 0) for text in args.sizes]
    started = time.perf_counter()
    out: dict[str, object] = {"world": args.world, "tolerance": TOLERANCE}
    print(f"gloo, {args.world} local processes; busbw gpuscope / recomputed from the raw per-iteration times")
    heads = ("busbw GB/s", "recomputed", "ratio", "p50 us", "p99 us", "spread")
    print(f"{'op':<14} {'size':>9} " + " ".join(f"{h:>{w}}" for h, w in zip(heads, (11, 11, 7, 8, 8, 7), strict=True)))
    ratios: list[dict[str, object]] = []
    failed = False
    for record in run(list(OPS), sizes, args.world, args.samples, 0.02):
        parameters, timing = detail_map(record.parameters), detail_map(record.timing)
        op = str(parameters["op"])
        if record.status != "ok" or not isinstance(timing.get("rank_iteration_s"), list):
            print(f"{op:<14} {record.status}: {record.error}")
            failed = True
            continue
        raw = timing["rank_iteration_s"]
        best_s = min(sample_times_s(raw, int(timing["inner_reps"])))  # type: ignore[arg-type]
        recomputed = (record.bytes or 0) / best_s * nccl_tests_factor(op, args.world)
        ratio = (record.busbw_bytes_per_s or 0.0) / recomputed
        failed |= abs(ratio - 1.0) > TOLERANCE
        ratios.append({"op": op, "size_bytes": record.bytes, "ratio": ratio})
        p50_us, p99_us = float(timing["iteration_p50_s"]) * 1e6, float(timing["iteration_p99_s"]) * 1e6  # type: ignore[arg-type]
        print(
            f"{op:<14} {record.bytes:>9} {(record.busbw_bytes_per_s or 0) / 1e9:>11.3f} {recomputed / 1e9:>11.3f} "
            f"{ratio:>7.4f} {p50_us:>8.0f} {p99_us:>8.0f} {float(timing['rank_spread']):>7.1%}"  # type: ignore[arg-type]
        )
    out["busbw_ratios"] = ratios
    named = 0
    runs: list[dict[str, object]] = []
    print(f"\nall-reduce with one rank sleeping {args.slow_ms:g} ms before each call, {args.straggler_runs} runs")
    for k in range(args.straggler_runs):
        slow_rank = (k + 1) % args.world
        records = run(["allreduce"], sizes[:1], args.world, 5, 0.08, slow_rank=slow_rank, slow_s=args.slow_ms / 1e3)
        timing = detail_map(records[0].timing) if records else {}
        found = [int(s["rank"]) for s in timing.get("stragglers") or []]  # type: ignore[index, union-attr]
        hit = found == [slow_rank]
        named += hit
        fraction = (timing.get("straggler") or {}).get("fraction_of_median")  # type: ignore[union-attr]
        share = f" ({float(fraction):.0%} of the median rank's time in the call)" if fraction is not None else ""
        late = (timing.get("late_iterations") or {}).get(str(slow_rank))  # type: ignore[union-attr]
        print(
            f"  run {k + 1}: slowed rank {slow_rank}, named {found or 'none'}{share}; "
            f"late in {late} of {timing.get('iterations_timed')} iterations"
        )
        runs.append({"slowed": slow_rank, "named": found, "fraction_of_median": fraction, "late_iterations": late})
    out["straggler_runs"] = runs
    out["straggler_named"] = named
    failed |= named != args.straggler_runs
    worst = max((abs(float(r["ratio"]) - 1.0) for r in ratios), default=float("nan"))  # type: ignore[arg-type]
    print(f"\nbusbw within {TOLERANCE:.0%}: worst |ratio - 1| = {worst:.4f}; straggler named in {named} of "
          f"{args.straggler_runs}; {time.perf_counter() - started:.0f} s")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
