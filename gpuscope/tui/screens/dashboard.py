"""The dashboard: one card per GPU, then CPU, memory, network, disk I/O and the host's top
processes. Panels hide with a key and the others reflow into the room; spare rows go to the
top-processes panel (or the CPU chart), so the screen has no empty rows. Many GPUs get dense
cards (the key metrics only) so eight of them fit 160x48."""

from __future__ import annotations

import math

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from gpuscope.telemetry.records import Sample
from gpuscope.tui.format import vendor_lines
from gpuscope.tui.history import gpu_key
from gpuscope.tui.screens.base import GpuscopeScreen
from gpuscope.tui.widgets.gpu_card import DenseGpuCard, GpuCard, card_height, dense_card_height, make_card
from gpuscope.tui.widgets.host_extra import DiskPanel, TopProcessesPanel
from gpuscope.tui.widgets.host_panels import CpuPanel, MemoryPanel, NetworkPanel
from gpuscope.tui.widgets.replay_bar import ReplayBar

__all__ = ["DashboardScreen", "PANELS", "PANEL_KEYS"]

#: panel name -> widget id, in the order of the toggle keys.
PANELS = {"gpus": "gpus", "cpu": "cpu", "memory": "memory", "network": "network", "disk": "disk", "top": "top"}
#: panel name -> the key that hides or shows it.
PANEL_KEYS = {"gpus": "g", "cpu": "c", "memory": "m", "network": "n", "disk": "d", "top": "p"}
GPU_CARD_MIN_WIDTH = 96
DENSE_CARD_MIN_WIDTH = 76
WIDE_HOST_MIN_WIDTH = 150
#: Dense cards only from this many GPUs on (fewer GPUs keep their charts and scroll).
DENSE_FROM_GPUS = 3
#: Rows the host panels need at least (CPU with its chart and cores, memory, network).
HOST_ROWS_ESTIMATE = 12
#: Seconds between host process scans while the top-processes panel shows. A scan reads every
#: /proc/<pid>/stat (about 35 µs each: 3 ms for 90 processes, 30 ms for a server's 900), the
#: largest part of the dashboard's idle cost at 2 s; the processes screen (4) scans every poll.
TOP_PROCESSES_PERIOD_S = 5.0


