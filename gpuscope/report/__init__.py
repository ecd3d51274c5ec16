"""Snapshot reports: results files plus an optional telemetry log, as self-contained HTML,
Markdown or versioned JSON (``"schema": "gpuscope.report"``, ``schema_version`` 1).

``report.json`` holds everything the other formats draw, so a report made from it reproduces
the HTML byte for byte. matplotlib loads only to draw.

Typical use::

    from gpuscope.report import write_report
    write_report("report.html", ["results.json"], log_path="telemetry.jsonl", redact=True)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TypeAlias

import msgspec

from gpuscope.errors import BadInputError, GpuscopeError
from gpuscope.fileio import write_json_atomic, write_text_atomic
from gpuscope.report.html import render_html
from gpuscope.report.io import (
    REPORT_SCHEMA,
    REPORT_SCHEMA_VERSION,
    ResultsInput,
    format_for,
    load_input,
    results_inputs,
    validate_report,
)
from gpuscope.report.markdown import render_markdown
from gpuscope.report.model import build_report
from gpuscope.report.redact import Redaction
from gpuscope.report.telemetry import read_samples, summarize_samples
from gpuscope.report.telemetry_only import telemetry_only_report
from gpuscope.results import to_results
from gpuscope.schema.core import JsonObject, JsonTree, convert
from gpuscope.schema.report import Report, Telemetry
from gpuscope.telemetry.records import Sample
from gpuscope.textsafe import safe_text

__all__ = [
    "REPORT_SCHEMA",
    "REPORT_SCHEMA_VERSION",
    "build",
    "make_report",
    "render_report",
    "write_report",
    "format_for",
]

#: A results or report file, or its document already parsed.
PathOrDoc: TypeAlias = "str | os.PathLike[str] | JsonObject"


def _as_list(items: PathOrDoc | Sequence[PathOrDoc]) -> list[PathOrDoc]:
    if isinstance(items, (str, os.PathLike, dict)):
        return [items]
    return list(items)


def report_document(report: Report, documents: Sequence[JsonObject] | None = None) -> JsonObject:
    """``report`` as the JSON-ready document report.json holds; ``documents`` are its results files
    as written (undeclared fields kept), embedded in place of their typed views (which are
    written when ``documents`` is None)."""
    data: JsonObject = msgspec.to_builtins(msgspec.structs.replace(report, results=[]))
    written: list[JsonTree] = (
        list(documents) if documents is not None else [msgspec.to_builtins(e.document) for e in report.results]
    )
    data["results"] = [{"label": e.label, "document": d} for e, d in zip(report.results, written)]
    return data


def build(
    results_paths_or_dicts: PathOrDoc | Sequence[PathOrDoc],
    log_path: str | os.PathLike[str] | None = None,
    *,
    samples: Iterable[Sample] | None = None,
    samples_label: str = "live telemetry",
    redact: bool = False,
) -> tuple[Report, JsonObject]:
    """The typed report of results files (paths or parsed dicts; a report JSON is accepted too)
    and an optional telemetry log or in-memory samples, with its JSON document (what report.json
    holds). Raises :class:`BadInputError`."""
    items = _as_list(results_paths_or_dicts)
    if not items and log_path is None and samples is None:  # a log alone is a telemetry-only report
        raise BadInputError("no results file given")
    loaded = [load_input(item, position) for position, item in enumerate(items)]
    reports = [entry.typed for entry in loaded if isinstance(entry.typed, Report)]
    redaction = None
    if len(loaded) == 1 and reports and log_path is None and samples is None and not redact:
        report, document = reports[0], loaded[0].document
    else:  # (a report redacted is built again from its results and telemetry, as with other inputs)
        inputs = results_inputs(loaded, items)
        warnings: list[str] = []
        telemetry = None
        if log_path is not None:
            telemetry = summarize_samples(read_samples(log_path, warnings), safe_text(Path(log_path).name), warnings)
        elif samples is not None:
            telemetry = summarize_samples(samples, samples_label, warnings)
        elif reports:
            telemetry = reports[0].telemetry
        if redact:  # before the report is built: its title, summary and tables see only aliases
            redaction, inputs, telemetry = _redacted_inputs(inputs, telemetry)
        report = telemetry_only_report(build_report(inputs, telemetry, warnings))  # unchanged with results
        document = report_document(report, [item.document for item in inputs])
    if redaction is not None:
        document = {**redaction.apply(document), "redacted": True}
        report = validate_report(document, "the redacted report")
    return report, document


def _redacted_inputs(
    inputs: Sequence[ResultsInput], telemetry: Telemetry | None
) -> tuple[Redaction, list[ResultsInput], Telemetry | None]:
    """``inputs`` and ``telemetry`` redacted by one :class:`Redaction` (the same host, the same alias)."""
    telemetry_data = msgspec.to_builtins(telemetry) if telemetry is not None else None
    redaction = Redaction.of([*(item.document for item in inputs), telemetry_data])
    redacted = []
    for item in inputs:
        label, document = redaction.text(item.label), redaction.apply(item.document)
        redacted.append(ResultsInput(label, to_results(document, label), document))
    if telemetry_data is not None:
        telemetry = convert(redaction.apply(telemetry_data), Telemetry, "the redacted telemetry")
    return redaction, redacted, telemetry


def make_report(
    results_paths_or_dicts: PathOrDoc | Sequence[PathOrDoc],
    log_path: str | os.PathLike[str] | None = None,
    *,
    samples: Iterable[Sample] | None = None,
    samples_label: str = "live telemetry",
    redact: bool = False,
) -> JsonObject:
    """The report JSON document (what report.json holds) of :func:`build`'s inputs."""
    return build(results_paths_or_dicts, log_path, samples=samples, samples_label=samples_label, redact=redact)[1]


def render_report(report: Report | JsonObject, fmt: str, documents: Sequence[JsonObject] | None = None) -> str:
    """The report (typed, or its JSON document) rendered as ``html``, ``md`` or ``json`` text;
    ``documents`` are a typed report's results files as written, for ``json`` (see :func:`report_document`)."""
    fmt = format_for("", fmt)
    typed = report if isinstance(report, Report) else validate_report(report, "report")
    if fmt == "json":
        document = report if isinstance(report, dict) else report_document(typed, documents)
        return json.dumps(document, indent=2, allow_nan=False) + "\n"
    if fmt == "html":
        return render_html(typed)
    return render_markdown(typed)


def write_report(
    path: str | os.PathLike[str],
    results_paths_or_dicts: PathOrDoc | Sequence[PathOrDoc],
    log_path: str | os.PathLike[str] | None = None,
    fmt: str | None = None,
    redact: bool = False,
    *,
    samples: Iterable[Sample] | None = None,
) -> Path:
    """Build a report and write it atomically to ``path``; the format comes from ``fmt`` or the
    extension (.html, .md, .json). Returns the path written. Raises :class:`UsageError` for an
    unknown format, :class:`BadInputError` for bad inputs, :class:`GpuscopeError` when the file
    cannot be written (the previous file, if any, is left as it was)."""
    fmt = format_for(path, fmt)
    report, document = build(results_paths_or_dicts, log_path, samples=samples, redact=redact)
    target = Path(path)
    try:
        if fmt == "json":
            write_json_atomic(target, document)
        else:
            write_text_atomic(target, render_report(report, fmt))
    except OSError as exc:
        raise GpuscopeError(f"{target}: cannot write the report ({exc.strerror or exc})") from None
    return target
