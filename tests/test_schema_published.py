"""The published JSON Schemas (docs/schemas) accept what gpuscope writes and refuse what it would not.

Checked with an independent validator (``jsonschema``, Draft 2020-12), so a schema that drifted
from the files, or lost its constraints when it was written out, fails here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from support.suites import TINY_SUITE

from gpuscope.tomlfile import parse_toml

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "docs" / "schemas"


def validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def problems(name: str, document: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}" for error in validator(name).iter_errors(document)
    ]


def gpuscope(*args: str, fake_gpus: str | None = None) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("GPUSCOPE_FAKE_NVML", None)
    if fake_gpus:
        env["GPUSCOPE_FAKE_NVML"] = f"gpus={fake_gpus},seed=1"
    done = subprocess.run(
        [sys.executable, "-m", "gpuscope", *args], capture_output=True, text=True, timeout=180, env=env, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A results file, a telemetry log and a report JSON written by the real commands."""
    folder = tmp_path_factory.mktemp("written")
    suite = folder / "tiny.toml"
    suite.write_text(TINY_SUITE, encoding="utf-8")
    files = {"results": folder / "results.json", "log": folder / "log.jsonl", "report": folder / "report.json"}
    gpuscope("probe", "--device", "cpu", "--suite", str(suite), "--output", str(files["results"]), "--no-telemetry")
    gpuscope("log", "--interval", "0.1", "--duration", "0.5", "--output", str(files["log"]), fake_gpus="2xh200")
    gpuscope("report", "--probes", str(files["results"]), "--log", str(files["log"]), "--output", str(files["report"]))
    return files


@pytest.mark.slow
def test_a_probe_results_file_matches_the_results_schema(written: dict[str, Path]) -> None:
    document = json.loads(written["results"].read_text(encoding="utf-8"))
    assert document["measurements"] and document["ceilings"]  # the check below has something to check
    assert problems("results.schema.json", document) == []


@pytest.mark.slow
def test_every_log_record_matches_the_log_record_schema(written: dict[str, Path]) -> None:
    lines = written["log"].read_text(encoding="utf-8").splitlines()
    assert len(lines) >= 2
    for number, line in enumerate(lines, 1):
        record = json.loads(line)
        if "gpus" in record:  # samples; alert records have their own shape
            assert problems("log-record.schema.json", record) == [], f"line {number}"


@pytest.mark.slow
def test_a_report_json_matches_the_report_schema(written: dict[str, Path]) -> None:
    document = json.loads(written["report"].read_text(encoding="utf-8"))
    assert problems("report.schema.json", document) == []


@pytest.mark.slow
def test_the_schemas_refuse_what_gpuscope_would_not_write(written: dict[str, Path]) -> None:
    document = json.loads(written["results"].read_text(encoding="utf-8"))
    assert problems("results.schema.json", {**document, "schema": "gpuscope.report"})
    wrong_type = json.loads(json.dumps(document))
    wrong_type["ceilings"][0]["value"] = "fast"
    assert any("ceilings/0/value" in problem for problem in problems("results.schema.json", wrong_type))
    negative = json.loads(json.dumps(document))
    negative["ceilings"][0]["value"] = -1.0
    assert any("ceilings/0/value" in problem for problem in problems("results.schema.json", negative))


@pytest.mark.slow
def test_free_detail_is_any_json_by_one_recursive_definition(written: dict[str, Path]) -> None:
    document = json.loads(written["results"].read_text(encoding="utf-8"))
    measurement = document["measurements"][0]
    measurement["parameters"] = {"nested": {"list": [1, "two", {"three": [3.0, None, True]}]}}
    assert problems("results.schema.json", document) == []
    schema = json.loads((SCHEMAS / "results.schema.json").read_text(encoding="utf-8"))
    assert "Detail" in schema["$defs"]
    assert (SCHEMAS / "results.schema.json").stat().st_size < 200_000  # named once, not written out per use


@pytest.mark.parametrize("suite", sorted((ROOT / "probes").glob("*.toml")), ids=lambda path: path.name)
def test_shipped_suites_match_the_suite_schema(suite: Path) -> None:
    assert problems("suite.schema.json", parse_toml(suite.read_text(encoding="utf-8"))) == []


@pytest.mark.parametrize("theme", sorted((ROOT / "themes").glob("*.toml")), ids=lambda path: path.name)
def test_shipped_themes_match_the_theme_schema(theme: Path) -> None:
    assert problems("theme.schema.json", parse_toml(theme.read_text(encoding="utf-8"))) == []
