"""SI formatting for roofline numbers: FLOP/s, B/s, bytes and FLOP/byte. GB means 1e9 bytes."""

from __future__ import annotations

import math

__all__ = ["format_si", "format_bytes", "format_intensity", "format_count"]

_PREFIXES = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
_SMALL = ((1e-3, "m"), (1e-6, "µ"), (1e-9, "n"))


def format_si(value: float | None, unit: str = "", digits: int = 3) -> str:
    """``989e12, "FLOP/s"`` -> ``"989 TFLOP/s"``; ``None`` or a non-finite value -> ``"-"``.

    ``digits`` significant digits (at least 1); values below 1 use m, µ, n prefixes."""
    if value is None or not math.isfinite(value):
        return "-"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if magnitude == 0:
        return f"0 {unit}".rstrip() if unit else "0"
    # the first prefix the magnitude reaches, else the last one
    table = _PREFIXES if magnitude >= 1 else _SMALL
    scale, prefix = next((entry for entry in table if magnitude >= entry[0] * 0.9995), table[-1])
    scaled = magnitude / scale
    decimals = max(0, max(1, digits) - 1 - int(math.floor(math.log10(scaled))) if scaled > 0 else 0)
    text = f"{scaled:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    separator = " " if unit else ""
    return f"{sign}{text}{separator}{prefix}{unit}" if unit else f"{sign}{text}{prefix}"


def format_bytes(value: float | None) -> str:
    """Bytes with an SI prefix (1 GB = 1e9 bytes): ``"50 MB"``."""
    return format_si(value, "B")


def format_count(value: float | None) -> str:
    """A bare count with an SI prefix: ``"2.15G"`` (for FLOP totals)."""
    return format_si(value, "")


def format_intensity(value: float | None) -> str:
    """Arithmetic intensity in FLOP/byte, 3 significant digits: ``"0.083"``, ``"341"``."""
    if value is None or not math.isfinite(value):
        return "-"
    if value == 0:
        return "0"
    if abs(value) >= 1e3:
        return format_si(value, "", 3)
    return f"{value:.3g}"
