"""Shared by the probe benchmarks: wait for the machine to be quiet before a round."""

from __future__ import annotations

import time


def wait_for_quiet(max_wait_s: float, busy_percent: float = 15.0, window_s: float = 1.0) -> float | None:
    """Wait until other processes use less than ``busy_percent`` of the CPUs over ``window_s``;
    return the busy percent seen last, or None without psutil. Gives up after ``max_wait_s``."""
    try:
        import psutil
    except ImportError:
        return None
    deadline = time.monotonic() + max_wait_s
    while True:
        busy = psutil.cpu_percent(interval=window_s)
        if busy < busy_percent or time.monotonic() > deadline:
            return busy
