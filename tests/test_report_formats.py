"""Each report format's structure, determinism and the report.json round trip."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest
from support.reports import make_log_samples, make_results, write_log, write_results
from support.roofline import typed

from gpuscope.report import make_report, render_report, write_report


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inputs")
    results = folder / "results.json"
    write_results(results, make_results(hbm_bytes_per_s=[3.0e12, 2.2e12]))
    log = folder / "telemetry.jsonl"
    write_log(log, make_log_samples(count=60))
    return results, log


@pytest.fixture(scope="module")
def html_text(inputs, tmp_path_factory):
    results, log = inputs
    out = tmp_path_factory.mktemp("out") / "report.html"
    write_report(out, [results], log_path=log)
    return out.read_text(encoding="utf-8")


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str, str | None]] = []
        self.ids: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            self.attrs.append((tag, name, value))
            if name == "id":
                self.ids.append(value)


def test_html_structure(html_text):
    assert html_text.startswith("<!DOCTYPE html>")
    parser = _Collector()
    parser.feed(html_text)
    for section in (
        "summary",
        "system",
        "roofline",
        "ceilings",
        "workloads",
        "telemetry",
        "runs",
        "telemetry-stats",
        "energy",
    ):
        assert section in parser.ids, section
    assert parser.tags.count("svg") == 2  # roofline + telemetry
    for table in ("table-system", "table-ceilings", "table-workloads", "table-runs", "table-telemetry", "table-energy"):
        assert table in parser.ids
    # ids are unique across the two inline SVGs
    assert len(parser.ids) == len(set(parser.ids))
    # the flagged row is marked
    assert re.search(r'<tr class="low"><td>cuda:1</td>.*?dram\.triad.*?LOW</td></tr>', html_text)
    # system facts
    for text in ("Fake CPU 9000", "550.54.15", "12.8", "2.13.0", "OpenBLAS 0.3.27", "NVIDIA H100 80GB HBM3"):
        assert text in html_text
    # light and dark
    assert "prefers-color-scheme: dark" in html_text and "color-scheme" in html_text


def test_html_is_self_contained(html_text):
    parser = _Collector()
    parser.feed(html_text)
    assert "script" not in parser.tags and "link" not in parser.tags and "img" not in parser.tags
    assert "default-src 'none'" in html_text  # the CSP forbids every fetch and script
    for tag, name, value in parser.attrs:
        if name in ("src", "href", "xlink:href", "action"):
            assert value is not None and value.startswith("#"), (tag, name, value)
    # no URL outside XML namespace declarations
    without_ns = re.sub(r'xmlns(:\w+)?="[^"]*"', "", html_text)
    assert not re.search(r"https?://", without_ns)
    assert "@import" not in html_text and "@font-face" not in html_text
    assert not re.search(r"url\((?!#)", html_text)


def test_roofline_svg_labels_every_point_and_tells_cpu_from_gpu(html_text):
    svg = html_text[html_text.index("<svg", html_text.index('id="roofline"')) :]
    svg = svg[: svg.index("</svg>")]
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    joined = " ".join(texts)
    for name in ("gemm 8192 bf16", "decode gemv $x$", "numpy sgemm 2048"):
        assert name in joined
    # one legend entry per device (GPU and CPU told apart), its envelope measured or datasheet
    assert re.search(r"GPU [^:]*: bf16 780 TFLOP/s", joined) and "CPU " in joined
    assert "(measured)" in joined and "envelope min(peak, I x DRAM)" in joined
    assert "bf16 780 TFLOP/s" in joined and "ridge " in joined and "FLOP/B" in joined
    assert "FLOP/byte" in joined
    # colours come from CSS variables so the page's dark style recolours the chart
    assert "var(--chart-fg)" in svg and "var(--c1)" in svg and "var(--c0)" in svg
    assert "mathdefault" not in svg  # tick labels are plain text, not raw mathtext


def test_telemetry_svg_marks_probe_runs(html_text):
    start = html_text.index('id="telemetry"')
    svg = html_text[html_text.index("<svg", start) :]
    svg = svg[: svg.index("</svg>")]
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    for title in ("GPU utilization (%)", "DRAM bandwidth (GB/s)", "Power (W)", "GPU temperature (°C)"):
        assert title in texts
    assert "PCIe TX (solid) and RX (dashed) (GB/s)" in texts and "NVLink TX (solid) and RX (dashed) (GB/s)" in texts
    # probe runs 1..5 start inside the 30 s log and are numbered on the axis
    for number in ("1", "2", "3", "4", "5"):
        assert number in texts
    assert "var(--chart-span-a)" in svg


def test_markdown_structure(inputs):
    results, log = inputs
    text = render_report(make_report([results], log), "md")
    assert text.startswith("# gpuscope report: node-a\n")
    for heading in (
        "## Summary",
        "## System",
        "## Ceilings: measured vs datasheet",
        "## Workloads",
        "## Probe runs",
        "## Telemetry per metric",
        "## GPU energy (telemetry)",
    ):
        assert f"\n{heading}\n" in text
    rows = [line for line in text.splitlines() if line.startswith("| cuda:1 |") and "dram.triad" in line]
    assert rows and rows[0].endswith("**LOW** |")
    # every table row has as many cells as its header
    for block in re.findall(r"((?:^\|.*\|\n)+)", text, flags=re.M):
        lines = block.strip().splitlines()
        counts = {len(re.split(r"(?<!\\)\|", line)) for line in lines}
        assert len(counts) == 1, lines[:3]
    assert "- node-a: Fake CPU 9000" in text


def test_json_round_trip_reproduces_html_and_markdown_byte_for_byte(inputs, tmp_path):
    results, log = inputs
    first_html, report_json = tmp_path / "a.html", tmp_path / "report.json"
    write_report(first_html, [results], log_path=log)
    write_report(report_json, [results], log_path=log)
    data = json.loads(report_json.read_text())
    assert data["schema"] == "gpuscope.report" and data["schema_version"] == 1
    again_html, again_md, first_md = tmp_path / "b.html", tmp_path / "b.md", tmp_path / "a.md"
    write_report(again_html, [report_json])
    write_report(again_md, report_json)
    write_report(first_md, [results], log_path=log)
    assert first_html.read_bytes() == again_html.read_bytes()
    assert first_md.read_bytes() == again_md.read_bytes()
    # and the JSON itself is stable
    again_json = tmp_path / "again.json"
    write_report(again_json, [report_json])
    assert again_json.read_bytes() == report_json.read_bytes()


def test_same_inputs_same_output(inputs, tmp_path):
    results, log = inputs
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    write_report(a, [results], log_path=log)
    write_report(b, [results], log_path=log)
    assert a.read_bytes() == b.read_bytes()


def test_report_without_log_or_workloads(tmp_path):
    doc = make_results(gpus=0)
    doc["workloads"] = []
    text = render_report(make_report([doc]), "html")
    assert 'id="telemetry"' not in text
    assert text.count("<svg") == 1
    empty = make_results(gpus=0)
    empty["ceilings"], empty["workloads"], empty["measurements"] = [], [], []
    text = render_report(make_report([empty]), "html")
    assert "No roofs or workloads to draw." in text and "<svg" not in text


def test_roofline_caption_names_every_line_style_and_marker_drawn(inputs, monkeypatch, html_text):
    from matplotlib.axes import Axes
    from support.reports import make_results as results_doc

    from gpuscope.report import charts
    from gpuscope.report.roofview import roofline_view

    drawn: list[tuple[object, object]] = []
    plot = Axes.plot

    def recording_plot(self, *args, **kwargs):
        drawn.append((kwargs.get("marker"), kwargs.get("linestyle")))
        return plot(self, *args, **kwargs)

    monkeypatch.setattr(Axes, "plot", recording_plot)
    doc = results_doc(hbm_bytes_per_s=[2.0e12, 3.0e12])  # decode gemv at 2.5 TFLOP/s: above a 2 TB/s roof
    assert charts.roofline_svg(roofline_view(typed([("r", doc)])), all_roofs=True) is not None
    caption = re.search(r"<figcaption[^>]*>(.*?)</figcaption>", html_text[html_text.index('id="roofline"') :]).group(1)
    words = {marker: text for text, marker in charts._MARKERS.values()}
    lines = {repr(style["linestyle"]): text for text, style in charts._STYLES.values()}
    for marker, linestyle in drawn:
        said = words[marker] if marker not in (None, "none") else lines[repr(linestyle)]
        assert said in caption
    assert {marker for marker, _ in drawn} >= {"o", "d", "^"}
    assert "circles" in caption and "triangles" in caption and "dash-dot: datasheet" in caption
