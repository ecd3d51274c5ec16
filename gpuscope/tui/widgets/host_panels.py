"""The host side of the dashboard: CPU (per-core bars), memory, network and InfiniBand."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING

from rich.style import Style
from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.geometry import Size
from textual.widget import Widget

from gpuscope.telemetry.records import HostSample
from gpuscope.telemetry.values import Unavailable
from gpuscope.tui.format import NA, bar, fmt_bytes, fmt_percent, fmt_rate, reason_text
from gpuscope.tui.history import History
from gpuscope.tui.widgets.chart_row import ChartData, ChartRow
from gpuscope.tui.widgets.history_plot import scale_percent
from gpuscope.tui.widgets.lines import LineWidget, Run, set_title
from gpuscope.tui.widgets.metric import MetricCell

if TYPE_CHECKING:
    from gpuscope.tui.themes import ChartPalette

__all__ = ["CoreBars", "CpuPanel", "MemoryPanel", "NetworkPanel"]


def _palette(widget: Widget) -> ChartPalette:
    from gpuscope.tui.themes import ChartPalette

    return getattr(widget.app, "chart_palette", None) or ChartPalette()


class CoreBars(LineWidget):
    """Per-core utilization bars in as many columns as fit; height follows the core count."""

    DEFAULT_CSS = """
    CoreBars { height: auto; width: 1fr; }
    """
    ENTRY_WIDTH = 22

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._levels: tuple[float | None, ...] = ()
        self._reasons: dict[int, str] = {}

    def set_levels(self, host: HostSample) -> None:
        levels = tuple(
            None if isinstance(core.utilization_percent, Unavailable) else float(core.utilization_percent)
            for core in host.cores
        )
        if levels == self._levels:
            return
        reasons = {
            core.core: reason_text(core.utilization_percent)
            for core in host.cores
            if isinstance(core.utilization_percent, Unavailable)
        }
        if reasons != self._reasons:
            self._reasons = reasons
            self.tooltip = "\n".join(f"core {core}: {why}" for core, why in sorted(reasons.items())[:8]) or None
        relayout = len(levels) != len(self._levels)
        self._levels = levels
        self.invalidate(layout=relayout)

    def _columns(self, width: int) -> int:
        return max(1, width // self.ENTRY_WIDTH)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, math.ceil(len(self._levels) / self._columns(width)))

    def build_lines(self, width: int, height: int) -> list[list[Run]]:
        if not self._levels:
            return [[("no per-core data", _ITALIC)]]
        columns = self._columns(width)
        entry = width // columns
        bar_width = max(3, entry - 11)
        palette = _palette(self)
        rows = max(1, math.ceil(len(self._levels) / columns))
        lines: list[list[Run]] = []
        for row in range(rows):
            runs: list[Run] = []
            for column in range(columns):
                index = column * rows + row  # fill down the columns, like htop
                if index >= len(self._levels):
                    break
                level = self._levels[index]
                runs.append((f"{index:>3} ", _DIM))
                if level is None:
                    runs.append((NA.ljust(bar_width + 6), _DIM_ITALIC))
                else:
                    filled = bar(level / 100, bar_width).rstrip()
                    runs.append((filled, _colour_style(palette.bar_colour(level))))
                    runs.append(("·" * (bar_width - len(filled)), _DIM))
                    runs.append((f"{level:>4.0f}% ", None))
                runs.append((" " * max(0, entry - (bar_width + 10)), None))
            lines.append(runs)
        return lines


_DIM = Style(dim=True)
_ITALIC = Style(italic=True)
_DIM_ITALIC = Style(dim=True, italic=True)


@lru_cache(maxsize=64)
def _colour_style(colour: str) -> Style:
    return Style.parse(colour)


class CpuPanel(Vertical):
    """CPU model, total utilization, load, a history chart and per-core bars."""

    DEFAULT_CSS = """
    CpuPanel { height: auto; border: round $secondary; border-title-style: bold; padding: 0 1; }
    CpuPanel > .cells { grid-size: 3; grid-gutter: 0 2; height: auto; grid-rows: 1; }
    """
    #: Rows of the CPU chart (title, bars, time axis) unless the dashboard gives it more.
    CHART_ROWS = 4

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._total = MetricCell("CPU", label_width=5, id="cpu-total")
        self._load = MetricCell("load", label_width=5, id="cpu-load")
        self._freq = MetricCell("freq", label_width=5, id="cpu-freq")
        self._chart = ChartRow(["CPU"], min_width=20, chart_height=self.CHART_ROWS, id="cpu-chart")
        self._cores = CoreBars(id="cpu-cores")

    def compose(self) -> ComposeResult:
        with Grid(classes="cells"):
            yield self._total
            yield self._load
            yield self._freq
        yield self._chart
        yield self._cores

    def on_resize(self) -> None:
        columns = max(1, min(3, (self.size.width + 2) // 26))
        grid = self.query_one(".cells", Grid)
        if grid.styles.grid_size_columns != columns:
            grid.styles.grid_size_columns = columns

    def set_chart_rows(self, rows: int) -> None:
        """Give the CPU chart ``rows`` rows (the dashboard fills spare rows this way)."""
        self._chart.chart_height = max(self.CHART_ROWS, rows)

    @property
    def chart_rows(self) -> int:
        return self._chart.chart_height

    def show(self, host: HostSample, history: History, window_s: float = 60.0) -> None:
        physical = "" if isinstance(host.physical_cores, Unavailable) else f" ({host.physical_cores} physical)"
        set_title(self, f"CPU · {host.cpu_model} · {host.logical_cores} cores{physical}")
        self._total.set_value(host.cpu_utilization_percent, fmt_percent)
        loads = (host.load_average_1m, host.load_average_5m, host.load_average_15m)
        load_cell = self._load
        if isinstance(loads[0], Unavailable):
            load_cell.set_value(loads[0])
        else:
            load_cell.set_text(" ".join(NA if isinstance(v, Unavailable) else f"{v:.2f}" for v in loads))
        freqs = [c.frequency_mhz for c in host.cores if not isinstance(c.frequency_mhz, Unavailable)]
        freq_cell = self._freq
        if freqs:
            freq_cell.set_text(f"{sum(freqs) / len(freqs):.0f} MHz")
        elif host.cores and isinstance(host.cores[0].frequency_mhz, Unavailable):
            freq_cell.set_value(host.cores[0].frequency_mhz)
        else:
            freq_cell.set_text(NA, reason="no per-core data")
        values = history.window(("host", "cpu"), history.points_in(window_s))
        current = NA if not values or values[-1] is None else scale_percent(values[-1])
        chart = ChartData("CPU", current, tuple(values), 100.0, scale_percent)
        self._chart.set_charts([chart], colour=_palette(self).series[0], window_s=window_s)
        self._cores.set_levels(host)


class MemoryPanel(Vertical):
    """Host memory and swap, as bars."""

    DEFAULT_CSS = """
    MemoryPanel { height: auto; border: round $secondary; border-title-style: bold; padding: 0 1; }
    MemoryPanel > MetricCell { width: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        #: The host shown last (the bars are drawn again at a new width) and the bars' width.
        self._host: HostSample | None = None
        self._bar_width: int | None = None
        self._used = MetricCell("used", label_width=5, id="mem-used")
        self._swap = MetricCell("swap", label_width=5, id="mem-swap")

    def compose(self) -> ComposeResult:
        yield self._used
        yield self._swap

    def on_resize(self) -> None:
        self._bar_width = max(6, self.size.width - 34)
        if self._host is not None:  # the bars follow the width
            self.show(self._host)

    def show(self, host: HostSample) -> None:
        self._host = host
        set_title(self, "Memory")
        palette = _palette(self)
        width = self._bar_width or max(6, self.size.width - 34)
        total, used = host.memory_total_bytes, host.memory_used_bytes
        if isinstance(used, Unavailable):
            self._used.set_value(used)
        elif total and not isinstance(total, Unavailable):
            percent = 100 * used / total
            suffix = (bar(percent / 100, width), palette.bar_colour(percent))
            text = f"{fmt_bytes(used):>8}/{fmt_bytes(total):<8} {percent:3.0f}%"
            self._used.set_text(text, suffix=suffix)
        else:
            self._used.set_text(NA, reason="memory total not reported")
        swap_cell = self._swap
        if isinstance(host.swap_total_bytes, Unavailable):
            swap_cell.set_value(host.swap_total_bytes)
        elif host.swap_total_bytes == 0:
            swap_cell.set_text("none configured")
        elif isinstance(host.swap_used_bytes, Unavailable):
            swap_cell.set_value(host.swap_used_bytes)
        else:
            percent = 100 * host.swap_used_bytes / host.swap_total_bytes
            suffix = (bar(percent / 100, width), palette.bar_colour(percent))
            swap_cell.set_text(
                f"{fmt_bytes(host.swap_used_bytes):>8}/{fmt_bytes(host.swap_total_bytes):<8} {percent:3.0f}%",
                suffix=suffix,
            )


def _rate_text(value: object) -> str:
    return NA if isinstance(value, Unavailable) else fmt_rate(float(value))  # type: ignore[arg-type]


def _link_line(name: str, rx: object, tx: object, suffix: str, reasons: list[str]) -> str:
    """One link's line (``name  rx 1.2 GB/s  tx 3.4 MB/s<suffix>``); why a rate is missing goes to ``reasons``."""
    for label, value in (("rx", rx), ("tx", tx)):
        if isinstance(value, Unavailable):
            reasons.append(f"{name} {label}: {reason_text(value)}")
    return f"{name[:14]:<14} rx {_rate_text(rx):>10}  tx {_rate_text(tx):>10}{suffix}"


class NetworkLines(LineWidget):
    """One line per network interface and InfiniBand port; unavailable rates read n/a with the
    reasons in the tooltip."""

    DEFAULT_CSS = """
    NetworkLines { height: auto; width: 1fr; }
    """
    MAX_LINES = 8

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._texts: tuple[str, ...] = ()
        self.down_count = 0

    def set_host(self, host: HostSample) -> None:
        lines: list[str] = []
        reasons: list[str] = []
        nics = [nic for nic in host.nics if nic.name != "lo" and nic.is_up is not False]
        self.down_count = sum(1 for nic in host.nics if nic.is_up is False)
        for nic in nics:
            state = "" if isinstance(nic.is_up, Unavailable) else ("" if nic.is_up else " (down)")
            speed = (
                ""
                if isinstance(nic.speed_mbit_per_s, Unavailable) or not nic.speed_mbit_per_s
                else f" {nic.speed_mbit_per_s / 1000:g} Gbit/s"
            )
            lines.append(_link_line(nic.name, nic.rx_bytes_per_s, nic.tx_bytes_per_s, f"{speed}{state}", reasons))
        for port in host.infiniband_ports:
            rate = "" if isinstance(port.rate_gbit_per_s, Unavailable) else f" {port.rate_gbit_per_s:g} Gbit/s"
            kind = "IB" if port.link_layer == "InfiniBand" else "RoCE"
            name = f"{port.device}/{port.port}"
            lines.append(
                _link_line(name, port.rx_bytes_per_s, port.tx_bytes_per_s, f" {kind}{rate} {port.state}", reasons)
            )
        if not lines:
            lines = ["no network interfaces besides loopback"]
        if len(lines) > self.MAX_LINES:
            hidden = len(lines) - self.MAX_LINES + 1
            lines = lines[: self.MAX_LINES - 1] + [f"… {hidden} more (see `gpuscope log`)"]
        tooltip = "\n".join(reasons[:10]) or None
        if tooltip != self.tooltip:
            self.tooltip = tooltip
        new = tuple(lines)
        if new != self._texts:
            relayout = len(new) != len(self._texts)
            self._texts = new
            self.invalidate(layout=relayout)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, len(self._texts))

    def build_lines(self, width: int, height: int) -> list[list[Run]]:
        return [[(text if len(text) <= width else text[: max(0, width - 1)] + "…", None)] for text in self._texts]


class NetworkPanel(Vertical):
    """Network interfaces and InfiniBand/RoCE ports with receive/transmit rates."""

    DEFAULT_CSS = """
    NetworkPanel { height: auto; border: round $secondary; border-title-style: bold; padding: 0 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._lines = NetworkLines(id="net-lines")

    def compose(self) -> ComposeResult:
        yield self._lines

    def show(self, host: HostSample) -> None:
        lines = self._lines
        lines.set_host(host)
        ib = f" · {len(host.infiniband_ports)} IB/RoCE ports" if host.infiniband_ports else ""
        down = f" · {lines.down_count} down, not shown" if lines.down_count else ""
        set_title(self, f"Network{ib}{down}")
