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
from gpuscope.testing.roofline import cpu_results, h200_results


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
    assert "cuda:0 bf16 989TFLOP/s (datasheet)" in plain
    assert "cuda:0 DRAM triad 4.3TB/s" in plain
    assert "cuda:0 HBM3e 4.8TB/s (datasheet)" in plain
    assert "cpu fp32 2TFLOP/s" in plain
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
