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
