"""Snapshot reports: results files plus an optional telemetry log, as self-contained HTML,
Markdown or versioned JSON (``"schema": "gpuscope.report"``, ``schema_version`` 1).

``report.json`` holds everything the other formats draw, so a report made from it reproduces
the HTML byte for byte. Importing this package is cheap; matplotlib loads only to draw.

Typical use::

    from gpuscope.report import write_report
    write_report("report.html", ["results.json"], log_path="telemetry.jsonl", redact=True)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gpuscope.errors import BadInputError, GpuscopeError
from gpuscope.report.io import REPORT_SCHEMA, REPORT_SCHEMA_VERSION, format_for, load_input, write_text_atomic

__all__ = [
    "REPORT_SCHEMA",
    "REPORT_SCHEMA_VERSION",
    "make_report",
    "render_report",
    "write_report",
    "format_for",
]

PathOrDoc = str | os.PathLike[str] | dict[str, Any]


def _as_list(items: PathOrDoc | Sequence[PathOrDoc]) -> list[PathOrDoc]:
    if isinstance(items, (str, os.PathLike, dict)):
        return [items]
    return list(items)


def _labels(items: list[PathOrDoc], loaded: list[tuple[str, str, dict[str, Any]]]) -> list[str]:
    """File names, with the parent folder added (and then a number) where two inputs share one."""
    labels = [label for _, label, _ in loaded]
    for position, label in enumerate(labels):
        if labels.count(label) > 1 and not isinstance(items[position], dict):
            path = Path(items[position])  # type: ignore[arg-type]
            labels[position] = f"{path.parent.name}/{path.name}" if path.parent.name else label
    seen: dict[str, int] = {}
    for position, label in enumerate(labels):
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            labels[position] = f"{label} ({seen[label]})"
    return labels


def make_report(
    results_paths_or_dicts: PathOrDoc | Sequence[PathOrDoc],
    log_path: str | os.PathLike[str] | None = None,
    *,
    samples: Iterable[Any] | None = None,
    samples_label: str = "live telemetry",
    redact: bool = False,
) -> dict[str, Any]:
    """The report document of results files (paths or parsed dicts; a report JSON is accepted
    too) and an optional telemetry log or in-memory samples. Raises :class:`BadInputError`."""
    from gpuscope.report.model import build_report
    from gpuscope.report.telemetry import read_samples, summarize_samples

    items = _as_list(results_paths_or_dicts)
    if not items:
        raise BadInputError("no results file given")
    loaded = [load_input(item, position) for position, item in enumerate(items)]
    labels = _labels(items, loaded)
    reports = [doc for kind, _, doc in loaded if kind == "report"]
    if len(loaded) == 1 and reports and log_path is None and samples is None:
        report = reports[0]
    else:
        inputs: list[tuple[str, dict[str, Any]]] = []
        for (kind, _, doc), label in zip(loaded, labels):
            if kind == "report":
                inputs.extend(
                    (str(entry.get("label") or label), entry["document"])
                    for entry in doc["results"]
                    if isinstance(entry.get("document"), dict)
                )
            else:
                inputs.append((label, doc))
        warnings: list[str] = []
        telemetry = None
        if log_path is not None:
            telemetry = summarize_samples(read_samples(log_path, warnings), Path(log_path).name, warnings)
        elif samples is not None:
            telemetry = summarize_samples(samples, samples_label, warnings)
        elif reports:
            telemetry = reports[0].get("telemetry")
        report = build_report(inputs, telemetry, warnings)
    if redact:
        from gpuscope.report.redact import redact_report

        report = redact_report(report)
    return report


def render_report(report: dict[str, Any], fmt: str) -> str:
    """The report document rendered as ``html``, ``md`` or ``json`` text."""
    fmt = format_for("", fmt)
    if fmt == "html":
        from gpuscope.report.html import render_html

        return render_html(report)
    if fmt == "md":
        from gpuscope.report.markdown import render_markdown

        return render_markdown(report)
    import json

    return json.dumps(report, indent=2, allow_nan=False) + "\n"


def write_report(
    path: str | os.PathLike[str],
    results_paths_or_dicts: PathOrDoc | Sequence[PathOrDoc],
    log_path: str | os.PathLike[str] | None = None,
    fmt: str | None = None,
    redact: bool = False,
    *,
    samples: Iterable[Any] | None = None,
) -> Path:
    """Build a report and write it atomically to ``path``; the format comes from ``fmt`` or the
    extension (.html, .md, .json). Returns the path written. Raises :class:`UsageError` for an
    unknown format, :class:`BadInputError` for bad inputs, :class:`GpuscopeError` when the file
    cannot be written (the previous file, if any, is left as it was)."""
    fmt = format_for(path, fmt)
    report = make_report(results_paths_or_dicts, log_path, samples=samples, redact=redact)
    target = Path(path)
    try:
        if fmt == "json":
            from gpuscope.fileio import write_json_atomic

            write_json_atomic(target, report)
        else:
            write_text_atomic(target, render_report(report, fmt))
    except OSError as exc:
        raise GpuscopeError(f"{target}: cannot write the report ({exc.strerror or exc})") from None
    return target
