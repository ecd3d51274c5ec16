"""Telemetry logs: JSON lines and CSV writers, and a reader for both.

Every record is written with one ``write`` of a whole line and flushed at once (no Python
buffering), so a run killed with SIGKILL leaves at most its last line incomplete; the reader skips
such a line with a :class:`TruncatedLogWarning`. The layout is documented in
docs/telemetry-schema.md.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import io
import itertools
import json
import os
import stat
import warnings
from collections.abc import Callable, Iterator

import msgspec

from gpuscope.errors import BadInputError, GpuscopeError, ResourceError, UsageError
from gpuscope.fileio import OutputLock, check_input_size, check_output, is_stream
from gpuscope.schema.core import encode_json, problem_of
from gpuscope.schema.kinds import KIND_NAMES, LOG, current_reader, sniff_kind
from gpuscope.telemetry.flatten import ABSENT_PREFIX, column_converter, encode_cell, flatten_record, unflatten_row
from gpuscope.telemetry.records import SCHEMA_VERSION, JsonObject, JsonValue, Sample, record_to_dict
from gpuscope.telemetry.wire import RecordError, VersionError, convert_record, decode_record

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
_CUT = "incomplete last line skipped (the writer was probably killed)"
#: A line longer than this is not a record (a record of 8 GPUs with many processes is ~100 KB);
#: the reader stops there instead of holding a huge line in memory.
MAX_LINE_BYTES = 16 * 1024 * 1024


class TruncatedLogWarning(UserWarning):
    """The log's last line is incomplete (the writer was killed mid-line); it was skipped."""


def sample_to_json_dict(sample: Sample) -> JsonObject:
    """The JSON object of one log line: ``schema_version`` and ``timestamp`` first."""
    data = record_to_dict(sample)
    assert isinstance(data, dict)  # a dataclass record is an object
    return {**{key: data.pop(key) for key in _LEADING}, **data}


