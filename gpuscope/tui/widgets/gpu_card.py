"""One card per GPU (or MIG instance): metric cells and history charts; a dense card (the key
cells only, no charts) when many GPUs share the screen."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.containers import Vertical

from gpuscope.telemetry.records import GpuSample
from gpuscope.telemetry.values import Metric, Reason, Unavailable
from gpuscope.textsafe import safe_text
from gpuscope.tui.format import (
    fmt_celsius,
    fmt_gib,
    fmt_percent,
    fmt_rate,
    si,
)
from gpuscope.tui.history import History, gpu_key
from gpuscope.tui.widgets.cell_grid import CellGrid, CellValue
from gpuscope.tui.widgets.chart_row import ChartData, ChartRow
from gpuscope.tui.widgets.history_plot import scale_percent

__all__ = [
    "GpuCard",
    "DenseGpuCard",
    "GPU_CELLS",
    "DENSE_CELLS",
    "gpu_title",
    "card_height",
    "dense_card_height",
    "make_card",
]

CELL_WIDTH = 24
CHART_WIDTH = 14


def _pair(first: Metric[float], second: Metric[float] | None, fmt: Callable[[float], str], unit: str = "") -> CellValue:
    """``first/second unit`` when both are known, ``first unit`` when only the first is."""
    if isinstance(first, Unavailable):
        return first
    if isinstance(second, Unavailable) or second is None:
        return f"{fmt(first)}{unit}"
    return f"{fmt(first)}/{fmt(second)}{unit}"


def _memory(g: GpuSample) -> CellValue:
    if isinstance(g.memory_used_bytes, Unavailable):
        return g.memory_used_bytes
    if isinstance(g.memory_total_bytes, Unavailable) or not g.memory_total_bytes:
        return fmt_gib(g.memory_used_bytes)
    used, total = g.memory_used_bytes, g.memory_total_bytes
    used_gib = f"{used / 2**30:.0f}" if used >= 100 * 2**30 else f"{used / 2**30:.1f}"  # fits the cell: never cut
    return f"{used_gib}/{total / 2**30:.0f}GiB {100 * used / total:.0f}%"


def _dram(g: GpuSample) -> CellValue:
    if isinstance(g.dram_bandwidth_bytes_per_s, Unavailable):
        return g.dram_bandwidth_bytes_per_s
    text = fmt_rate(g.dram_bandwidth_bytes_per_s)
    if not isinstance(g.dram_bandwidth_percent_of_peak, Unavailable):
        text += f" {g.dram_bandwidth_percent_of_peak:.0f}%"
    return text


def _throttle(g: GpuSample) -> CellValue:
    reasons = g.throttle_reasons
    if isinstance(reasons, Unavailable):
        return reasons
    return ", ".join(reasons) if reasons else "none"


def _ecc(g: GpuSample) -> CellValue:
    if isinstance(g.ecc_corrected_errors, Unavailable) and isinstance(g.ecc_uncorrected_errors, Unavailable):
        return g.ecc_corrected_errors
    corrected = "n/a" if isinstance(g.ecc_corrected_errors, Unavailable) else str(g.ecc_corrected_errors)
    uncorrected = "n/a" if isinstance(g.ecc_uncorrected_errors, Unavailable) else str(g.ecc_uncorrected_errors)
    return f"{corrected} corr {uncorrected} unc"


def _nvlink(value: Metric[float], g: GpuSample) -> CellValue:
    if isinstance(value, Unavailable):
        return value
    links = "" if isinstance(g.nvlink_active_links, Unavailable) else f" ×{g.nvlink_active_links}"
    return fmt_rate(value) + links


def _pct(value: Metric[float]) -> CellValue:
    return value if isinstance(value, Unavailable) else fmt_percent(value)


def _rate(value: Metric[float]) -> CellValue:
    return value if isinstance(value, Unavailable) else fmt_rate(value)


#: (cell id, label, value function). A value function returns a string or an Unavailable.
GPU_CELLS: tuple[tuple[str, str, Callable[[GpuSample], CellValue]], ...] = (
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
    (
        "temp",
        "temp",
        lambda g: (
            g.temperature_gpu_c if isinstance(g.temperature_gpu_c, Unavailable) else fmt_celsius(g.temperature_gpu_c)
        ),
    ),
    (
        "memtemp",
        "mem temp",
        lambda g: (
            g.temperature_memory_c
            if isinstance(g.temperature_memory_c, Unavailable)
            else fmt_celsius(g.temperature_memory_c)
        ),
    ),
    ("fan", "fan", lambda g: _pct(g.fan_speed_percent)),
    ("energy", "energy", lambda g: g.energy_j if isinstance(g.energy_j, Unavailable) else si(g.energy_j, "J")),
    ("ecc", "ECC", _ecc),
    ("throttle", "throttle", _throttle),
)


def _xgmi(value: Metric[float], g: GpuSample) -> CellValue:
    if isinstance(value, Unavailable):
        return value
    links = "" if isinstance(g.xgmi_active_links, Unavailable) else f" ×{g.xgmi_active_links}"
    return fmt_rate(value) + links


#: An AMD GPU's cells: what AMD SMI gives in place of NVIDIA-only readings (no SM/tensor
#: activity, no DRAM bytes; PCIe as one total; XGMI for NVLink; the hotspot sensor).
_AMD_REPLACED = {"sm", "tensor", "occupancy", "dram", "pcie_tx", "pcie_rx", "nvlink_tx", "nvlink_rx", "fan"}
AMD_CELLS: tuple[tuple[str, str, Callable[[GpuSample], CellValue]], ...] = (
    *(cell for cell in GPU_CELLS[:5] if cell[0] not in _AMD_REPLACED),
    ("membusy", "mem busy", lambda g: _pct(g.memory_busy_percent)),
    ("pcie", "PCIe", lambda g: _rate(g.pcie_bytes_per_s)),  # rx and tx together: AMD SMI gives one total
    ("xgmi_tx", "XGMI tx", lambda g: _xgmi(g.xgmi_tx_bytes_per_s, g)),
    ("xgmi_rx", "XGMI rx", lambda g: _xgmi(g.xgmi_rx_bytes_per_s, g)),
    *(
        (cell_id, {"smclk": "GFX clk", "temp": "edge"}.get(cell_id, label), value)  # AMD's names for them
        for cell_id, label, value in GPU_CELLS
        if cell_id in ("smclk", "memclk", "power", "temp")
    ),
    (
        "hotspot",
        "hotspot",
        lambda g: (
            g.temperature_hotspot_c
            if isinstance(g.temperature_hotspot_c, Unavailable)
            else fmt_celsius(g.temperature_hotspot_c)
        ),
    ),
    *(cell for cell in GPU_CELLS if cell[0] in ("memtemp", "energy", "ecc", "throttle")),
)
_LABEL_WIDTH = max(len(label) for _, label, _ in (*GPU_CELLS, *AMD_CELLS))
#: The cells of a dense card (8 GPUs on one screen).
DENSE_CELLS = tuple(
    cell
    for cell in GPU_CELLS
    if cell[0] in ("util", "sm", "memory", "dram", "pcie_rx", "nvlink_tx", "power", "temp", "throttle")
)
AMD_DENSE_CELLS = tuple(
    cell
    for cell in AMD_CELLS
    if cell[0] in ("util", "memory", "membusy", "pcie", "xgmi_tx", "power", "hotspot", "throttle")
)


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
    return safe_text(" · ".join(parts))  # escaped before Textual's title drops a BEL unseen


def _cell_columns(width: int) -> int:
    return max(1, (width - 3 + 2) // (CELL_WIDTH + 2))


def card_height(width: int, tall: bool, gap: int = 1) -> int:
    """Rows a card takes at ``width`` columns (border, cells, gap, charts)."""
    return 2 + -(-len(GPU_CELLS) // _cell_columns(width)) + gap + (CHART_ROWS_TALL if tall else CHART_ROWS)


def dense_card_height(width: int) -> int:
    """Rows a dense card takes at ``width`` columns (border, cells)."""
    return 2 + -(-len(DENSE_CELLS) // _cell_columns(width))


#: Chart heights (title, bars, time axis).
CHART_ROWS = 4
CHART_ROWS_TALL = 7


class GpuCard(Vertical):
    """A :class:`CellGrid` of metrics that reflows with the width, then a :class:`ChartRow` of
    history charts (taller with the ``-tall`` class)."""

    DEFAULT_CSS = """
    GpuCard { height: auto; border: round $primary 60%; border-title-color: $text; \
border-title-style: bold; padding: 0 0 0 1; }
    GpuCard > ChartRow { margin-top: 1; }
    """

    def __init__(self, gpu: GpuSample, *, dense: bool = False, id: str | None = None) -> None:
        super().__init__(id=id, classes="gpu-card")
        self.dense = dense
        self.amd = gpu.vendor == "amd"
        if self.amd:
            self._cell_specs = AMD_DENSE_CELLS if dense else AMD_CELLS
        else:
            self._cell_specs = DENSE_CELLS if dense else GPU_CELLS
        self.key = gpu_key(gpu)
        self.border_title = gpu_title(gpu)
        self._pending: tuple[GpuSample, History, str | None, float] | None = None
        #: The cells and charts, once mounted (a sample can come first: it waits in _pending).
        self._grid: CellGrid | None = None
        self._charts: ChartRow | None = None
        self._has_nvlink = self.amd or not (
            isinstance(gpu.nvlink_tx_bytes_per_s, Unavailable)
            and gpu.nvlink_tx_bytes_per_s.reason == Reason.NOT_APPLICABLE
        )  # on an AMD GPU the link chart is XGMI's

    def compose(self) -> ComposeResult:
        yield CellGrid(
            [(cell_id, label) for cell_id, label, _ in self._cell_specs], cell_width=CELL_WIDTH, gap=2, id="cells"
        )
        if not self.dense:
            link = "XGMI" if self.amd else "NVL"
            titles = ["util" if self.amd else "SM", "mem busy" if self.amd else "DRAM", "PCIe"]
            titles += ([link] if self._has_nvlink else []) + ["power"]
            yield ChartRow(titles, min_width=CHART_WIDTH, id="charts")

    @property
    def cells(self) -> CellGrid:
        return self.query_one(CellGrid)

    def on_mount(self) -> None:
        self._grid = self.query_one(CellGrid)
        self._charts = None if self.dense else self.query_one(ChartRow)
        if self._charts is not None:
            self._charts.chart_height = CHART_ROWS_TALL if self.has_class("-tall") else CHART_ROWS
        if self._pending is not None:
            self.show(*self._pending)

    def on_cell_grid_explained(self, event: CellGrid.Explained) -> None:
        """Name the GPU in the explanation the screen's hint line shows."""
        if event.text:
            name = " ".join(str(self.border_title).split(" · ")[:2])  # "GPU 1 NVIDIA A100-SXM4-80GB"
            event.text = f"{name} · {event.text}"

    def set_tall(self, tall: bool) -> None:
        """Taller charts when the terminal has the rows for them."""
        self.set_class(tall, "-tall")
        if self._charts is not None:
            self._charts.chart_height = CHART_ROWS_TALL if tall else CHART_ROWS

    def show(self, gpu: GpuSample, history: History, series_colour: str | None = None, window_s: float = 60.0) -> None:
        """Update the cells and charts from ``gpu``; the charts span the last ``window_s``
        seconds (only what changed redraws)."""
        if self._grid is None:  # not mounted yet: show it once mounted
            self._pending = (gpu, history, series_colour, window_s)
            return
        self._pending = None
        title = gpu_title(gpu)
        if self.border_title != title:
            self.border_title = title
        self.set_class(gpu.state != "ok", "-lost")
        self._grid.set_values(_cell_values(self._cell_specs, gpu))
        if self._charts is not None:
            points = history.points_in(window_s)
            self._charts.set_charts(
                _charts(gpu, history, self._has_nvlink, points), colour=series_colour, window_s=window_s
            )


