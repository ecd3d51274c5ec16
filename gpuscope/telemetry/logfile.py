"""Telemetry logs: the JSON lines and CSV writers, plain or compressed; the reader's public names
(:mod:`gpuscope.telemetry.logread`) are re-exported here.

A plain log's every record is written with one ``write`` of a whole line and flushed at once (no
Python buffering), so a run killed with SIGKILL leaves at most its last line incomplete; a
compressed log's records are written as indexed frames (:mod:`gpuscope.telemetry.logframes`) at
most :data:`FRAME_DELAY_S` after they were sampled, so it loses at most that and a cut frame. The
layout is documented in docs/telemetry-schema.md.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import io
import os
import stat
import time
import warnings
from collections.abc import Callable

from gpuscope.errors import BadInputError, GpuscopeError, ResourceError, UsageError
from gpuscope.fileio import OutputLock, check_output, is_stream
from gpuscope.schema.core import encode_json
from gpuscope.telemetry.flatten import ABSENT_PREFIX, encode_cell, flatten_record
from gpuscope.telemetry.logframes import FramedReader, FrameError, codec_of_name, encode_frame, scan_frames, sniff_codec
from gpuscope.telemetry.logread import (
    _BLANK,
    MAX_LINE_BYTES,
    UNAVAILABLE_COLUMN,
    TruncatedLogWarning,
    _csv_line,
    _decode,
    _lines_with_last_flag,
    _read_csv,
    _read_jsonl,
    _records_in,
    read_log,
    read_log_dicts,
    sample_to_json_dict,
    samples_of_bytes,
)
from gpuscope.telemetry.records import SCHEMA_VERSION, JsonObject, Sample

__all__ = [
    "FORMATS",
    "FRAME_DELAY_S",
    "LogWriter",
    "JsonlWriter",
    "CsvWriter",
    "open_log_writer",
    "sample_to_json_dict",
    "read_log",
    "read_log_dicts",
    "samples_of_bytes",
    "TruncatedLogWarning",
    "UNAVAILABLE_COLUMN",
    "MAX_LINE_BYTES",
]

FORMATS = ("jsonl", "csv")
_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
#: A compressed log's records reach the file at most this long after they were sampled (so a
#: ``kill -9`` loses at most this much).
FRAME_DELAY_S = 5.0


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

    def __init__(
        self,
        fd: int,
        label: str,
        close_fd: bool,
        on_warning: Callable[[str], None] | None = None,
        *,
        codec: str | None = None,
        interval_s: float = 1.0,
    ) -> None:
        self._fd = fd
        #: ``"zst"`` or ``"gz"``: records are buffered and written as indexed frames
        #: (:mod:`gpuscope.telemetry.logframes`) at most :data:`FRAME_DELAY_S` after sampling.
        self.codec = codec
        self._frame_records = max(1, int(FRAME_DELAY_S / max(interval_s, 1e-3) + 1e-9))
        self._interval_s = interval_s
        self._pending: list[bytes] = []
        self._pending_times: list[float] = []
        self._pending_since = 0.0
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
        """Append one record and flush it (a compressed log: flush its frame when due)."""
        data = self._format(sample)
        if self.codec is not None:
            if not self._pending:
                self._pending_since = time.monotonic()
            self._pending.append(data)
            self._pending_times.append(sample.timestamp)
            waited_s = time.monotonic() - self._pending_since
            if len(self._pending) >= self._frame_records or waited_s + self._interval_s > FRAME_DELAY_S:
                self.flush()
            return
        if self._seekable:
            data = self._follow_truncation() + data
        self._write_line(data)

    def flush(self) -> None:
        """Write the records buffered for a compressed frame (nothing for a plain log)."""
        if not self._pending or self.codec is None:
            return
        lines, times = self._pending, self._pending_times
        self._pending, self._pending_times = [], []
        data = b"".join(lines)
        if self._seekable:
            data = self._follow_truncation() + data
        frame = encode_frame(self.codec, data, times[0], times[-1], len(times))
        self._write_line(frame, len(times))

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

    def _write_line(self, data: bytes, records: int = 1) -> None:
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
        self.records_written += records

    def _cut_back(self) -> None:
        if self._seekable:
            with contextlib.suppress(OSError):
                if os.fstat(self._fd).st_size > self._record_start:
                    os.ftruncate(self._fd, self._record_start)

    def close(self) -> None:
        """Write what a compressed frame still holds, then close; a failing last write still
        closes the file (and raises)."""
        try:
            self.flush()
        finally:
            self._close()

    def _close(self) -> None:
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
        *,
        codec: str | None = None,
        interval_s: float = 1.0,
    ) -> None:
        super().__init__(fd, label, close_fd, on_warning, codec=codec, interval_s=interval_s)
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
    interval_s: float = 1.0,
    codec: str | None = "name",
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

    ``codec`` (``"zst"``, ``"gz"``, ``None`` for plain; by default taken from the name's suffix,
    ``run.jsonl.zst``) writes indexed compressed frames, each at most :data:`FRAME_DELAY_S`
    after its first record at the sampling ``interval_s``.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown log format {fmt!r} (choose jsonl or csv)")
    if existing not in ("replace", "refuse", "append"):
        raise ValueError(f"existing must be replace, refuse or append, not {existing!r}")
    cls = JsonlWriter if fmt == "jsonl" else CsvWriter
    named = None if path is None or str(path) == "-" else os.fspath(path)
    if codec == "name":
        codec = codec_of_name(named) if named is not None else None
    framing = {"codec": codec, "interval_s": interval_s}
    if named is None:
        return cls(1, "standard output", close_fd=False, on_warning=on_warning, **framing)  # type: ignore[arg-type]
    label = named
    check_output(label, option="--output", streams=True)
    stream = _open_stream(label)
    if stream is not None:
        return cls(stream, label, close_fd=True, on_warning=on_warning, **framing)  # type: ignore[arg-type]
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
            columns = _prepare_existing(fd, label, fmt, existing, codec)
            writer: LogWriter = (
                CsvWriter(fd, label, True, on_warning, columns, codec=codec, interval_s=interval_s)
                if cls is CsvWriter
                else JsonlWriter(fd, label, True, on_warning, codec=codec, interval_s=interval_s)
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


def _prepare_existing(fd: int, label: str, fmt: str, existing: str, codec: str | None = None) -> list[str] | None:
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
    elif size and (codec is not None or sniff_codec(os.pread(fd, 4, 0)) is not None):
        columns = _prepare_framed(fd, label, fmt, codec)
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


def _prepare_framed(fd: int, label: str, fmt: str, codec: str | None) -> list[str] | None:
    """Check a compressed log for ``--append``: same codec, indexed frames, first record of
    format ``fmt``; a cut last frame (a killed run) is dropped. Returns the CSV columns."""
    found_codec = sniff_codec(os.pread(fd, 4, 0))
    if found_codec != codec:
        found = "plain text" if found_codec is None else f"{found_codec}-compressed"
        raise UsageError(f"--append {label}: the file is {found}, not what its name says; {_LEFT}")
    assert codec is not None
    scan = scan_frames(fd, codec)
    if not scan.indexed:
        raise UsageError(f"--append {label}: not a compressed log written by gpuscope log; {_LEFT}")
    handle = io.BufferedReader(FramedReader(fd, codec))
    try:
        next(_records_in(handle, label, lambda message: None, "gpuscope log --append"))
    except (BadInputError, FrameError) as exc:
        raise UsageError(f"--append: {exc}; {_LEFT}") from None
    first = decode_first_frame(fd, codec, scan)
    header = first.split(b"\n", 1)[0].decode("utf-8", "replace")
    found_fmt = "csv" if header.startswith("schema_version,") else "jsonl"
    if found_fmt != fmt:
        kind = "a JSON lines log" if found_fmt == "jsonl" else "a CSV log"
        raise UsageError(f"--append {label}: the file is {kind}, left as it was; add --format {found_fmt}")
    if scan.cut:
        os.ftruncate(fd, scan.end)
    return next(csv.reader([header]))[:-1] if found_fmt == "csv" else None


def decode_first_frame(fd: int, codec: str, scan: object) -> bytes:
    """The plain bytes of the first frame of an indexed compressed log."""
    from gpuscope.telemetry.logframes import decode_frame

    frame = scan.frames[0]  # type: ignore[attr-defined]
    return decode_frame(codec, os.pread(fd, frame.length, frame.offset))


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
