"""The dashboard: one card per GPU, then CPU, memory and network. Panels hide with a key."""

from __future__ import annotations

import math

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Vertical, VerticalScroll
from textual.widgets import Static

from gpuscope.telemetry.records import Sample
from gpuscope.tui.format import reason_text
from gpuscope.tui.history import gpu_key
from gpuscope.tui.screens.base import GpuscopeScreen
from gpuscope.tui.widgets.gpu_card import GpuCard, card_height
from gpuscope.tui.widgets.host_panels import CpuPanel, MemoryPanel, NetworkPanel
from gpuscope.tui.widgets.replay_bar import ReplayBar

__all__ = ["DashboardScreen", "PANELS"]

#: panel name -> widget id, in the order of the toggle keys.
PANELS = {"gpus": "gpus", "cpu": "cpu", "memory": "memory", "network": "network"}
GPU_CARD_MIN_WIDTH = 96
WIDE_HOST_MIN_WIDTH = 150
HOST_ROWS_ESTIMATE = 12


class DashboardScreen(GpuscopeScreen):
    MODE = "dashboard"
    DEFAULT_HINT = "tab: why is it n/a? · g c m n: hide/show panels · ctrl+p: commands"
    BINDINGS = [
        Binding("g", "toggle_panel('gpus')", "GPUs", show=False),
        Binding("c", "toggle_panel('cpu')", "CPU", show=False),
        Binding("m", "toggle_panel('memory')", "Mem", show=False),
        Binding("n", "toggle_panel('network')", "Net", show=False),
    ]

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="body"):
            yield Static("", id="no-gpu", markup=False)
            yield Grid(id="gpus")
            with Grid(id="host"):
                yield CpuPanel(id="cpu")
                with Vertical(id="host-side"):
                    yield MemoryPanel(id="memory")
                    yield NetworkPanel(id="network")
        if self.gpuscope.replay is not None:
            yield ReplayBar(id="replay-bar")

    REPLAY_HINT = "space: pause · ←→: step · [ ]: seek 10% · home/end · +/-: speed · tab: why n/a"

    def on_mount(self) -> None:
        if self.gpuscope.replay is not None:
            self.DEFAULT_HINT = self.REPLAY_HINT
            self.set_hint("")
        self._cards: dict[str, GpuCard] = {}
        self._gpu_count = 0
        for name in self.gpuscope.settings.hidden_panels:
            if name in PANELS:
                self.query_one(f"#{PANELS[name]}").display = False
        self.query_one("#no-gpu").display = False

    def on_resize(self) -> None:
        self._layout_columns()

    def _layout_columns(self) -> None:
        """One column of cards with tall charts when they fit the height, else as many columns
        as the width allows (the body scrolls when even that does not fit)."""
        width = max(20, self.size.width - 1)  # the scrollbar
        count = max(1, self._gpu_count)
        budget = self.size.height - 3 - HOST_ROWS_ESTIMATE
        if card_height(width, tall=True) * count <= budget:
            columns, tall = 1, True
        elif card_height(width, tall=False) * count <= budget or width < 2 * GPU_CARD_MIN_WIDTH:
            columns, tall = 1, False
        else:
            columns = max(1, min(count, width // GPU_CARD_MIN_WIDTH))
            tall = card_height(width // columns, tall=True) * math.ceil(count / columns) <= budget
        gpus = self.query_one("#gpus", Grid)
        if gpus.styles.grid_size_columns != columns:
            gpus.styles.grid_size_columns = columns
        compact = self.size.height < 30
        for card in self._cards.values():
            card.set_tall(tall)
            card.set_class(compact and not tall, "-compact")
        host = self.query_one("#host", Grid)
        host_columns = 2 if width >= WIDE_HOST_MIN_WIDTH else 1
        if host.styles.grid_size_columns != host_columns:
            host.styles.grid_size_columns = host_columns

    def action_toggle_panel(self, name: str) -> None:
        widget = self.query_one(f"#{PANELS[name]}")
        widget.display = not widget.display
        self.gpuscope.set_panel_hidden(name, not widget.display)
        self.notify(f"{name} panel {'shown' if widget.display else 'hidden'} (press {name[0]} to toggle)", timeout=2)

    def show_sample(self, sample: Sample) -> None:
        app = self.gpuscope
        no_gpu = self.query_one("#no-gpu", Static)
        if not sample.gpus:
            missing = sample.gpu_unavailable
            why = (missing.detail or reason_text(missing)) if missing else "no NVIDIA GPUs found"
            no_gpu.update(f"No NVIDIA GPU side: {why}", layout=False)
            no_gpu.display = True
        elif no_gpu.display:
            no_gpu.display = False
        self._sync_cards(sample)
        palette = app.chart_palette
        gpus = self.query_one("#gpus")
        if gpus.display:
            for position, gpu in enumerate(sample.gpus):
                card = self._cards.get(gpu_key(gpu))
                if card is not None:
                    card.show(gpu, app.history, palette.series[position % len(palette.series)])
        if self.query_one("#cpu").display:
            self.query_one(CpuPanel).show(sample.host, app.history)
        if self.query_one("#memory").display:
            self.query_one(MemoryPanel).show(sample.host)
        if self.query_one("#network").display:
            self.query_one(NetworkPanel).show(sample.host)
        if app.replay is not None:
            self.query_one(ReplayBar).show(app.replay)

    def _sync_cards(self, sample: Sample) -> None:
        keys = [gpu_key(gpu) for gpu in sample.gpus]
        if keys == list(self._cards):
            return
        container = self.query_one("#gpus", Grid)
        for key in list(self._cards):
            if key not in keys:
                self._cards.pop(key).remove()
        new = []
        for gpu in sample.gpus:
            key = gpu_key(gpu)
            if key not in self._cards:
                card = GpuCard(gpu)
                self._cards[key] = card
                new.append(card)
        if new:
            container.mount_all(new)
        # keep the cards in sample order
        ordered = {key: self._cards[key] for key in keys}
        self._cards = ordered
        self._gpu_count = len(keys)
        self._layout_columns()
