"""Reading report inputs and writing report outputs.

Inputs are results files (``gpuscope.results``) or report files (``gpuscope.report``), told
apart by their ``schema`` field. Outputs are written atomically: a temporary file in the same
folder, then a rename, so a reader never sees a half-written report.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from gpuscope.errors import BadInputError, UsageError
from gpuscope.fileio import read_json_file, write_json_atomic, write_text_atomic
from gpuscope.results import parse_results, validate_results
from gpuscope.schema.core import convert, decode_json, decode_tree, encode_json
from gpuscope.schema.files import read_bytes
from gpuscope.schema.kinds import KIND_NAMES, current_reader, declared_schema, sniff_kind
from gpuscope.schema.report import REPORT_SCHEMA, REPORT_SCHEMA_VERSION, Report
from gpuscope.schema.results import RESULTS_SCHEMA

__all__ = [
    "REPORT_SCHEMA",
    "REPORT_SCHEMA_VERSION",
    "FORMATS",
    "format_for",
    "read_json_document",
    "load_input",
    "validate_report",
    "write_text_atomic",
    "write_json_atomic",
]


#: Output formats and the file extensions that select them.
FORMATS: dict[str, tuple[str, ...]] = {
    "html": (".html", ".htm"),
    "md": (".md", ".markdown"),
    "json": (".json",),
}


def format_for(path: str | os.PathLike[str], fmt: str | None = None, hint: str = ", or --format") -> str:
    """The output format: ``fmt`` when given (``html``, ``md``/``markdown``, ``json``), else
    from the file extension. Raises :class:`UsageError` when neither names a known format."""
    if fmt:
        name = fmt.lower().lstrip(".")
        name = {"markdown": "md", "htm": "html"}.get(name, name)
        if name not in FORMATS:
            raise UsageError(f"unknown report format {fmt!r}; expected html, md or json")
        return name
    suffix = Path(path).suffix.lower()
    for name, suffixes in FORMATS.items():
        if suffix in suffixes:
            return name
    raise UsageError(
        f"{path}: cannot tell the report format from the extension {suffix or '(none)'!r}; "
        f"use .html, .md or .json{hint}"
    )


def read_json_document(path: str | os.PathLike[str]) -> Any:
    """Parse a JSON file; raise :class:`BadInputError` with one line naming the file and problem."""
    return read_json_file(path, "a results or report JSON file")


def _version_problem(data: Any, source: str) -> str | None:
    if isinstance(data, dict) and data.get("schema") == REPORT_SCHEMA:
        version = data.get("schema_version")
        if version != REPORT_SCHEMA_VERSION or isinstance(version, bool):
            return (
                f"{source}: report schema_version {version!r} is not supported "
                f"(this gpuscope reads version {REPORT_SCHEMA_VERSION})"
            )
    return None


def validate_report(data: Any, source: str) -> dict[str, Any]:
    """Check ``data`` against :class:`gpuscope.schema.report.Report` (every field the renderers
    read, embedded results documents included); raise :class:`BadInputError` naming ``source``
    and the JSON path. Returns ``data``."""
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        raise BadInputError(f"{source}: not a gpuscope report file (field 'schema' is not {REPORT_SCHEMA!r})")
    problem = _version_problem(data, source)
    if problem:
        raise BadInputError(problem)
    convert(data, Report, source)
    return data


def load_input(
    item: str | os.PathLike[str] | dict[str, Any], position: int = 0, reader: str | None = None
) -> tuple[str, str, dict[str, Any]]:
    """Load one input: a path or an already-parsed dict, results or report.

    Returns ``(kind, label, document)`` where kind is ``"results"`` or ``"report"`` and label is
    the file name (``results[N]`` for a dict). Raises :class:`BadInputError` (one line: the file,
    the JSON path, the problem; or what kind of file it is when it is neither)."""
    if isinstance(item, dict):
        source = label = str(item.get("_label") or f"results[{position}]")
        document: dict[str, Any] = msgspec.json.decode(encode_json(item))  # as if read from a file: NaN -> null
        if document.get("schema") == REPORT_SCHEMA:
            return "report", label, validate_report(document, source)
        return "results", label, validate_results(document, source)
    source = str(item)
    label = Path(item).name or source
    raw = read_bytes(item, "a results or report JSON file", "report")
    kind = sniff_kind(raw)
    if kind == REPORT_SCHEMA:
        try:
            decode_json(raw, Report, source, on_error=lambda _: _version_problem(msgspec.json.decode(raw), source))
        except RecursionError:
            raise BadInputError(f"{source}: JSON nested too deeply") from None
        return "report", label, decode_tree(raw, source)
    if kind not in (None, RESULTS_SCHEMA):
        raise BadInputError(
            f"{source} is {KIND_NAMES[kind]}; {reader or current_reader()} reads a probe results or report file"
        )
    schema = declared_schema(raw)
    if kind is None and schema is not None:
        raise BadInputError(
            f"{source}: not a gpuscope results or report file "
            f"(field 'schema' is {schema!r}, expected {RESULTS_SCHEMA!r} or {REPORT_SCHEMA!r})"
        )
    parse_results(raw, source, reader)
    data = decode_tree(raw, source)
    for key in ("devices", "ceilings", "measurements", "workloads"):
        data.setdefault(key, [])
    return "results", label, data
