"""The terminal roofline chart: axis labels, SI ticks, legend and point labels at 60 and 160
columns; GPU and CPU roofs in different colours; monochrome output without escape codes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from gpuscope.roofline.chart import (
    DEFAULT_PALETTE,
    MONOCHROME_PALETTE,
    ChartPalette,
    draw_roofline,
    legend_lines,
    render_roofline,
    select_chart_roofs,
    strip_ansi,
)
from gpuscope.roofline.live import LiveEstimate, live_placement
from gpuscope.roofline.loading import build_model
from gpuscope.testing.roofline import ceiling, cpu_results, h200_results, results_document


@dataclass
class FakeCpu:
    model: str = "Fake CPU 9000"

    def peak_flop_per_s(self, dtype: str = "fp32") -> float:
        return 4e12 if dtype == "fp32" else 2e12


@pytest.fixture(scope="module")
def model():
    return build_model([("gpu.json", h200_results())], local_cpu=FakeCpu())


@pytest.mark.parametrize("width", [60, 160])
@pytest.mark.parametrize("palette", [DEFAULT_PALETTE, MONOCHROME_PALETTE], ids=["colour", "mono"])
def test_chart_has_axes_ticks_legend_and_point_labels(model, width, palette):
    text = render_roofline(model, width, 24, palette=palette)
    plain = strip_ansi(text)
    lines = plain.splitlines()
    assert all(len(line) <= width for line in lines), max(len(line) for line in lines)
    assert "arithmetic intensity (FLOP/byte)" in plain
    assert "FLOP/s" in plain
    assert "Roofline (log-log)" in plain
    # SI-prefixed y ticks (decades between the lowest and highest roof).
    for tick in ("1T", "10T", "100T", "1P"):
        assert any(line.lstrip().startswith(tick + "┤") for line in lines), tick
    # Legend: measured and datasheet roofs of the GPU, roofs of the CPU.
    assert "cuda:0 bf16 790TFLOP/s" in plain
    assert "cuda:0 DRAM triad 4.3TB/s" in plain
    assert "cpu fp32 2TFLOP/s" in plain
    if width >= 100:
        assert "cuda:0 bf16 989TFLOP/s (datasheet)" in plain
        assert "cuda:0 HBM3e 4.8TB/s (datasheet)" in plain
    else:  # the datasheet twins of measured roofs give way to the legend, and a footnote says so
        assert "cuda:0 bf16 989TFLOP/s (datasheet)" not in plain
        assert "datasheet roofs with a measured twin hidden below 100" in plain
        assert "cuda:0 fp8 1.98PFLOP/s (datasheet)" in plain  # no measured fp8: its datasheet roof stays
    # Every workload is a labelled point.
    for label in ("matmul 8192 bf16", "softmax", "cpu gemm"):
        assert label in plain, label
    assert plain.count("●") >= 3
    if palette.use_color:
        assert "\x1b[" in text
    else:
        assert "\x1b" not in text


def test_gpu_and_cpu_roofs_have_different_colours(model):
    text = render_roofline(model, 120, 24)
    gpu_colour = f"38;5;{DEFAULT_PALETTE.gpu_roofs[0]}m"
    cpu_colour = f"38;5;{DEFAULT_PALETTE.cpu_roofs[0]}m"
    datasheet_colour = f"38;5;{DEFAULT_PALETTE.gpu_datasheet}m"
    assert gpu_colour in text and cpu_colour in text and datasheet_colour in text
    legend = [line for line in text.splitlines() if "cpu fp32" in line]
    assert legend and cpu_colour in legend[0]


def test_datasheet_roofs_are_dotted_and_measured_solid(model):
    roofs = {(r.roof.name, r.roof.source): r for r in draw_roofline(_Recorder(), model, width=100, height=24)}
    assert roofs[("bf16", "datasheet")].marker == "·"
    assert roofs[("bf16", "datasheet")].legend_sample == "··"
    assert roofs[("bf16", "measured")].marker == "braille"
    assert roofs[("bf16", "measured")].legend_sample == "──"


def test_monochrome_tells_roofs_apart_by_marker(model):
    text = render_roofline(model, 100, 24, palette=MONOCHROME_PALETTE)
    legend = {line for line in text.splitlines() if "cpu fp32" in line or "cpu DRAM" in line}
    assert any(line.lstrip().startswith("++ cpu fp32") or "++ cpu fp32" in line for line in legend)


def test_highlighted_point(model):
    plain = strip_ansi(render_roofline(model, 100, 24, highlight="softmax"))
    assert "◆" in plain
    plain_by_index = strip_ansi(render_roofline(model, 100, 24, highlight=0))
    assert "◆" in plain_by_index


def test_hex_palette_colours():
    palette = ChartPalette(gpu_roofs=("#ff0000",))
    model = build_model([("gpu.json", h200_results())], local_cpu=FakeCpu())
    assert "38;2;255;0;0" in render_roofline(model, 100, 24, palette=palette)


def test_two_files_on_one_chart():
    model = build_model([("a.json", h200_results("node-a")), ("b.json", cpu_results("node-b"))], local_cpu=FakeCpu())
    plain = strip_ansi(render_roofline(model, 160, 30))
    assert "node-a:cuda:0 bf16" in plain
    assert "node-b:cpu fp64" in plain
    assert "stencil [node-b:cpu]" in plain
    assert "matmul 8192 bf16 [node-a:cuda:0]" in plain


def test_live_estimate_drawn_as_estimated_point(model):
    estimate = LiveEstimate(
        gpu_index=0,
        device="cuda:0",
        name="NVIDIA H200",
        flop_per_s=400e12,
        dram_bytes_per_s=2e12,
        contributions_flop_per_s={"hmma": 400e12},
        peaks_source="H200 SXM datasheet",
    )
    placement = live_placement(estimate, model)
    plain = strip_ansi(render_roofline(model, 160, 30, extra_placements=[placement]))
    assert "◇" in plain
    assert "estimated from activity counters" in plain


def test_narrow_widths_are_raised_to_sixty(model):
    plain = strip_ansi(render_roofline(model, 20, 24))
    assert max(len(line) for line in plain.splitlines()) == 60


def test_all_roofs_detail_draws_more(model):
    main = select_chart_roofs(model, "main")
    everything = select_chart_roofs(model, "all")
    assert len(everything) > len(main)
    assert {r.roof.name for r in everything} >= {"fp64", "tf32", "fp16", "pcie.h2d", "nvlink"}


def test_empty_model_renders():
    empty = build_model([], datasheet=False)
    plain = strip_ansi(render_roofline(empty, 60, 16))
    assert "arithmetic intensity" in plain
    assert legend_lines([], 60) == []


class _Recorder:
    """Records the plotext calls (stands in for a PlotextPlot widget's ``plt``)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str):
        def record(*args: Any, **kwargs: Any) -> None:
            self.calls.append((name, args, kwargs))

        return record


def test_draw_roofline_on_a_plotext_like_object(model):
    recorder = _Recorder()
    drawn = draw_roofline(recorder, model, width=100, height=24, legend_inside=True, configure_canvas=False)
    names = [call[0] for call in recorder.calls]
    assert "canvas_color" not in names
    labels = [call[2].get("label") for call in recorder.calls if call[0] == "plot"]
    assert labels == [roof.legend for roof in drawn]
    texts = [call[1][0] for call in recorder.calls if call[0] == "text"]
    assert any("softmax" in text for text in texts)
    assert ("xscale", ("log",), {}) in recorder.calls and ("yscale", ("log",), {}) in recorder.calls


# --- the default ("main") selection ---------------------------------------------------------------


def _full_gpu_results() -> dict[str, Any]:
    """An H200 run measuring every compute dtype, several kernels per memory level, transfers
    both ways (pinned and pageable) and collectives with algbw and busbw, plus a CPU run of fp64,
    fp32, bf16 and fp16 (like ``gpuscope probe --device cpu --suite quick``)."""
    gpu = [
        ceiling("cuda:0", "compute", name, value)
        for name, value in (("fp64", 50e12), ("fp32", 55e12), ("tf32", 380e12), ("bf16", 760e12), ("fp16", 770e12), ("fp8", 1.5e15))
    ]
    gpu += [
        ceiling("cuda:0", "memory", "l2.triad", 11e12),
        ceiling("cuda:0", "memory", "l2.copy", 9e12),
        ceiling("cuda:0", "memory", "dram.triad", 4.3e12),
        ceiling("cuda:0", "memory", "dram.copy", 4.1e12),
        ceiling("cuda:0", "transfer", "h2d.pinned", 53e9),
        ceiling("cuda:0", "transfer", "h2d.pageable", 20e9),
        ceiling("cuda:0", "transfer", "d2h.pinned", 52e9),
        ceiling("cuda:0", "transfer", "d2d", 3.9e12),
        ceiling("cuda:0", "collective", "allreduce.algbw", 300e9),
        ceiling("cuda:0", "collective", "allreduce.busbw", 450e9),
        ceiling("cuda:0", "collective", "allgather.algbw", 500e9),
        ceiling("cuda:0", "collective", "allgather.busbw", 430e9),
    ]
    cpu = [
        ceiling("cpu", "compute", "bf16", 861e9),
        ceiling("cpu", "compute", "fp32", 230e9),
        ceiling("cpu", "compute", "fp64", 109e9),
        ceiling("cpu", "compute", "fp16", 2.5e9),
        ceiling("cpu", "memory", "l1.read", 317e9),
        ceiling("cpu", "memory", "l1.copy", 123e9),
        ceiling("cpu", "memory", "l2.read", 310e9),
        ceiling("cpu", "memory", "llc.add", 194e9),
        ceiling("cpu", "memory", "dram.read", 79e9),
        ceiling("cpu", "memory", "dram.triad", 65e9),
    ]
    return results_document(
        "gpu-node",
        devices=[
            {"device": "cuda:0", "type": "gpu", "name": "NVIDIA H200", "host": "gpu-node"},
            {"device": "cpu", "type": "cpu", "name": "Fake CPU 9000", "host": "gpu-node"},
        ],
        ceilings=gpu + cpu,
    )


@pytest.fixture(scope="module")
def full_model():
    return build_model([("full.json", _full_gpu_results())], local_cpu=FakeCpu())


def _legends(model, width=None):
    return [roof.legend for roof in select_chart_roofs(model, "main", width)]


def test_default_draws_every_measured_compute_dtype(full_model):
    legends = _legends(full_model)
    for device in full_model.devices:
        label = full_model.device_label(device.key)
        for roof in device.of_kind("compute", "measured"):
            assert any(text.startswith(f"{label} {roof.name} ") and "(datasheet)" not in text for text in legends), (label, roof.name)
    # ... and in the rendered chart at both widths
    for width in (60, 160):
        plain = strip_ansi(render_roofline(full_model, width, 24))
        for name in ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8"):
            assert f"cuda:0 {name} " in plain, (width, name)
        for name in ("fp64", "fp32", "bf16", "fp16"):
            assert f"cpu {name} " in plain, (width, name)


def test_default_draws_datasheet_twins_marked_and_dotted(full_model):
    roofs = select_chart_roofs(full_model, "main")
    datasheet = {(r.device.key.device, r.roof.kind, r.roof.name) for r in roofs if r.roof.source == "datasheet"}
    # the H200's datasheet roof of every measured dtype (fp64 against the higher fp64.tensor), HBM, PCIe
    assert {("cuda:0", "compute", n) for n in ("fp64.tensor", "fp32", "tf32", "bf16", "fp16", "fp8")} <= datasheet
    assert ("cuda:0", "memory", "dram") in datasheet
    assert ("cuda:0", "transfer", "pcie.h2d") in datasheet and ("cuda:0", "transfer", "pcie.d2h") in datasheet
    assert ("cpu", "compute", "fp32") in datasheet
    assert ("cuda:0", "compute", "int8") not in datasheet  # not measured, not used by a workload
    for roof in roofs:
        assert (roof.roof.source == "datasheet") == roof.legend.endswith("(datasheet)"), roof.legend
    plain = strip_ansi(render_roofline(full_model, 160, 30))
    assert "cuda:0 bf16 989TFLOP/s (datasheet)" in plain
    assert "cuda:0 HBM3e 4.8TB/s (datasheet)" in plain
    assert "cpu fp32 4TFLOP/s (datasheet)" in plain


def test_default_memory_is_the_best_kernel_per_level(full_model):
    memory = [(r.device.key.device, r.roof.name) for r in select_chart_roofs(full_model, "main") if r.roof.kind == "memory" and r.roof.source == "measured"]
    assert sorted(memory) == sorted(
        [("cuda:0", "l2.triad"), ("cuda:0", "dram.triad"), ("cpu", "l1.read"), ("cpu", "l2.read"), ("cpu", "llc.add"), ("cpu", "dram.read")]
    )
    legends = _legends(full_model)
    assert "cuda:0 DRAM triad 4.3TB/s" in legends and "cpu DRAM read 79GB/s" in legends


def test_default_transfers_best_per_direction_and_busbw_not_algbw(full_model):
    roofs = [r for r in select_chart_roofs(full_model, "main") if r.roof.source == "measured"]
    transfers = sorted(r.roof.name for r in roofs if r.roof.kind == "transfer")
    assert transfers == ["d2d", "d2h.pinned", "h2d.pinned"]
    collectives = sorted(r.roof.name for r in roofs if r.roof.kind == "collective")
    assert collectives == ["allgather.busbw", "allreduce.busbw"]  # allgather's algbw is higher, still not drawn
    plain = strip_ansi(render_roofline(full_model, 160, 30))
    assert "allreduce busbw" in plain and "algbw" not in plain
    # --all-roofs keeps every roof, algbw included
    assert {"allgather.algbw", "h2d.pageable", "dram.copy"} <= {r.roof.name for r in select_chart_roofs(full_model, "all")}


def test_algbw_drawn_when_no_busbw():
    document = results_document(
        "box",
        devices=[{"device": "cpu", "type": "cpu", "name": "Fake CPU 9000", "host": "box"}],
        ceilings=[ceiling("cpu", "compute", "fp32", 1e11), ceiling("cpu", "memory", "dram.read", 5e10), ceiling("cpu", "collective", "broadcast.algbw", 2e9)],
    )
    model = build_model([("x.json", document)], local_cpu=FakeCpu())
    legends = _legends(model)
    assert "broadcast algbw 2GB/s" in legends
    assert all(not text.startswith("cpu ") for text in legends)  # one device: no device prefix


@pytest.mark.parametrize("width", [60, 100, 160])
@pytest.mark.parametrize("palette", [DEFAULT_PALETTE, MONOCHROME_PALETTE], ids=["colour", "mono"])
def test_full_default_chart_fits_and_keeps_labels(full_model, width, palette):
    plain = strip_ansi(render_roofline(full_model, width, 24, palette=palette))
    lines = plain.splitlines()
    assert all(len(line) <= width for line in lines), max(len(line) for line in lines)
    assert "arithmetic intensity (FLOP/byte)" in plain and "FLOP/s" in plain
    narrow = width < 100
    assert ("(datasheet)" in plain) == (not narrow)  # every datasheet roof here has a measured twin
    assert ("with a measured twin hidden below 100" in plain.replace("\n", " ")) == narrow
    legend = [line for line in lines if "TFLOP/s" in line or "GB/s" in line or "TB/s" in line]
    assert len(legend) <= 16, legend  # still a legend one can read under the chart


def test_narrow_selection_keeps_datasheet_roofs_without_a_twin():
    model = build_model([("gpu.json", h200_results())], local_cpu=FakeCpu())
    wide = {r.roof.name for r in select_chart_roofs(model, "main", 160) if r.roof.source == "datasheet"}
    narrow = {r.roof.name for r in select_chart_roofs(model, "main", 60) if r.roof.source == "datasheet"}
    assert "fp8" in narrow  # a workload's dtype with no measured roof: its only roof
    assert {"bf16", "dram"} <= wide and not ({"bf16", "dram"} & narrow)


def test_report_and_terminal_share_the_default_roofs(full_model):
    """The HTML report's emphasised ("main") roofs are the terminal chart's default selection;
    its datasheet roofs are drawn only when that selection draws them; algbw never with busbw."""
    from gpuscope.report.roofview import _from_model

    view = _from_model(full_model)
    main = sorted((r["device"], r["kind"], r["name"], r["origin"]) for r in view["roofs"] if r["main"])
    terminal = sorted((r.device.key.device, r.roof.kind, r.roof.name, r.roof.source) for r in select_chart_roofs(full_model, "main"))
    assert main == terminal
    for roof in view["roofs"]:
        if roof["origin"] == "datasheet":
            assert roof["chart"] == roof["main"], roof["name"]
        if roof["name"].endswith(".algbw"):
            assert roof["chart"] is False and roof["main"] is False


# --- point label placement ---------------------------------------------------------------------


def _crowded_results() -> dict[str, Any]:
    """A CPU run with 16 matmul points packed close together near the compute roofs (like the
    quick suite's matmul measurements)."""
    from gpuscope.testing.roofline import workload

    ceilings = [
        ceiling("cpu", "compute", "bf16", 861e9),
        ceiling("cpu", "compute", "fp32", 230e9),
        ceiling("cpu", "compute", "fp64", 109e9),
        ceiling("cpu", "memory", "l2.read", 310e9),
        ceiling("cpu", "memory", "dram.read", 79e9),
    ]
    workloads = []
    for number in range(16):
        dtype = ("fp64", "fp32", "bf16", "fp16")[number % 4]
        size = (512, 1024, 2048, 4096)[number // 4]
        flops = 2.0 * size**3
        intensity = 40.0 * (1.15 ** number)
        rate = 90e9 * (1.12 ** number)
        workloads.append(workload(f"matmul {dtype} {size}x{size}x{size}", "cpu", flops, flops / intensity, flops / rate, dtype=dtype))
    return results_document(
        "laptop",
        devices=[{"device": "cpu", "type": "cpu", "name": "Fake CPU 9000", "host": "laptop"}],
        ceilings=ceilings,
        workloads=workloads,
    )


@pytest.fixture(scope="module")
def crowded_model():
    return build_model([("crowded.json", _crowded_results())], local_cpu=FakeCpu())


@pytest.mark.parametrize("width", [60, 160])
@pytest.mark.parametrize("highlight", [None, 5])
def test_crowded_labels_do_not_overlap_and_tags_match_the_table(crowded_model, width, highlight):
    from gpuscope.roofline.chart import render_roofline_labelled
    from gpuscope.roofline.tables import points_table

    rendered = render_roofline_labelled(crowded_model, width, 24, palette=MONOCHROME_PALETTE, highlight=highlight)
    lines = rendered.text.splitlines()
    assert len(rendered.labels) == 16
    assert rendered.text == render_roofline(crowded_model, width, 24, palette=MONOCHROME_PALETTE, highlight=highlight)
    table_numbers = {line.split()[0] for line in points_table(crowded_model)[1:]}
    cells: set[tuple[int, int]] = set()
    shown_points = set()
    for label in rendered.labels:
        assert label.row is not None, label
        # Intact in the rendered text: nothing overwrote it.
        assert lines[label.row][label.column : label.column + len(label.text)] == label.text, (label, lines[label.row])
        span = {(label.row, column) for column in range(label.column, label.column + len(label.text))}
        assert not span & cells, label
        cells |= span
        if label.full:
            assert label.text.startswith(crowded_model.placements[label.mark.index].point.name)
        else:
            assert label.text.rstrip("d") in table_numbers
            assert label.text == str(label.mark.index + 1)
        shown_points.add(label.mark.index)
    assert shown_points == set(range(16))
    assert rendered.tags, "16 close points cannot all carry full labels"
    if highlight is not None:
        highlighted = [label for label in rendered.labels if label.mark.index == highlight]
        assert highlighted and all(label.full for label in highlighted)
    # Labels never run into one another: a label's neighbours on its row are not label text.
    for label in rendered.labels:
        for column in (label.column - 1, label.column + len(label.text)):
            assert (label.row, column) not in cells, label
    # Nothing written over the frame.
    assert all(line.count("│") in (0, 2) for line in lines if "┤" not in line and "│" in line)


def test_label_placement_is_deterministic(crowded_model):
    first = render_roofline(crowded_model, 100, 24, palette=DEFAULT_PALETTE, highlight=3)
    assert first == render_roofline(crowded_model, 100, 24, palette=DEFAULT_PALETTE, highlight=3)
