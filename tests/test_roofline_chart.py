"""The roofline picture from the outside: results files in, text / JSON / SVG out.

One machine identity across files, points judged against their own device's measured roofs,
above-datasheet ceilings flagged, the envelope with marked ridges, labels that never cover a
line or each other (at 60 to 160 columns), and every output line within the width asked for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.roofline import ceiling, fleet_results, h200_results, results_document, typed, workload, write_results

from gpuscope.cli import main
from gpuscope.roofline.layout import layout_roofline
from gpuscope.roofline.layout_cells import legibility, place_labels
from gpuscope.roofline.loading import build_model
from gpuscope.roofline.paint_text import MONOCHROME_PALETTE, render_roofline_labelled


def _probe_file(path: Path) -> Path:
    """What `gpuscope probe --device cpu` writes: host and rank 0 on every entry."""
    doc = results_document(
        "vm",
        devices=[{"device": "cpu", "type": "cpu", "name": "AMD EPYC", "host": "vm", "rank": 0, "physical_cores": 2}],
        ceilings=[
            ceiling("cpu", "compute", "fp32", 204e9, host="vm", rank=0),
            ceiling("cpu", "compute", "fp64", 107e9, host="vm", rank=0),
            ceiling("cpu", "memory", "dram.triad", 23e9, host="vm", rank=0),
            ceiling("cpu", "memory", "dram.copy", 31e9, host="vm", rank=0),
            ceiling("cpu", "collective", "allreduce.busbw", 1.5e9, host="vm", rank=0),
            ceiling("cpu", "compute", "fp16", 2.5e9, host="vm", rank=0),
        ],
    )
    doc["system"]["cpu_model"] = "AMD EPYC"
    return write_results(path, doc)


def _measure_file(path: Path) -> Path:
    """What `gpuscope.measure` in another process writes: host, no rank."""
    doc = results_document(
        "vm",
        devices=[{"device": "cpu", "type": "cpu", "name": "AMD EPYC", "host": "vm"}],
        ceilings=[],
        workloads=[
            workload("mlp 1024x4096", "cpu", 8.6e9, 33.6e6, 0.05, dtype="fp32", host="vm"),  # 172 GFLOP/s
            workload("axpy 8M", "cpu", 2 * 8.4e6, 12 * 8.4e6, 0.0055, dtype="fp32", host="vm"),
        ],
    )
    doc["system"]["cpu_model"] = "AMD EPYC"
    return write_results(path, doc)


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    return [str(_probe_file(tmp_path / "cpu.json")), str(_measure_file(tmp_path / "measure.json"))]


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_probe_and_measure_files_chart_as_one_cpu_judged_by_measured_roofs(
    files: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    model = _json(capsys, ["roofline", "--probes", *files, "--json", "--no-datasheet"])
    assert [(d["label"], d["type"]) for d in model["devices"]] == [("cpu", "cpu")]
    mlp, axpy = model["points"]
    assert mlp["compute_roof"]["source"] == "measured" and mlp["compute_roof"]["name"] == "fp32"
    assert mlp["bound"] == "compute" and not mlp["above_roof"] and 0.8 < mlp["efficiency"] < 0.9
    assert axpy["bound"] == "memory" and axpy["memory_roof"]["name"] == "dram.triad"  # the stated DRAM rule
    assert axpy["intensity_flop_per_byte"] == pytest.approx(2 / 12)


def test_no_memory_roof_gives_bound_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = results_document(
        "h",
        [{"device": "cpu", "type": "cpu", "name": "X"}],
        [ceiling("cpu", "compute", "fp32", 1e11)],
        [workload("w", "cpu", 1e6, 1e6, 1e-3, dtype="fp32")],
    )
    model = _json(
        capsys, ["roofline", "--probes", str(write_results(tmp_path / "a.json", doc)), "--json", "--no-datasheet"]
    )
    assert model["points"][0]["bound"] == "unknown" and "no DRAM roof" in model["points"][0]["note"]


def test_above_datasheet_ceiling_is_flagged_in_json_text_and_report(
    files: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuscope.report.roofview import roofline_view
    from gpuscope.telemetry.cpuinfo import CpuInfo

    slow_clock = CpuInfo(
        "AMD EPYC",
        "AuthenticAMD",
        "x86_64",
        2,
        2,
        2000.0,
        2000.0,
        simd="avx2",
        fp32_flop_per_cycle_per_core=32,
        max_frequency_source="test",
    )  # 2 x 32 x 2 GHz = 128 GFLOP/s
    documents = [(path, json.loads(Path(path).read_text())) for path in files]
    model = build_model(typed(documents), local_cpu=slow_clock)
    assert [(item.measured.name, round(item.ratio, 2)) for item in model.above_datasheet] == [
        ("fp32", 1.59),
        ("fp64", 1.67),
    ]
    view = roofline_view(typed(documents), local_cpu=slow_clock)
    flagged = {
        roof.name: roof.above_datasheet
        for roof in view.roofs or []
        if roof.origin == "measured" and roof.kind == "compute"
    }
    assert "above datasheet: the datasheet entry or the measurement is wrong" in str(flagged["fp32"])
    assert [item.name for item in view.above_datasheet or []] == ["fp32", "fp64"]
    rendered = render_roofline_labelled(model, 100, 24, palette=MONOCHROME_PALETTE).text
    assert "fp32 159% of datasheet fp32: above datasheet" in rendered.replace("\n", " ")


def test_envelope_ridge_and_default_roofs(files: list[str]) -> None:
    model = build_model(typed([(path, json.loads(Path(path).read_text())) for path in files]), datasheet=False)
    layout = layout_roofline(model)
    envelope = [(s.roof.name, s.style) for s in layout.segments]
    assert envelope == [("dram.triad", "envelope"), ("fp32", "envelope")]  # fp64, fp16, copy, collectives: --all-roofs
    (ridge,) = layout.ridges
    assert ridge.x == pytest.approx(204 / 23) and ridge.text == "ridge 8.87 FLOP/B"
    assert layout.y_range[0] >= 7  # the 1.5 GB/s collective and 2.5 GFLOP/s fp16 do not stretch the axis
    everything = layout_roofline(model, all_roofs=True)
    thin = {(s.roof.name, s.style) for s in everything.segments if s.style != "envelope"}
    assert {("fp64", "dtype"), ("fp16", "dtype"), ("dram.copy", "level")} <= thin
    assert all(s.roof.kind in ("compute", "memory") for s in everything.segments)
    fp64 = next(s for s in everything.segments if s.roof.name == "fp64")
    assert fp64.x0 == pytest.approx(107 / 23)  # a thin dtype line starts at its own ridge


@pytest.mark.parametrize("width", [60, 80, 120, 160])
def test_labels_never_overlap_nor_cover_lines_and_lines_fit(width: int) -> None:
    model = build_model(typed([("fleet.json", fleet_results())]), local_cpu=None)
    rendered = render_roofline_labelled(model, width, 24, palette=MONOCHROME_PALETTE)
    assert rendered.placement is not None
    counts = legibility(rendered.placement)
    assert counts["label_overlaps"] == counts["labels_over_lines"] == counts["labels_over_points"] == 0
    assert all(len(line) <= width for line in rendered.text.splitlines())
    assert len(rendered.tags) >= 8  # most points carry their number next to their mark
    layout_only = place_labels(rendered.layout, width - 9, 18)
    assert legibility(layout_only)["label_overlaps"] == 0


@pytest.mark.parametrize("width", [60, 80])
def test_cli_text_fits_the_width_and_keeps_bound_and_efficiency(
    width: int, files: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = str(write_results(tmp_path / "fleet.json", fleet_results()))
    assert main(["roofline", "--probes", *files, fleet, "--width", str(width), "--height", "20", "--no-color"]) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= width for line in out.splitlines()), [
        line for line in out.splitlines() if len(line) > width
    ]
    table = out.split("Workloads", 1)[1]
    header = next(line for line in table.splitlines() if line.lstrip().startswith("#"))
    assert header.split()[:5] == ["#", "workload", "bound", "eff.", "roof"]
    assert "…" not in header
    assert "Interconnect bandwidths" in out and "allreduce busbw" in out  # not drawn, tabled


def test_report_svg_paints_the_same_layout(files: list[str]) -> None:
    from gpuscope.report.charts import roofline_svg
    from gpuscope.report.roofview import roofline_view

    view = roofline_view(typed([(path, json.loads(Path(path).read_text())) for path in files]), local_cpu=None)
    svg = roofline_svg(view)
    assert svg is not None and svg.startswith("<svg")
    assert "ridge 8.87 FLOP/B" in svg and "fp32 204 GFLOP/s" in svg and "DRAM triad 23 GB/s" in svg
    assert ">1<" in svg.replace(" ", "") or "1</text>" in svg  # numbered point tags
    assert "var(--c0)" in svg  # the page's light/dark colours


@pytest.mark.parametrize("name", ["h200", "cpu_only", "cpu_h200_a100", "dozen_workloads"])
def test_report_chart_writes_every_bandwidth_label_along_its_line(name: str) -> None:
    """In the report's chart a DRAM roof's label runs along its slope. With the tight y axis the
    slopes are steeper: a label lifted a fixed 0.9 rows off the line crossed the line's own cells
    at every spot and fell back to a flat label off the line's end."""
    import re

    from support.roofline import CHART_PICTURES

    from gpuscope.report.charts import roofline_svg
    from gpuscope.report.roofview import roofline_view

    document = h200_results() if name == "h200" else CHART_PICTURES[name]()
    svg = roofline_svg(roofline_view(typed([(f"{name}.json", document)]), local_cpu=None))
    assert svg is not None
    angles = {
        text: float(angle)
        for angle, text in re.findall(r'transform="rotate\((-?[\d.]+) [^"]*">((?:DRAM|HBM)[^<]*)<', svg)
    }
    assert angles, "no bandwidth roof label found"
    for text, angle in angles.items():
        assert -80 < angle < -5, f"{text!r} is drawn at {angle} degrees, not along its slope"


