"""Reading telemetry logs: JSON lines and CSV, plain or compressed (indexed frames), one file
or a rotated set (a folder, a glob, a base name) read as one log.

A killed writer leaves at most an incomplete last line (plain) or frame (compressed); the reader
skips it with a :class:`TruncatedLogWarning`. Anything else wrong is one :class:`BadInputError`
naming the file and line. The layout is documented in docs/telemetry-schema.md; the writers are
in :mod:`gpuscope.telemetry.logfile`, which re-exports this module's public names.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import warnings
from collections.abc import Callable, Iterator

import msgspec

from gpuscope.errors import BadInputError
from gpuscope.fileio import check_input_size
from gpuscope.schema.core import problem_of
from gpuscope.schema.kinds import KIND_NAMES, LOG, current_reader, sniff_kind
from gpuscope.telemetry.flatten import column_converter, unflatten_row
from gpuscope.telemetry.logframes import FramedReader, FrameError, sniff_codec
from gpuscope.telemetry.logpaths import describe_gap, log_files
from gpuscope.telemetry.records import JsonObject, JsonValue, Sample, record_to_dict
from gpuscope.telemetry.wire import RecordError, VersionError, convert_record, decode_record

__all__ = [
    "MAX_LINE_BYTES",
    "UNAVAILABLE_COLUMN",
    "TruncatedLogWarning",
    "read_log",
    "read_log_dicts",
    "sample_to_json_dict",
    "samples_of_bytes",
]

#: The last CSV column: JSON object mapping each unavailable column to ``"reason: detail"``.
UNAVAILABLE_COLUMN = "unavailable"
_LEADING = ("schema_version", "timestamp")
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
    files = log_files(os.fspath(path))
    warn = on_warning or _warn
    previous: tuple[str, float, float] | None = None  # (file, its last timestamp, its last step)
    for name in files:
        first = True
        last_s = step_s = 0.0
        for _, sample in _read_numbered(name, warn, reader):
            if first and previous is not None:
                gap = describe_gap(previous[0], previous[1], name, sample.timestamp, previous[2])
                if gap:
                    warn(gap)
            elif not first:
                step_s = sample.timestamp - last_s
            first = False
            last_s = sample.timestamp
            yield sample
        if not first:
            previous = (name, last_s, step_s)


def read_log_dicts(
    path: str | os.PathLike[str], on_warning: Callable[[str], None] | None = None
) -> Iterator[JsonObject]:
    """Like :func:`read_log` but yields each record as the plain dict (``record_to_dict`` shape)."""
    for _, sample in _read_numbered(os.fspath(path), on_warning, None):
        yield sample_to_json_dict(sample)


def _kind_problem(label: str, handle: io.BufferedIOBase, reader: str | None) -> str | None:
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
            codec = sniff_codec(os.pread(handle.fileno(), 4, 0))
        except OSError as exc:
            raise BadInputError(f"{label}: cannot read telemetry log: {exc.strerror or exc}") from None
        warn = on_warning or _warn
        if codec is None:
            yield from _records_in(handle, label, warn, reader)
            return
        frames = FramedReader(handle.fileno(), codec)
        try:
            yield from _records_in(io.BufferedReader(frames, 1024 * 1024), label, warn, reader)
        except FrameError as exc:
            raise BadInputError(f"{label}: {exc}") from None
        if frames.cut:
            warn(f"{label}: incomplete last frame skipped (the writer was probably killed)")


def _records_in(
    handle: io.BufferedIOBase, label: str, warn: Callable[[str], None], reader: str | None
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


def _lines_with_last_flag(handle: io.BufferedIOBase, label: str) -> Iterator[tuple[int, str, bool, bool]]:
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


def samples_of_bytes(data: bytes, label: str, on_warning: Callable[[str], None] | None = None) -> list[Sample]:
    """The samples of whole log lines held in memory (a decoded frame, a block of a plain log;
    a CSV block starts with its header line)."""
    handle = io.BytesIO(data)
    return [sample for _, sample in _records_in(handle, label, on_warning or _warn, None)]
