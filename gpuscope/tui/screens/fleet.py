"""The fleet screens: the grid of every node and GPU (sort, filter, select) and one node's
drill-down (its GPUs in a table, its east-west traffic and its history)."""

from __future__ import annotations

from typing import Protocol, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Sparkline, Static

from gpuscope.fleet.history import HISTORY_METRICS
from gpuscope.fleet.options import FleetSource
from gpuscope.fleet.snapshot import FleetNode, FleetSnapshot
from gpuscope.fleet.text import fleet_summary, node_line, node_names
from gpuscope.fleet.view import GRID_METRICS, SORTS, gpu_sample_of, order_nodes
from gpuscope.textsafe import safe_text
from gpuscope.tui.format import fmt_rate, fmt_time_of_day
from gpuscope.tui.history import History
from gpuscope.tui.themes import ChartPalette
from gpuscope.tui.widgets.fleet_grid import EAST_WEST_MIN_WIDTH, FleetGrid, GridView
from gpuscope.tui.widgets.gpu_card import DenseGpuCard


class FleetHost(Protocol):
    """What the fleet screens read of their app (gpuscope.tui.screens.fleet_app.FleetApp)."""

    source: FleetSource
    snapshot: FleetSnapshot | None
    error: str | None
    chart_palette: ChartPalette

    @property
    def margin_percent(self) -> float: ...

    def want_history(self, instance: str | None) -> None: ...


__all__ = ["FleetScreen", "FleetNodeScreen", "FleetHost"]

_ALERT_LINES = 3
#: History rows: short labels (the words of HISTORY_METRICS are in docs/fleet.md).
_HISTORY_LABELS = {
    "sm_activity_percent": "SM % (mean)",
    "utilization_percent": "util % (mean)",
    "power_w": "power W (sum)",
    "nic_rx_bytes_per_s": "NIC rx",
}
#: Straggler metrics in the node table's flag column.
_SHORT = {"sm_activity_percent": "SM activity", "power_w": "power"}
_LEVEL_STYLE = {"critical": "bold red", "warning": "yellow", "careful": "cyan"}


def _top_text(snapshot: FleetSnapshot | None, error: str | None, where: str) -> str:
    if snapshot is None:
        return f"gpuscope fleet · {where} · " + (error or "reading…")
    when = fmt_time_of_day(snapshot.timestamp_s)
    text = f"gpuscope fleet · {safe_text(snapshot.where)} · {fleet_summary(snapshot)} · {when}"
    return text + (f" · LAST REFRESH FAILED: {error}" if error else "")


