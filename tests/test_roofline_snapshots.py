"""SVG snapshots of the roofline as the terminal prints it and as the report draws it, for three
pictures: a CPU only; a CPU, an H200 (measured) and an A100 (datasheet); a dozen workloads on
them. Update after an intended change with ``pytest tests/test_roofline_snapshots.py
--snapshot-update`` and look at the pictures (tests/__snapshots__/test_roofline_snapshots/:
``rsvg-convert`` turns the terminal ones into PNG; the report ones use the page's CSS
variables, so view them inside a report)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from support.roofline import CHART_PICTURES, typed
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode


class SvgExtension(SingleFileSnapshotExtension):
    _file_extension = "svg"
    _write_mode = WriteMode.TEXT


PICTURES = CHART_PICTURES


def _cpu() -> Any:
    """This test's CPU: the cpu_only picture's model (testing.roofline.laptop_results) at 2.45 GHz
    (157 GFLOP/s fp32 datasheet, so its measured 204 GFLOP/s is flagged above datasheet), whatever
    machine runs the test."""
    from gpuscope.telemetry.cpuinfo import CpuInfo

    return CpuInfo(
        "AMD EPYC",
        "AuthenticAMD",
        "x86_64",
        2,
        2,
        2450.0,
        2450.0,
        simd="avx2",
        fp32_flop_per_cycle_per_core=32,
        max_frequency_source="test",
    )


def _model(name: str) -> Any:
    from gpuscope.roofline.loading import build_model

    return build_model(typed([(f"{name}.json", PICTURES[name]())]), local_cpu=_cpu())


@pytest.mark.parametrize("name", list(PICTURES))
def test_terminal_chart(name: str, snapshot: Any) -> None:
    from rich.console import Console
    from rich.text import Text

    from gpuscope.roofline.paint_text import DEFAULT_PALETTE, render_roofline

    text = render_roofline(_model(name), 100, 26, palette=DEFAULT_PALETTE)
    console = Console(record=True, width=100, force_terminal=True, color_system="truecolor", file=io.StringIO())
    console.print(Text.from_ansi(text))
    assert console.export_svg(title=f"gpuscope roofline ({name})") == snapshot(extension_class=SvgExtension)


@pytest.mark.parametrize("name", list(PICTURES))
def test_report_chart(name: str, snapshot: Any) -> None:
    from gpuscope.report.charts import roofline_svg
    from gpuscope.report.roofview import roofline_view

    svg = roofline_svg(roofline_view(typed([(f"{name}.json", PICTURES[name]())]), local_cpu=_cpu()))
    assert svg is not None
    assert svg == snapshot(extension_class=SvgExtension)
