"""Telemetry logs: JSON lines and CSV writers, and a reader for both.

Every record is written with one ``write`` of a whole line and flushed at once (no Python
buffering), so a run killed with SIGKILL leaves at most its last line incomplete; the reader skips
such a line with a :class:`TruncatedLogWarning`. The layout is documented in
docs/telemetry-schema.md.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import math
import os
import stat
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from gpuscope.errors import BadInputError, GpuscopeError, UsageError
from gpuscope.telemetry.logcheck import RecordTypeError, check_record
from gpuscope.telemetry.flatten import ABSENT_PREFIX, column_converter, encode_cell, flatten_record, unflatten_row
from gpuscope.telemetry.records import SCHEMA_VERSION, Sample, record_from_dict, record_to_dict

__all__ = [
    "FORMATS",
    "LogWriter",
    "JsonlWriter",
    "CsvWriter",
    "open_log_writer",
    "sample_to_json_dict",
    "read_log",
    "read_log_dicts",
    "TruncatedLogWarning",
    "UNAVAILABLE_COLUMN",
]

FORMATS = ("jsonl", "csv")
#: The last CSV column: JSON object mapping each unavailable column to ``"reason: detail"``.
UNAVAILABLE_COLUMN = "unavailable"
_LEADING = ("schema_version", "timestamp")
_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_BLANK = " \t\r"  # a line of only these is skipped; anything else must be a record
#: A line longer than this is not a record (a record of 8 GPUs with many processes is ~100 KB);
#: the reader stops there instead of holding a huge line in memory.
MAX_LINE_BYTES = 16 * 1024 * 1024


class TruncatedLogWarning(UserWarning):
    """The log's last line is incomplete (the writer was killed mid-line); it was skipped."""


def sample_to_json_dict(sample: Sample) -> dict[str, Any]:
    """The JSON object of one log line: ``schema_version`` and ``timestamp`` first."""
    data = record_to_dict(sample)
    return {**{key: data.pop(key) for key in _LEADING}, **data}


