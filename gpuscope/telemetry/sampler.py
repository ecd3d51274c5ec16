"""The sampling schedule and the history buffers.

:class:`Sampler` calls a collect function on a drift-free schedule: tick ``k`` is due at
``start + k * interval`` on the monotonic clock. A tick that comes late (collection took longer
than the interval, the machine stalled, the process was stopped) is not made up for: the missed
ticks, and a tick less than half an interval after the late sample, are skipped and counted, so
the sampler never bursts and two samples never begin less than :data:`MIN_INTERVAL_S` apart.
:class:`RingBuffer` keeps a fixed number of recent items.
Neither imports Textual; the TUI uses :class:`RingBuffer` with its own thread workers.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Generic, SupportsIndex, TypeVar, overload

from gpuscope.errors import EXIT_INTERRUPTED, UsageError

__all__ = ["MIN_INTERVAL_S", "RingBuffer", "Sampler", "check_interval", "stopped_by_signals"]

T = TypeVar("T")

#: The shortest sampling interval, seconds. GPM needs more than 100 ms between its two samples.
MIN_INTERVAL_S = 0.1


def check_interval(interval_s: float) -> float:
    """``interval_s`` if it is a usable sampling interval; else a one-line :class:`UsageError`."""
    if not isinstance(interval_s, (int, float)) or isinstance(interval_s, bool) or not math.isfinite(interval_s):
        raise UsageError(f"interval {interval_s!r} is not a finite number of seconds")
    if interval_s <= 0:
        raise UsageError(f"interval {interval_s:g} s must be positive (the minimum is {MIN_INTERVAL_S:g} s)")
    if interval_s < MIN_INTERVAL_S - 1e-12:
        raise UsageError(
            f"interval {interval_s:g} s is below the minimum {MIN_INTERVAL_S:g} s (GPM needs >100 ms between samples)"
        )
    return float(interval_s)


def check_duration(duration_s: float | None) -> float | None:
    """``duration_s`` if it is None (run until stopped) or a positive finite number of seconds;
    else a one-line :class:`UsageError`."""
    if duration_s is not None and not (math.isfinite(duration_s) and duration_s > 0):
        raise UsageError(f"duration {duration_s:g} s must be a positive number of seconds")
    return duration_s


class RingBuffer(deque[T]):
    """The last ``capacity`` items: a bounded deque (O(1) append, iteration oldest to newest,
    never grows); ``buffer[0]`` is the oldest, ``buffer[-1]`` the newest, slices return lists."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"RingBuffer capacity must be at least 1, got {capacity}")
        super().__init__(maxlen=capacity)

    @property
    def capacity(self) -> int:
        return self.maxlen or 0

    @overload
    def __getitem__(self, index: SupportsIndex) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> T | list[T]:
        return list(self)[index] if isinstance(index, slice) else super().__getitem__(index)

    def latest(self) -> T | None:
        """The newest item, or None when empty."""
        return self[-1] if self else None

    def to_list(self) -> list[T]:
        """A copy, oldest first."""
        return list(self)

    def __repr__(self) -> str:
        return f"RingBuffer(capacity={self.capacity}, size={len(self)})"


class Sampler(Generic[T]):
    """Calls ``collect()`` every ``interval_s`` seconds on a background thread (or in
    :meth:`run`), hands each result to ``on_sample`` and keeps the last ``history`` results.

    ``duration_s`` ends the run after the ticks due before ``start + duration_s`` (so 10 s at
    1 s gives 10 samples). An exception from ``collect`` or ``on_sample`` stops the run; it is
    kept in :attr:`error` and re-raised by :meth:`join`. ``clock`` and ``wait`` exist for tests:
    ``wait(timeout_s)`` sleeps and returns True when the sampler should stop.
    """

    def __init__(
        self,
        collect: Callable[[], T],
        interval_s: float,
        *,
        on_sample: Callable[[T], None] | None = None,
        history: int | None = 600,
        duration_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        wait: Callable[[float], bool] | None = None,
    ) -> None:
        self.interval_s = check_interval(interval_s)
        if duration_s is not None and not (math.isfinite(duration_s) and duration_s > 0):
            raise UsageError(f"duration {duration_s:g} s must be a positive number of seconds")
        self._collect = collect
        self._on_sample = on_sample
        self.duration_s = duration_s
        self.history: RingBuffer[T] | None = RingBuffer(history) if history else None
        self._clock = clock
        self._stop = threading.Event()
        self._wait = wait or self._stop.wait
        self._thread: threading.Thread | None = None
        self.samples_taken = 0
        #: Ticks skipped because an earlier tick ran late.
        self.ticks_skipped = 0
        self.error: BaseException | None = None

    def start(self) -> None:
        """Run :meth:`run` on a daemon thread."""
        if self._thread is not None:
            raise RuntimeError("Sampler already started")
        self._thread = threading.Thread(target=self._run_catching, name="gpuscope-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ask the loop to end; the tick in progress finishes first. Safe from signal handlers."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def run_in_thread(self) -> None:
        """:meth:`start`, then wait for the thread; the calling thread stays free for signals."""
        self.start()
        while not self.join(0.5):
            pass

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait for the thread; True when it ended. Re-raises what stopped it, if anything."""
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                return False
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        return True

    def _run_catching(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # noqa: BLE001 - handed to join() in the owning thread
            self.error = exc

    def run(self) -> None:
        """The loop, in the calling thread, until :meth:`stop`, ``duration_s`` or an exception."""
        interval = self.interval_s
        start = self._clock()
        deadline = None if self.duration_s is None else start + self.duration_s
        tick = 0
        while not self._stop.is_set():
            started = self._clock()
            result = self._collect()
            self.samples_taken += 1
            if self.history is not None:
                self.history.append(result)
            if self._on_sample is not None:
                self._on_sample(result)
            now = self._clock()
            # The next tick is the first one still ahead and at least half an interval after this
            # sample began: a late sample (slow collection, a stall, SIGSTOP) skips the missed
            # ticks and is never followed by a catch-up burst.
            earliest = max(now, started + interval / 2)
            following = max(tick + 1, math.ceil((earliest - start) / interval - 1e-9))
            self.ticks_skipped += following - tick - 1
            tick = following
            due = start + tick * interval
            if deadline is not None and due >= deadline - 1e-9:
                break
            # GPM needs MIN_INTERVAL_S between samples even when this one began a little late.
            if self._wait(max(0.0, due - now, started + MIN_INTERVAL_S - now)):
                break
            if self._stop.is_set():
                break


#: A second SIGINT/SIGTERM this long after the first ends the process without waiting, seconds.
_FORCE_AFTER_S = 2.0


@contextlib.contextmanager
def stopped_by_signals(sampler: Sampler[Any]) -> Iterator[None]:
    """While open, SIGINT and SIGTERM stop ``sampler`` after the sample in progress (handlers are
    set on the main thread only, and restored on exit). A second signal 2 s or more after the
    first means the sampler is stuck (a hung driver call): the process exits at once (code 130)."""
    first_signal_at: list[float] = []

    def _stop(signum: int, frame: object) -> None:
        now = time.monotonic()
        if first_signal_at and now - first_signal_at[0] >= _FORCE_AFTER_S:
            with contextlib.suppress(OSError, ValueError):  # a full stderr must not keep a stuck process alive
                print("gpuscope: sampler stuck; exiting without waiting for it", file=sys.stderr, flush=True)
            os._exit(EXIT_INTERRUPTED)
        if not first_signal_at:
            first_signal_at.append(now)
        sampler.stop()

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        previous = {signum: signal.signal(signum, _stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        sampler.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
