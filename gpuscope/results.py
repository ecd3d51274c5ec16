"""The probe results file: versioned JSON written by ``gpuscope probe`` and ``gpuscope measure``,
read by ``roofline``, ``report``, ``compare`` and the TUI. Documented in ``docs/results-schema.md``.

The declared types, one per object of the file, are in :mod:`gpuscope.schema.results`.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

from gpuscope.schema import kinds
from gpuscope.schema.core import MAX_MAGNITUDE, MIN_MAGNITUDE, decode_json, encode_json, timestamp_now_s
from gpuscope.schema.files import read_bytes
from gpuscope.schema.kinds import KIND_NAMES, wrong_kind_message
from gpuscope.schema.results import CEILING_KINDS, CEILING_UNITS, RESULTS_SCHEMA, RESULTS_SCHEMA_VERSION, Results
from gpuscope.version import __version__

__all__ = [
    "RESULTS_SCHEMA",
    "RESULTS_SCHEMA_VERSION",
    "CEILING_KINDS",
    "CEILING_UNITS",
    "empty_results",
    "read_results",
    "read_results_file",
    "parse_results",
    "to_results",
    "MIN_MAGNITUDE",
    "MAX_MAGNITUDE",
]


def empty_results(**fields: Any) -> Results:
    """A results document of the current schema version, stamped with this gpuscope's version and
    the time (epoch seconds); ``fields`` set the rest (``system``, ``suite``, ``devices``...)."""
    return Results(
        schema="gpuscope.results",
        schema_version=1,
        gpuscope_version=__version__,
        created=timestamp_now_s(),
        **fields,
    )


def _kind_problem(data: object, source: str) -> str | None:
    """One line when ``data`` is not a results document of this version (another kind, another
    version), else None."""
    if not isinstance(data, dict):
        return f"{source}: not a gpuscope results file (top level is {type(data).__name__}, expected an object)"
    schema = data.get("schema")
    if schema != RESULTS_SCHEMA:
        if isinstance(schema, str) and schema in KIND_NAMES:
            return f"{source} is {KIND_NAMES[schema]}, not a probe results file"
        return f"{source}: not a gpuscope results file (field 'schema' is {schema!r}, expected {RESULTS_SCHEMA!r})"
    version = data.get("schema_version")
    if version != RESULTS_SCHEMA_VERSION or isinstance(version, bool):
        return (
            f"{source}: results schema_version {version!r} is not supported "
            f"(this gpuscope reads version {RESULTS_SCHEMA_VERSION})"
        )
    return None


def to_results(data: object, source: str) -> Results:
    """An in-memory results document (dicts and lists, e.g. a run in progress) as the typed view
    of the file it would write (:func:`~gpuscope.schema.core.encode_json`: NaN and infinity become
    null), checked as :func:`parse_results` checks a file. A :class:`Results` is returned as it is."""
    return data if isinstance(data, Results) else parse_results(encode_json(data), source)


def parse_results(raw: bytes, source: str, reader: str | None = None) -> Results:
    """Decode and check the bytes of a results file into the typed view; ``reader`` names the
    command in "x.json is a report file; <reader> reads a probe results file"."""

    def better(error: Exception) -> str | None:
        kind = wrong_kind_message(source, raw, kinds.RESULTS, reader)
        if kind:
            return kind
        try:
            return _kind_problem(msgspec.json.decode(raw), source)
        except (msgspec.MsgspecError, RecursionError):
            return None

    return decode_json(raw, Results, source, on_error=better)


def read_results(path: str | os.PathLike[str], reader: str | None = None) -> Results:
    """Read a results file into the typed view (:class:`~gpuscope.schema.results.Results`).
    Raises :class:`BadInputError` (one line: file, JSON path, problem)."""
    return read_results_file(path, reader)[0]


def read_results_file(path: str | os.PathLike[str], reader: str | None = None) -> tuple[Results, bytes]:
    """:func:`read_results` and the file's bytes as written (undeclared fields and explicit nulls
    kept: what a report embeds). Raises :class:`BadInputError`."""
    raw = read_bytes(path, "a results JSON file")
    return parse_results(raw, str(path), reader), raw
