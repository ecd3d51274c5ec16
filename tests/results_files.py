"""Results files in tests: reading one (checked by the typed reader, then its JSON as written), and
an empty document as plain JSON for a test to fill in and write."""

from __future__ import annotations

import json
import os
from typing import Any

import msgspec

from gpuscope.results import empty_results, read_results_file


def results_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The results file at ``path`` as plain JSON (undeclared fields kept), after
    :func:`gpuscope.results.read_results_file` accepted it (a bad file raises its one line)."""
    document: dict[str, Any] = json.loads(read_results_file(path)[1])
    return document


def new_document(system: dict[str, Any] | None = None, suite: dict[str, Any] | None = None) -> dict[str, Any]:
    """An empty results document of the current version as dicts and lists, for a test to fill in
    (a file gpuscope itself would write is built as :class:`gpuscope.schema.results.Results`)."""
    document: dict[str, Any] = msgspec.to_builtins(empty_results())
    document["system"] = system or {}
    if suite is not None:
        document["suite"] = suite
    return document
