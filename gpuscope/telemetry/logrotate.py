"""Rotation of ``gpuscope log``: a new file by size or age, the oldest removed past ``--keep``.

Each file of the set is written whole by the one logger and closed before the next is opened
under a new name (:func:`gpuscope.telemetry.logpaths.rotated_name`); nothing is renamed, copied or
truncated under a writer or a reader, so a reader following along never loses a record (the
copytruncate trap of an external logrotate). A file is complete and self-describing on its own (a
CSV file starts with its header, a compressed file with an indexed frame).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable

from gpuscope.errors import UsageError
from gpuscope.telemetry.logfile import LogWriter, open_log_writer
from gpuscope.telemetry.logpaths import rotated_files, rotated_name
from gpuscope.telemetry.records import Sample

__all__ = ["RotatingLogWriter", "parse_size_bytes", "parse_age_s"]

_SIZE_UNITS = {"": 1, "B": 1, "K": 1e3, "KB": 1e3, "M": 1e6, "MB": 1e6, "G": 1e9, "GB": 1e9, "T": 1e12, "TB": 1e12,
               "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3, "TIB": 1024**4}  # fmt: skip
_AGE_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_size_bytes(text: str, option: str = "--rotate-size") -> int:
    """``"1GB"`` -> 1_000_000_000 (GB = 1e9 bytes; KiB/MiB/GiB binary); at least 4 KiB."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).upper() if match else ""
    if match is None or unit not in _SIZE_UNITS:
        raise UsageError(f"{option} {text!r}: expected a size such as 500MB, 1GB or 2GiB")
    size = int(float(match.group(1)) * _SIZE_UNITS[unit])
    if size < 4096:
        raise UsageError(f"{option} {text!r}: at least 4KiB")
    return size


def parse_age_s(text: str, option: str = "--rotate-every") -> float:
    """``"1h"`` -> 3600.0 (units s, m/min, h, d; a bare number is seconds); at least 1 s."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-z]*)\s*", text.lower())
    if match is None or match.group(2) not in (*_AGE_UNITS, ""):
        raise UsageError(f"{option} {text!r}: expected a duration such as 30m, 1h or 1d")
    seconds = float(match.group(1)) * _AGE_UNITS.get(match.group(2), 1)
    if seconds < 1:
        raise UsageError(f"{option} {text!r}: at least 1s")
    return seconds


class RotatingLogWriter:
    """The :class:`LogWriter` interface over a set of files named after ``base``.

    A new file starts before a record when the current one has reached ``size_bytes`` (checked as
    its frames are written, so a file may pass it by one frame) or when the record falls in a new
    ``every_s`` period of the clock (``1h``: on the hour, UTC). After a new file is opened, the
    oldest files of the set beyond ``keep`` are removed.
    """

    def __init__(
        self,
        base: str,
        fmt: str,
        *,
        size_bytes: int | None,
        every_s: float | None,
        keep: int | None,
        interval_s: float = 1.0,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        self.base = base
        self.label = base
        self._fmt = fmt
        self._size_bytes = size_bytes
        self._every_s = every_s
        self._keep = keep
        self._interval_s = interval_s
        self._on_warning = on_warning
        self._current: LogWriter | None = None
        self._period: int | None = None
        self._done_records = 0
        self.files_written: list[str] = []
        self.failure: str | None = None
        folder = os.path.dirname(base) or "."
        if not os.path.isdir(folder):
            raise UsageError(f"--output {base}: folder {folder} does not exist")
        if os.path.isdir(base):
            raise UsageError(f"--output {base}: is a directory; name the files, e.g. {base.rstrip('/')}/run.jsonl.zst")

    @property
    def records_written(self) -> int:
        return self._done_records + (self._current.records_written if self._current is not None else 0)

    def write(self, sample: Sample) -> None:
        """Write one record, first starting a new file when the current one is full or old."""
        period = int(sample.timestamp // self._every_s) if self._every_s else None
        current = self._current
        if current is None or (period is not None and period != self._period) or self._full(current):
            self._open_next(sample.timestamp)
            self._period = period
        assert self._current is not None
        try:
            self._current.write(sample)
        except Exception:
            self.failure = self._current.failure
            raise

    def _full(self, writer: LogWriter) -> bool:
        if self._size_bytes is None:
            return False
        try:
            return os.fstat(writer._fd).st_size >= self._size_bytes
        except OSError:
            return False

    def _open_next(self, first_s: float) -> None:
        self._close_current()
        serial = 0
        while True:
            name = rotated_name(self.base, first_s, serial)
            if not os.path.lexists(name):
                break
            serial += 1
        self._current = open_log_writer(
            name, self._fmt, self._on_warning, existing="refuse", interval_s=self._interval_s
        )
        self.files_written.append(name)
        self._remove_old()

    def _remove_old(self) -> None:
        if not self._keep:
            return
        files = rotated_files(self.base)
        for name in files[: max(0, len(files) - self._keep)]:
            if self._current is not None and name == self._current.label:
                continue
            with contextlib.suppress(OSError):
                os.unlink(name)

    def _close_current(self) -> None:
        current, self._current = self._current, None
        if current is not None:
            try:
                current.close()
            finally:
                self._done_records += current.records_written
                self.failure = current.failure

    def close(self) -> None:
        """Write what the current file still buffers and close it."""
        self._close_current()

    def __enter__(self) -> RotatingLogWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
