"""What kind of gpuscope file a byte string holds, for "this is a report, not a results file".

Every JSON document gpuscope writes names itself (``"schema": "gpuscope.results"`` and
``"schema_version"``); telemetry log lines carry ``schema_version`` and ``timestamp``; the CSV
log starts with ``schema_version,``; suites and themes are TOML with ``[[probe]]`` / ``[theme]``.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterator
from contextvars import ContextVar

import msgspec

__all__ = [
    "RESULTS",
    "REPORT",
    "LOG",
    "KIND_NAMES",
    "declared_schema",
    "sniff_kind",
    "wrong_kind_message",
    "existing_output",
    "reading_as",
    "current_reader",
]

RESULTS = "gpuscope.results"
REPORT = "gpuscope.report"
LOG = "gpuscope.log"
SUITE = "gpuscope.suite"
THEME = "gpuscope.theme"

#: kind -> how a message names a file of that kind.
KIND_NAMES = {
    RESULTS: "a probe results file",
    REPORT: "a report file",
    LOG: "a `gpuscope log` telemetry log",
    SUITE: "a probe suite (TOML)",
    THEME: "a theme file (TOML)",
}

_SNIFF_BYTES = 64 * 1024
_READER: ContextVar[str] = ContextVar("gpuscope_reader", default="this command")


@contextlib.contextmanager
def reading_as(command: str) -> Iterator[None]:
    """Inside, "x.json is a report file; <command> reads ..." names ``command`` (``"replay"``)."""
    token = _READER.set(command)
    try:
        yield
    finally:
        _READER.reset(token)


def current_reader() -> str:
    """The command named in wrong-kind messages (``"this command"`` outside :func:`reading_as`)."""
    return _READER.get()


class _Envelope(msgspec.Struct):
    schema: object = None
    schema_version: object = None
    timestamp: object = None


def declared_schema(raw: bytes) -> object:
    """The top-level ``schema`` value of a JSON object in ``raw``; None when absent or not an object."""
    try:
        return msgspec.json.decode(raw, type=_Envelope).schema
    except (msgspec.MsgspecError, RecursionError):
        return None


def sniff_kind(raw: bytes) -> str | None:
    """The kind of file ``raw`` holds (a key of :data:`KIND_NAMES`), or None when unknown."""
    try:
        envelope = msgspec.json.decode(raw, type=_Envelope)
        if isinstance(envelope.schema, str) and envelope.schema in KIND_NAMES:
            return envelope.schema
        if envelope.schema is None and envelope.timestamp is not None and envelope.schema_version is not None:
            return LOG
        return None
    except (msgspec.MsgspecError, RecursionError):
        pass
    head = raw[:_SNIFF_BYTES]
    first = head.lstrip().split(b"\n", 1)[0]
    if first.startswith(b"schema_version,"):
        return LOG
    if first.startswith(b"{"):
        try:
            line = msgspec.json.decode(first, type=_Envelope)
        except (msgspec.MsgspecError, RecursionError):
            line = None
        if line is not None and line.timestamp is not None and line.schema_version is not None:
            return LOG
    text = head.decode("utf-8", "replace")
    if re.search(r"^\s*\[\[\s*probe\s*\]\]", text, re.MULTILINE):
        return SUITE
    if re.search(r"^\s*\[\s*theme\s*\]", text, re.MULTILINE):
        return THEME
    return None


def wrong_kind_message(source: str, raw: bytes, expected: str, reader: str | None = None) -> str | None:
    """``"cpu.json is a probe results file; replay reads a `gpuscope log` telemetry log"`` when
    ``raw`` is a gpuscope file of another kind than ``expected``; None otherwise.

    ``reader`` names what reads it (``"replay"``, ``"roofline --probes"``)."""
    kind = sniff_kind(raw)
    if kind is None or kind == expected:
        return None
    return f"{source} is {KIND_NAMES[kind]}; {reader or current_reader()} reads {KIND_NAMES[expected]}"


def existing_output(path: str | os.PathLike[str]) -> tuple[str, str] | None:
    """``(kind, description)`` of a non-empty regular file at ``path`` that an output would replace:
    kind is a key of :data:`KIND_NAMES` or ``"other"``; the description says what would be lost
    (``"a probe results file with 28 ceilings and 1 workload"``). None when there is nothing to lose."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode) or os.path.getsize(path) == 0:
            return None
        with open(path, "rb") as handle:
            raw = handle.read(_SNIFF_BYTES * 1024)
    except OSError:
        return None
    kind = sniff_kind(raw)
    if kind is None:
        return "other", "a file that is not a gpuscope file"
    text = KIND_NAMES[kind]
    if kind == RESULTS:
        try:
            counts = msgspec.json.decode(raw, type=_Counts)
            text += f" with {len(counts.ceilings)} ceiling(s) and {len(counts.workloads)} workload(s)"
        except (msgspec.MsgspecError, RecursionError):
            pass
    return kind, text


class _Counts(msgspec.Struct):
    ceilings: list[object] = []
    workloads: list[object] = []
