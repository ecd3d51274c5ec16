"""Keep torch profiler noise off the user's terminal, and nothing else.

torch's profiler (kineto, ``SyncActivityProfilerHandler.cpp``) writes a line such as::

    USDT:2026-12-05 00:16:14 18008:18008 SyncActivityProfilerHandler.cpp:52] profiler_start

from C++ straight to file descriptor 2 each time a profiling session starts and stops, at a log
level above ERROR (``KINETO_LOG_LEVEL`` would silence it only with every real error). So, only
while a profiler starts or stops, :func:`drop_profiler_noise` points descriptors 1 and 2 at
temporary files, then puts them back and writes what was captured to where it was going, less the
``USDT:`` lines. Real errors printed in that window reach the terminal, a moment later.
No torch.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from typing import IO

__all__ = ["PROFILER_NOISE", "drop_profiler_noise", "without_noise"]

#: A line of profiler noise: kineto's USDT probe messages (``USDT:<date> <pid>:<tid> <file>:<line>] ...``).
PROFILER_NOISE = re.compile(rb"^USDT:\S+ \S+ \d+:\d+ \S+\] ")


def without_noise(data: bytes) -> bytes:
    """``data`` less its profiler-noise lines (:data:`PROFILER_NOISE`), other bytes untouched."""
    return b"".join(line for line in data.splitlines(keepends=True) if not PROFILER_NOISE.match(line))


def _flush_c_streams() -> None:
    """Flush C stdio buffers, so what C code buffered lands in the file it was meant for."""
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, TypeError):  # no libc to load (not Linux or macOS): nothing to flush
        pass


def _flush_python_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # closed or broken stream: nothing to flush
            pass


@contextlib.contextmanager
def drop_profiler_noise(fds: tuple[int, ...] = (1, 2)) -> Iterator[None]:
    """Inside the block, descriptors ``fds`` write to temporary files; on leaving, they are
    restored and the captured bytes, less profiler noise, are written to them. A descriptor that
    is not open is left alone."""
    _flush_python_streams()
    _flush_c_streams()
    saved: list[tuple[int, int, IO[bytes]]] = []
    try:
        for fd in fds:
            try:
                original = os.dup(fd)
            except OSError:
                continue
            capture: IO[bytes] = tempfile.TemporaryFile()
            os.dup2(capture.fileno(), fd)
            saved.append((fd, original, capture))
        yield
    finally:
        _flush_python_streams()
        _flush_c_streams()
        for fd, original, capture in saved:
            os.dup2(original, fd)
            os.close(original)
            capture.seek(0)
            kept = without_noise(capture.read())
            capture.close()
            while kept:
                try:
                    written = os.write(fd, kept)
                except OSError:
                    break
                kept = kept[written:]
