"""Number formatting shared by the report formats and ``gpuscope compare`` (GB = 1e9 bytes)."""

from __future__ import annotations

import datetime as _dt
import math
import re
from typing import TYPE_CHECKING, TypeGuard

from gpuscope.textsafe import safe_text

if TYPE_CHECKING:
    from gpuscope.schema.report import Report

__all__ = [
    "fmt_quantity",
    "fmt_percent",
    "fmt_seconds",
    "fmt_number",
    "fmt_time_utc",
    "clean_text",
    "source_descriptions",
    "natural_key",
]

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def _finite(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def fmt_quantity(value: object, unit: str, digits: int = 3) -> str:
    """``7.9e14, "FLOP/s"`` -> ``"790 TFLOP/s"``; ``4.3e12, "B/s"`` -> ``"4.30 TB/s"``; ``None`` -> ``"–"``."""
    if not _finite(value):
        return "–"
    magnitude = abs(value)
    for factor, prefix in _PREFIXES:
        if magnitude >= factor:
            return f"{_significant(value / factor, digits)} {prefix}{unit}"
    return f"{_significant(value, digits)} {unit}"


def _significant(value: float, digits: int) -> str:
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(value)))))
    return f"{value:.{decimals}f}"


def fmt_number(value: object, digits: int = 3) -> str:
    """A plain number with ``digits`` significant digits (no prefix); ``None`` -> ``"–"``."""
    if not _finite(value):
        return "–"
    if abs(value) >= 10**digits:
        return f"{value:,.0f}"
    return _significant(float(value), digits)


def fmt_percent(value: object) -> str:
    """``87.26`` -> ``"87%"``; below 10 one decimal; ``None`` -> ``"–"``."""
    if not _finite(value):
        return "–"
    return f"{value:.1f}%" if abs(value) < 10 else f"{value:.0f}%"


def fmt_seconds(value: object) -> str:
    """Durations: ``0.25`` -> ``"250 ms"``, ``75`` -> ``"1 min 15 s"``."""
    if not _finite(value):
        return "–"
    if value < 1e-3:
        return f"{value * 1e6:.3g} µs"
    if value < 0.9995:  # 0.9996 s is "1 s", not "1e+03 ms"
        return f"{value * 1e3:.3g} ms"
    if value < 60:
        return f"{value:.3g} s"
    minutes, seconds = divmod(int(round(value)), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def fmt_time_utc(epoch_s: object) -> str:
    """An epoch time as ``2025-01-31 12:00:00 UTC`` (always UTC: reports must not depend on the reader's zone)."""
    if not _finite(epoch_s):
        return "–"
    try:
        return _dt.datetime.fromtimestamp(float(epoch_s), tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return "–"


def clean_text(value: object, limit: int = 200) -> str:
    """Text for display: ``None`` -> ``"–"``, control and bidi characters and undecodable bytes
    escaped (:func:`gpuscope.textsafe.safe_text`, the one rule), at most ``limit`` characters.
    Escaping for HTML or Markdown is the renderer's job; this only keeps the text printable."""
    if value is None:
        return "–"
    text = safe_text(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that puts ``gpu2`` before ``gpu10``."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part)


def source_descriptions(report: Report, partial_suffix: str) -> list[str]:
    """One plain-text line per report source: kind, label, creation time (UTC) and
    ``partial_suffix`` when the source was partial. The caller escapes them."""
    descriptions = []
    for source in report.sources or []:
        kind = "results" if source.kind == "results" else "telemetry log"
        text = f"{kind} {clean_text(source.label)}"
        if source.created is not None:
            text += f" ({fmt_time_utc(source.created)})"
        if source.partial:
            text += partial_suffix
        descriptions.append(text)
    return descriptions
