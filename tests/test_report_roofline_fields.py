"""The report's roofline section read back from JSON keeps the model, the above-datasheet flags
and the DRAM rule (declared in gpuscope.schema.report, so they are checked, not dropped)."""

from __future__ import annotations

import json

import msgspec
import pytest
from support.reports import make_results, write_results

from gpuscope.errors import BadInputError
from gpuscope.report import write_report
from gpuscope.report.io import load_input, validate_report
from gpuscope.roofline.model import ABOVE_DATASHEET_TEXT, DRAM_ROOF_RULE
from gpuscope.roofline.model_json import model_from_json
from gpuscope.schema.report import Report


@pytest.fixture
def report_json(tmp_path):
    # cuda:1 measures 3.6 TB/s against the H100 SXM datasheet's 3.35 TB/s: above datasheet
    results = tmp_path / "r.json"
    write_results(results, make_results(gpus=2, hbm_bytes_per_s=[3.0e12, 3.6e12]))
    return write_report(tmp_path / "report.json", [results])


def test_roofline_fields_survive_the_round_trip(report_json):
    loaded = load_input(report_json)
    assert loaded.kind == "report" and isinstance(loaded.typed, Report)
    assert loaded.typed == msgspec.convert(loaded.document, Report)  # the typed view is the file's
    roofline = loaded.typed.roofline
    assert roofline.dram_rule == DRAM_ROOF_RULE
    assert [(item.device, item.name) for item in roofline.above_datasheet or []] == [("cuda:1", "dram.triad")]
    assert roofline.above_datasheet[0].ratio == pytest.approx(3.6 / 3.35)
    flagged = [(roof.device, roof.name) for roof in roofline.roofs or [] if roof.above_datasheet]
    assert flagged == [("cuda:1", "dram.triad")]
    assert ABOVE_DATASHEET_TEXT in str(
        next(roof.above_datasheet for roof in roofline.roofs or [] if roof.above_datasheet)
    )
    assert isinstance(roofline.model, dict) and roofline.model["schema"] == "gpuscope.roofline"
    model = model_from_json(roofline.model)
    assert {device.key.device for device in model.devices} >= {"cuda:0", "cuda:1", "cpu"}


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("dram_rule", {"not": "text"}, "$.roofline.dram_rule"),
        ("above_datasheet", [{"ratio": "big"}], "$.roofline.above_datasheet[0].ratio"),
        ("model", ["not", "an", "object"], "$.roofline.model"),
    ],
)
def test_bad_roofline_fields_are_one_line_errors(report_json, field, value, path):
    document = json.loads(report_json.read_text())
    document["roofline"][field] = value
    with pytest.raises(BadInputError) as caught:
        validate_report(document, "report.json")
    message = str(caught.value)
    assert message.startswith("report.json:") and path in message and "\n" not in message