def _dumps(data: dict[str, Any]) -> str:
    try:
        return json.dumps(data, separators=(",", ":"), allow_nan=False)
    except ValueError:  # a NaN or inf slipped through a collector: never write invalid JSON
        return json.dumps(_finite(data), separators=(",", ":"), allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


# --- writers ---------------------------------------------------------------------------------


class LogWriter:
    """Writes whole lines to a file descriptor, one ``os.write`` loop per record, no buffering.

    Raises ``BrokenPipeError`` when the reader of a pipe went away, and :class:`GpuscopeError`
    (one line) for a full disk or another write error; on a full disk a regular file is cut back
    to its last complete record.
    """

    def __init__(self, fd: int, label: str, close_fd: bool, on_warning: Callable[[str], None] | None = None) -> None:
        self._fd = fd
        self.label = label
        self._close_fd = close_fd
        self._on_warning = on_warning or (lambda message: warnings.warn(message, stacklevel=3))
        self.records_written = 0
        try:
            self._seekable = stat.S_ISREG(os.fstat(fd).st_mode)
            self._good_offset = os.lseek(fd, 0, os.SEEK_CUR) if self._seekable else 0
        except OSError:
            self._seekable, self._good_offset = False, 0

    def write(self, sample: Sample) -> None:
        """Append one record and flush it."""
        self._write_line(self._format(sample))

    def _format(self, sample: Sample) -> bytes:  # pragma: no cover - abstract
        raise NotImplementedError

    def _write_line(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except BrokenPipeError:
            raise
        except OSError as exc:
            if exc.errno in _NO_SPACE:
                self._cut_back()
                raise GpuscopeError(
                    f"{self.label}: {os.strerror(exc.errno)} after {self.records_written} records; "
                    "the records written are intact"
                ) from None
            raise GpuscopeError(f"cannot write {self.label}: {exc.strerror or exc}") from None
        self._good_offset += len(data)
        self.records_written += 1

    def _cut_back(self) -> None:
        if self._seekable:
            try:
                os.ftruncate(self._fd, self._good_offset)
            except OSError:
                pass

    def close(self) -> None:
        if self._close_fd:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._close_fd = False

    def __enter__(self) -> "LogWriter":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class JsonlWriter(LogWriter):
    """One JSON object per line (see :func:`sample_to_json_dict`)."""

    def _format(self, sample: Sample) -> bytes:
        return (_dumps(sample_to_json_dict(sample)) + "\n").encode("utf-8")


class CsvWriter(LogWriter):
    """A header from the first record's flattened columns, then one row per record.

    Unavailable cells are empty and listed in the last column, ``unavailable``, as a JSON object
    ``{"column": "reason: detail"}``. Columns a later record lacks are empty and listed as
    ``not_applicable: not present in this sample``; columns it adds (a new NIC or GPU) are
    dropped with one warning.
    """

    def __init__(self, fd: int, label: str, close_fd: bool, on_warning: Callable[[str], None] | None = None) -> None:
        super().__init__(fd, label, close_fd, on_warning)
        self._columns: list[str] | None = None
        self._column_set: frozenset[str] = frozenset()
        self._warned_extra = False

    def _format(self, sample: Sample) -> bytes:
        values, missing = flatten_record(sample_to_json_dict(sample))
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        if self._columns is None:
            self._columns = list(values)
            self._column_set = frozenset(self._columns)
            writer.writerow([*self._columns, UNAVAILABLE_COLUMN])
        extra = [column for column in values if column not in self._column_set]
        if extra and not self._warned_extra:
            self._warned_extra = True
            self._on_warning(
                f"{self.label}: {len(extra)} column(s) appeared after the CSV header was written "
                f"(e.g. {extra[0]}); CSV keeps the first header, use --format jsonl for them"
            )
        row: list[str] = []
        for column in self._columns:
            if column in values:
                row.append(encode_cell(values[column]))
            else:
                row.append("")
                missing.setdefault(column, ABSENT_PREFIX)
        kept = {column: reason for column, reason in missing.items() if column in self._column_set}
        row.append(encode_cell(kept) if kept else "")
        writer.writerow(row)
        return buffer.getvalue().encode("utf-8")


def open_log_writer(
    path: str | os.PathLike[str] | None, fmt: str = "jsonl", on_warning: Callable[[str], None] | None = None
) -> LogWriter:
    """A writer for ``path`` (``None`` or ``"-"``: standard output), truncating the file.

    Raises :class:`UsageError` (one line) for an unknown format or a path that cannot be written.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown log format {fmt!r} (choose jsonl or csv)")
    cls = JsonlWriter if fmt == "jsonl" else CsvWriter
    if path is None or str(path) == "-":
        return cls(1, "standard output", close_fd=False, on_warning=on_warning)
    label = os.fspath(path)
    try:
        fd = os.open(label, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        raise UsageError(f"cannot write output {label}: {exc.strerror or exc}") from None
    return cls(fd, label, close_fd=True, on_warning=on_warning)


# --- reader ----------------------------------------------------------------------------------


def _warn(message: str) -> None:
    warnings.warn(message, TruncatedLogWarning, stacklevel=4)


def read_log(path: str | os.PathLike[str], on_warning: Callable[[str], None] | None = None) -> Iterator[Sample]:
    """The samples of a JSONL or CSV telemetry log, oldest first.

    An incomplete last line (a killed writer) is skipped with a :class:`TruncatedLogWarning`
    (or ``on_warning(message)``). Anything else wrong raises :class:`BadInputError` naming the
    file and line: garbage, an unsupported ``schema_version``, an empty file.
    """
    label = os.fspath(path)
    for line_number, data in _read_numbered(label, on_warning):
        try:
            yield record_from_dict(Sample, data)
        except (TypeError, ValueError, AttributeError) as exc:
            raise BadInputError(f"{label}:{line_number}: not a gpuscope telemetry record ({exc})") from None


def read_log_dicts(path: str | os.PathLike[str], on_warning: Callable[[str], None] | None = None) -> Iterator[dict[str, Any]]:
    """Like :func:`read_log` but yields each record as the plain dict (``record_to_dict`` shape)."""
    for _, data in _read_numbered(os.fspath(path), on_warning):
        yield data


def _read_numbered(label: str, on_warning: Callable[[str], None] | None) -> Iterator[tuple[int, dict[str, Any]]]:
    warn = on_warning or _warn
    try:
        handle = open(label, "rb")  # noqa: SIM115 - closed below; a generator owns it
    except OSError as exc:
        raise BadInputError(f"{label}: cannot read telemetry log: {exc.strerror or exc}") from None
    with handle:
        lines = _lines_with_last_flag(handle, label)
        first = next(lines, None)
        while first is not None and not first[1].strip(_BLANK):
            first = next(lines, None)
        if first is None:
            raise BadInputError(f"{label}: empty telemetry log (no records)")
        number, text, is_last, complete = first
        if text.lstrip(_BLANK).startswith("{"):
            records = _read_jsonl(label, [(number, text, is_last, complete)], lines, warn)
        elif text.startswith("schema_version,"):
            records = _read_csv(label, (number, text, is_last, complete), lines, warn)
        elif is_last and not complete and "schema_version,".startswith(text):
            warn(f"{label}:{number}: incomplete last line skipped (the writer was probably killed)")
            records = iter(())
        else:
            raise BadInputError(f"{label}:{number}: not a gpuscope telemetry log (expected JSON lines or gpuscope CSV)")
        count = 0
        for number, data in records:
            try:
                check_record(data)
            except RecordTypeError as exc:
                raise BadInputError(f"{label}:{number}: not a gpuscope telemetry record ({exc})") from None
            count += 1
            yield number, data
        if count == 0:
            raise BadInputError(f"{label}: empty telemetry log (no complete records)")


def _lines_with_last_flag(handle: io.BufferedReader, label: str) -> Iterator[tuple[int, str, bool, bool]]:
    """(line number, text without newline, is the last line, ended with a newline)."""
    number = 0
    previous: bytes | None = None
    while True:
        raw = handle.readline(MAX_LINE_BYTES + 1)
        if not raw:
            break
        if len(raw) > MAX_LINE_BYTES:
            if previous is not None:  # what came before is still delivered
                number += 1
                yield number, _decode(previous, label, number), False, True
                previous = None
            raise BadInputError(
                f"{label}:{number + 1}: line longer than {MAX_LINE_BYTES} bytes; "
                "not a gpuscope telemetry record"
            )
        if previous is not None:
            number += 1
            yield number, _decode(previous, label, number), False, True
        previous = raw
    if previous is not None:
        number += 1
        complete = previous.endswith(b"\n")
        yield number, _decode(previous, label, number), True, complete


def _decode(raw: bytes, label: str, number: int) -> str:
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        return "\x00"  # not UTF-8: reported as garbage (or skipped when it is a cut last line)


def _read_jsonl(
    label: str, head: list[tuple[int, str, bool, bool]], rest: Iterator[tuple[int, str, bool, bool]], warn: Callable[[str], None]
) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, text, is_last, complete in _chain(head, rest):
        if not text.strip(_BLANK):
            continue
        problem = "not a JSON object"
        try:
            data = json.loads(text, parse_constant=_reject_constant)
        except RecursionError:
            data, problem = None, "not a JSON object (nested too deeply)"
        except ValueError as exc:
            data, problem = None, f"not a JSON object ({str(exc).splitlines()[0][:120]})"
        if not isinstance(data, dict):
            if is_last and not complete:
                warn(f"{label}:{number}: incomplete last line skipped (the writer was probably killed)")
                return
            raise BadInputError(f"{label}:{number}: {problem}")
        _check_version(label, number, data.get("schema_version"))
        yield number, data


def _csv_line(cells: list[str]) -> str:
    """The line :class:`CsvWriter` writes for ``cells``, without its newline."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="").writerow(cells)
    return buffer.getvalue()


def _reject_constant(name: str) -> Any:
    """NaN and Infinity are not JSON and never written by gpuscope: the line is not a record."""
    raise ValueError(f"{name} is not valid JSON")


def _chain(head: list[Any], rest: Iterator[Any]) -> Iterator[Any]:
    yield from head
    yield from rest


def _check_version(label: str, number: int, version: Any) -> None:
    if version != SCHEMA_VERSION or isinstance(version, bool):
        if version is None:
            raise BadInputError(f"{label}:{number}: record has no schema_version")
        raise BadInputError(f"{label}:{number}: schema_version {version!r} is not supported (this gpuscope reads {SCHEMA_VERSION})")


def _read_csv(
    label: str, header_line: tuple[int, str, bool, bool], rest: Iterator[tuple[int, str, bool, bool]], warn: Callable[[str], None]
) -> Iterator[tuple[int, dict[str, Any]]]:
    number, text, is_last, complete = header_line
    columns = next(csv.reader([text]))
    if not columns or columns[-1] != UNAVAILABLE_COLUMN:
        if is_last and not complete:
            warn(f"{label}:{number}: incomplete last line skipped (the writer was probably killed)")
            return
        raise BadInputError(f"{label}:{number}: CSV header does not end with the '{UNAVAILABLE_COLUMN}' column")
    data_columns = columns[:-1]
    converters = [column_converter(column) for column in data_columns]
    for number, text, is_last, complete in rest:
        if not text.strip(_BLANK):
            continue
        try:
            cells = next(csv.reader([text]))
        except csv.Error as exc:
            if is_last and not complete:
                warn(f"{label}:{number}: incomplete last line skipped (the writer was probably killed)")
                return
            raise BadInputError(f"{label}:{number}: bad CSV row ({exc})") from None
        # A last line without its newline is whole only if it is exactly what the writer writes
        # for those cells (csv.reader accepts a line cut inside a quoted cell); a line cut just
        # before its 'unavailable' cell has the right cell count but lost the reasons of its
        # empty cells: both are skipped as incomplete.
        cut = is_last and not complete and (
            _csv_line(cells) != text or (cells[-1:] == [""] and "" in cells[:-1])
        )
        if len(cells) != len(columns) or cut:
            if is_last and not complete:
                warn(f"{label}:{number}: incomplete last line skipped (the writer was probably killed)")
                return
            raise BadInputError(f"{label}:{number}: {len(cells)} cells, the header has {len(columns)}")
        try:
            values = {
                column: (convert(cell) if cell != "" else None)
                for column, convert, cell in zip(data_columns, converters, cells)
            }
            missing = json.loads(cells[-1]) if cells[-1] else {}
        except RecursionError:
            raise BadInputError(f"{label}:{number}: bad cell (JSON nested too deeply)") from None
        except ValueError as exc:
            if is_last and not complete:
                warn(f"{label}:{number}: incomplete last line skipped (the writer was probably killed)")
                return
            raise BadInputError(f"{label}:{number}: bad cell ({exc})") from None
        if not isinstance(missing, dict):
            raise BadInputError(f"{label}:{number}: the '{UNAVAILABLE_COLUMN}' cell is not a JSON object")
        _check_version(label, number, values.get("schema_version"))
        yield number, unflatten_row(values, {str(k): str(v) for k, v in missing.items()})
