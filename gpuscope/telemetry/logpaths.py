"""Names of telemetry logs: the files of a rotated set, and a folder or glob read as one log.

``gpuscope log -o run.jsonl.zst --rotate-size 1GB`` writes ``run.2026-12-05T00-15-00.123Z.jsonl.zst``,
``run.2026-12-05T01-15-00.125Z.jsonl.zst``, ...: the base name, the UTC time of the file's first
record (milliseconds, fixed width, so names sort by time), then the base's suffixes. Readers
(``report --log``, ``replay``) take one file, a folder (every log in it), a glob
(``'logs/run.*.jsonl.zst'``), or the base name of a rotated set, and read the files in name order
as one log.
"""

from __future__ import annotations

import glob
import os
import re
import time

from gpuscope.errors import BadInputError

__all__ = ["LOG_SUFFIXES", "split_log_name", "rotated_name", "rotated_files", "log_files", "describe_gap"]

#: Suffixes of a telemetry log: the format, then optionally the codec.
LOG_SUFFIXES = tuple(f"{fmt}{codec}" for fmt in (".jsonl", ".csv") for codec in ("", ".zst", ".gz"))
_STAMP = r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3}Z(?:-\d+)?"


def split_log_name(name: str) -> tuple[str, str]:
    """``("dir/run", ".jsonl.zst")``: the path without its log suffixes, and those suffixes."""
    for suffix in sorted(LOG_SUFFIXES, key=len, reverse=True):
        if suffix and name.lower().endswith(suffix):
            return name[: -len(suffix)], name[-len(suffix) :]
    return name, ""


def rotated_name(base: str, first_s: float, serial: int = 0) -> str:
    """The name of a rotated file of ``base`` whose first record is at ``first_s`` (epoch s)."""
    stem, suffix = split_log_name(base)
    whole = int(first_s)
    stamp = time.strftime("%Y-%m-%dT%H-%M-%S", time.gmtime(whole)) + f".{int((first_s - whole) * 1000):03d}Z"
    return f"{stem}.{stamp}{f'-{serial}' if serial else ''}{suffix}"


def rotated_files(base: str) -> list[str]:
    """The existing files of ``base``'s rotated set, oldest first."""
    stem, suffix = split_log_name(base)
    folder = os.path.dirname(stem) or "."
    pattern = re.compile(re.escape(os.path.basename(stem)) + r"\." + _STAMP + re.escape(suffix) + "$")
    try:
        names = [name for name in os.listdir(folder) if pattern.match(name)]
    except OSError:
        return []
    return [os.path.join(os.path.dirname(stem), name) for name in sorted(names)]


def log_files(path: str) -> list[str]:
    """The files to read as one log: ``path`` itself, every log in a folder, the matches of a
    glob, or the rotated set of a base name that is not a file (in name order, which is time
    order for a rotated set). :class:`BadInputError` when a folder or glob names no log."""
    if os.path.isdir(path):
        names = sorted(
            os.path.join(path, name)
            for name in os.listdir(path)
            if split_log_name(name)[1] and os.path.isfile(os.path.join(path, name))
        )
        if not names:
            raise BadInputError(
                f"{path}: cannot read telemetry log: a folder with no log in it (*.jsonl, *.csv, .zst, .gz)"
            )
        return names
    if os.path.lexists(path):
        return [path]
    if glob.has_magic(path):
        names = sorted(name for name in glob.glob(path) if os.path.isfile(name))
        if not names:
            raise BadInputError(f"{path}: no file matches")
        return names
    return rotated_files(path) or [path]


def describe_gap(before: str, before_s: float, after: str, after_s: float, step_s: float) -> str | None:
    """A line naming the gap between two files of a set when the second starts more than
    2.5 sampling steps (and at least 2 s) after the first ended, else None."""
    gap_s = after_s - before_s
    if gap_s <= max(2.0, 2.5 * step_s):
        return None
    return (
        f"{os.path.basename(after)}: starts {gap_s:.0f} s after {os.path.basename(before)} ends; the gap has no samples"
    )
