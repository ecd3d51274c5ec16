"""Reading a results file in tests: checked by the typed reader, then its JSON as written."""

from __future__ import annotations

import json
import os
from typing import Any

from gpuscope.results import read_results_file


def results_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The results file at ``path`` as plain JSON (undeclared fields kept), after
    :func:`gpuscope.results.read_results_file` accepted it (a bad file raises its one line)."""
    document: dict[str, Any] = json.loads(read_results_file(path)[1])
    return document