def _number(value: Metric[float] | None) -> float | None:
    return None if isinstance(value, Unavailable) or value is None else float(value)


#: PCIe GB/s per lane and direction by generation (after encoding overhead).
_PCIE_LANE_BYTES_PER_S = {1: 0.25e9, 2: 0.5e9, 3: 0.985e9, 4: 1.969e9, 5: 3.938e9, 6: 7.563e9}


def _pcie_peak(gpu: GpuSample) -> float | None:
    """Both directions of the link at its current generation and width, bytes/s."""
    generation, width = _number(gpu.pcie_link_generation), _number(gpu.pcie_link_width)
    if generation is None or width is None or int(generation) not in _PCIE_LANE_BYTES_PER_S:
        return None
    return 2 * _PCIE_LANE_BYTES_PER_S[int(generation)] * width


def _nvlink_peak(gpu: GpuSample) -> float | None:
    link, links = _number(gpu.nvlink_link_peak_bytes_per_s), _number(gpu.nvlink_active_links)
    return 2 * link * links if link and links else None


def _xgmi_peak(gpu: GpuSample) -> float | None:
    link, links = _number(gpu.xgmi_link_peak_bytes_per_s), _number(gpu.xgmi_active_links)
    return 2 * link * links if link and links else None


def _amd_charts(gpu: GpuSample, window: Callable[[str], list[float | None]]) -> list[ChartData]:
    """An AMD GPU's charts: GFX activity, memory-controller activity, PCIe (one total), XGMI."""
    util, busy = window("utilization_percent"), window("memory_busy_percent")
    return [
        ChartData("util", _last(util, scale_percent), tuple(util), 100.0, scale_percent),
        ChartData("mem busy", _last(busy, scale_percent), tuple(busy), 100.0, scale_percent),
        _rate_chart("PCIe", window("pcie_bytes_per_s"), _pcie_peak(gpu)),
        _rate_chart(
            "XGMI", _pairwise_sum(window("xgmi_tx_bytes_per_s"), window("xgmi_rx_bytes_per_s")), _xgmi_peak(gpu)
        ),
    ]


