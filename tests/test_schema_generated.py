"""docs/schemas/*.schema.json are generated from the declared types: regenerating gives the same bytes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gpuscope.schema.generate import SCHEMAS, default_folder, schema_text, stale_schemas, write_schemas


def test_checked_in_schemas_match_the_types() -> None:
    stale = stale_schemas()
    assert stale == [], f"out of date: {stale}; run python -m gpuscope.schema"


def test_regenerating_gives_the_same_bytes(tmp_path: Path) -> None:
    write_schemas(tmp_path)
    for name in SCHEMAS:
        assert (tmp_path / name).read_bytes() == (default_folder() / name).read_bytes(), name
        assert schema_text(name) == schema_text(name)  # stable within a run too


def test_every_file_kind_names_itself_and_its_version() -> None:
    results = json.loads(schema_text("results.schema.json"))
    report = json.loads(schema_text("report.schema.json"))
    assert results["$defs"]["Results"]["properties"]["schema"] == {"enum": ["gpuscope.results"]}
    assert results["$defs"]["Results"]["properties"]["schema_version"] == {"enum": [1]}
    assert report["$defs"]["Report"]["properties"]["schema"] == {"enum": ["gpuscope.report"]}
    record = json.loads(schema_text("log-record.schema.json"))
    assert "timestamp" in record["$defs"]["WireSample"]["required"]


def test_check_mode_of_the_module(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpuscope.schema", "--check"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
