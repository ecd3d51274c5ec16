"""Stragglers of a multi-rank results file (``gpuscope probe --distributed``, docs/cluster.md).

The probe run marks each compared ceiling with ``straggler`` (true/false), ``median_value`` and
``fraction_of_median``, and lists the flagged ones under ``stragglers``; the margin used is
``straggler_margin``. The reports and ``gpuscope compare`` word the per-ceiling fields with
these helpers. Pure data, no imports beyond the stdlib.
"""

from __future__ import annotations

import math

__all__ = ["below_median_percent", "below_text"]


def _positive(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def below_median_percent(value: float | None, median: float | None) -> float | None:
    """How far ``value`` is below ``median``, in percent of the median (negative when above)."""
    value_f, median_f = _positive(value), _positive(median)
    if value_f is None or median_f is None:
        return None
    return (1.0 - value_f / median_f) * 100.0


def below_text(percent: float | None) -> str:
    """``"20% below the median"``, or ``"below the median"`` when the percent is unknown."""
    return "below the median" if percent is None else f"{percent:.0f}% below the median"
