"""The report data model: ceilings against the datasheet, workloads, telemetry statistics, energy,
probe spans and the JSON schema."""

from __future__ import annotations

import json
import math

import pytest
from support.reports import T0, make_log_samples, make_results, write_log, write_results

from gpuscope.report import REPORT_SCHEMA, REPORT_SCHEMA_VERSION, make_report
from gpuscope.report.model import ceiling_spread_percent, measurement_span
from gpuscope.report.telemetry import summarize_samples
from gpuscope.schema.results import Measurement
from gpuscope.telemetry.values import Reason, Unavailable


@pytest.fixture()
def files(tmp_path):
    results = tmp_path / "results.json"
    write_results(results, make_results(hbm_bytes_per_s=[3.0e12, 2.2e12]))
    log = tmp_path / "telemetry.jsonl"
    write_log(log, make_log_samples(count=40))
    return results, log


def test_report_document_is_versioned_and_complete(files):
    results, log = files
    report = make_report([results], log)
    assert report["schema"] == REPORT_SCHEMA == "gpuscope.report"
    assert report["schema_version"] == REPORT_SCHEMA_VERSION == 1
    for key in (
        "systems",
        "ceilings",
        "workloads",
        "measurements",
        "roofline",
        "telemetry",
        "summary",
        "results",
        "sources",
    ):
        assert key in report
    # the inputs themselves travel inside the report
    assert report["results"][0]["document"]["schema"] == "gpuscope.results"
    # plain JSON: no NaN, nothing that json cannot write
    json.dumps(report, allow_nan=False)
    # no generation time: "created" is the input's
    assert report["created"] == make_results()["created"]


def test_ceilings_held_against_the_datasheet_and_low_flagged(files):
    results, _ = files
    report = make_report([results])
    rows = {(c["device"], c["name"]): c for c in report["ceilings"]}
    slow = rows[("cuda:1", "dram.triad")]
    assert slow["datasheet_value"] == pytest.approx(3.35e12)
    assert slow["percent_of_spec"] == pytest.approx(2.2 / 3.35 * 100)
    assert slow["low"] is True
    healthy = rows[("cuda:0", "dram.triad")]
    assert healthy["low"] is False and healthy["percent_of_spec"] == pytest.approx(3.0 / 3.35 * 100)
    # bf16 780 of 989 TFLOP/s dense is a normal H100 result: not flagged
    assert rows[("cuda:0", "bf16")]["low"] is False
    # pinned H2D against PCIe Gen5 one way
    assert rows[("cuda:0", "h2d.pinned")]["datasheet_value"] == pytest.approx(64e9)
    # a CPU with no matching datasheet: no percentage, no flag
    assert rows[("cpu", "fp32")]["percent_of_spec"] is None and rows[("cpu", "fp32")]["low"] is False
    assert any("cuda:1 dram.triad" in line for line in report["summary"])


def test_ceiling_spread_from_timed_samples():
    spread, count = ceiling_spread_percent(Measurement(samples_s=[1.0, 1.1, 1.2, 1.05]))
    assert count == 4
    assert spread == pytest.approx((1.075 / 1.0 - 1) * 100)
    assert ceiling_spread_percent(Measurement(samples_s=[1.0])) == (None, 1)
    assert ceiling_spread_percent(None) == (None, None)


def test_workloads_placed_by_the_roofline_model(files):
    results, _ = files
    report = make_report([results])
    rows = {w["name"]: w for w in report["workloads"]}
    gemm = rows["gemm 8192 bf16"]
    assert gemm["bound"] == "compute"
    assert gemm["intensity_flop_per_byte"] == pytest.approx(8192 / 3)
    assert gemm["flop_per_s"] == pytest.approx(700e12)
    assert gemm["efficiency_percent"] == pytest.approx(700 / 780 * 100)
    gemv = rows["decode gemv $x$"]
    assert gemv["bound"] == "memory"
    assert gemv["efficiency_percent"] == pytest.approx(2.5 / 3.0 * 100)
    assert report["roofline"]["available"] is True
    assert any(r["origin"] == "datasheet" for r in report["roofline"]["roofs"])


def test_measurement_spans_and_failures(files):
    results, _ = files
    report = make_report([results])
    first = report["measurements"][0]
    assert first["start"] == T0 + 5.0 and first["end"] == T0 + 9.0
    assert measurement_span(Measurement(start=10.0, end=12.5)) == (10.0, 12.5)
    assert measurement_span(Measurement(start=10.0, end=5.0)) == (None, None)
    assert measurement_span(
        Measurement(start=10.0, end=5.0, telemetry_before={"timestamp": 3.0}, telemetry_after={"timestamp": 4.5})
    ) == (3.0, 4.5)
    assert any("did not succeed" in line for line in report["summary"])


