"""The JSON Schema of every file kind, generated from the declared types (``msgspec.json.schema``).

``python -m gpuscope.schema`` writes them to ``docs/schemas/``; ``--check`` exits 1 when a
checked-in file differs from what the types give (tests run the same comparison).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import msgspec

from gpuscope.schema.core import Detail, Scalar

__all__ = ["SCHEMAS", "schema_text", "write_schemas", "stale_schemas"]


#: file name -> (title, ``module:Type`` of its declared type, imported when the schema is made)
SCHEMAS: dict[str, tuple[str, str]] = {
    "results.schema.json": ("gpuscope results file (gpuscope.results, version 1)", "gpuscope.schema.results:Results"),
    "report.schema.json": ("gpuscope report file (gpuscope.report, version 1)", "gpuscope.schema.report:Report"),
    "log-record.schema.json": (
        "one record (line) of a gpuscope telemetry log (version 1)",
        "gpuscope.telemetry.wire:WireSample",
    ),
    "suite.schema.json": ("gpuscope probe suite (TOML, shown as JSON)", "gpuscope.schema.suites:SuiteFile"),
    "theme.schema.json": ("gpuscope theme file (TOML, shown as JSON)", "gpuscope.schema.themes:ThemeFileSpec"),
    "settings.schema.json": (
        "gpuscope TUI settings, config.toml (TOML, shown as JSON)",
        "gpuscope.tui.config:Settings",
    ),
    "alerts.schema.json": (
        "gpuscope alert thresholds, alerts.toml (TOML, shown as JSON)",
        "gpuscope.schema.alerts:AlertsFile",
    ),
    "probe-event.schema.json": (
        "one line of the probe child's event stream (JSON lines)",
        "gpuscope.schema.events:ProbeEvent",
    ),
}


#: ``Detail`` is declared as six nested unions (the decoder's depth limit); written out, each use
#: is ~28 kB of schema. The published schema names it once, recursively, with the limit in words.
_DETAIL_REF = {"$ref": "#/$defs/Detail"}
_DETAIL_DEF = {
    "description": "any JSON value nested at most 6 levels deep (deeper is refused); numbers finite",
    "anyOf": [
        *msgspec.json.schema(Scalar)["anyOf"],
        {"type": "array", "items": _DETAIL_REF},
        {"type": "object", "additionalProperties": _DETAIL_REF},
    ],
}


def _name_detail(node: object, expanded: list[object]) -> object:
    """``node`` with every written-out Detail (its ``anyOf`` list) replaced by a reference."""
    if isinstance(node, dict):
        if node.get("anyOf") == expanded:
            return {**{key: value for key, value in node.items() if key != "anyOf"}, **_DETAIL_REF}
        return {key: _name_detail(value, expanded) for key, value in node.items()}
    if isinstance(node, list):
        return [_name_detail(value, expanded) for value in node]
    return node


def schema_text(name: str) -> str:
    """The JSON Schema ``name`` (a key of :data:`SCHEMAS`) as stable, indented text."""
    title, where = SCHEMAS[name]
    module, _, type_name = where.partition(":")
    declared = getattr(importlib.import_module(module), type_name)
    written_out = msgspec.json.schema(declared)
    generated = _name_detail(written_out, msgspec.json.schema(Detail)["anyOf"])
    assert isinstance(generated, dict)
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title, **generated}
    if generated != written_out:  # some field is Detail
        schema.setdefault("$defs", {})["Detail"] = _DETAIL_DEF
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
