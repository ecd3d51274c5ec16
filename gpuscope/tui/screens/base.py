"""What every gpuscope screen has: the top bar, a hint line and the footer, and a hook the
app calls with each new sample while the screen is showing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from textual import events
from textual.app import ComposeResult
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import DataTable, Static

from gpuscope.telemetry.records import Sample
from gpuscope.tui.widgets.alert_line import AlertLine
from gpuscope.tui.widgets.cell_grid import CellGrid
from gpuscope.tui.widgets.keybar import KeyBar
from gpuscope.tui.widgets.lines import query_cached
from gpuscope.tui.widgets.metric import MetricCell
from gpuscope.tui.widgets.topbar import TopBar

if TYPE_CHECKING:
    from gpuscope.tui.app import GpuscopeApp

__all__ = ["GpuscopeScreen"]


class GpuscopeScreen(Screen[None]):
    """Base class: subclasses implement :meth:`compose_body` and :meth:`show_sample`."""

    MODE = "dashboard"
    DEFAULT_HINT = ""

    def __init__(self, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        from gpuscope.tui.row_compositor import row_cropped_compositor

        # paint only the rows a frame updates (the clock and a chart no longer repaint every panel)
        self._compositor = row_cropped_compositor()

    @property
    def gpuscope(self) -> GpuscopeApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield TopBar(self.MODE)
        yield AlertLine()
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

    def _style_state(self) -> tuple[object, ...] | None:
        """What the styles of a suspended screen depend on besides its own nodes: the app's CSS
        (theme) and the app's pseudo-classes (focus/blur, dark/light, ansi, ...); None when this
        Textual does not tell (gpuscope.tui.textual_compat)."""
        from gpuscope.tui.textual_compat import style_state

        return style_state(self.app)

    def _on_screen_suspend(self) -> None:
        # Runs before Textual's own handler (the dispatcher calls each class's handler, subclass first).
        self._suspended_style_state = self._style_state()

    def _on_screen_resume(self, event: events.ScreenResume) -> None:
        # Runs before Textual's Screen._on_screen_resume: bring the data up to date, and spare it
        # re-applying the CSS to every node (a third of a switch) when nothing styles depend on changed.
        state = self._style_state()
        if event.refresh_styles and state is not None and getattr(self, "_suspended_style_state", None) == state:
            event.refresh_styles = False
        sample = self.gpuscope.latest_sample
        if sample is not None and sample is not getattr(
            self, "_shown_sample", None
        ):  # the app's switch_mode may have shown it already
            self.receive_sample(sample)

    def receive_sample(self, sample: Sample) -> None:
        """Called by the app for each new sample while this screen is on the stack."""
        app = self.gpuscope
        try:
            top, alerts = query_cached(self, "TopBar", TopBar), query_cached(self, "AlertLine", AlertLine)
        except NoMatches:  # not composed yet (a sample can arrive first): shown when it resumes
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

    def set_hint(self, text: str) -> None:
        """Show ``text`` in the hint line above the footer (or the screen's default hint)."""
        self.query_one("#hint", Static).update(text or self.DEFAULT_HINT, layout=False)

    def on_metric_cell_explained(self, event: MetricCell.Explained) -> None:
        self.set_hint(event.text)

    def on_cell_grid_explained(self, event: CellGrid.Explained) -> None:
        self.set_hint(event.text)
