"""The memory hierarchy must be monotone: a level nearer the core is at least as fast as every
level farther out (L1 >= L2 >= LLC >= DRAM, per kernel). A level slower than one farther out is
a measurement problem (call overhead, a working set that did not fit, load from other
processes): it is flagged wherever "above datasheet" is, and not drawn as a roof.

Pure functions on numbers; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["LEVELS", "OUT_OF_ORDER_TEXT", "out_of_order", "out_of_order_roofs"]

#: memory levels from the core outwards
LEVELS = ("l1", "l2", "llc", "dram")
OUT_OF_ORDER_TEXT = "out of order: slower than a level farther from the core, a measurement problem (not a roof)"


def _gb(value: float) -> str:
    return f"{value / 1e9:.1f} GB/s"


def out_of_order(rates: Mapping[str, float | None], kernel: str | None = None) -> dict[str, str]:
    """level -> flag text for every level slower than a level farther from the core (the
    fastest such farther level is named). ``rates``: B/s per level (None or missing: not
    measured); ``kernel`` names levels ``<level>.<kernel>`` in the text."""

    def name(level: str) -> str:
        return f"{level}.{kernel}" if kernel else level

    known = [(level, float(rate)) for level in LEVELS if isinstance(rate := rates.get(level), (int, float))]
    flags: dict[str, str] = {}
    for position, (level, value) in enumerate(known):
        faster_outside = [(other, rate) for other, rate in known[position + 1 :] if rate > value]
        if faster_outside:
            other, rate = max(faster_outside, key=lambda item: item[1])
            flags[level] = f"{name(level)} {_gb(value)} below {name(other)} {_gb(rate)}: {OUT_OF_ORDER_TEXT}"
    return flags


def out_of_order_roofs(roofs: Mapping[str, float]) -> dict[str, str]:
    """Memory roof name (``"l1.copy"``) -> flag text, for roofs named ``<level>.<kernel>`` whose
    level is slower than a farther level of the same kernel (``dram`` roofs are never flagged)."""
    by_kernel: dict[str, dict[str, float | None]] = {}
    for roof_name, value in roofs.items():
        level, _, kernel = roof_name.partition(".")
        if level in LEVELS and kernel:
            by_kernel.setdefault(kernel, {})[level] = value
    return {
        f"{level}.{kernel}": text
        for kernel, rates in by_kernel.items()
        for level, text in out_of_order(rates, kernel).items()
    }