def _dumps(data: JsonObject) -> str:
    """One log line; a NaN or inf that slipped through a collector is written as null."""
    return encode_json(data).decode("utf-8")


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
        #: Why the last write failed (``None`` while every write succeeded), for the run's summary.
        self.failure: str | None = None
        self._lock: OutputLock | None = None  # the OutputLock of a file opened by open_log_writer
        try:
            self._seekable = stat.S_ISREG(os.fstat(fd).st_mode)
            self._appending = bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND)
        except OSError:
            self._seekable = self._appending = False
        #: Where the record being written starts (a regular file): a full disk cuts back to it.
        self._record_start = 0

    def write(self, sample: Sample) -> None:
        """Append one record and flush it."""
        data = self._format(sample)
        if self._seekable:
            data = self._follow_truncation() + data
        self._write_line(data)

    def _format(self, sample: Sample) -> bytes:  # pragma: no cover - abstract
        raise NotImplementedError

    def _restart(self) -> bytes:
        """What a file emptied under the writer must begin with again (CSV: its header)."""
        return b""

    def _follow_truncation(self) -> bytes:
        """Notice a file cut under the writer (logrotate's copytruncate, ``: > file``): writing at
        the old offset would leave a hole of NUL bytes no reader accepts, so go on at the new end.
        Returns what must come first there."""
        try:
            offset = os.lseek(self._fd, 0, os.SEEK_CUR)
            size = os.fstat(self._fd).st_size
        except OSError:
            return b""
        if offset <= size:
            self._record_start = size if self._appending else offset
            return b""
        with contextlib.suppress(OSError):
            os.lseek(self._fd, 0, os.SEEK_END)  # O_APPEND writes go there anyway; standard output may lack it
        self._record_start = size
        self._on_warning(
            f"{self.label} was truncated by another program ({offset} -> {size} bytes); logging goes on at its new end"
        )
        return self._restart() if size == 0 else b""

    def _write_line(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except BrokenPipeError:
            self.failure = "the reader closed the pipe"
            raise
        except OSError as exc:
            self.failure = exc.strerror or str(exc)
            if exc.errno in _NO_SPACE:
                self._cut_back()
                raise GpuscopeError(
                    f"{self.label}: {os.strerror(exc.errno)} after {self.records_written} records; "
                    "the records written are intact"
                ) from None
            raise GpuscopeError(f"cannot write {self.label}: {exc.strerror or exc}") from None
        self.records_written += 1

    def _cut_back(self) -> None:
        if self._seekable:
            with contextlib.suppress(OSError):
                if os.fstat(self._fd).st_size > self._record_start:
                    os.ftruncate(self._fd, self._record_start)

    def close(self) -> None:
        if self._close_fd:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._close_fd = False
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    def __enter__(self) -> LogWriter:
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

    def __init__(
        self,
        fd: int,
        label: str,
        close_fd: bool,
        on_warning: Callable[[str], None] | None = None,
        columns: list[str] | None = None,
    ) -> None:
        super().__init__(fd, label, close_fd, on_warning)
        #: ``columns`` (without ``unavailable``): the header of a file being continued (--append).
        self._columns: list[str] | None = columns
        self._column_set: frozenset[str] = frozenset(columns or ())
        self._warned_extra = False

    def _restart(self) -> bytes:
        if self._columns is None:
            return b""  # the next record writes the header anyway
        return (_csv_line([*self._columns, UNAVAILABLE_COLUMN]) + "\n").encode("utf-8")

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
        kept: JsonObject = {column: reason for column, reason in missing.items() if column in self._column_set}
        row.append(encode_cell(kept) if kept else "")
        writer.writerow(row)
        return buffer.getvalue().encode("utf-8")


def open_log_writer(
    path: str | os.PathLike[str] | None,
    fmt: str = "jsonl",
    on_warning: Callable[[str], None] | None = None,
    *,
    existing: str = "replace",
) -> LogWriter:
    """A writer for ``path`` (``None`` or ``"-"``: standard output).

    A stream (a FIFO or pipe, ``/dev/fd/N``, a terminal, ``/dev/null``) is written like standard
    output: nothing to lock, continue or replace, so ``existing`` does not apply. A regular file
    is locked (:class:`~gpuscope.fileio.OutputLock`, on the file itself) until the writer is
    closed: a second writer gets a one-line :class:`~gpuscope.errors.ResourceError` (exit 4).
    ``existing`` says what to do with a file that already holds data: ``"replace"`` (the
    library default) truncates it, ``"refuse"`` raises :class:`UsageError` (``gpuscope log``
    without ``--append``/``--force``), ``"append"`` continues a file whose first record reads
    back as a gpuscope log of format ``fmt`` (reusing a CSV header), after dropping an incomplete
    last line (a killed run); any other file is refused and left byte for byte as it was. Writes
    always go to the file's end, so a file cut under the writer (logrotate's copytruncate) goes on
    from its new end. Block devices are refused; an existing file keeps its mode.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown log format {fmt!r} (choose jsonl or csv)")
    if existing not in ("replace", "refuse", "append"):
        raise ValueError(f"existing must be replace, refuse or append, not {existing!r}")
    cls = JsonlWriter if fmt == "jsonl" else CsvWriter
    if path is None or str(path) == "-":
        return cls(1, "standard output", close_fd=False, on_warning=on_warning)
    label = os.fspath(path)
    check_output(label, option="--output", streams=True)
    stream = _open_stream(label)
    if stream is not None:
        return cls(stream, label, close_fd=True, on_warning=on_warning)
    lock = OutputLock(label)
    lock.acquire()
    try:
        try:
            fd = os.open(label, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOCTTY | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise UsageError(f"cannot write output {label}: {exc.strerror or exc}") from None
        try:
            info = os.fstat(fd)
            if lock.file_key not in (None, (info.st_dev, info.st_ino)):
                raise ResourceError(f"{label}: the file was replaced while being opened; run again")
            columns = _prepare_existing(fd, label, fmt, existing)
            writer: LogWriter = (
                CsvWriter(fd, label, close_fd=True, on_warning=on_warning, columns=columns)
                if cls is CsvWriter
                else JsonlWriter(fd, label, close_fd=True, on_warning=on_warning)
            )
        except BaseException:
            os.close(fd)
            raise
    except BaseException:
        lock.release()
        raise
    writer._lock = lock
    return writer


def _open_stream(label: str) -> int | None:
    """A write descriptor of ``label`` when it is a stream (see :func:`gpuscope.fileio.is_stream`;
    a FIFO waits here for its reader), else None."""
    try:
        if not is_stream(os.stat(label)):
            return None
        fd = os.open(label, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        hint = " (a socket cannot be opened by name: use -o - and redirect)" if exc.errno == errno.ENXIO else ""
        raise UsageError(f"cannot write output {label}: {exc.strerror or exc}{hint}") from None
    if is_stream(os.fstat(fd)):
        return fd
    os.close(fd)  # replaced by a regular file meanwhile: write it as one
    return None


def _prepare_existing(fd: int, label: str, fmt: str, existing: str) -> list[str] | None:
    """Truncate, refuse or check ``fd`` for appending (see :func:`open_log_writer`); returns the
    CSV header's data columns when continuing a CSV log. Nothing is changed before the file is
    known to be a gpuscope log of format ``fmt``."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"--output {label}: not a regular file; write to standard output with -o - instead")
    size = info.st_size
    columns: list[str] | None = None
    if size and existing == "refuse":
        raise UsageError(
            f"--output {label} already exists ({size} bytes); add --append to continue it or --force to replace it"
        )
    if size and existing == "replace":
        os.ftruncate(fd, 0)
    elif size:
        found, header = _identify_log(fd, label)
        if found != fmt:
            kind = "a JSON lines log" if found == "jsonl" else "a CSV log"
            raise UsageError(f"--append {label}: the file is {kind}, left as it was; add --format {found}")
        kept = _check_tail(fd, label, size, header)
        if kept < size:
            os.ftruncate(fd, kept)
        columns = next(csv.reader([header]))[:-1] if header else None
    os.lseek(fd, 0, os.SEEK_END)  # the offset the writer checks for a file cut under it
    return columns


_LEFT = "the file was left as it was (choose another --output, or --force to replace it)"


def _identify_log(fd: int, label: str) -> tuple[str, str | None]:
    """``("jsonl", None)`` or ``("csv", its header line)`` when the file open as ``fd`` is a
    gpuscope telemetry log, known by its first record reading back; else a one-line
    :class:`UsageError`. Only reads."""
    with os.fdopen(os.dup(fd), "rb") as handle:
        try:
            handle.seek(0)
            next(_records_in(handle, label, lambda message: None, "gpuscope log --append"))
        except BadInputError as exc:
            raise UsageError(f"--append: {exc}; {_LEFT}") from None
        except OSError as exc:
            raise UsageError(f"--append {label}: cannot read it ({exc.strerror or exc})") from None
        handle.seek(0)
        text = ""
        for _, text, _, _ in _lines_with_last_flag(handle, label):
            if text.strip(_BLANK):
                break
    return ("csv", text) if text.startswith("schema_version,") else ("jsonl", None)


def _check_tail(fd: int, label: str, size: int, header: str | None) -> int:
    """Where appending starts: the end of the last complete line, once that line reads back as a
    record and what follows it (if anything) is the start of one, cut by a killed writer; else a
    one-line :class:`UsageError` (something else was added to the log: nothing is dropped)."""
    kept = _last_complete_line_end(fd, size)
    cut = os.pread(fd, min(size - kept, 64), kept)
    start = (f"{SCHEMA_VERSION}," if header else '{"schema_version":').encode()
    if cut and not (cut.startswith(start) or start.startswith(cut)):
        raise UsageError(f"--append {label}: its last line is neither a record nor a cut record; {_LEFT}")
    if cut and size - kept <= MAX_LINE_BYTES and _is_record(label, os.pread(fd, size - kept, kept), header, True):
        os.write(fd, b"\n")  # a whole record that only lacks its newline is kept
        return size + 1
    begins = _last_complete_line_end(fd, kept - 1) if kept else 0
    if kept - begins > MAX_LINE_BYTES:
        raise UsageError(f"--append {label}: its last line is longer than any record; {_LEFT}")
    if (header is None or begins > 0) and not _is_record(label, os.pread(fd, kept - begins, begins), header, False):
        raise UsageError(f"--append {label}: its last complete line is not a gpuscope record; {_LEFT}")
    return kept


def _is_record(label: str, line: bytes, header: str | None, unfinished: bool) -> bool:
    """True when ``line`` reads back as a record of the log (``header``: its CSV header);
    ``unfinished``: the line lacks its newline (read as the reader reads a file's last line)."""
    if not line.strip(b" \t\r\n"):
        return True  # a blank line, skipped by the reader
    quiet: Callable[[str], None] = lambda message: None  # noqa: E731 - a cut line is just "no record"
    text = (1, _decode(line, label, 1), True, not unfinished)
    try:
        if header is None:
            return any(True for _ in _read_jsonl(label, [text], iter(()), quiet))
        return any(True for _ in _read_csv(label, (0, header, False, True), iter([text]), quiet))
    except BadInputError:
        return False


def _last_complete_line_end(fd: int, size: int) -> int:
    """The offset just after the last newline of the file (0 when there is none)."""
    position = size
    while position > 0:
        start = max(0, position - 64 * 1024)
        block = os.pread(fd, position - start, start)
        newline = block.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        position = start
    return 0


# --- reader ----------------------------------------------------------------------------------


def _warn(message: str) -> None:
    warnings.warn(message, TruncatedLogWarning, stacklevel=4)


def read_log(
    path: str | os.PathLike[str], on_warning: Callable[[str], None] | None = None, reader: str | None = None
) -> Iterator[Sample]:
    """The samples of a JSONL or CSV telemetry log, oldest first, decoded and checked by the
    wire types of :mod:`gpuscope.telemetry.wire`.

    An incomplete last line (a killed writer) is skipped with a :class:`TruncatedLogWarning`
    (or ``on_warning(message)``). Anything else wrong raises :class:`BadInputError` naming the
    file and line: garbage, a field of the wrong type (with its JSON path), an unsupported
    ``schema_version``, an empty file, a gpuscope file of another kind (``reader`` names the
    command in that message: "x.json is a probe results file; replay reads ...").
    """
    for _, sample in _read_numbered(os.fspath(path), on_warning, reader):
        yield sample


def read_log_dicts(
    path: str | os.PathLike[str], on_warning: Callable[[str], None] | None = None
) -> Iterator[JsonObject]:
    """Like :func:`read_log` but yields each record as the plain dict (``record_to_dict`` shape)."""
    for _, sample in _read_numbered(os.fspath(path), on_warning, None):
        yield sample_to_json_dict(sample)


def _kind_problem(label: str, handle: io.BufferedReader, reader: str | None) -> str | None:
    """ "<label> is a probe results file; <reader> reads a `gpuscope log` telemetry log" when the
    file is a gpuscope file of another kind."""
    try:
        handle.seek(0)
        raw = handle.read(64 * 1024 * 1024)
    except OSError:
        return None
    kind = sniff_kind(raw)
    if kind is None or kind == LOG:
        return None
    return f"{label} is {KIND_NAMES[kind]}; {reader or current_reader()} reads {KIND_NAMES[LOG]}"


def _read_numbered(
    label: str, on_warning: Callable[[str], None] | None, reader: str | None
) -> Iterator[tuple[int, Sample]]:
    try:
        handle = open(label, "rb")  # noqa: SIM115 - closed below; a generator owns it
    except OSError as exc:
        raise BadInputError(f"{label}: cannot read telemetry log: {exc.strerror or exc}") from None
    with handle:
        try:
            check_input_size(handle.fileno(), label, "telemetry log")
        except OSError as exc:
            raise BadInputError(f"{label}: cannot read telemetry log: {exc.strerror or exc}") from None
        yield from _records_in(handle, label, on_warning or _warn, reader)


def _records_in(
    handle: io.BufferedReader, label: str, warn: Callable[[str], None], reader: str | None
) -> Iterator[tuple[int, Sample]]:
    """The numbered samples of the log open as ``handle`` (from its current offset)."""
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
        warn(f"{label}:{number}: {_CUT}")
        records = iter(())
    else:
        raise BadInputError(f"{label}:{number}: not a gpuscope telemetry log (expected JSON lines or gpuscope CSV)")
    count = 0
    try:
        for number, sample in records:
            count += 1
            yield number, sample
    except BadInputError:
        if count == 0:  # the first record failed: perhaps a gpuscope file of another kind
            problem = _kind_problem(label, handle, reader)
            if problem:
                raise BadInputError(problem) from None
        raise
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
                f"{label}:{number + 1}: line longer than {MAX_LINE_BYTES} bytes; not a gpuscope telemetry record"
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
    label: str,
    head: list[tuple[int, str, bool, bool]],
    rest: Iterator[tuple[int, str, bool, bool]],
    warn: Callable[[str], None],
) -> Iterator[tuple[int, Sample]]:
    for number, text, is_last, complete in itertools.chain(head, rest):
        if not text.strip(_BLANK):
            continue
        try:
            sample = decode_record(text)
        except RecursionError:
            problem = "not a JSON object (nested too deeply)"
        except RecordError as exc:
            raise BadInputError(_record_problem(label, number, exc)) from None
        except msgspec.ValidationError as exc:
            if str(exc).startswith("Expected `object`"):
                problem = f"not a JSON object ({problem_of(exc)})"
            else:
                raise BadInputError(_record_problem(label, number, exc)) from None
        except msgspec.DecodeError as exc:
            problem = f"not a JSON object ({problem_of(exc)})"
        else:
            yield number, sample
            continue
        if is_last and not complete:
            warn(f"{label}:{number}: {_CUT}")
            return
        raise BadInputError(f"{label}:{number}: {problem}")


