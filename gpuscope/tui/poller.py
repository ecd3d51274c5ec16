"""The live sampling loop: one persistent thread that samples a source at a fixed interval and
hands each result to a callback (the app posts it to its message queue). No Textual import.

Schedule: the next sample is due at the previous due time plus the interval (no drift); a late
sample starts the schedule again from now (no burst). The next sample waits until the receiver
acknowledged the previous result (:meth:`Poller.ack`), so results never pile up behind a busy
UI. A failed sample backs off (interval x 2^failures, at most :data:`MAX_BACKOFF_S`).

Cost: one thread that sleeps between samples; a Textual thread worker per sample cost a worker
object, a task, an executor hand-off and three state messages on the UI thread every tick.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from gpuscope.telemetry.hostprocs import HostProcess
from gpuscope.telemetry.records import Sample
from gpuscope.telemetry.values import Unavailable
from gpuscope.tui.sources import TelemetrySource

__all__ = ["MAX_BACKOFF_S", "Polled", "PollFailed", "Poller"]

#: The longest wait after repeated failures, seconds.
MAX_BACKOFF_S = 30.0
#: How often a thread waiting for an acknowledgement checks whether it should stop, seconds.
_ACK_CHECK_S = 0.25


@dataclass(frozen=True, slots=True)
class Polled:
    """A sample, and the host processes when a scan was due with it (else None)."""

    sample: Sample
    processes: list[HostProcess] | Unavailable | None = None


@dataclass(frozen=True, slots=True)
class PollFailed:
    """``source.sample()`` raised ``error``; the next try is in ``retry_in_s`` seconds."""

    error: BaseException
    failures: int
    retry_in_s: float


class Poller:
    """Samples ``source`` every ``interval_s`` seconds on its own thread and calls ``deliver``
    (from that thread) with a :class:`Polled` or :class:`PollFailed`. ``scan_period_s`` is read
    before each sample: the seconds between host process scans, or None for none."""

    def __init__(
        self,
        source: TelemetrySource,
        interval_s: float,
        deliver: Callable[[Polled | PollFailed], object],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.interval_s = interval_s
        self.scan_period_s: float | None = None
        self._deliver = deliver
        self._clock = clock
        self._stop = threading.Event()
        self._acked = threading.Event()
        self._opened = False
        self._thread = threading.Thread(target=self._run, name="gpuscope-poller", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def ack(self) -> None:
        """The receiver handled the last result: the next sample may follow on schedule."""
        self._acked.set()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop sampling and wait up to ``timeout_s`` for the thread (it closes the source)."""
        self._stop.set()
        self._acked.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            if self._opened:
                self.source.close()

    def _loop(self) -> None:
        due = self._clock()
        failures = 0
        scanned_at: float | None = None
        scans = 0
        while not self._stop.wait(max(0.0, due - self._clock())):
            period = self.scan_period_s
            # the second scan follows the first at once: CPU % needs two
            scan = period is not None and (
                scans < 2 or scanned_at is None or self._clock() - scanned_at >= period - 0.05
            )
            try:
                if not self._opened:
                    self.source.open()
                    self._opened = True
                sample = self.source.sample()
                processes = self.source.host_processes() if scan else None
            except Exception as exc:  # noqa: BLE001 - any failure of the source backs off, never ends the loop
                failures += 1
                delay = min(MAX_BACKOFF_S, self.interval_s * 2**failures)
                due = self._clock() + delay
                self._deliver(PollFailed(exc, failures, delay))
                continue
            failures = 0
            if scan:
                scanned_at, scans = self._clock(), scans + 1
            self._acked.clear()
            self._deliver(Polled(sample, processes))
            while not self._acked.wait(_ACK_CHECK_S):
                if self._stop.is_set():
                    return
            due += self.interval_s
            now = self._clock()
            if due < now:  # fell behind (slow sample, busy UI, suspended): do not burst
                due = now
