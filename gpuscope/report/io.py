"""Reading report inputs and writing report outputs.

Inputs are results files (``gpuscope.results``) or report files (``gpuscope.report``), told
apart by their ``schema`` field. Outputs are written atomically: a temporary file in the same
folder, then a rename, so a reader never sees a half-written report.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import msgspec

from gpuscope.errors import BadInputError, UsageError
from gpuscope.results import parse_results
from gpuscope.schema.core import JsonObject, convert, decode_json, decode_tree, encode_json
from gpuscope.schema.files import read_bytes
from gpuscope.schema.kinds import KIND_NAMES, current_reader, declared_schema, sniff_kind
from gpuscope.schema.report import REPORT_SCHEMA, REPORT_SCHEMA_VERSION, Report
from gpuscope.schema.results import RESULTS_SCHEMA, Results
from gpuscope.textsafe import safe_text

__all__ = [
    "REPORT_SCHEMA",
    "REPORT_SCHEMA_VERSION",
    "FORMATS",
    "format_for",
    "Input",
    "ResultsInput",
    "load_input",
    "results_inputs",
    "validate_report",
]


#: Output formats and the file extensions that select them.
FORMATS: dict[str, tuple[str, ...]] = {"html": (".html", ".htm"), "md": (".md", ".markdown"), "json": (".json",)}


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


class ResultsInput(NamedTuple):
    """One results file of a report: ``results`` is the typed view (every field the report reads),
    ``document`` the file as written (undeclared fields kept: it travels inside report.json as
    given, and the profile and energy sections read its free detail)."""

    label: str
    results: Results
    document: JsonObject


class Input(NamedTuple):
    """One loaded input: ``kind`` ``"results"`` or ``"report"``, its label, the document as
    written (the dict view) and its typed view."""

    kind: str
    label: str
    document: JsonObject
    typed: Results | Report


def _version_problem(data: object, source: str) -> str | None:
    """The one-line message for a report file of another ``schema_version``, else None."""
    version = data.get("schema_version") if isinstance(data, dict) else REPORT_SCHEMA_VERSION
    if version == REPORT_SCHEMA_VERSION and not isinstance(version, bool):
        return None
    return (
        f"{source}: report schema_version {version!r} is not supported "
        f"(this gpuscope reads version {REPORT_SCHEMA_VERSION})"
    )


def validate_report(data: object, source: str) -> Report:
    """``data`` (a parsed report JSON) as the typed :class:`~gpuscope.schema.report.Report`
    (every field the renderers read, embedded results documents included); raise
    :class:`BadInputError` naming ``source`` and the JSON path."""
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        raise BadInputError(f"{source}: not a gpuscope report file (field 'schema' is not {REPORT_SCHEMA!r})")
    problem = _version_problem(data, source)
    if problem:
        raise BadInputError(problem)
    return convert(data, Report, source)


def load_input(item: str | os.PathLike[str] | JsonObject, position: int = 0, reader: str | None = None) -> Input:
    """Load one input: a path or an already-parsed dict (read as if from a file: NaN -> null),
    results or report; its label is the file name (``results[N]`` for a dict, or its ``_label``).
    Raises :class:`BadInputError` (one line: the file, the JSON path, the problem; or what kind
    of file it is when it is neither)."""
    if isinstance(item, dict):
        source = label = str(item.get("_label") or f"results[{position}]")
        raw = encode_json(item)
    else:
        source = str(item)
        label = safe_text(Path(item).name or source)  # a file name shown as safe_text shows it
        raw = read_bytes(item, "a results or report JSON file", "report")
    kind = sniff_kind(raw)
    if kind == REPORT_SCHEMA:

        def version(_: Exception) -> str | None:
            try:
                return _version_problem(msgspec.json.decode(raw), source)
            except (msgspec.MsgspecError, RecursionError):
                return None

        report = decode_json(raw, Report, source, on_error=version)
        return Input("report", label, decode_tree(raw, source), report)
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
    results = parse_results(raw, source, reader)
    data = decode_tree(raw, source)
    for key in ("devices", "ceilings", "measurements", "workloads"):
        data.setdefault(key, [])
    return Input("results", label, data, results)


def _labels(items: Sequence[str | os.PathLike[str] | JsonObject], loaded: Sequence[Input]) -> list[str]:
    """File names, with the parent folder added (and then a number) where two inputs share one."""
    labels = [entry.label for entry in loaded]
    for position, label in enumerate(labels):
        item = items[position]
        if labels.count(label) > 1 and not isinstance(item, dict):
            path = Path(item)
            labels[position] = safe_text(f"{path.parent.name}/{path.name}") if path.parent.name else label
    seen: dict[str, int] = {}
    for position, label in enumerate(labels):
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            labels[position] = f"{label} ({seen[label]})"
    return labels


def embedded_documents(report: Input) -> list[JsonObject]:
    """The results documents a loaded report embeds, as written (its typed view checked them)."""
    entries = report.document.get("results")
    if not isinstance(entries, list):
        return []
    documents = [entry.get("document") for entry in entries if isinstance(entry, dict)]
    return [document for document in documents if isinstance(document, dict)]


def results_inputs(
    loaded: Sequence[Input], items: Sequence[str | os.PathLike[str] | JsonObject] | None = None
) -> list[ResultsInput]:
    """The results files of loaded inputs (``items``: the paths or dicts they came from), a report's
    embedded ones included. Labels: the file name (parent folder, then a number, added where two
    share one); a report's results by their own label (else the report's), all of that report's
    as ``report.json[label]`` where one of them is taken twice."""
    labels = _labels(items, loaded) if items is not None else [entry.label for entry in loaded]
    groups: list[list[tuple[str, ResultsInput]]] = []  # per input: (short label, input under its long label)
    for label, entry in zip(labels, loaded):
        if isinstance(entry.typed, Report):
            groups.append(
                [
                    (
                        str(embedded.label or label),
                        ResultsInput(f"{label}[{embedded.label or index}]", embedded.document, as_written),
                    )
                    for index, (embedded, as_written) in enumerate(zip(entry.typed.results, embedded_documents(entry)))
                ]
            )
        else:
            groups.append([(label, ResultsInput(label, entry.typed, entry.document))])
    shorts = [short for group in groups for short, _ in group]
    return [
        item if any(shorts.count(name) > 1 for name, _ in group) else item._replace(label=short)
        for group in groups
        for short, item in group
    ]