def _record_problem(label: str, number: int, error: Exception) -> str:
    if isinstance(error, VersionError):
        return f"{label}:{number}: {error}"
    text = error if isinstance(error, RecordError) else problem_of(error)  # type: ignore[arg-type]
    return f"{label}:{number}: not a gpuscope telemetry record ({text})"


def _csv_line(cells: list[str]) -> str:
    """The line :class:`CsvWriter` writes for ``cells``, without its newline."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="").writerow(cells)
    return buffer.getvalue()


def _read_csv(
    label: str,
    header_line: tuple[int, str, bool, bool],
    rest: Iterator[tuple[int, str, bool, bool]],
    warn: Callable[[str], None],
) -> Iterator[tuple[int, Sample]]:
    number, text, is_last, complete = header_line
    columns = next(csv.reader([text]))
    if not columns or columns[-1] != UNAVAILABLE_COLUMN:
        if is_last and not complete:
            warn(f"{label}:{number}: {_CUT}")
            return
        raise BadInputError(f"{label}:{number}: CSV header does not end with the '{UNAVAILABLE_COLUMN}' column")
    converters = [(column, column_converter(column)) for column in columns[:-1]]
    for number, text, is_last, complete in rest:
        if not text.strip(_BLANK):
            continue
        try:
            yield number, _csv_record(text, len(columns), converters, is_last and not complete)
        except _CutLine as problem:
            if is_last and not complete and problem.cut:
                warn(f"{label}:{number}: {_CUT}")
                return
            raise BadInputError(f"{label}:{number}: {problem}") from None
        except RecordError as exc:
            raise BadInputError(_record_problem(label, number, exc)) from None


class _CutLine(ValueError):
    """What is wrong with a CSV row; ``cut``: a killed writer's cut last line would explain it."""

    def __init__(self, text: str, cut: bool = True) -> None:
        super().__init__(text)
        self.cut = cut


