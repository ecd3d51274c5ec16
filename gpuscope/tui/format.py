"""Text for metric values: units, SI prefixes, and "n/a" for unavailable metrics (never 0).

No Textual import. GB means 1e9 bytes (as everywhere in gpuscope); GPU memory is shown in
MiB/GiB (2**20, 2**30 bytes), as nvidia-smi shows it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from gpuscope.telemetry.values import Reason, Unavailable

__all__ = [
    "NA",
    "si",
    "fmt_bytes",
    "fmt_mib",
    "fmt_gib",
    "fmt_rate",
    "fmt_percent",
    "fmt_mhz",
    "fmt_watts",
    "fmt_celsius",
    "fmt_flops",
    "fmt_metric",
    "reason_text",
    "bar",
]

#: What an unavailable metric reads as.
NA = "n/a"

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))

_REASON_WORDS = {
    Reason.NOT_SUPPORTED: "not supported by this GPU or driver",
    Reason.NO_PERMISSION: "no permission",
    Reason.GPU_LOST: "GPU lost",
    Reason.NO_DRIVER: "no NVIDIA driver",
    Reason.DRIVER_TOO_OLD: "driver too old",
    Reason.DRIVER_MISMATCH: "driver/library version mismatch",
    Reason.WARMING_UP: "warming up (a rate needs two samples)",
    Reason.NOT_APPLICABLE: "not applicable",
    Reason.ERROR: "error",
}


def si(value: float, unit: str = "", digits: int = 3) -> str:
    """``value`` with an SI prefix and ``digits`` significant digits: ``si(3.2e12, "B/s")`` -> ``3.20 TB/s``."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return NA
    magnitude = abs(value)
    for scale, prefix in _PREFIXES:
        if magnitude >= scale * 0.9995:
            return f"{_sig(value / scale, digits)} {prefix}{unit}".rstrip()
    return f"{_sig(value, digits)} {unit}".rstrip()


def _sig(value: float, digits: int) -> str:
    magnitude = abs(value)
    if magnitude >= 100 or magnitude == 0:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.{max(0, digits - 2)}f}"
    return f"{value:.{max(0, digits - 1)}f}"


def _with_prefix(unit: str) -> Callable[[float], str]:
    def fmt(value: float) -> str:
        return si(float(value), unit)

    return fmt


def _whole(unit: str) -> Callable[[float], str]:
    def fmt(value: float) -> str:
        return f"{value:.0f}{unit}"

    return fmt


#: Bytes with a decimal prefix: ``80.1 GB``; bytes per second: ``3.21 TB/s``; FLOP/s: ``989 TFLOP/s``.
fmt_bytes, fmt_rate, fmt_flops = _with_prefix("B"), _with_prefix("B/s"), _with_prefix("FLOP/s")
#: Whole numbers with their unit: ``42%``, ``1980 MHz``, ``300 W``, ``65°C``.
fmt_percent, fmt_mhz, fmt_watts, fmt_celsius = _whole("%"), _whole(" MHz"), _whole(" W"), _whole("°C")


def fmt_mib(value: float) -> str:
    """Bytes in binary mebibytes, as nvidia-smi shows GPU memory: ``61440 MiB``."""
    return f"{value / 2**20:.0f} MiB"


def fmt_gib(value: float) -> str:
    """Bytes in binary gibibytes: ``79.6 GiB``."""
    return f"{value / 2**30:.1f} GiB"


def fmt_metric(value: Any, formatter: Callable[[Any], str] = str) -> str:
    """``formatter(value)``, or ``n/a`` for an :class:`Unavailable` (never a zero)."""
    if isinstance(value, Unavailable) or value is None:
        return NA
    return formatter(value)


def reason_text(value: Unavailable) -> str:
    """One human line for why a metric is unavailable: ``not supported by this GPU or driver: GPM needs Hopper``."""
    words = _REASON_WORDS.get(value.reason, value.reason.value)
    if not value.detail:
        return words
    if words in value.detail:  # the detail already says it: say it once
        return value.detail
    return f"{words}: {value.detail}"


_EIGHTHS = " ▏▎▍▌▋▊▉█"


def bar(fraction: float, width: int) -> str:
    """A horizontal bar ``width`` cells wide filled to ``fraction`` (0..1), in eighths."""
    if width <= 0:
        return ""
    fraction = min(1.0, max(0.0, fraction if math.isfinite(fraction) else 0.0))
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (_EIGHTHS[part] if part else "")
    return text.ljust(width)