class DashboardScreen(GpuscopeScreen):
    MODE = "dashboard"
    DEFAULT_HINT = "tab: why is it n/a? · g c m n d p: hide/show panels · w: chart window · ctrl+p: commands"
    BINDINGS = [
        Binding(key, f"toggle_panel('{name}')", name.capitalize(), show=False) for name, key in PANEL_KEYS.items()
    ]

    def compose_body(self) -> ComposeResult:
        with self._body:
            yield self._no_gpu
            yield self._all_hidden
            yield self._gpus
            with self._host:
                yield self._cpu
                with self._host_side:
                    yield self._memory
                    yield self._network
                    yield self._disk
                    yield self._top
        if self.gpuscope.replay is not None:
            yield ReplayBar(id="replay-bar")

    REPLAY_HINT = "space: pause · ←→: step · [ ]: seek 10% · home/end · +/-: speed · w: window · tab: why n/a"

    def __init__(self, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._no_gpu = Static("", id="no-gpu", markup=False)
        self._all_hidden = Static("", id="all-hidden", markup=False)
        self._gpus = Grid(id="gpus")
        self._host = Grid(id="host")
        self._host_side = Vertical(id="host-side")
        self._cpu = CpuPanel(id="cpu")
        self._memory = MemoryPanel(id="memory")
        self._network = NetworkPanel(id="network")
        self._disk = DiskPanel(id="disk")
        self._top = TopProcessesPanel(id="top")
        self._body = VerticalScroll(id="body")
        #: panel name -> its widget (hidden and shown by the panel keys)
        self._panels: dict[str, Widget] = {
            "gpus": self._gpus,
            "cpu": self._cpu,
            "memory": self._memory,
            "network": self._network,
            "disk": self._disk,
            "top": self._top,
        }
        self._cards: dict[str, GpuCard | DenseGpuCard] = {}
        self._gpu_count = 0
        self._dense = False
        #: What the no-GPU line says (updated only when it changes).
        self._no_gpu_text = ""

    def on_mount(self) -> None:
        if self.gpuscope.replay is not None:
            self.DEFAULT_HINT = self.REPLAY_HINT
            self.set_hint("")
        for name in self.gpuscope.settings.hidden_panels:
            if name in PANELS:
                self._panels[name].display = False
        self._no_gpu.display = False
        self._reflow_host()
        self.watch(self._body, "virtual_size", lambda _size: self._fill(), init=False)

    def wants_host_processes(self) -> float | None:
        return TOP_PROCESSES_PERIOD_S if self._panel("top").display else None

    def on_resize(self) -> None:
        self._layout_columns()
        self.call_after_refresh(self._fill)

    # --- layout ------------------------------------------------------------------------------

    def _panel(self, name: str) -> Widget:
        return self._panels[name]

    def _host_rows(self) -> int:
        """Rows the host side needs below the GPUs (measured once laid out, else estimated)."""
        shown = [name for name in ("cpu", "memory", "network", "disk", "top") if self._panel(name).display]
        if not shown:
            return 0
        rows = HOST_ROWS_ESTIMATE if "cpu" in shown else 4 * len(shown)
        if "top" in shown and ("cpu" not in shown or self.size.width - 1 < WIDE_HOST_MIN_WIDTH):
            rows += TopProcessesPanel.MIN_ROWS
        return rows

    def _layout_columns(self) -> None:
        """One column of cards with tall charts when they fit the height, else short charts, else
        as many columns as the width allows, else dense cards (the body scrolls if even that does
        not fit)."""
        width = max(20, self.size.width - 1)  # the scrollbar
        count = max(1, self._gpu_count)
        budget = self.size.height - 3 - self._host_rows() - (1 if self.gpuscope.alerts else 0)
        dense = False
        if card_height(width, tall=True) * count <= budget:
            columns, tall = 1, True
        elif card_height(width, tall=False) * count <= budget:
            columns, tall = 1, False
        else:
            columns = max(1, min(count, width // GPU_CARD_MIN_WIDTH))
            tall = card_height(width // columns, tall=True) * math.ceil(count / columns) <= budget
            if (
                not tall
                and card_height(width // columns, tall=False) * math.ceil(count / columns) > budget
                and count >= DENSE_FROM_GPUS
            ):
                dense = True
                columns = max(1, min(count, width // DENSE_CARD_MIN_WIDTH))
                while (
                    columns < count
                    and dense_card_height(width // columns) * math.ceil(count / columns) > budget
                    and width // (columns + 1) >= 52
                ):
                    columns += 1
        if dense != self._dense:
            self._dense = dense
            for card in list(self._cards.values()):
                card.remove()
            self._cards = {}
            if self.gpuscope.latest_sample is not None:
                self.call_after_refresh(lambda: self.show_sample(self.gpuscope.latest_sample))
        gpus = self._gpus
        if gpus.styles.grid_size_columns != columns:
            gpus.styles.grid_size_columns = columns
        compact = self.size.height < 30
        for card in self._cards.values():
            card.set_tall(tall)
            card.set_class(compact and not tall, "-compact")
        self._reflow_host()

    def _reflow_host(self) -> None:
        """Host panels share the width only when both columns have something to show."""
        main_shown = self._panel("cpu").display
        side = self._host_side
        side_shown = any(self._panel(name).display for name in ("memory", "network", "disk", "top"))
        side.display = side_shown
        host = self._host
        host.display = main_shown or side_shown
        columns = 2 if self.size.width - 1 >= WIDE_HOST_MIN_WIDTH and main_shown and side_shown else 1
        if host.styles.grid_size_columns != columns:
            host.styles.grid_size_columns = columns
        hidden = [name for name in PANELS if not self._panel(name).display]
        message = self._all_hidden
        all_hidden = len(hidden) == len(PANELS)
        if all_hidden:
            keys = " ".join(PANEL_KEYS.values())
            message.update(
                f"All panels are hidden. Press {keys} (GPUs, CPU, memory, network, disk, top processes) "
                "to show them again."
            )
        message.display = all_hidden

    def _fill(self) -> None:
        """Give the rows the body has to spare (and the rows one host column lacks beside the
        other) to the top-processes panel and the CPU chart: no empty rows, no needless scroll."""
        body = self._body
        content = sum(child.outer_size.height for child in body.children if child.display)
        if not body.size.height or not content:
            return
        top, cpu = self._top, self._cpu
        spare = body.size.height - content  # (the virtual size is never below the viewport)
        host = self._host
        if not host.display:
            return
        main, side = cpu, self._host_side
        wide = host.styles.grid_size_columns == 2
        if wide:
            left, right = main.outer_size.height, side.outer_size.height
            target = max(left, right) + spare
            if top.display:
                self._grow_top(top, target - right)
            if cpu.display:
                cpu.set_chart_rows(cpu.chart_rows + target - left)
        elif top.display:
            self._grow_top(top, spare)
        elif cpu.display:
            cpu.set_chart_rows(cpu.chart_rows + spare)

    @staticmethod
    def _grow_top(top: TopProcessesPanel, rows: int) -> None:
        current = top.outer_size.height or TopProcessesPanel.MIN_ROWS
        wanted = max(TopProcessesPanel.MIN_ROWS, current + rows)
        if wanted != current:
            top.styles.height = wanted

    def action_toggle_panel(self, name: str) -> None:
        widget = self._panel(name)
        widget.display = not widget.display
        self.gpuscope.set_panel_hidden(name, not widget.display)
        self._layout_columns()
        if name == "top" and widget.display:
            self.gpuscope.refresh_host_processes()
        self.call_after_refresh(self._fill)
        self.notify(
            f"{name} panel {'shown' if widget.display else 'hidden'} (press {PANEL_KEYS[name]} to toggle)", timeout=2
        )

    # --- data --------------------------------------------------------------------------------

    def processes_changed(self) -> None:
        top = self._top
        if top.display:
            top.show(self.gpuscope.host_processes)

    def show_sample(self, sample: Sample) -> None:
        app = self.gpuscope
        no_gpu = self._no_gpu
        if not sample.gpus:
            # one line per vendor that gave no GPU, as `gpuscope snapshot` says it
            text = "\n".join(line[:1].upper() + line[1:] for line in vendor_lines(sample))
            if text != self._no_gpu_text:
                relayout = text.count("\n") != self._no_gpu_text.count("\n")
                self._no_gpu_text = text
                no_gpu.update(text, layout=relayout)
            if no_gpu.display != self._panel("gpus").display:
                no_gpu.display = self._panel("gpus").display
        elif no_gpu.display:
            no_gpu.display = False
        self._sync_cards(sample)
        palette = app.chart_palette
        window_s = app.history_window_s
        if self._panel("gpus").display:
            for position, gpu in enumerate(sample.gpus):
                card = self._cards.get(gpu_key(gpu))
                if card is not None:
                    card.show(gpu, app.history, palette.series[position % len(palette.series)], window_s)
        if self._panel("cpu").display:
            self._cpu.show(sample.host, app.history, window_s)
        if self._panel("memory").display:
            self._memory.show(sample.host)
        if self._panel("network").display:
            self._network.show(sample.host)
        if self._panel("disk").display:
            self._disk.show(sample.host)
        if self._panel("top").display:
            self._top.show(app.host_processes)
        if app.replay is not None:
            self.query_one(ReplayBar).show(app.replay)
        self._fill()

    def _sync_cards(self, sample: Sample) -> None:
        keys = [gpu_key(gpu) for gpu in sample.gpus]
        if keys == list(self._cards):
            return
        if len(keys) != self._gpu_count:
            self._gpu_count = len(keys)
            self._layout_columns()  # dense or full cards, before making them
        container = self._gpus
        for key in list(self._cards):
            if key not in keys:
                self._cards.pop(key).remove()
        new = []
        for gpu in sample.gpus:
            key = gpu_key(gpu)
            if key not in self._cards:
                card = make_card(gpu, self._dense)
                self._cards[key] = card
                new.append(card)
        if new:
            container.mount_all(new)
        # keep the cards in sample order
        ordered = {key: self._cards[key] for key in keys}
        self._cards = ordered
        self._layout_columns()
        self.call_after_refresh(self._fill)