def _csv_record(
    text: str, width: int, converters: list[tuple[str, Callable[[str], JsonValue]]], unfinished: bool
) -> Sample:
    """One CSV row as a :class:`Sample`; ``unfinished``: the file's last line, without its newline."""
    try:
        cells = next(csv.reader([text]))
    except csv.Error as exc:
        raise _CutLine(f"bad CSV row ({exc})") from None
    # A last line without its newline is whole only if it is exactly what the writer writes for
    # those cells (csv.reader accepts a line cut inside a quoted cell); a line cut just before its
    # 'unavailable' cell has the right cell count but lost the reasons of its empty cells: both
    # are skipped as incomplete.
    cut = unfinished and (_csv_line(cells) != text or (cells[-1:] == [""] and "" in cells[:-1]))
    if len(cells) != width or cut:
        raise _CutLine(f"{len(cells)} cells, the header has {width}")
    try:
        values = {column: (convert(cell) if cell != "" else None) for (column, convert), cell in zip(converters, cells)}
        missing = json.loads(cells[-1]) if cells[-1] else {}
    except RecursionError:
        raise _CutLine("bad cell (JSON nested too deeply)", cut=False) from None
    except ValueError as exc:
        raise _CutLine(f"bad cell ({exc})") from None
    if not isinstance(missing, dict):
        raise _CutLine(f"the '{UNAVAILABLE_COLUMN}' cell is not a JSON object", cut=False)
    return convert_record(unflatten_row(values, {str(k): str(v) for k, v in missing.items()}))
