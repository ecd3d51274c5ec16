"""Stragglers of a multi-rank results file (``gpuscope probe --distributed``, docs/cluster.md).

The probe run marks each compared ceiling with ``straggler`` (true/false), ``median_value`` and
``fraction_of_median``, and lists the flagged ones under ``stragglers``; the margin used is
``straggler_margin``. The roofline, the reports, ``gpuscope compare`` and the TUI read the
per-ceiling fields through these helpers (the list is derived from them, so a file whose
``stragglers`` list is malformed cannot mislead). Pure data, no imports beyond the stdlib.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["is_straggler", "ceiling_median", "below_median_percent", "straggler_margin", "below_text"]


def _positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def is_straggler(entry: Any) -> bool:
    """True when a ceiling (or device, measurement, workload) entry carries ``straggler: true``."""
    return isinstance(entry, dict) and entry.get("straggler") is True


def ceiling_median(ceiling: dict[str, Any]) -> float | None:
    """The median of the same ceiling across ranks (``median_value``, same unit), or None."""
    return _positive(ceiling.get("median_value"))


def below_median_percent(value: Any, median: Any) -> float | None:
    """How far ``value`` is below ``median``, in percent of the median (negative when above)."""
    value_f, median_f = _positive(value), _positive(median)
    if value_f is None or median_f is None:
        return None
    return (1.0 - value_f / median_f) * 100.0


def straggler_margin(document: dict[str, Any]) -> float | None:
    """The margin (a fraction, 0.10 = 10%) the probe run used, or None when not recorded."""
    margin = document.get("straggler_margin")
    if (
        isinstance(margin, bool)
        or not isinstance(margin, (int, float))
        or not math.isfinite(margin)
        or not 0 < margin < 1
    ):
        return None
    return float(margin)


def below_text(percent: float | None) -> str:
    """``"20% below the median"``, or ``"below the median"`` when the percent is unknown."""
    return "below the median" if percent is None else f"{percent:.0f}% below the median"
