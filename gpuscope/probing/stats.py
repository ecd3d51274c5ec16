"""Statistics over timed samples: best-of-N for ceilings, median with p10/p90 for workloads."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["percentile", "summarize", "Summary", "STATISTICS"]

#: ``best``: the fastest sample (ceilings, as STREAM and ERT report); ``median``: workloads.
STATISTICS = ("best", "median")


def percentile(values: Sequence[float], fraction: float) -> float:
    """Linear-interpolated percentile (``fraction`` in [0, 1]) of ``values`` (not empty)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction {fraction} outside [0, 1]")
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = math.floor(position)
    high = math.ceil(position)
    if low == high:
        return float(ordered[low])
    weight = position - low
    return float(ordered[low] * (1.0 - weight) + ordered[high] * weight)


@dataclass(frozen=True)
class Summary:
    """Per-call times in seconds: ``time_s`` is the statistic's (the minimum for ``best``, the
    median for ``median``); ``spread`` is ``(p90 - p10) / median``."""

    statistic: str
    n: int
    time_s: float
    time_min_s: float
    time_median_s: float
    time_p10_s: float
    time_p90_s: float
    time_max_s: float
    spread: float


def summarize(samples_s: Sequence[float], statistic: str) -> Summary:
    """The :class:`Summary` of per-call times in seconds (``statistic``: ``best`` or ``median``)."""
    if statistic not in STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; expected one of {', '.join(STATISTICS)}")
    if not samples_s:
        raise ValueError("no samples")
    median = percentile(samples_s, 0.5)
    p10 = percentile(samples_s, 0.1)
    p90 = percentile(samples_s, 0.9)
    best = min(samples_s)
    return Summary(
        statistic=statistic,
        n=len(samples_s),
        time_s=best if statistic == "best" else median,
        time_min_s=best,
        time_median_s=median,
        time_p10_s=p10,
        time_p90_s=p90,
        time_max_s=max(samples_s),
        spread=(p90 - p10) / median if median > 0 else 0.0,
    )
