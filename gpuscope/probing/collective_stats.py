"""Collectives as nccl-tests reports them: the size and bus-bandwidth rules per op, and the
per-rank statistics of the raw per-iteration times (pure data: no torch).

nccl-tests (doc/PERFORMANCE.md): ``algbw = S / t``; ``busbw = algbw x factor`` with factor
2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for broadcast.
``S`` is the size of the whole array: the all-reduce and broadcast buffer, the all-gather output
(n x the per-rank input), the reduce-scatter input (n x the per-rank output), the all-to-all
per-rank buffer (n chunks).

Per-iteration times: every rank times each call alone (from the call until its result is
ready); ``rank_iteration_s[r]`` is rank ``r``'s list, sample after sample. A sample's time is
the slowest rank's mean call time in that sample (the ``samples_s`` the ceiling statistic reads);
``iteration_p50_s``/``iteration_p99_s`` are percentiles (linear interpolation) of each
iteration's slowest-rank time.

Stragglers, by the rule ``gpuscope probe --distributed`` states ("a rank more than the margin
below the median of the same quantity", :data:`STRAGGLER_MARGIN`, 10%), applied to each
iteration: a rank that arrives late at a collective spends the *least* time inside it, since the
others wait for it there. In an iteration a rank is *late* when its time inside the call is more
than the margin below the median of the ranks' times in that call; a rank late in at least
:data:`CONSISTENT_FRACTION` (80%) of the timed iterations is a straggler (``stragglers``; the most
consistent one is ``straggler``). One late iteration is noise; a rank late in most of them is slow.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from gpuscope.probing.stats import percentile
from gpuscope.schema.core import Detail, DetailMap, as_detail

__all__ = [
    "OPS",
    "BYTES_RULE",
    "STRAGGLER_MARGIN",
    "CONSISTENT_FRACTION",
    "bus_factor",
    "sample_times_s",
    "iteration_times_s",
    "rank_statistics",
]

#: The collectives timed, in nccl-tests' order.
OPS: tuple[str, ...] = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast")

BYTES_RULE = (
    "nccl-tests: S = bytes of the whole array (all-reduce and broadcast: the buffer; all-gather: the gathered "
    "output; reduce-scatter: the input, n x the output; all-to-all: the per-rank buffer); algbw = S / time; "
    "busbw = algbw x 2(n-1)/n (all-reduce), x (n-1)/n (all-gather, reduce-scatter, all-to-all), x 1 (broadcast)"
)

#: A rank more than this fraction faster inside the call than the slowest (the others waited for
#: it) is late; the same margin as gpuscope.probing.cluster.DEFAULT_STRAGGLER_MARGIN.
STRAGGLER_MARGIN = 0.10
#: ... in at least this fraction of the timed iterations.
CONSISTENT_FRACTION = 0.8


def bus_factor(op: str, world_size: int) -> float:
    """nccl-tests' bus bandwidth factor for ``op`` over ``world_size`` ranks."""
    n = world_size
    if n < 1:
        raise ValueError(f"world size {n} must be at least 1")
    if op == "allreduce":
        return 2.0 * (n - 1) / n
    if op in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / n
    if op == "broadcast":
        return 1.0
    raise ValueError(f"unknown collective {op!r}")


def sample_times_s(rank_iteration_s: Sequence[Sequence[float]], iters: int) -> list[float]:
    """Each sample's time: the slowest rank's mean call time over the sample's ``iters`` calls."""
    if not rank_iteration_s or iters < 1:
        return []
    count = min(len(times) for times in rank_iteration_s) // iters
    return [max(sum(times[k * iters : (k + 1) * iters]) / iters for times in rank_iteration_s) for k in range(count)]


def iteration_times_s(rank_iteration_s: Sequence[Sequence[float]]) -> list[float]:
    """Each iteration's slowest-rank time."""
    if not rank_iteration_s:
        return []
    count = min(len(times) for times in rank_iteration_s)
    return [max(times[i] for times in rank_iteration_s) for i in range(count)]


def rank_statistics(
    rank_iteration_s: Sequence[Sequence[float]], ranks: Sequence[int], margin: float = STRAGGLER_MARGIN
) -> DetailMap:
    """p50/p99 per iteration, each rank's mean call time, min/max/spread across ranks and the
    straggler (or None) by the rule of this module; ``ranks`` names the global rank of each row."""
    iterations = iteration_times_s(rank_iteration_s)
    if not iterations:
        return {}
    count = len(iterations)
    means = [sum(times[:count]) / count for times in rank_iteration_s]
    fastest, slowest = means.index(min(means)), means.index(max(means))
    late = [0] * len(rank_iteration_s)
    fractions: list[list[float]] = [[] for _ in rank_iteration_s]
    for i in range(count):
        column = [times[i] for times in rank_iteration_s]
        middle = statistics.median(column)
        for r, value in enumerate(column):
            fraction = value / middle if middle > 0 else 1.0
            fractions[r].append(fraction)
            late[r] += fraction < 1.0 - margin
    flagged: list[Detail] = []
    if len(rank_iteration_s) >= 2:
        for r in sorted(range(len(late)), key=lambda r: -late[r]):
            share = late[r] / count
            if share < CONSISTENT_FRACTION:
                continue
            fraction = statistics.median(fractions[r])
            flagged.append(
                as_detail(
                    {
                        "rank": int(ranks[r]),
                        "late_iterations_fraction": share,
                        "fraction_of_median": fraction,
                        "below_median_percent": (1.0 - fraction) * 100.0,
                        "rule": f"time inside the call more than {margin:.0%} below the median rank's in >= "
                        f"{CONSISTENT_FRACTION:.0%} of iterations (the others waited for it)",
                    }
                )
            )
    straggler: Detail = flagged[0] if flagged else None
    return {
        "iterations_timed": count,
        "iteration_p50_s": percentile(iterations, 0.5),
        "iteration_p99_s": percentile(iterations, 0.99),
        "rank_time_s": as_detail({str(ranks[r]): mean for r, mean in enumerate(means)}),
        "rank_min_s": means[fastest],
        "rank_max_s": means[slowest],
        "rank_spread": (means[slowest] - means[fastest]) / means[slowest] if means[slowest] > 0 else 0.0,
        "fastest_rank": int(ranks[fastest]),
        "slowest_rank": int(ranks[slowest]),
        "late_iterations": as_detail({str(ranks[r]): late[r] for r in range(len(late))}),
        "straggler": straggler,
        "stragglers": as_detail(flagged),
    }
