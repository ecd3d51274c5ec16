"""The fleet app (``gpuscope fleet`` without ``--once``): refreshes the source in a thread
worker, one refresh at a time, the next scheduled only when the previous one is shown
(``set_timer``, never overlapping); Prometheus history is read every 30 s while a node's view is open."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from textual.app import App
from textual.binding import Binding
from textual.theme import BUILTIN_THEMES

from gpuscope.errors import exception_text
from gpuscope.fleet.http import FetchError
from gpuscope.fleet.options import FleetSource
from gpuscope.fleet.snapshot import FleetSnapshot
from gpuscope.resources import themes_dir
from gpuscope.tui import config
from gpuscope.tui.screens.fleet import FleetNodeScreen, FleetScreen
from gpuscope.tui.themes import DEFAULT_THEME, ChartPalette, discover_themes, fallback_theme

__all__ = ["FleetApp", "run_fleet_app", "HISTORY_EVERY_S"]

#: Seconds between Prometheus history reads while a node's view is open.
HISTORY_EVERY_S = 30.0


class FleetApp(App[None]):
    """The fleet view over ``source``, refreshed every ``interval_s`` seconds."""

    TITLE = "gpuscope fleet"
    BINDINGS = [Binding("ctrl+c", "quit", "Quit", show=False)]

    def __init__(
        self,
        source: FleetSource,
        interval_s: float = 2.0,
        theme: str | None = None,
        theme_dirs: Sequence[Path] | None = None,
        live: bool = True,
    ) -> None:
        super().__init__()
        self.source = source
        self.interval_s = interval_s
        self.snapshot: FleetSnapshot | None = None
        self.error: str | None = None
        self.live = live
        self._history_for: str | None = None
        self._history_at = 0.0
        self.refreshes = 0
        folders = list(theme_dirs) if theme_dirs is not None else [themes_dir(), config.user_themes_dir()]
        found, _problems = discover_themes(folders)
        if DEFAULT_THEME not in found:
            found[DEFAULT_THEME] = fallback_theme()
        for loaded in found.values():
            self.register_theme(loaded.theme)
        wanted = theme if theme in found else DEFAULT_THEME
        self.theme = wanted
        for name in list(BUILTIN_THEMES):
            if name not in found:
                self.unregister_theme(name)
        self.chart_palette: ChartPalette = found[wanted].palette

    @property
    def margin_percent(self) -> float:
        """The straggler margin in percent (shown in the hint)."""
        return 100.0 * float(getattr(self.source, "margin", 0.10))

    def on_mount(self) -> None:
        self.push_screen(FleetScreen())
        if self.live:
            self.poll()

    def poll(self) -> None:
        """Start one refresh in a thread worker (its result is shown, then the next is scheduled)."""
        self.run_worker(self._refresh, thread=True, group="fleet", exclusive=True, exit_on_error=False)

    def _refresh(self) -> None:
        try:
            snapshot = self.source.refresh()
        except FetchError as exc:
            self.call_from_thread(self._failed, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - a monitor keeps running; the line says what failed
            self.call_from_thread(self._failed, f"refresh failed: {exception_text(exc)}")
            return
        want = self._history_for
        if want is not None and time.monotonic() - self._history_at >= HISTORY_EVERY_S:
            try:
                self.source.refresh_history()
                self._history_at = time.monotonic()
            except FetchError as exc:
                self.call_from_thread(self._failed, f"history: {exc}", False)
        self.call_from_thread(self.show_snapshot, snapshot)

    def _failed(self, message: str, schedule: bool = True) -> None:
        self.error = message
        self._redraw()
        if schedule and self.live:
            self.set_timer(max(self.interval_s, 5.0), self.poll)

    def show_snapshot(self, snapshot: FleetSnapshot) -> None:
        """Show ``snapshot`` on the screens and schedule the next refresh."""
        self.snapshot, self.error = snapshot, None
        self.refreshes += 1
        self._redraw()
        if self.live:
            self.set_timer(self.interval_s, self.poll)

    def _redraw(self) -> None:
        for screen in self.screen_stack:
            if isinstance(screen, (FleetScreen, FleetNodeScreen)) and screen.is_mounted:
                screen.redraw()

    def want_history(self, instance: str | None) -> None:
        """A node's view opened (its instance) or closed (None): read history for it soon."""
        self._history_for = instance
        if instance is not None:
            self._history_at = 0.0

    def on_unmount(self) -> None:
        self.source.close()


def run_fleet_app(source: FleetSource, interval_s: float = 2.0, theme: str | None = None) -> int:
    """Run the fleet screen until the user quits; returns the exit code (0)."""
    FleetApp(source, interval_s=interval_s, theme=theme).run()
    return 0