def test_telemetry_statistics_and_energy(files):
    results, log = files
    telemetry = make_report([results], log)["telemetry"]
    assert telemetry["samples"] == 40
    assert telemetry["interval_s"] == pytest.approx(0.5)
    stats = {(s["key"], s["metric"]): s for s in telemetry["stats"]}
    power = stats[("gpu0", "power_w")]
    values = [sample.gpus[0].power_w for sample in make_log_samples(count=40)]
    assert power["mean"] == pytest.approx(sum(values) / len(values))
    assert power["max"] == pytest.approx(max(values))
    ordered = sorted(values)
    assert ordered[int(0.5 * 39)] <= power["p50"] <= ordered[int(0.5 * 39) + 1]
    assert power["p50"] <= power["p95"] <= power["max"]
    dram = stats[("gpu0", "dram_bandwidth_bytes_per_s")]
    assert dram["unit"] == "GB/s" and dram["max"] <= 2800.0 + 1e-6
    energy = {e["key"]: e for e in telemetry["energy"]}
    # the counter rises 400 J per second over 19.5 s
    assert energy["gpu0"]["method"] == "energy counter"
    assert energy["gpu0"]["energy_j"] == pytest.approx(400 * 19.5)
    panels = {p["id"] for p in telemetry["panels"]}
    assert {"util", "activity", "dram", "pcie", "nvlink", "power", "temperature", "clocks"} <= panels


def test_energy_falls_back_to_integrated_power_and_unavailable_is_not_zero():
    samples = make_log_samples(count=11, gpus=1, interval_s=1.0)
    for sample in samples:
        gpu = sample.gpus[0]
        gpu.energy_j = Unavailable(Reason.NOT_SUPPORTED, "no energy counter")
        gpu.power_w = 100.0
        gpu.tensor_activity_percent = Unavailable(Reason.NOT_SUPPORTED, "GPM needs Hopper")
    telemetry = summarize_samples(samples, "t")
    energy = (telemetry.energy or [])[0]
    assert energy.method == "integrated power"
    assert energy.energy_j == pytest.approx(1000.0)
    assert not any(s.metric == "tensor_activity_percent" for s in telemetry.stats or [])
    missing = [u for u in telemetry.unavailable or [] if u.metric == "tensor_activity_percent"]
    assert missing and str(missing[0].reason).startswith("not_supported")
    activity = next(p for p in telemetry.panels or [] if p.id == "activity")
    assert all(line.metric != "tensor_activity_percent" for line in activity.lines)


def test_long_logs_are_downsampled_keeping_peaks():
    samples = make_log_samples(count=3000, gpus=1, interval_s=0.1)
    samples[1234].gpus[0].power_w = 999.0
    telemetry = summarize_samples(samples, "t")
    power = next(p for p in telemetry.panels or [] if p.id == "power").lines[0]
    assert len(power.v) <= 1200
    assert max(v for v in power.v if v is not None) == 999.0
    assert next(s for s in telemetry.stats or [] if s.metric == "power_w").n == 3000


def test_several_results_files_and_partial_warning(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "sub" / "a.json"
    b.parent.mkdir()
    write_results(a, make_results(hostname="node-a"))
    doc = make_results(hostname="node-b", gpus=1)
    doc["partial"], doc["partial_reason"] = True, "interrupted"
    write_results(b, doc)
    report = make_report([a, b])
    labels = [s["label"] for s in report["sources"]]
    assert labels[0] != labels[1]
    assert {s["host"] for s in report["systems"]} == {"node-a", "node-b"}
    assert any("partial" in w for w in report["warnings"])
    assert not math.isnan(report["created"])


def test_in_memory_samples_and_report_plus_new_log(tmp_path):
    from gpuscope.report import write_report

    doc = make_results(gpus=1)
    report = make_report([doc], samples=make_log_samples(count=10, gpus=1))
    assert report["telemetry"]["source"] == "live telemetry" and report["telemetry"]["samples"] == 10
    # a report.json given with a new log: its results, the new telemetry
    first = tmp_path / "first.json"
    write_report(first, [doc])
    log = tmp_path / "t.jsonl"
    write_log(log, make_log_samples(count=7, gpus=1))
    again = make_report([first], log)
    assert again["telemetry"]["samples"] == 7
    assert again["results"][0]["document"]["ceilings"] == doc["ceilings"]


def test_built_report_is_the_report_its_json_reads_back_as(files):
    """No JSON round trip in build: the typed report in memory equals the one report.json decodes to."""
    from gpuscope.report import build
    from gpuscope.report.io import validate_report

    results, log = files
    report, document = build([results], log)
    assert validate_report(json.loads(json.dumps(document, allow_nan=False)), "report.json") == report
    assert document["results"][0]["document"] == json.loads(results.read_text())  # embedded as written


def test_spread_of_a_denormal_best_sample_is_unknown_not_infinite():
    assert ceiling_spread_percent(Measurement(samples_s=[5e-324, 1.0, 2.0])) == (None, 3)