def test_report_chart_axes_end_a_little_past_the_last_ridge_roof_and_point() -> None:
    """The report's x axis stops a factor 4 past the furthest ridge or point, not at the next
    whole decade (data ending at 2.7k FLOP/B drew an axis to 100k), and its y axis 3x above the
    highest roof or point (a 790 TFLOP/s roof drew an axis to 10 PFLOP/s, its top decade empty);
    the terminal keeps whole decades."""
    from support.reports import make_results

    from gpuscope.report.charts import roofline_svg
    from gpuscope.report.roofview import roofline_view

    document = make_results()
    model = build_model(typed([("a.json", document)]), local_cpu=None)
    decades = layout_roofline(model)
    furthest = max([ridge.x for ridge in decades.ridges] + [p.x for p in decades.points])
    highest = max([ridge.y for ridge in decades.ridges] + [p.y for p in decades.points])
    assert 2000 < furthest < 3000
    tight = layout_roofline(model, tight=True)
    assert 10 ** tight.x_range[1] == pytest.approx(4 * furthest)
    assert 10 ** tight.y_range[1] == pytest.approx(3 * highest)
    assert tight.y_range[1] < decades.y_range[1]
    assert decades.x_range[1] == 5  # whole decades where tick labels need them
    assert decades.y_range[1] == int(decades.y_range[1])
    svg = roofline_svg(roofline_view(typed([("a.json", document)]), local_cpu=None))
    assert svg is not None and ">10 k<" in svg.replace("</text>", "<") and ">100 k<" not in svg.replace("</text>", "<")


