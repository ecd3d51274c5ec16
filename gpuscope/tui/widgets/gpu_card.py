"""One card per GPU (or MIG instance): metric cells and history charts."""

from __future__ import annotations

from typing import Any, Callable

from textual.app import ComposeResult
from textual.containers import Grid, Vertical

from gpuscope.telemetry.records import GpuSample
from gpuscope.telemetry.values import Reason, Unavailable
from gpuscope.tui.format import (
    fmt_bytes,
    fmt_celsius,
    fmt_percent,
    fmt_rate,
    fmt_watts,
    si,
)
from gpuscope.tui.history import History, gpu_key
from gpuscope.tui.widgets.chart import HistoryChart
from gpuscope.tui.widgets.metric import MetricCell

__all__ = ["GpuCard", "GPU_CELLS", "gpu_title", "card_height"]

CELL_WIDTH = 24
CHART_WIDTH = 14


def _pair(first: Any, second: Any, fmt: Callable[[Any], str], unit: str = "") -> Any:
    """``first/second unit`` when both are known, ``first unit`` when only the first is."""
    if isinstance(first, Unavailable):
        return first
    if isinstance(second, Unavailable) or second is None:
        return f"{fmt(first)}{unit}"
    return f"{fmt(first)}/{fmt(second)}{unit}"


def _memory(g: GpuSample) -> Any:
    if isinstance(g.memory_used_bytes, Unavailable):
        return g.memory_used_bytes
    if isinstance(g.memory_total_bytes, Unavailable) or not g.memory_total_bytes:
        return fmt_bytes(g.memory_used_bytes)
    used, total = g.memory_used_bytes, g.memory_total_bytes
    return f"{used / 1e9:.1f}/{total / 1e9:.0f} GB {100 * used / total:.0f}%"


def _dram(g: GpuSample) -> Any:
    if isinstance(g.dram_bandwidth_bytes_per_s, Unavailable):
        return g.dram_bandwidth_bytes_per_s
    text = fmt_rate(g.dram_bandwidth_bytes_per_s)
    if not isinstance(g.dram_bandwidth_percent_of_peak, Unavailable):
        text += f" {g.dram_bandwidth_percent_of_peak:.0f}%"
    return text


def _throttle(g: GpuSample) -> Any:
    reasons = g.throttle_reasons
    if isinstance(reasons, Unavailable):
        return reasons
    return ", ".join(reasons) if reasons else "none"


def _ecc(g: GpuSample) -> Any:
    if isinstance(g.ecc_corrected_errors, Unavailable) and isinstance(g.ecc_uncorrected_errors, Unavailable):
        return g.ecc_corrected_errors
    corrected = "n/a" if isinstance(g.ecc_corrected_errors, Unavailable) else str(g.ecc_corrected_errors)
    uncorrected = "n/a" if isinstance(g.ecc_uncorrected_errors, Unavailable) else str(g.ecc_uncorrected_errors)
    return f"{corrected} corr {uncorrected} unc"


def _nvlink(value: Any, g: GpuSample) -> Any:
    if isinstance(value, Unavailable):
        return value
    links = "" if isinstance(g.nvlink_active_links, Unavailable) else f" ×{g.nvlink_active_links}"
    return fmt_rate(value) + links


def _pct(value: Any) -> Any:
    return value if isinstance(value, Unavailable) else fmt_percent(value)


def _rate(value: Any) -> Any:
    return value if isinstance(value, Unavailable) else fmt_rate(value)


