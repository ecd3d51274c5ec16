"""Text for metric values: units, SI prefixes, and "n/a" for unavailable metrics (never 0).

No Textual import. GB means 1e9 bytes (as everywhere in gpuscope); GPU memory is shown in
MiB/GiB (2**20, 2**30 bytes), as nvidia-smi shows it.

Every formatter here is total: any number (an int of any size, a float however large, NaN,
infinity, negative) gives a short text and never raises, so no value a reader lets through can
stop the display. A number past the range a unit's prefixes cover is shown in exponent form
(``1e+300 W``); what is not a finite number reads ``n/a``, a time no clock can show ``--:--:--``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from gpuscope.schema.core import finite_or_none
from gpuscope.telemetry.values import Metric, Reason, Unavailable

if TYPE_CHECKING:
    from gpuscope.telemetry.records import Sample

__all__ = [
    "vendor_lines",
    "NA",
    "NO_TIME",
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
    "fmt_time_of_day",
    "fmt_duration",
    "reason_text",
    "bar",
]

#: What an unavailable metric reads as.
NA = "n/a"
#: What a time no clock can show reads as.
NO_TIME = "--:--:--"
#: Past this magnitude a number with a prefix is shown in exponent form (beyond the last prefix).
_EXPONENT_FROM = 1e18
#: Past this magnitude a whole number (``1980 MHz``) is shown in exponent form (too wide for a cell).
_WHOLE_UP_TO = 1e9

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))

_REASON_WORDS = {
    Reason.NOT_SUPPORTED: "not supported by this GPU or driver",
    Reason.NO_PERMISSION: "no permission",
    Reason.GPU_LOST: "GPU lost",
    Reason.NO_DRIVER: "no driver or library",
    Reason.DRIVER_TOO_OLD: "driver too old",
    Reason.DRIVER_MISMATCH: "driver/library version mismatch",
    Reason.WARMING_UP: "warming up (a rate needs two samples)",
    Reason.NOT_APPLICABLE: "not applicable",
    Reason.ERROR: "error",
}


def si(value: float, unit: str = "", digits: int = 3) -> str:
    """``value`` with an SI prefix and ``digits`` significant digits: ``si(3.2e12, "B/s")`` -> ``3.20 TB/s``;
    ``n/a`` when it is not a finite number."""
    number = finite_or_none(value)
    if number is None:
        return NA
    magnitude = abs(number)
    if magnitude >= _EXPONENT_FROM * 0.9995:
        return f"{number:.{max(1, digits)}g} {unit}".rstrip()
    for scale, prefix in _PREFIXES:
        if magnitude >= scale * 0.9995:
            return f"{_sig(number / scale, digits)} {prefix}{unit}".rstrip()
    return f"{_sig(number, digits)} {unit}".rstrip()


def _sig(value: float, digits: int) -> str:
    magnitude = abs(value)
    if magnitude >= 100 or magnitude == 0:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.{max(0, digits - 2)}f}"
    return f"{value:.{max(0, digits - 1)}f}"


def _whole_number(value: object) -> str:
    """A number rounded to a whole one (``1980``), in exponent form past :data:`_WHOLE_UP_TO`,
    ``n/a`` when it is not a finite number."""
    number = finite_or_none(value)
    if number is None:
        return NA
    return f"{number:.0f}" if abs(number) < _WHOLE_UP_TO else f"{number:.3g}"


def _with_prefix(unit: str) -> Callable[[float], str]:
    def fmt(value: float) -> str:
        return si(value, unit)

    return fmt


def _whole(unit: str) -> Callable[[float], str]:
    def fmt(value: float) -> str:
        text = _whole_number(value)
        return text if text == NA else text + unit

    return fmt


#: Bytes with a decimal prefix: ``80.1 GB``; bytes per second: ``3.21 TB/s``; FLOP/s: ``989 TFLOP/s``.
fmt_bytes, fmt_rate, fmt_flops = _with_prefix("B"), _with_prefix("B/s"), _with_prefix("FLOP/s")
#: Whole numbers with their unit: ``42%``, ``1980 MHz``, ``300 W``, ``65°C``.
fmt_percent, fmt_mhz, fmt_watts, fmt_celsius = _whole("%"), _whole(" MHz"), _whole(" W"), _whole("°C")


def fmt_mib(value: float) -> str:
    """Bytes in binary mebibytes, as nvidia-smi shows GPU memory: ``61440 MiB``."""
    number = finite_or_none(value)
    return NA if number is None else f"{_whole_number(number / 2**20)} MiB"


def fmt_gib(value: float) -> str:
    """Bytes in binary gibibytes: ``79.6 GiB``."""
    number = finite_or_none(value)
    if number is None:
        return NA
    gib = number / 2**30
    return f"{gib:.1f} GiB" if abs(gib) < _WHOLE_UP_TO else f"{gib:.3g} GiB"


def fmt_time_of_day(timestamp_s: float | None) -> str:
    """``HH:MM:SS`` in local time for a timestamp (seconds since the epoch); ``--:--:--`` for
    none (or 0) and for one this platform's clock cannot show (not finite, out of its range)."""
    number = finite_or_none(timestamp_s)
    if not number:
        return NO_TIME
    try:
        return time.strftime("%H:%M:%S", time.localtime(number))
    except (OverflowError, OSError, ValueError):
        return NO_TIME


def fmt_duration(seconds: float) -> str:
    """``H:MM:SS`` for a duration in seconds (a negative one as 0); ``123 d`` past 99,999 hours;
    ``--:--:--`` when it is not a finite number."""
    number = finite_or_none(seconds)
    if number is None:
        return NO_TIME
    if number >= 100_000 * 3600:
        return f"{number / 86400:.3g} d"
    whole = max(0, int(number))
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


T = TypeVar("T")


def fmt_metric(value: Metric[T] | None, formatter: Callable[[T], str] = str) -> str:
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
    fraction = min(1.0, max(0.0, finite_or_none(fraction) or 0.0))
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (_EIGHTHS[part] if part else "")
    return text.ljust(width)


def vendor_lines(sample: Sample) -> list[str]:
    """One line per GPU vendor that gave no GPUs, with why (``no NVIDIA GPUs: ...``)."""
    lines: list[str] = []
    nvidia = sample.nvidia_unavailable or sample.gpu_unavailable
    if nvidia is not None:
        lines.append(f"no NVIDIA GPUs: {reason_text(nvidia)}")
    if sample.amd_unavailable is not None:
        lines.append(f"no AMD GPUs: {reason_text(sample.amd_unavailable)}")
    return lines or ["no GPUs found"]
