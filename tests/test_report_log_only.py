"""Issue 28: ``gpuscope report --log LOG`` without a results file is a telemetry report (HTML, Markdown, JSON)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from support.reports import make_log_samples, write_log

from gpuscope.cli import main
from gpuscope.errors import EXIT_USAGE

PROBE_SECTIONS = ("Ceilings", "Workloads", "Roofline", "## System")


def _report(tmp_path: Path, log: Path, *extra: str) -> dict[str, str]:
    for fmt in ("json", "html", "md"):
        assert main(["report", "--log", str(log), *extra, "-o", str(tmp_path / f"out.{fmt}")]) == 0
    return {fmt: (tmp_path / f"out.{fmt}").read_text(encoding="utf-8") for fmt in ("json", "html", "md")}


def test_log_alone_is_a_telemetry_report(tmp_path: Path) -> None:
    """Per GPU and host: mean/p95/max per metric, energy and the charts; no probe sections; the host in the title."""
    write_log(tmp_path / "run.jsonl", make_log_samples(count=40, gpus=2, hostname="node-t"))
    out = _report(tmp_path, tmp_path / "run.jsonl")
    data = json.loads(out["json"])
    assert data["title"] == "gpuscope telemetry report: node-t"
    assert [source["kind"] for source in data["sources"]] == ["log"]
    assert data["ceilings"] == [] and data["workloads"] == [] and data["measurements"] == []
    telemetry = data["telemetry"]
    assert telemetry["samples"] == 40
    subjects = {stat["subject"] for stat in telemetry["stats"]}
    assert {"Host", "GPU 0", "GPU 1"} <= subjects
    power = next(s for s in telemetry["stats"] if s["subject"] == "GPU 0" and s["metric"] == "power_w")
    assert power["mean"] < power["p95"] <= power["max"] == pytest.approx(650.0, rel=0.01)
    assert {row["subject"] for row in telemetry["energy"]} >= {"GPU 0", "GPU 1"}
    assert "No ceilings measured." not in data["summary"] and data["summary"][0].startswith("Telemetry only")
    html, md = out["html"], out["md"]
    assert "<h1>gpuscope telemetry report: node-t</h1>" in html and "<svg" in html
    assert 'id="telemetry"' in html and 'href="#roofline"' not in html and 'id="ceilings"' not in html
    assert md.startswith("# gpuscope telemetry report: node-t")
    for section in PROBE_SECTIONS:
        assert section not in md, section
    assert "| GPU 0 | Power | W |" in md


def test_rotated_and_compressed_log_set_reads_as_one(tmp_path: Path) -> None:
    """A folder holding a gzip-compressed first part and a plain second part: one report of all samples."""
    samples = make_log_samples(count=30, gpus=1, hostname="node-r")
    folder = tmp_path / "logs"
    folder.mkdir()
    write_log(tmp_path / "first.jsonl", samples[:15])
    (folder / "run.20231114T221320.jsonl.gz").write_bytes(gzip.compress((tmp_path / "first.jsonl").read_bytes()))
    write_log(folder / "run.jsonl", samples[15:])
    data = json.loads(_report(tmp_path, folder)["json"])
    assert data["telemetry"]["samples"] == 30
    assert data["title"] == "gpuscope telemetry report: node-r"


def test_log_only_report_redacted(tmp_path: Path) -> None:
    """``--redact`` on a log alone: the host is host-1 in the title and nowhere named, in every format."""
    write_log(tmp_path / "run.jsonl", make_log_samples(count=20, gpus=1, hostname="n7", hostile=True))
    out = _report(tmp_path, tmp_path / "run.jsonl", "--redact")
    assert json.loads(out["json"])["title"] == "gpuscope telemetry report: host-1"
    for fmt, text in out.items():
        assert not re.search(r"(?<![^\W_])n7(?![^\W_])", text, re.IGNORECASE), fmt
        assert "mallory" not in text and "hunter2" not in text, fmt


def test_nothing_at_all_is_still_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "-o", "x.html"]) == EXIT_USAGE
    assert "--log" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_throttling_and_alerts_of_a_log_are_reported(tmp_path: Path, fmt: str) -> None:
    """GPU 1 held back by its power cap for 10 of 40 samples (seconds 5.0 to 9.5) and GPU 0 hot for
    4: the throttling table and the alerts, counted from the records the logger's own alert rule
    annotated, in JSON, HTML and Markdown, the same from a JSON-lines and a CSV log."""
    from gpuscope.telemetry.alerts import annotate
    from gpuscope.telemetry.logfile import open_log_writer

    samples = make_log_samples(count=40, gpus=2, interval_s=0.5, hostname="node-h")
    for tick, sample in enumerate(samples):
        for gpu in sample.gpus:
            gpu.throttle_reasons = []
            gpu.temperature_gpu_c = 60.0
        if 10 <= tick < 20:
            sample.gpus[1].throttle_reasons = ["sw_power_cap"]
        if tick in (30, 31, 32, 33):
            sample.gpus[0].temperature_gpu_c = 95.0
        annotate(sample)
    log = tmp_path / f"run.{fmt}"
    with open_log_writer(log, fmt) as writer:
        for sample in samples:
            writer.write(sample)
    out = _report(tmp_path, log)
    telemetry = json.loads(out["json"])["telemetry"]
    throttling = telemetry["throttling"]
    assert [(t["subject"], t["reason"], t["samples"], t["of_samples"]) for t in throttling] == [
        ("GPU 1", "sw_power_cap", 10, 40)
    ]
    assert throttling[0]["first_s"] == pytest.approx(5.0) and throttling[0]["last_s"] == pytest.approx(9.5)
    by_kind = {(a["kind"], a["subject"]): a for a in telemetry["alerts"]}
    hot = by_kind[("temperature", "GPU 0")]
    assert hot["samples"] == 4 and hot["first_s"] == pytest.approx(15.0) and "95°C" in hot["message"]
    held = by_kind[("throttle", "GPU 1")]
    assert held["samples"] == 10 and "sw_power_cap" in held["message"]
    levels = [a["level"] for a in telemetry["alerts"]]
    assert levels == sorted(levels, key=("ok", "careful", "warning", "critical").index, reverse=True)  # worst first
    summary = next(line for line in json.loads(out["json"])["summary"] if line.startswith("Telemetry:"))
    assert "GPU 1 clocks held back by sw_power_cap 25% of the time" in summary, summary
    assert "2 alerts (worst: critical temperature, GPU 0)" in summary, summary
    html, md = out["html"], out["md"]
    assert 'href="#throttling"' in html and 'href="#alerts"' in html and 'id="alerts"' in html
    assert re.search(r"\| GPU 1 \| sw\\_power\\_cap \| 10 \| 25% \| 5 s \| 9.5 s \|", md), md
    assert "## Alerts" in md and "| GPU 0 |" in md


def test_a_log_without_throttling_or_alerts_says_so(tmp_path: Path) -> None:
    samples = make_log_samples(count=10, gpus=1, hostname="node-q")
    for sample in samples:
        sample.alerts = []
        for gpu in sample.gpus:
            gpu.throttle_reasons = []
    write_log(tmp_path / "run.jsonl", samples)
    out = _report(tmp_path, tmp_path / "run.jsonl")
    telemetry = json.loads(out["json"])["telemetry"]
    assert telemetry["throttling"] == [] and telemetry["alerts"] == []
    assert "No GPU clock was held back in the log" in out["md"] and "No alert threshold was crossed" in out["html"]


def test_samples_a_clock_put_at_one_instant_give_no_mean_power(tmp_path: Path) -> None:
    """Two samples 1e-121 s apart (a clock gone wrong): energy over no time has no mean power, and
    the report reads back (found by tests/test_hostile_ranges.py)."""
    samples = make_log_samples(count=2, gpus=1, hostname="node-c")
    samples[0].timestamp, samples[1].timestamp = 1e-121, 2e-121
    write_log(tmp_path / "run.jsonl", samples)
    assert main(["report", "--log", str(tmp_path / "run.jsonl"), "-o", str(tmp_path / "r.json")]) == 0
    energy = json.loads((tmp_path / "r.json").read_text())["telemetry"]["energy"]
    assert energy and all(row["mean_power_w"] is None for row in energy)
    assert main(["report", "--from", str(tmp_path / "r.json"), "-o", str(tmp_path / "again.html")]) == 0