#: (cell id, label, value function). A value function returns a string or an Unavailable.
GPU_CELLS: tuple[tuple[str, str, Callable[[GpuSample], Any]], ...] = (
    ("util", "util", lambda g: _pct(g.utilization_percent)),
    ("sm", "SM act", lambda g: _pct(g.sm_activity_percent)),
    ("tensor", "tensor", lambda g: _pct(g.tensor_activity_percent)),
    ("occupancy", "SM occ", lambda g: _pct(g.sm_occupancy_percent)),
    ("memory", "mem", _memory),
    ("membusy", "mem busy", lambda g: _pct(g.memory_busy_percent)),
    ("dram", "DRAM", _dram),
    ("pcie_tx", "PCIe tx", lambda g: _rate(g.pcie_tx_bytes_per_s)),
    ("pcie_rx", "PCIe rx", lambda g: _rate(g.pcie_rx_bytes_per_s)),
    ("nvlink_tx", "NVL tx", lambda g: _nvlink(g.nvlink_tx_bytes_per_s, g)),
    ("nvlink_rx", "NVL rx", lambda g: _nvlink(g.nvlink_rx_bytes_per_s, g)),
    ("smclk", "SM clk", lambda g: _pair(g.sm_clock_mhz, g.sm_clock_max_mhz, lambda v: f"{v:.0f}", " MHz")),
    ("memclk", "mem clk", lambda g: _pair(g.memory_clock_mhz, g.memory_clock_max_mhz, lambda v: f"{v:.0f}", " MHz")),
    ("power", "power", lambda g: _pair(g.power_w, g.power_limit_w, lambda v: f"{v:.0f}", " W")),
    ("temp", "temp", lambda g: g.temperature_gpu_c if isinstance(g.temperature_gpu_c, Unavailable) else fmt_celsius(g.temperature_gpu_c)),
    ("memtemp", "mem temp", lambda g: g.temperature_memory_c if isinstance(g.temperature_memory_c, Unavailable) else fmt_celsius(g.temperature_memory_c)),
    ("fan", "fan", lambda g: _pct(g.fan_speed_percent)),
    ("energy", "energy", lambda g: g.energy_j if isinstance(g.energy_j, Unavailable) else si(g.energy_j, "J")),
    ("ecc", "ECC", _ecc),
    ("throttle", "throttle", _throttle),
)
_LABEL_WIDTH = max(len(label) for _, label, _ in GPU_CELLS)


def gpu_title(g: GpuSample) -> str:
    """``GPU 0 · NVIDIA H200 · Hopper`` (``GPU 0 MIG 1.0 · ...`` for a MIG instance)."""
    if g.mig_parent_index is not None:
        head = f"GPU {g.mig_parent_index} MIG {g.mig_gpu_instance_id}.{g.mig_compute_instance_id}"
    else:
        head = f"GPU {g.index}"
    parts = [head, g.name]
    if g.architecture:
        parts.append(g.architecture)
    if g.state != "ok":
        parts.append(g.state.upper())
    return " · ".join(parts)