class FleetScreen(Screen[None]):
    """Every node: a grid of its GPUs, its east-west traffic, and the fleet's alerts."""

    DEFAULT_CSS = """
    FleetScreen #fleet-top { height: 1; background: $primary-background; }
    FleetScreen #fleet-alerts { height: auto; max-height: 3; }
    FleetScreen #fleet-filter { display: none; height: 3; }
    FleetScreen #fleet-filter.shown { display: block; }
    FleetScreen #fleet-hint { height: 1; color: $text-muted; }
    """
    AUTO_FOCUS = "#fleet-grid"
    BINDINGS = [
        Binding("down,j", "move(1)", "Next", show=False),
        Binding("up,k", "move(-1)", "Previous", show=False),
        Binding("enter", "open_node", "Node"),
        Binding("o", "cycle_sort", "Sort"),
        Binding("f", "toggle_problems", "Problems"),
        Binding("slash", "filter", "Filter"),
        Binding("m", "cycle_metric", "Metric"),
        Binding("escape", "clear_filter", "Clear", show=False),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.sort = "name"
        self.problems_only = False
        self.filter_text = ""
        self.selected_instance: str | None = None
        self.metric = 0
        self.view_nodes: list[FleetNode] = []

    @property
    def fleet(self) -> FleetHost:
        return cast(FleetHost, self.app)

    def compose(self) -> ComposeResult:
        yield Static(_top_text(None, None, self.fleet.source.where), id="fleet-top", markup=False)
        yield Static("", id="fleet-alerts", markup=False)
        yield Input(placeholder="filter nodes by name (Enter to apply, Escape to clear)", id="fleet-filter")
        yield FleetGrid(self.fleet.chart_palette, id="fleet-grid")
        yield Static(self._hint(), id="fleet-hint", markup=False)
        yield Footer()

    def _hint(self) -> str:
        label = SORTS.get(self.sort, SORTS["name"])[0]
        wide = self.size.width >= EAST_WEST_MIN_WIDTH
        cells = "cells: SM% util | DRAM W | °C mem · " if wide else ""
        filters = (" · problems only" if self.problems_only else "") + (
            f" · name has {self.filter_text!r}" if self.filter_text else ""
        )
        return f"sort: {label}{filters} · {cells}▼ straggler (margin {self.fleet.margin_percent:.0f}%) · ✖ Xid"

    def on_mount(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        """Show the app's latest snapshot with this screen's sort, filter and selection."""
        app = self.fleet
        self.query_one("#fleet-top", Static).update(_top_text(app.snapshot, app.error, app.source.where))
        snapshot = app.snapshot
        if snapshot is None:
            return
        names = node_names(snapshot.nodes)
        nodes = order_nodes(snapshot, self.sort, self.problems_only, self.filter_text, names)
        self.view_nodes = nodes
        instances = [node.instance for node in nodes]
        selected = instances.index(self.selected_instance) if self.selected_instance in instances else 0
        self.selected_instance = instances[selected] if instances else None
        counts: dict[str, int] = {}
        for alert in snapshot.alerts:
            counts[alert.instance] = counts.get(alert.instance, 0) + 1
        self.query_one(FleetGrid).show(
            GridView(nodes=nodes, names=names, selected=selected, metric=self.metric, alert_counts=counts)
        )
        self._show_alerts(snapshot, names)
        self.query_one("#fleet-hint", Static).update(self._hint())

    def _show_alerts(self, snapshot: FleetSnapshot, names: dict[str, str]) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        width = max(20, self.size.width)
        shown = snapshot.alerts[:_ALERT_LINES]
        for number, alert in enumerate(shown):
            if number:
                text.append("\n")
            more = len(snapshot.alerts) - _ALERT_LINES
            suffix = f"  (+{more} more: f shows problem nodes)" if number == len(shown) - 1 and more > 0 else ""
            line = f"{names.get(alert.instance, safe_text(alert.instance))}: {safe_text(alert.message)}{suffix}"
            text.append(f"{alert.level:<8} ", _LEVEL_STYLE.get(alert.level, ""))
            text.append(line if len(line) <= width - 9 else line[: width - 10] + "…")
        if not shown:
            text.append("no alerts", "dim")
        self.query_one("#fleet-alerts", Static).update(text)

    def action_move(self, step: int) -> None:
        instances = [node.instance for node in self.view_nodes]
        if not instances:
            return
        index = instances.index(self.selected_instance) if self.selected_instance in instances else 0
        self.selected_instance = instances[max(0, min(len(instances) - 1, index + step))]
        self.redraw()

    def action_cycle_sort(self) -> None:
        keys = list(SORTS)
        self.sort = keys[(keys.index(self.sort) + 1) % len(keys)]
        self.redraw()

    def action_cycle_metric(self) -> None:
        self.metric = (self.metric + 1) % len(GRID_METRICS)
        self.redraw()

    def action_toggle_problems(self) -> None:
        self.problems_only = not self.problems_only
        self.redraw()

    def action_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.add_class("shown")
        box.value = self.filter_text
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.remove_class("shown")
        self.filter_text = ""
        self.set_focus(None)
        self.redraw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.filter_text = event.value.strip()
        event.input.remove_class("shown")
        self.set_focus(None)
        self.redraw()

    def action_open_node(self) -> None:
        if self.selected_instance is not None:
            self.app.push_screen(FleetNodeScreen(self.selected_instance))


class FleetNodeScreen(Screen[None]):
    """One node: its GPUs (every number the grid has, and more), east-west traffic, history."""

    DEFAULT_CSS = """
    FleetNodeScreen #node-top { height: 1; background: $primary-background; }
    FleetNodeScreen #node-line { height: auto; max-height: 2; }
    FleetNodeScreen #node-cards { height: 1fr; }
    FleetNodeScreen #node-cards-grid { height: auto; grid-size: 1; grid-gutter: 0 1; }
    FleetNodeScreen #node-history { height: auto; }
    FleetNodeScreen .history-row { height: 1; }
    FleetNodeScreen .history-label { width: 22; }
    FleetNodeScreen Sparkline { width: 1fr; height: 1; }
    FleetNodeScreen DenseGpuCard.-straggler { border: round $warning; border-subtitle-color: $warning; }
    """
    BINDINGS = [
        Binding("escape,backspace", "app.pop_screen", "Back"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, instance: str) -> None:
        super().__init__()
        self.instance = instance
        self._cards: list[DenseGpuCard] = []
        self._history = History(capacity=2)  # the cards show no charts: history is below them

    @property
    def fleet(self) -> FleetHost:
        return cast(FleetHost, self.app)

    def compose(self) -> ComposeResult:
        yield Static("", id="node-top", markup=False)
        yield Static("", id="node-line", markup=False)
        with VerticalScroll(id="node-cards"):
            yield Grid(id="node-cards-grid")
        with Vertical(id="node-history"):
            for name in HISTORY_METRICS:
                with Horizontal(classes="history-row"):
                    yield Static(_HISTORY_LABELS[name], classes="history-label", id=f"label-{name}", markup=False)
                    yield Sparkline([], id=f"spark-{name}")
        yield Footer()

    def on_mount(self) -> None:
        self.fleet.want_history(self.instance)
        self.redraw()

    def on_unmount(self) -> None:
        self.fleet.want_history(None)

    def _show_cards(self, node: FleetNode | None) -> None:
        """The node's GPUs as the dashboard's dense cards (one per GPU; created once)."""
        grid = self.query_one("#node-cards-grid", Grid)
        gpus = node.gpus if node is not None else []
        columns = max(1, min(2, self.size.width // 78))
        if grid.styles.grid_size_columns != columns:
            grid.styles.grid_size_columns = columns
        if len(self._cards) != len(gpus):
            grid.remove_children()
            self._cards = [DenseGpuCard(gpu_sample_of(gpu)) for gpu in gpus]
            grid.mount_all(self._cards)
        for card, gpu in zip(self._cards, gpus, strict=True):
            card.show(gpu_sample_of(gpu), self._history)
            flags = (
                ["▼ straggler: " + ", ".join(_SHORT.get(m, m) for m in gpu.straggler_metrics)] if gpu.straggler else []
            )
            if gpu.xid_events_total:
                flags.append(f"Xid x{gpu.xid_events_total:.0f}")
            flag = " · ".join(flags)
            if card.border_subtitle != flag:
                card.border_subtitle = flag
            if gpu.straggler != card.has_class("-straggler"):
                card.set_class(gpu.straggler, "-straggler")

    def _node(self) -> FleetNode | None:
        snapshot = self.fleet.snapshot
        if snapshot is None:
            return None
        return next((node for node in snapshot.nodes if node.instance == self.instance), None)

    def redraw(self) -> None:
        """Show the node as the latest snapshot has it, and its history."""
        snapshot, node = self.fleet.snapshot, self._node()
        name = node_names(snapshot.nodes).get(self.instance, self.instance) if snapshot else self.instance
        where = "" if name == safe_text(self.instance) else f" ({safe_text(self.instance)})"
        top = f"gpuscope fleet · node {name}{where}"
        if snapshot is not None:
            top += f" · {fmt_time_of_day(snapshot.timestamp_s)}"
        self.query_one("#node-top", Static).update(top)
        self.query_one("#node-line", Static).update(
            node_line(node, name) if node is not None else "this node is no longer in the fleet"
        )
        self._show_cards(node)
        for metric in HISTORY_METRICS:
            points = self.fleet.source.node_history(self.instance, metric)
            values = [point.value for point in points][-240:]
            self.query_one(f"#spark-{metric}", Sparkline).data = values
            last = values[-1] if values else None
            shown = "-" if last is None else (fmt_rate(last) if metric.endswith("bytes_per_s") else f"{last:.0f}")
            self.query_one(f"#label-{metric}", Static).update(f"{_HISTORY_LABELS[metric]} {shown}")
