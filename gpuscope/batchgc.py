"""Garbage collection while a command reads and reduces a large results file (``roofline``,
``report``, ``compare``).

A 5,000-device results file decodes into millions of small objects, none of them in a cycle;
with CPython's default thresholds (a young collection every 700 allocations, older generations
rescanned as the heap grows) the collector took about 40% of those commands' time, and more the
larger the file (benchmarks/bench_scale_devices.py). Inside :func:`few_collections` the young
generation is collected every 200,000 allocations (mypy does the same); cycles are still
collected, and the thresholds are restored on leaving, so a long-running process (the TUI, a
test run calling ``main``) keeps the defaults.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["few_collections", "BATCH_THRESHOLDS"]

#: Allocations between young collections, and collections between older ones.
BATCH_THRESHOLDS = (200_000, 30, 30)


_lock = threading.Lock()
_depth = 0  # blocks entered and not left, in any thread: the outermost sets and restores
_saved: tuple[int, ...] = ()


@contextmanager
def few_collections() -> Iterator[None]:
    """Collect garbage rarely inside the block (see the module docstring); the thresholds are
    restored when the last block left, in whichever thread (the TUI loads files in workers)."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(*BATCH_THRESHOLDS)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gc.set_threshold(*_saved)