def _charts(gpu: GpuSample, history: History, has_nvlink: bool, points: int) -> list[ChartData]:
    key = gpu_key(gpu)

    def window(name: str) -> list[float | None]:
        return history.window(("gpu", key, name), points)

    if gpu.vendor == "amd":
        power = window("power_w")
        return [
            *_amd_charts(gpu, window),
            ChartData("power", _last(power, _compact_watts), tuple(power), _number(gpu.power_limit_w), _compact_watts),
        ]
    sm, sm_title = window("sm_activity_percent"), "SM"
    if not any(v is not None for v in sm):
        sm, sm_title = window("utilization_percent"), "util"
    charts = [
        ChartData(sm_title, _last(sm, scale_percent), tuple(sm), 100.0, scale_percent),
        _rate_chart("DRAM", window("dram_bandwidth_bytes_per_s"), _number(gpu.dram_peak_bytes_per_s)),
        _rate_chart(
            "PCIe", _pairwise_sum(window("pcie_tx_bytes_per_s"), window("pcie_rx_bytes_per_s")), _pcie_peak(gpu)
        ),
    ]
    if has_nvlink:
        charts.append(
            _rate_chart(
                "NVL",
                _pairwise_sum(window("nvlink_tx_bytes_per_s"), window("nvlink_rx_bytes_per_s")),
                _nvlink_peak(gpu),
            )
        )
    power = window("power_w")
    charts.append(
        ChartData("power", _last(power, _compact_watts), tuple(power), _number(gpu.power_limit_w), _compact_watts)
    )
    return charts


