"""A probe file's contention warnings stay in everything made from it: the roofline model and its
chart, the report (JSON, Markdown, HTML) and compare (JSON, text, Markdown); a file written before
``contention`` existed is read by its warnings."""

from __future__ import annotations

import msgspec
import pytest
from support.reports import make_results
from support.roofline import typed

from gpuscope.report import make_report, render_report
from gpuscope.report.compare import compare_results, render_compare_markdown, render_compare_text
from gpuscope.roofline.layout import layout_roofline
from gpuscope.roofline.loading import build_model
from gpuscope.roofline.model_json import model_to_json
from gpuscope.schema.results import Contention, Results, contention_notes

BUSY = "the CPU was 51% busy before the run (other processes); numbers may be low and noisy"
CONTENDED = (
    "36 measurement(s) ran while other processes used more than 10% of the cores "
    "(up to 74%; see host_contention_percent); their numbers may be low"
)


def _contended(typed_field: bool = True) -> dict:
    doc = make_results(gpus=1)
    doc["warnings"] = [BUSY, CONTENDED, "telemetry unavailable: no NVML"]
    if typed_field:
        doc["contention"] = {"cpu_busy_percent_before": 51.0, "threshold_percent": 10.0,
                             "contended_measurements": 36, "max_percent": 74.0, "notes": [BUSY, CONTENDED]}  # fmt: skip
    return doc


@pytest.mark.parametrize("typed_field", [True, False], ids=["contention", "warnings-only"])
def test_contention_notes_from_the_typed_field_or_the_warnings(typed_field):
    results = typed([("probe", _contended(typed_field))])[0][1]
    assert contention_notes(results) == [BUSY, CONTENDED]  # never the unrelated telemetry warning
    assert contention_notes(msgspec.structs.replace(results, warnings=[], contention=None)) == []


def test_contention_round_trips_in_the_results_file():
    results = typed([("probe", _contended())])[0][1]
    assert isinstance(results.contention, Contention)
    assert results.contention.contended_measurements == 36
    again = msgspec.json.decode(msgspec.json.encode(results), type=Results)
    assert again.contention == results.contention


def test_roofline_model_json_and_chart_carry_contention():
    model = build_model(typed([("run-a.json", _contended())]))
    assert model.contention == [f"run-a.json: {BUSY}", f"run-a.json: {CONTENDED}"]
    assert f"run-a.json: {BUSY}" in model.warnings
    assert f"run-a.json: {BUSY}" in model_to_json(model)["warnings"]
    notes = layout_roofline(model).notes
    assert any("51% busy" in note and note.startswith("contention:") for note in notes)
    assert any("36 measurement(s)" in note for note in notes)
    # replacing the points keeps them
    assert model.replace_points([]).contention == model.contention


def test_a_quiet_file_has_no_contention_notes():
    model = build_model(typed([("quiet.json", make_results(gpus=1))]))
    assert model.contention == []
    assert not any(note.startswith("contention:") for note in layout_roofline(model).notes)


@pytest.mark.parametrize("fmt", ["json", "md", "html"])
def test_report_keeps_contention_in_every_format(fmt):
    report = make_report([_contended()])
    text = render_report(report, fmt)
    assert "51% busy" in text
    assert "36 measurement(s) ran while other processes" in text


def test_compare_keeps_each_files_contention():
    quiet = make_results(gpus=1)
    result = compare_results(typed([("busy.json", _contended(False)), ("quiet.json", quiet)]))
    assert result["contention"] == [f"busy.json: {BUSY}", f"busy.json: {CONTENDED}"]
    for rendered in (render_compare_text(result), render_compare_markdown(result)):
        assert "Contention while measuring" in rendered
        assert "51% busy" in rendered
    calm = compare_results(typed([("a.json", quiet), ("b.json", make_results(gpus=1))]))
    assert calm["contention"] == []
    assert "Contention while measuring" not in render_compare_text(calm)
