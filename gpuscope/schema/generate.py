"""The JSON Schema of every file kind, generated from the declared types (``msgspec.json.schema``).

``python -m gpuscope.schema`` writes them to ``docs/schemas/``; ``--check`` exits 1 when a
checked-in file differs from what the types give (tests run the same comparison).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

__all__ = ["SCHEMAS", "schema_text", "write_schemas", "stale_schemas"]


def _results() -> Any:
    from gpuscope.schema.results import Results

    return Results


def _report() -> Any:
    from gpuscope.schema.report import Report

    return Report


def _log_record() -> Any:
    from gpuscope.schema.telemetry import WireSample

    return WireSample


def _suite() -> Any:
    from gpuscope.schema.suites import SuiteFile

    return SuiteFile


def _theme() -> Any:
    from gpuscope.schema.themes import ThemeFileSpec

    return ThemeFileSpec


def _settings() -> Any:
    from gpuscope.tui.config import Settings

    return Settings


def _probe_event() -> Any:
    from gpuscope.schema.events import ProbeEvent

    return ProbeEvent


#: file name -> (title, the type's loader)
SCHEMAS: dict[str, tuple[str, Callable[[], Any]]] = {
    "results.schema.json": ("gpuscope results file (gpuscope.results, version 1)", _results),
    "report.schema.json": ("gpuscope report file (gpuscope.report, version 1)", _report),
    "log-record.schema.json": ("one record (line) of a gpuscope telemetry log (version 1)", _log_record),
    "suite.schema.json": ("gpuscope probe suite (TOML, shown as JSON)", _suite),
    "theme.schema.json": ("gpuscope theme file (TOML, shown as JSON)", _theme),
    "settings.schema.json": ("gpuscope TUI settings, config.toml (TOML, shown as JSON)", _settings),
    "probe-event.schema.json": ("one line of the probe child's event stream (JSON lines)", _probe_event),
}


def schema_text(name: str) -> str:
    """The JSON Schema ``name`` (a key of :data:`SCHEMAS`) as stable, indented text."""
    title, load = SCHEMAS[name]
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title, **msgspec.json.schema(load())}
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def default_folder() -> Path:
    """``docs/schemas`` of the source tree."""
    return Path(__file__).resolve().parents[2] / "docs" / "schemas"


def write_schemas(folder: Path | None = None) -> list[Path]:
    """Write every schema into ``folder``; returns the paths written."""
    folder = folder or default_folder()
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in SCHEMAS:
        path = folder / name
        path.write_text(schema_text(name), encoding="utf-8")
        written.append(path)
    return written


def stale_schemas(folder: Path | None = None) -> list[str]:
    """Names of the schemas in ``folder`` that are missing or differ from the types."""
    folder = folder or default_folder()
    stale = []
    for name in SCHEMAS:
        path = folder / name
        if not path.is_file() or path.read_text(encoding="utf-8") != schema_text(name):
            stale.append(name)
    return stale
