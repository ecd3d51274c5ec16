"""The fleet grid: nodes down, GPUs across, each cell coloured by its level from the theme's
bar colours; each node's east-west traffic (NIC, InfiniBand/RoCE, NVLink) beside its GPUs when the
terminal is wide enough. Drawn as one Rich Text per refresh, only the nodes that fit."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from gpuscope.fleet.snapshot import FleetGpu, FleetNode
from gpuscope.fleet.text import fmt_optional_rate
from gpuscope.fleet.view import GRID_METRICS, GridMetric
from gpuscope.tui.themes import ChartPalette

__all__ = ["FleetGrid", "GridView", "grid_text", "WIDE_CELL", "EAST_WEST_MIN_WIDTH"]

#: Cells at least this wide show two numbers on each of three lines; narrower ones one number.
WIDE_CELL = 12
#: Terminals at least this wide show the east-west column.
EAST_WEST_MIN_WIDTH = 120
_EW = 30


@dataclass
class GridView:
    """What the grid draws: the nodes in order, their names, the selection and the metric first shown."""

    nodes: list[FleetNode] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    selected: int = 0
    metric: int = 0
    alert_counts: dict[str, int] = field(default_factory=dict)


def _fit(text: str, width: int) -> str:
    return text[:width].rjust(width) if width > 0 else ""


def _cell_value(metric: GridMetric, gpu: FleetGpu) -> str:
    value = metric.value(gpu)
    return "-" if value is None else metric.text(value)


def _style(metric: GridMetric, gpu: FleetGpu, palette: ChartPalette) -> str:
    level = metric.level(gpu)
    colour = "" if level is None else palette.bar_colour(level)
    if gpu.straggler and metric.name in gpu.straggler_metrics:
        return f"bold reverse {colour}".strip()
    return colour


def grid_text(view: GridView, width: int, height: int, palette: ChartPalette) -> Text:
    """The grid for a ``width`` x ``height`` area."""
    out = Text(no_wrap=True, overflow="crop")
    if not view.nodes:
        out.append("no nodes to show (f: all nodes, /: change the name filter)")
        return out
    gpus = max((len(node.gpus) for node in view.nodes), default=0) or 1
    name_w = max(10, min(18, width // 9))
    ew_w = _EW if width >= EAST_WEST_MIN_WIDTH else 0
    wide = (width - name_w - ew_w - 1) // gpus >= WIDE_CELL + 1
    tag_w = 0 if wide else 5
    cell_w = max(4, (width - name_w - ew_w - tag_w - 1) // gpus)
    rows = height - 1
    per_node = 3 if wide else max(1, min(len(GRID_METRICS), rows // max(1, len(view.nodes))))
    gap = 1 if wide and rows >= len(view.nodes) * 4 else 0
    fit = max(1, rows // (per_node + gap))
    first = min(max(0, view.selected - fit + 1), max(0, len(view.nodes) - fit))
    # header
    out.append(" node".ljust(name_w), "bold")
    out.append(" " * tag_w)
    for index in range(gpus):
        out.append(_fit(f"GPU{index}", cell_w - 1) + " ", "bold")
    if ew_w:
        out.append(" east-west ↓rx ↑tx", "bold")
    if first:
        out.append(f"  ↑{first} more", "dim")
    for position in range(first, min(len(view.nodes), first + fit)):
        node = view.nodes[position]
        out.append("\n")
        _node_lines(out, view, node, position == view.selected, per_node, wide, name_w, tag_w, cell_w, ew_w, palette)
        if gap:
            out.append("\n")
    hidden = len(view.nodes) - (first + fit)
    if hidden > 0 and not gap:
        out.append(f"\n  ↓{hidden} more", "dim")
    elif hidden > 0:
        out.append(f"  ↓{hidden} more", "dim")
    return out


def _node_lines(
    out: Text, view: GridView, node: FleetNode, selected: bool, per_node: int, wide: bool,
    name_w: int, tag_w: int, cell_w: int, ew_w: int, palette: ChartPalette,
) -> None:  # fmt: skip
    name = view.names.get(node.instance, node.label)
    marker = "▶" if selected else " "
    name_style = "bold reverse" if selected else "bold"
    alerts = view.alert_counts.get(node.instance, 0)
    second = node.state if node.state != "up" else f"{len(node.gpus)} GPUs"
    if alerts:
        second = f"!{alerts} {second}"
    third = "▼ straggler" if node.straggler else ""
    labels = [f"{marker}{name}", f" {second}", f" {third}"]
    metrics = (
        _wide_pairs() if wide else [(GRID_METRICS[(view.metric + k) % len(GRID_METRICS)],) for k in range(per_node)]
    )
    ew = _east_west(node) if ew_w else []
    if node.state != "up":
        per_node = min(per_node, 2 if wide else 1)
    for line in range(per_node):
        if line:
            out.append("\n")
        label = labels[line] if line < len(labels) else ""
        style = name_style if line == 0 else ("bold red" if node.state != "up" or alerts else "dim")
        out.append(label[: name_w - 1].ljust(name_w), style if label.strip() else "")
        if tag_w:
            out.append((metrics[line][0].tag if node.state == "up" else "").ljust(tag_w), "dim")
        if node.state != "up":
            room = cell_w * max(1, len(node.gpus) or 8)
            text = (node.error or node.state) if line == 0 else ""
            out.append(text[:room].ljust(room), "bold red" if line == 0 else "")
        else:
            for gpu in node.gpus:
                _cell(out, gpu, metrics[line], cell_w, palette)
        if ew_w and line < len(ew):
            out.append(" " + ew[line][: ew_w - 1], "dim" if node.state != "up" else "")


def _wide_pairs() -> list[tuple[GridMetric, ...]]:
    by = {m.name: m for m in GRID_METRICS}
    return [
        (by["sm_activity_percent"], by["utilization_percent"]),
        (by["dram_bandwidth_bytes_per_s"], by["power_w"]),
        (by["temperature_c"], by["memory_used_bytes"]),
    ]


def _cell(out: Text, gpu: FleetGpu, metrics: tuple[GridMetric, ...], cell_w: int, palette: ChartPalette) -> None:
    if gpu.lost:
        out.append(_fit("LOST", cell_w - 1) + " ", f"bold {palette.above_roof}")
        return
    widths = [(cell_w - 1) // len(metrics)] * len(metrics)
    widths[0] += (cell_w - 1) - sum(widths)
    for metric, width in zip(metrics, widths, strict=True):
        text = _cell_value(metric, gpu)
        if gpu.straggler and metric.name in gpu.straggler_metrics:
            text = "▼" + text
        if gpu.xid_events_total and metric.name == "sm_activity_percent":
            text = _fit(text, width - 1)
            out.append(" " * (len(text) - len(text.lstrip())) + "✖", f"bold {palette.above_roof}")
            out.append(text.lstrip(), _style(metric, gpu, palette))
            continue
        out.append(_fit(text, width), _style(metric, gpu, palette))
    out.append(" ")


def _rate(value: float | None) -> str:
    return fmt_optional_rate(value).rjust(9)


def _east_west(node: FleetNode) -> list[str]:
    if node.state != "up":
        return []
    return [
        f"NIC ↓{_rate(node.nic_rx_bytes_per_s)} ↑{_rate(node.nic_tx_bytes_per_s)}",
        f"IB  ↓{_rate(node.infiniband_rx_bytes_per_s)} ↑{_rate(node.infiniband_tx_bytes_per_s)}",
        f"NVL ↓{_rate(node.nvlink_rx_bytes_per_s)} ↑{_rate(node.nvlink_tx_bytes_per_s)}",
    ]


class FleetGrid(Widget, can_focus=True):
    """The grid widget; :meth:`show` gives it a new view (it redraws once). It takes the focus,
    so the screen's keys reach the screen."""

    DEFAULT_CSS = """
    FleetGrid { height: 1fr; width: 1fr; }
    """
    version: reactive[int] = reactive(0)

    def __init__(self, palette: ChartPalette, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.view = GridView()
        self.palette = palette

    def show(self, view: GridView) -> None:
        """Draw ``view`` (on the next refresh)."""
        self.view = view
        self.version += 1

    def render(self) -> Text:
        return grid_text(self.view, self.size.width, self.size.height, self.palette)
