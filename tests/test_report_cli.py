"""``gpuscope report`` on the command line: formats, --from, bad inputs (one line, exit code, no
half-written output)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.installs import needs_torch
from support.reports import make_log_samples, make_results, write_log, write_results

from gpuscope.cli import main
from gpuscope.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_USAGE

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def inputs(tmp_path):
    results = tmp_path / "results.json"
    write_results(results, make_results())
    log = tmp_path / "telemetry.jsonl"
    write_log(log, make_log_samples(count=20))
    return results, log


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith("gpuscope: error: ")
    return err


@pytest.mark.parametrize(
    "name, marker",
    [("r.html", "<!DOCTYPE html>"), ("r.md", "# gpuscope report"), ("r.json", '"schema": "gpuscope.report"')],
)
def test_formats_from_the_extension(inputs, tmp_path, capsys, name, marker):
    results, log = inputs
    out = tmp_path / name
    assert main(["report", "--probes", str(results), "--log", str(log), "--output", str(out)]) == 0
    assert marker in out.read_text(encoding="utf-8")
    assert str(out) in capsys.readouterr().err
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left behind


def test_format_option_overrides_the_extension(inputs, tmp_path):
    results, _ = inputs
    out = tmp_path / "report.txt"
    assert main(["report", "--probes", str(results), "--output", str(out), "--format", "md"]) == 0
    assert out.read_text().startswith("# gpuscope report")


def test_from_report_json_reproduces_the_html(inputs, tmp_path):
    results, log = inputs
    report_json, first, second = tmp_path / "r.json", tmp_path / "a.html", tmp_path / "b.html"
    assert main(["report", "--probes", str(results), "--log", str(log), "-o", str(report_json)]) == 0
    assert main(["report", "--probes", str(results), "--log", str(log), "-o", str(first)]) == 0
    assert main(["report", "--from", str(report_json), "-o", str(second)]) == 0
    assert first.read_bytes() == second.read_bytes()


def test_several_probes_files_and_redact(inputs, tmp_path):
    results, _ = inputs
    other = tmp_path / "other.json"
    write_results(other, make_results(hostname="node-b", gpus=1))
    out = tmp_path / "r.json"
    assert main(["report", "--probes", str(results), "--probes", str(other), "--redact", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["redacted"] is True and len(data["results"]) == 2
    assert "node-b" not in out.read_text()


@pytest.mark.parametrize(
    "content, fragment",
    [
        (None, "no such file"),
        ("", "empty"),
        ('{"schema": "gpuscope.results", "schema_version": 1, "ceilings": [', "invalid JSON"),
        ('{"schema": "something else"}', "not a gpuscope results or report file"),
        ('{"schema": "gpuscope.results", "schema_version": 99}', "schema_version 99"),
        ('{"schema": "gpuscope.report", "schema_version": 1}', "field"),
    ],
)
def test_bad_results_file(tmp_path, capsys, content, fragment):
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    out = tmp_path / "r.html"
    out.write_text("previous report")
    assert main(["report", "--probes", str(bad), "-o", str(out)]) == EXIT_BAD_INPUT
    err = _one_line_error(capsys)
    assert "bad.json" in err and fragment in err
    assert out.read_text() == "previous report"  # never half-written, never clobbered


@pytest.mark.parametrize(
    "lines, fragment",
    [
        (None, "telemetry log"),
        ([], "empty"),
        (["not json at all", "{}"], "bad.jsonl"),
        (
            ['{"schema_version": 1, "timestamp": 1}', "garbage in the middle", '{"schema_version": 1, "timestamp": 2}'],
            "bad.jsonl:2",
        ),
    ],
)
def test_bad_log(inputs, tmp_path, capsys, lines, fragment):
    results, _ = inputs
    bad = tmp_path / "bad.jsonl"
    if lines is not None:
        bad.write_text("".join(line + "\n" for line in lines))
    out = tmp_path / "r.md"
    assert main(["report", "--probes", str(results), "--log", str(bad), "-o", str(out)]) == EXIT_BAD_INPUT
    err = _one_line_error(capsys)
    assert fragment in err
    assert not out.exists()


def test_truncated_last_log_line_is_skipped_with_a_warning(inputs, tmp_path):
    results, log = inputs
    cut = tmp_path / "cut.jsonl"
    text = log.read_text()
    cut.write_text(text + text.splitlines()[-1][:50])
    out = tmp_path / "r.json"
    assert main(["report", "--probes", str(results), "--log", str(cut), "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["telemetry"]["samples"] == 20
    assert any("incomplete last line" in w for w in data["warnings"])


def test_unknown_format_and_missing_inputs(inputs, tmp_path, capsys):
    results, _ = inputs
    assert main(["report", "--probes", str(results), "-o", str(tmp_path / "r.pdf")]) == EXIT_USAGE
    assert ".pdf" in _one_line_error(capsys)
    assert main(["report", "-o", str(tmp_path / "r.html")]) == EXIT_USAGE
    assert "nothing to report" in _one_line_error(capsys)
    with pytest.raises(SystemExit) as stop:
        main(["report", "--probes", str(results), "-o", str(tmp_path / "r.html"), "--format", "pdf"])
    assert stop.value.code == EXIT_USAGE


def test_unwritable_output(inputs, tmp_path, capsys):
    results, _ = inputs
    assert main(["report", "--probes", str(results), "-o", str(tmp_path / "missing-dir" / "r.html")]) == EXIT_FAILURE
    assert "cannot write" in _one_line_error(capsys)


def test_report_in_a_subprocess_imports_no_torch_or_textual(inputs, tmp_path):
    results, log = inputs
    out = tmp_path / "r.html"
    code = (
        "import sys; from gpuscope.cli import main; rc = main(sys.argv[1:]);"
        "bad = [m for m in ('torch', 'textual') if m in sys.modules]; print(bad); sys.exit(rc)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code, "report", "--probes", str(results), "--log", str(log), "-o", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert out.stat().st_size > 10_000


@needs_torch
def test_probe_report_option_checks_the_format_first(tmp_path, capsys):
    results = tmp_path / "results.json"
    assert main(["probe", "--device", "cpu", "--report", str(tmp_path / "r.pdf"), "-o", str(results)]) == EXIT_USAGE
    assert "r.pdf" in _one_line_error(capsys)
    assert not results.exists()


@pytest.mark.slow
@needs_torch
def test_probe_writes_a_report(tmp_path):
    suite = tmp_path / "tiny.toml"
    suite.write_text(
        '[suite]\nname = "tiny"\nsamples = 3\ntarget_sample_s = 0.005\nwarmup_max_s = 0.1\nmax_call_s = 1.0\n\n'
        '[[probe]]\nkind = "matmul"\ndevices = ["cpu"]\ndtypes = ["fp32"]\n'
        'shapes = [[128, 128, 128]]\nlibraries = ["numpy"]\n'
    )
    results, report = tmp_path / "results.json", tmp_path / "report.md"
    assert (
        main(["probe", "--device", "cpu", "--suite", str(suite), "-o", str(results), "--report", str(report), "-q"])
        == 0
    )
    text = report.read_text()
    assert "## Ceilings: measured vs datasheet" in text and "| cpu |" in text
