"""What every gpuscope screen has: the top bar, a hint line and the footer, and a hook the
app calls with each new sample while the screen is showing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import DataTable, Static

from gpuscope.telemetry.records import Sample
from gpuscope.tui.widgets.alert_line import AlertLine
from gpuscope.tui.widgets.cell_grid import CellGrid
from gpuscope.tui.widgets.keybar import KeyBar
from gpuscope.tui.widgets.metric import MetricCell
from gpuscope.tui.widgets.topbar import TopBar

if TYPE_CHECKING:
    from gpuscope.tui.app import GpuscopeApp

__all__ = ["GpuscopeScreen"]


class GpuscopeScreen(Screen[None]):
    """Base class: subclasses implement :meth:`compose_body` and :meth:`show_sample`."""

    MODE = "dashboard"
    DEFAULT_HINT = ""
    #: The app reads GPU process lists every second only while a screen that lists them shows.
    shows_gpu_processes = False

    def __init__(self, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        #: The sample shown last (a screen shown again catches up with the latest one).
        self._shown_sample: Sample | None = None
        self._top_bar = TopBar(self.MODE)
        self._alert_line = AlertLine()

    @property
    def gpuscope(self) -> GpuscopeApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield self._top_bar
        yield self._alert_line
        yield from self.compose_body()
        yield Static(self.DEFAULT_HINT, id="hint", markup=False)
        yield KeyBar()

    def compose_body(self) -> ComposeResult:
        yield from ()

    def add_columns(self, selector: str, columns: Sequence[tuple[str, str]]) -> None:
        """Give the DataTable at ``selector`` its ``columns`` ((key, title) pairs)."""
        table = self.query_one(selector, DataTable)
        for key, title in columns:
            table.add_column(title, key=key)

    def on_screen_resume(self) -> None:
        """Bring the data up to date: samples reach only the screens on the stack."""
        sample = self.gpuscope.latest_sample
        if sample is not None and sample is not self._shown_sample:
            self.receive_sample(sample)

    def receive_sample(self, sample: Sample) -> None:
        """Called by the app for each new sample while this screen is on the stack."""
        app = self.gpuscope
        top, alerts = self._top_bar, self._alert_line
        if not top.is_mounted:  # not composed yet (a sample can arrive first): shown when it resumes
            return
        self._shown_sample = sample
        top.set_status(sample.host.hostname, app.source_label, sample.timestamp)
        alerts.set_alerts(app.alerts)
        self.show_sample(sample)

    def show_sample(self, sample: Sample) -> None:
        """Redraw what depends on the sample. Override."""

    def wants_host_processes(self) -> float | None:
        """Seconds between host process scans while this screen shows (None: none wanted)."""
        return None

    def processes_changed(self) -> None:
        """The app's host processes changed (a scan finished). Override to show them."""

    def palette_changed(self) -> None:
        """The chart palette changed with the theme. Override where charts keep colours."""

    def set_hint(self, text: str) -> None:
        """Show ``text`` in the hint line above the footer (or the screen's default hint)."""
        self.query_one("#hint", Static).update(text or self.DEFAULT_HINT, layout=False)

    def on_metric_cell_explained(self, event: MetricCell.Explained) -> None:
        self.set_hint(event.text)

    def on_cell_grid_explained(self, event: CellGrid.Explained) -> None:
        self.set_hint(event.text)