def card_height(width: int, tall: bool) -> int:
    """Rows a card takes at ``width`` columns (border, cells, gap, charts)."""
    columns = max(1, (width - 3 + 2) // (CELL_WIDTH + 2))
    return 2 + -(-len(GPU_CELLS) // columns) + 1 + (7 if tall else 3)


class GpuCard(Vertical):
    """Metric cells in a grid that reflows with the width, then history charts."""

    DEFAULT_CSS = """
    GpuCard { height: auto; border: round $primary 60%; border-title-color: $text; border-title-style: bold; padding: 0 0 0 1; }
    GpuCard > .cells { grid-size: 3; grid-gutter: 0 2; height: auto; grid-rows: 1; }
    GpuCard > .charts { grid-size: 5; grid-gutter: 0 1; height: auto; grid-rows: 3; margin-top: 1; }
    GpuCard > .charts > HistoryChart { height: 3; }
    """

    def __init__(self, gpu: GpuSample, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.key = gpu_key(gpu)
        self.border_title = gpu_title(gpu)
        self._pending: tuple[GpuSample, History, str | None] | None = None
        self._has_nvlink = not (
            isinstance(gpu.nvlink_tx_bytes_per_s, Unavailable) and gpu.nvlink_tx_bytes_per_s.reason == Reason.NOT_APPLICABLE
        )

    def compose(self) -> ComposeResult:
        with Grid(classes="cells"):
            for cell_id, label, _ in GPU_CELLS:
                yield MetricCell(label, label_width=_LABEL_WIDTH, id=f"cell-{cell_id}")
        with Grid(classes="charts"):
            yield HistoryChart("SM", maximum=100, id="chart-sm")
            yield HistoryChart("DRAM", id="chart-dram")
            yield HistoryChart("PCIe", id="chart-pcie")
            if self._has_nvlink:
                yield HistoryChart("NVL", id="chart-nvlink")
            yield HistoryChart("power", id="chart-power")

    def on_mount(self) -> None:
        self._cells = {cell.id.removeprefix("cell-"): cell for cell in self.query(MetricCell) if cell.id}
        self._charts = {chart.id.removeprefix("chart-"): chart for chart in self.query(HistoryChart) if chart.id}
        if self._pending is not None:
            self.show(*self._pending)

    def on_resize(self) -> None:
        inner = max(1, self.size.width)  # size is the content area (inside border and padding)
        cells = self.query_one(".cells", Grid)
        charts = self.query_one(".charts", Grid)
        columns = max(1, min(len(GPU_CELLS), (inner + 2) // (CELL_WIDTH + 2)))
        chart_count = len(self.query(HistoryChart))
        chart_columns = max(1, min(chart_count, (inner + 1) // (CHART_WIDTH + 1)))
        if cells.styles.grid_size_columns != columns:
            cells.styles.grid_size_columns = columns
        if charts.styles.grid_size_columns != chart_columns:
            charts.styles.grid_size_columns = chart_columns

    def show(self, gpu: GpuSample, history: History, series_colour: str | None = None) -> None:
        """Update every cell and chart from ``gpu`` (only changed ones redraw)."""
        if not hasattr(self, "_cells"):  # not mounted yet: show it once mounted
            self._pending = (gpu, history, series_colour)
            return
        self._pending = None
        self.border_title = gpu_title(gpu)
        self.set_class(gpu.state != "ok", "-lost")
        for cell_id, _, function in GPU_CELLS:
            try:
                value = function(gpu)
            except Exception as exc:  # noqa: BLE001 - a malformed record shows as n/a, not a crash
                value = Unavailable(Reason.ERROR, f"cannot show: {exc}")
            self._cells[cell_id].set_value(value)
        key = gpu_key(gpu)
        sm = history.series("gpu", key, "sm_activity_percent")
        sm_title = "SM"
        if not any(v is not None for v in sm):
            sm, sm_title = history.series("gpu", key, "utilization_percent"), "util"
        chart = self._charts["sm"]
        chart.title = sm_title
        current = next((v for v in reversed(sm) if v is not None), None)
        chart.set_data(sm, "n/a" if current is None or (sm and sm[-1] is None) else f"{current:.0f}%", colour=series_colour)
        peak = gpu.dram_peak_bytes_per_s if not isinstance(gpu.dram_peak_bytes_per_s, Unavailable) else None
        dram = history.series("gpu", key, "dram_bandwidth_bytes_per_s")
        self._charts["dram"].set_data(dram, _last_rate(dram), maximum=peak, colour=series_colour)
        pcie = _pairwise_sum(history.series("gpu", key, "pcie_tx_bytes_per_s"), history.series("gpu", key, "pcie_rx_bytes_per_s"))
        self._charts["pcie"].set_data(pcie, _last_rate(pcie), colour=series_colour)
        power = history.series("gpu", key, "power_w")
        limit = gpu.power_limit_w if not isinstance(gpu.power_limit_w, Unavailable) else None
        self._charts["power"].set_data(power, "n/a" if not power or power[-1] is None else fmt_watts(power[-1]), maximum=limit, colour=series_colour)
        if "nvlink" in self._charts:
            nvlink = _pairwise_sum(history.series("gpu", key, "nvlink_tx_bytes_per_s"), history.series("gpu", key, "nvlink_rx_bytes_per_s"))
            self._charts["nvlink"].set_data(nvlink, _last_rate(nvlink), colour=series_colour)


def _last_rate(values: list[float | None]) -> str:
    return "n/a" if not values or values[-1] is None else fmt_rate(values[-1])


def _pairwise_sum(a: list[float | None], b: list[float | None]) -> list[float | None]:
    return [None if x is None or y is None else x + y for x, y in zip(a, b)]
