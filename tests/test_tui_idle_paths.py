"""The shortcuts a dashboard sample takes (issue 15's idle cost) give what the general paths
give: the same alerts, history, chart rows and cell widths."""

from __future__ import annotations

import dataclasses
import math

import pytest
from rich.cells import cell_len
from tui_samples import sample

from gpuscope.schema.core import finite_or_none
from gpuscope.telemetry.alerts import evaluate
from gpuscope.tui.history import GPU_SERIES, History, gpu_key
from gpuscope.tui.widgets.chart import _bar_column, chart_lines
from gpuscope.tui.widgets.history_plot import resample_max
from gpuscope.tui.widgets.lines import _cells


def test_every_alert_kind_keeps_its_message() -> None:
    s = sample(3)
    s.gpus[0] = dataclasses.replace(
        s.gpus[0],
        temperature_gpu_c=91.0,
        temperature_memory_c=96.0,
        power_w=720.0,
        power_limit_w=700.0,
        memory_used_bytes=140 * 2**30,
        memory_total_bytes=141 * 2**30,
        ecc_uncorrected_errors=2,
        ecc_corrected_errors=150,
    )
    messages = {(a.kind, a.level): (a.message, a.value) for a in evaluate(s) if a.gpu == 0}
    assert messages[("temperature", "critical")] == ("GPU 0: 91°C (slowdown at 90°C)", 91.0)
    assert messages[("memory_temperature", "critical")] == ("GPU 0: memory 96°C (HBM max 95°C)", 96.0)
    assert messages[("power", "warning")] == ("GPU 0: 720 W of its 700 W cap", 720.0 / 700.0)
    assert messages[("memory_full", "critical")] == ("GPU 0: memory 99% full (1.0 GiB free)", 140 / 141)
    assert messages[("ecc_uncorrected", "critical")] == ("GPU 0: 2 uncorrected ECC errors", 2.0)
    assert messages[("ecc_corrected", "warning")] == ("GPU 0: 150 corrected ECC errors", 150.0)
    order = [a.kind for a in evaluate(s) if a.gpu == 0 and a.level == "critical"]
    assert order == ["temperature", "memory_temperature", "memory_full", "ecc_uncorrected"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1.5, 1.5), (-0.0, -0.0), (math.inf, None), (-math.inf, None), (math.nan, None), (3, 3.0), (True, None)],
)
def test_finite_or_none_takes_floats_first_with_the_same_rule(value: object, expected: float | None) -> None:
    got = finite_or_none(value)
    assert got == expected and (got is None) == (expected is None)


def test_history_rows_per_gpu_are_the_series_it_reports() -> None:
    history = History(capacity=10)
    first = sample(0)
    history.push(first)
    later = sample(1)
    added = dataclasses.replace(later.gpus[0], uuid="GPU-hot-added", index=7)
    history.push(dataclasses.replace(later, gpus=[*later.gpus, added]))  # a GPU appears late
    for gpu in later.gpus:
        for name in GPU_SERIES:
            expected = [finite_or_none(getattr(g, name)) for g in (first.gpus[gpu.index], gpu)]
            assert history.series("gpu", gpu_key(gpu), name) == expected
    assert history.series("gpu", "GPU-hot-added", "power_w") == [None, finite_or_none(added.power_w)]
    history.clear()
    history.push(first)
    assert history.series("gpu", gpu_key(first.gpus[0]), "power_w") == [finite_or_none(first.gpus[0].power_w)]


def _resample_reference(values: list[float | None], width: int) -> list[float | None]:
    count = len(values)
    out: list[float | None] = []
    for column in range(width):
        start = column * count // width
        end = max(start + 1, (column + 1) * count // width)
        present = [v for v in values[start:end] if v is not None]
        out.append(max(present) if present else None)
    return out


def test_resampling_without_gaps_keeps_each_shares_largest_value() -> None:
    values: list[float | None] = [math.sin(k / 5) * 50 + 50 for k in range(137)]
    for width in (1, 7, 75, 136):
        assert resample_max(values, width) == _resample_reference(values, width)
    values[40] = None
    assert resample_max(values, 75) == _resample_reference(values, 75)


def test_chart_rows_are_the_columns_stacked() -> None:
    values: list[float | None] = [None, -3.0, 0.0, 12.5, 50.0, 99.9, 100.0, 250.0, math.nan, 61.0]
    rows, width, top = 4, 12, 100.0
    lines = chart_lines("CPU", "61%", values, width, rows, top)
    heights = [
        None if v is None or not math.isfinite(v) else min(rows * 8, max(0, round(v / top * rows * 8))) for v in values
    ]
    columns = [_bar_column(height, rows) for height in heights]
    pad = " " * (width - len(values))
    assert [line[0][0] for line in lines[1:]] == [pad + "".join(cells) for cells in zip(*columns)]


def test_chart_columns_looked_up_are_the_ones_worked_out() -> None:
    """``chart_lines`` remembers each value's column per (scale, rows): a window that moves by a
    point a sample (values seen before, gaps, NaN, infinities, values past the scale, a scale
    that changes, no scale) gives the rows worked out afresh, and the memory stays bounded."""
    from gpuscope.tui.widgets import chart

    series: list[float | None] = [50 + 49 * math.sin(k / 3) for k in range(90)]
    series[10:12] = [None, math.nan]
    series[30:33] = [math.inf, -5.0, 180.0]
    width, rows = 40, 6
    for start in range(0, 50):
        window = series[start : start + 45]
        for top in (100.0, 150.0, None):
            lines = chart_lines("CPU", "x", window, width, rows, top)
            shown = chart.downsample_minmax(window, width)[-width:]
            finite = [v for v in shown if v is not None and math.isfinite(v)]
            scale = top if top else max(finite)
            heights = [
                None if v is None or not math.isfinite(v) else min(rows * 8, max(0, round(v / scale * rows * 8)))
                for v in shown
            ]
            columns = [_bar_column(height, rows) for height in heights]
            assert [line[0][0] for line in lines[1:]] == ["".join(cells) for cells in zip(*columns)], (start, top)
    assert len(chart._COLUMNS) <= chart._COLUMNS_SCALES
    assert all(len(known) <= chart._COLUMNS_VALUES + 1 for known in chart._COLUMNS.values())
    assert not any(value != value for known in chart._COLUMNS.values() for value in known)  # no NaN kept


@pytest.mark.parametrize(
    "text", ["util     80%", " ▁▂▃▄▅▆▇█ ", "45°C", "90.0 GB/s ×18", "ab…", "表示", "a\tb", "\x1b[0m", "é", ""]
)
def test_cells_counts_as_rich_does(text: str) -> None:
    assert _cells(text) == cell_len(text)