def _compact_watts(value: float) -> str:
    """``448W``: watts without the space, as the chart's scale (``0–700W``) writes them."""
    return f"{value:.0f}W"


def _compact_rate(value: float) -> str:
    """``3.05TB/s``: a rate without the space, so chart titles fit 14 columns."""
    return si(value, "B/s").replace(" ", "")


def _rate_chart(title: str, values: list[float | None], peak: float | None) -> ChartData:
    return ChartData(title, _last(values, _compact_rate), tuple(values), peak, _compact_rate)


def _last(values: list[float | None], fmt: Callable[[float], str]) -> str:
    return "n/a" if not values or values[-1] is None else fmt(values[-1])


def _pairwise_sum(a: list[float | None], b: list[float | None]) -> list[float | None]:
    return [None if x is None or y is None else x + y for x, y in zip(a, b)]


def _cell_values(
    specs: tuple[tuple[str, str, Callable[[GpuSample], CellValue]], ...], gpu: GpuSample
) -> dict[str, CellValue]:
    values: dict[str, CellValue] = {}
    for cell_id, _, function in specs:
        try:
            values[cell_id] = function(gpu)
        except Exception as exc:  # noqa: BLE001 - a malformed record shows as n/a, not a crash
            values[cell_id] = Unavailable(Reason.ERROR, f"cannot show: {exc}")
    return values


class DenseGpuCard(CellGrid):
    """The key cells of one GPU in a bordered box, as one widget (eight of them share 160x48:
    the redraw cost is per widget). Same interface as :class:`GpuCard`."""

    DEFAULT_CSS = """
    DenseGpuCard { height: auto; border: round $primary 60%; border-title-color: $text; \
border-title-style: bold; padding: 0 0 0 1; }
    DenseGpuCard.-lost { border: round $error; border-title-color: $error; }
    """
    dense = True
    merge_changed_lines = True  # one refresh per card and sample

    def __init__(self, gpu: GpuSample, *, id: str | None = None) -> None:
        self._cell_specs = AMD_DENSE_CELLS if gpu.vendor == "amd" else DENSE_CELLS
        super().__init__(
            [(cell_id, label) for cell_id, label, _ in self._cell_specs], cell_width=CELL_WIDTH, gap=2, id=id
        )
        self.add_class("gpu-card")
        self.key = gpu_key(gpu)
        self.border_title = gpu_title(gpu)

    @property
    def cells(self) -> CellGrid:
        return self

    def set_tall(self, tall: bool) -> None:
        """Dense cards have no charts."""

    def on_cell_grid_explained(self, event: CellGrid.Explained) -> None:
        if event.text and not event.text.startswith("GPU "):
            name = " ".join(str(self.border_title).split(" · ")[:2])
            event.text = f"{name} · {event.text}"

    def show(self, gpu: GpuSample, history: History, series_colour: str | None = None, window_s: float = 60.0) -> None:
        """Update the cells from ``gpu`` (only what changed redraws)."""
        title = gpu_title(gpu)
        if self.border_title != title:
            self.border_title = title
        lost = gpu.state != "ok"
        if lost != self.has_class("-lost"):
            self.set_class(lost, "-lost")
        self.set_values(_cell_values(self._cell_specs, gpu))


def make_card(gpu: GpuSample, dense: bool) -> GpuCard | DenseGpuCard:
    """The card for ``gpu``: dense (cells only) or full (cells and charts)."""
    return DenseGpuCard(gpu) if dense else GpuCard(gpu)
