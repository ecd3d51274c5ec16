"""Reading report inputs and writing report outputs.

Inputs are results files (``gpuscope.results``) or report files (``gpuscope.report``), told
apart by their ``schema`` field. Outputs are written atomically: a temporary file in the same
folder, then a rename, so a reader never sees a half-written report.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gpuscope.errors import BadInputError, UsageError
from gpuscope.results import RESULTS_SCHEMA, read_json_file, validate_results, write_json_atomic, write_text_atomic

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

REPORT_SCHEMA = "gpuscope.report"
REPORT_SCHEMA_VERSION = 1

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
    raise UsageError(f"{path}: cannot tell the report format from the extension {suffix or '(none)'!r}; use .html, .md or .json{hint}")


def read_json_document(path: str | os.PathLike[str]) -> Any:
    """Parse a JSON file; raise :class:`BadInputError` with one line naming the file and problem."""
    return read_json_file(path, "a results or report JSON file")


def validate_report(data: Any, source: str) -> dict[str, Any]:
    """Check ``data`` is a report document of a supported version, every field the renderers
    read included (:mod:`gpuscope.report.schema`); raise :class:`BadInputError` naming ``source``
    and the field path."""
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        raise BadInputError(f"{source}: not a gpuscope report file (field 'schema' is not {REPORT_SCHEMA!r})")
    if data.get("schema_version") != REPORT_SCHEMA_VERSION or isinstance(data.get("schema_version"), bool):
        raise BadInputError(
            f"{source}: report schema_version {data.get('schema_version')!r} is not supported (this gpuscope reads version {REPORT_SCHEMA_VERSION})"
        )
    for key, kind in (("systems", list), ("ceilings", list), ("workloads", list), ("measurements", list), ("roofline", dict), ("results", list)):
        if not isinstance(data.get(key), kind):
            raise BadInputError(f"{source}: field '{key}' must be {'a list' if kind is list else 'an object'}")
    telemetry = data.get("telemetry")
    if telemetry is not None and not isinstance(telemetry, dict):
        raise BadInputError(f"{source}: field 'telemetry' must be an object or null")
    from gpuscope.report.schema import check_report_document

    check_report_document(data, source)
    return data


def load_input(item: str | os.PathLike[str] | dict[str, Any], position: int = 0) -> tuple[str, str, dict[str, Any]]:
    """Load one input: a path or an already-parsed dict, results or report.

    Returns ``(kind, label, document)`` where kind is ``"results"`` or ``"report"`` and label is
    the file name (``results[N]`` for a dict). Raises :class:`BadInputError`."""
    if isinstance(item, dict):
        label = str(item.get("_label") or f"results[{position}]")
        data: Any = item
    else:
        label = Path(item).name or str(item)
        data = read_json_document(item)
        label_source = str(item)
    source = label if isinstance(item, dict) else label_source
    if isinstance(data, dict) and data.get("schema") == REPORT_SCHEMA:
        return "report", label, validate_report(data, source)
    if isinstance(data, dict) and data.get("schema") == RESULTS_SCHEMA:
        return "results", label, validate_results(data, source)
    schema = data.get("schema") if isinstance(data, dict) else None
    raise BadInputError(
        f"{source}: not a gpuscope results or report file (field 'schema' is {schema!r}, expected {RESULTS_SCHEMA!r} or {REPORT_SCHEMA!r})"
    )