def test_report_flags_the_above_datasheet_ceiling(
    files: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuscope.roofline import loading
    from gpuscope.telemetry.cpuinfo import CpuInfo

    slow_clock = CpuInfo(
        "AMD EPYC",
        "AuthenticAMD",
        "x86_64",
        2,
        2,
        2000.0,
        2000.0,
        simd="avx2",
        fp32_flop_per_cycle_per_core=32,
        max_frequency_source="test",
    )
    monkeypatch.setattr(loading, "cpu_info", lambda: slow_clock)
    monkeypatch.setattr(loading.socket, "gethostname", lambda: "vm")
    out = tmp_path / "report.md"
    assert main(["report", "--probes", *files, "--output", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert (
        "2 of the 2 ceilings with a datasheet figure (of 6 measured) are above their datasheet value: "
        "the datasheet entry or the measurement is wrong"
    ) in text
    assert "within the expected range" not in text
    assert "ABOVE DATASHEET" in text


def test_theme_device_colours_reach_the_terminal_chart() -> None:
    """A theme's ``gpu_roofs`` / ``cpu_roofs`` colour the devices; without them the
    colour-blind-safe set stays."""
    from support.reports import make_results

    from gpuscope.roofline.paint_text import DEFAULT_PALETTE, render_roofline

    model = build_model(typed([("a.json", make_results(gpus=1))]), local_cpu=None)
    themed = render_roofline(
        model, 100, 30, palette=DEFAULT_PALETTE.with_colors(gpu_roofs=((1, 2, 3),), cpu_roofs=((4, 5, 6),))
    )
    assert "38;2;1;2;3" in themed and "38;2;4;5;6" in themed
    plain = render_roofline(model, 100, 30)
    assert "38;2;1;2;3" not in plain and "38;2;86;180;233" in plain  # the first CPU's Okabe-Ito blue
