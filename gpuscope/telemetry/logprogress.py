"""What ``gpuscope log`` says on stderr (stdout carries the records): a start line, a line when
an alert starts, and a summary at the end. Also annotates each sample with its alerts. No Textual."""

from __future__ import annotations

import time
from collections.abc import Callable

from gpuscope.telemetry.alerts import AlertThresholds, annotate, load_thresholds
from gpuscope.telemetry.records import Sample

__all__ = ["LogProgress", "fmt_interval"]


def fmt_interval(interval_s: float) -> str:
    """``every 1 s``, ``every 250 ms``, ``every 1.5 s``."""
    return f"every {interval_s * 1000:.0f} ms" if interval_s < 1 else f"every {interval_s:g} s"


class LogProgress:
    """Counts samples and alerts; ``say`` prints one line (to stderr)."""

    def __init__(self, say: Callable[[str], None], thresholds: AlertThresholds | None = None) -> None:
        self._say = say
        if thresholds is None:
            thresholds, problem = load_thresholds()
            if problem:
                say(f"warning: {problem}")
        self._thresholds = thresholds
        self.samples = 0
        self.alert_records = 0
        self._active: set[tuple[str, str, int | None]] = set()
        self._started = time.monotonic()
        self._gpus = 0

    def start(self, target: str, fmt: str, interval_s: float, duration_s: float | None) -> None:
        until = f" for {duration_s:g} s" if duration_s else " until Ctrl+C or SIGTERM"
        self._say(f"logging {fmt} to {target} {fmt_interval(interval_s)}{until}")

    def observe(self, sample: Sample) -> None:
        """Annotate ``sample`` with its alerts (before it is written) and note new ones."""
        self.samples += 1
        self._gpus = len(sample.gpus)
        alerts = annotate(sample, self._thresholds)
        if alerts:
            self.alert_records += 1
        now = {(a.level, a.kind, a.gpu) for a in alerts}
        for alert in alerts:
            if (alert.level, alert.kind, alert.gpu) not in self._active:
                self._say(f"alert: {alert.level.upper()} {alert.message}")
        self._active = now

    def summary(self, target: str, written: int | None = None, failure: str | None = None) -> str:
        """The end-of-run line: ``written`` records (default: every sample seen) and, when fewer
        than the samples seen, how many were not written and why (``failure``)."""
        elapsed = time.monotonic() - self._started
        written = self.samples if written is None else written
        lost = self.samples - written
        unwritten = f"; {lost} not written ({failure or 'the write did not happen'})" if lost > 0 else ""
        alerts = f"; {self.alert_records} with alerts" if self.alert_records else "; no alerts"
        return f"wrote {written} records ({self._gpus} GPUs each) to {target} in {elapsed:.1f} s{unwritten}{alerts}"
