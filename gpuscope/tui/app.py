"""The gpuscope Textual app: modes (screens), telemetry polling, replay, themes, screenshots.

Polling: one persistent thread (:class:`gpuscope.tui.poller.Poller`) samples the source at
``previous due time + interval`` (no drift) and posts each result to the app's message queue;
the next sample waits until the app handled the previous one (no overlap, no pile-up); errors
back off up to 30 s. Only screens on the current stack are updated.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.filter import LineFilter
from textual.message import Message
from textual.screen import Screen
from textual.theme import BUILTIN_THEMES, Theme
from textual.timer import Timer
from textual.widget import AwaitMount

from gpuscope.errors import GpuscopeError
from gpuscope.resources import themes_dir
from gpuscope.schema.core import JsonObject
from gpuscope.schema.results import Results
from gpuscope.telemetry.alerts import Alert, evaluate, load_thresholds
from gpuscope.telemetry.cpuinfo import CpuInfo
from gpuscope.telemetry.hostprocs import HostProcess
from gpuscope.telemetry.records import Sample
from gpuscope.telemetry.sampler import RingBuffer
from gpuscope.telemetry.values import Reason, Unavailable
from gpuscope.tui import config
from gpuscope.tui.history import WINDOWS_S, History, capacity_for, window_label
from gpuscope.tui.poller import MAX_BACKOFF_S, Polled, Poller, PollFailed
from gpuscope.tui.probe_job import kill_all
from gpuscope.tui.report_hook import save_report
from gpuscope.tui.roofline_data import LoadedResults
from gpuscope.tui.safe_lines import SAFE_TEXT
from gpuscope.tui.screens.base import GpuscopeScreen
from gpuscope.tui.screens.dashboard import PANEL_KEYS, PANELS, DashboardScreen
from gpuscope.tui.screens.probes import ProbesScreen
from gpuscope.tui.screens.processes import ProcessesScreen
from gpuscope.tui.screens.roofline import RooflineScreen
from gpuscope.tui.screens.topology import TopologyScreen
from gpuscope.tui.screens.topology_feed import TopologyFeed
from gpuscope.tui.sources import ReplayCursor, TelemetrySource
from gpuscope.tui.themes import DEFAULT_THEME, ChartPalette, ThemeFile, discover_themes, fallback_theme
from gpuscope.tui.widgets.topbar import SCREEN_TABS

__all__ = ["GpuscopeApp", "MIN_INTERVAL_S", "DEFAULT_INTERVAL_S", "MAX_BACKOFF_S"]

MIN_INTERVAL_S = 0.1
DEFAULT_INTERVAL_S = 1.0
#: Textual's Timer divides by its interval when it runs late: never ask for 0.
MIN_TIMER_S = 0.001


class PollResult(Message):
    """The poller thread's result (a :class:`Polled` or :class:`PollFailed`), posted to the app."""

    def __init__(self, result: Polled | PollFailed) -> None:
        super().__init__()
        self.result = result


class GpuscopeApp(App[None]):
    """The interactive monitor. Give it a live ``source`` or a ``replay`` cursor."""

    TITLE = "gpuscope"
    CSS_PATH = str(Path(__file__).resolve().parent / "styles" / "app.tcss")  # absolute: subclasses may live elsewhere
    MODES = {
        "dashboard": DashboardScreen,
        "roofline": RooflineScreen,
        "probes": ProbesScreen,
        "processes": ProcessesScreen,
        "topology": TopologyScreen,
    }
    DEFAULT_MODE = "dashboard"
    BINDINGS = [
        *(Binding(key, f"switch_mode('{mode}')", label, show=False) for mode, key, label in SCREEN_TABS),
        Binding("s", "save_screenshot", "Screenshot"),
        Binding("R", "save_report", "Report", show=False),
        Binding("t", "change_theme", "Theme", show=False),
        Binding("w", "cycle_window", "Window", show=False),
        Binding("question_mark", "show_help_panel", "Keys", show=False),
        Binding("q", "quit", "Quit"),
        Binding("space", "replay_toggle", "Pause", show=False),
        Binding("right", "replay_step(1)", "Step", show=False),
        Binding("left", "replay_step(-1)", "Back", show=False),
        Binding("right_square_bracket", "replay_seek(0.1)", "Seek+", show=False, priority=True),
        Binding("left_square_bracket", "replay_seek(-0.1)", "Seek-", show=False, priority=True),
        Binding("plus,equals_sign", "replay_speed(2)", "Faster", show=False, priority=True),
        Binding("minus", "replay_speed(0.5)", "Slower", show=False, priority=True),
        Binding("home", "replay_seek_fraction(0)", "Start", show=False, priority=True),
        Binding("end", "replay_seek_fraction(1)", "End", show=False, priority=True),
    ]

    def __init__(
        self,
        source: TelemetrySource | None = None,
        *,
        replay: ReplayCursor | None = None,
        interval_s: float = DEFAULT_INTERVAL_S,
        theme: str | None = None,
        probe_results: Sequence[tuple[Results, bytes | JsonObject | None]] = (),
        theme_dirs: Sequence[Path] | None = None,
        settings_path: Path | None = None,
        history_size: int | None = None,
        persist_settings: bool = True,
        extra_suites: Sequence[Path] = (),
    ) -> None:
        super().__init__()
        if source is None and replay is None:
            raise ValueError("GpuscopeApp needs a source or a replay")
        self.source = source
        self.replay = replay
        self.interval_s = max(MIN_INTERVAL_S, interval_s)
        self.history = History(history_size or capacity_for(self.interval_s))
        #: Seconds the history charts span (key ``w`` cycles through :data:`WINDOWS_S`).
        self.history_window_s = WINDOWS_S[0]
        self.latest_sample: Sample | None = None
        self.recent_samples: RingBuffer[Sample] = RingBuffer(600)
        #: Host processes from the last scan, or why there are none (scanned only while shown).
        self.host_processes: list[HostProcess] | Unavailable = (
            Unavailable(Reason.WARMING_UP, "not scanned yet")
            if source is not None
            else Unavailable(Reason.NOT_APPLICABLE, "a replay has no host processes (they are not in the log)")
        )
        #: Thresholds crossed by the latest sample, worst first.
        self.alerts: list[Alert] = []
        #: Probe results, typed and as written (what a report embeds: gpuscope.tui.report_hook).
        self.probe_results: list[LoadedResults] = [LoadedResults(*loaded) for loaded in probe_results]
        #: Bumped whenever probe_results changes (screens rebuild their roofline model then).
        self.results_version = 0
        #: CpuInfo for the CPU datasheet roof (None: this machine's; tests pin it).
        self.local_cpu_info: CpuInfo | None = None
        #: Suite files offered on the probes screen besides the shipped ones.
        self.extra_suites: list[Path] = [Path(p) for p in extra_suites]
        self.source_label = source.label if source is not None else "replay"
        self._settings_path = settings_path or config.config_path()
        self._persist = persist_settings
        self.settings, settings_problem = config.load_settings(self._settings_path)
        self._startup_messages: list[tuple[str, str]] = []
        if settings_problem:
            self._startup_messages.append((settings_problem, "warning"))
        self.alert_thresholds, thresholds_problem = load_thresholds(self._settings_path.parent / "alerts.toml")
        if thresholds_problem:
            self._startup_messages.append((thresholds_problem, "warning"))
        label = self.source_label.lower()
        #: True when the data comes from fake hardware (demo, fake NVML): reports say so.
        self.simulated = bool(getattr(source, "simulated", False)) or "demo" in label or "fake" in label
        self._poll_errors = 0
        self._poller: Poller | None = None
        self._replay_timer: Timer | None = None
        #: The source's topology, read off the UI thread, and its link findings as alerts.
        self.topology_feed = TopologyFeed(self)
        self._install_themes(theme, theme_dirs)

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters, then the text-safety filter: whatever a widget shows, nothing from a
        name reaches the terminal raw (gpuscope.tui.safe_lines)."""
        return [*super().get_line_filters(), SAFE_TEXT]

    def add_startup_message(self, message: str, severity: str = "warning") -> None:
        """A notification to show once the app is up (used by the commands)."""
        self._startup_messages.append((message, severity))

    # --- themes ------------------------------------------------------------------------------

    def _install_themes(self, requested: str | None, theme_dirs: Sequence[Path] | None) -> None:
        folders = list(theme_dirs) if theme_dirs is not None else [themes_dir(), config.user_themes_dir()]
        found, problems = discover_themes(folders)
        for problem in problems:
            self._startup_messages.append((f"Theme file skipped: {problem}", "error"))
        for loaded in found.values():
            self._startup_messages.extend((f"Theme file: {note}", "warning") for note in loaded.notes)
        if DEFAULT_THEME not in found:
            found[DEFAULT_THEME] = fallback_theme()
        self.theme_files: dict[str, ThemeFile] = found
        for loaded in found.values():
            self.register_theme(loaded.theme)
        wanted = requested or self.settings.theme or DEFAULT_THEME
        if wanted not in found:
            available = ", ".join(sorted(found))
            self._startup_messages.append(
                (f"No usable theme named {wanted!r}; using {DEFAULT_THEME} (available: {available})", "error")
            )
            wanted = DEFAULT_THEME
        self._persist_theme = False
        self.theme = wanted
        for name in list(BUILTIN_THEMES):  # only gpuscope themes (they carry chart colours) are offered
            if name not in found:
                self.unregister_theme(name)
        self.chart_palette: ChartPalette = found[wanted].palette
        self._requested_theme = requested

    def _on_theme_changed(self, theme: Theme) -> None:
        loaded = self.theme_files.get(theme.name)
        self.chart_palette = loaded.palette if loaded else ChartPalette()
        for screen in self._gpuscope_screens():
            screen.palette_changed()
        if self.latest_sample is not None:  # charts coloured from the palette redraw now
            self._deliver(self.latest_sample, push_history=False)
        if self._persist_theme and self.settings.theme != theme.name:
            self.settings.theme = theme.name
            self._save_settings()

    def _save_settings(self) -> None:
        if not self._persist:
            return
        try:
            config.save_settings(self.settings, self._settings_path)
        except GpuscopeError as exc:  # the choice holds for this run; the file stays as it was
            self.notify(f"Settings not saved: {exc}", severity="warning", markup=False)

    def set_panel_hidden(self, name: str, hidden: bool) -> None:
        """Remember that dashboard panel ``name`` is hidden (or shown) across runs."""
        panels = [p for p in self.settings.hidden_panels if p != name]
        if hidden:
            panels.append(name)
        self.settings.hidden_panels = panels
        self._save_settings()

    # --- start and stop ----------------------------------------------------------------------

    def on_mount(self) -> None:
        self.theme_changed_signal.subscribe(self, self._on_theme_changed)
        self.switch_mode(self.DEFAULT_MODE)
        for message, severity in self._startup_messages:
            self.notify(message, severity=severity, timeout=8, markup=False)  # type: ignore[arg-type]
        # --theme NAME is a choice: remember it. A theme picked from the palette later is too.
        self._persist_theme = True
        if self._requested_theme and self._requested_theme == self.theme and self.settings.theme != self.theme:
            self.settings.theme = self.theme
            self._save_settings()
        if self.replay is not None:
            self._deliver(self.replay.current)
            self._schedule_replay()
        elif self.source is not None:
            self._poller = Poller(self.source, self.interval_s, lambda result: self.post_message(PollResult(result)))
            self._update_poll_wants()
            self._poller.start()

    async def action_quit(self) -> None:
        kill_all()  # a running probe child goes first, so its reader thread ends at once
        await super().action_quit()

    def on_unmount(self) -> None:
        kill_all()
        if self._poller is not None:
            self._poller.stop()  # the poller closes the source

    def set_results(self, index: int | None, document: Results, written: bytes | JsonObject | None = None) -> int:
        """Add (``index`` None) or replace probe results (typed, and as written); returns its
        index. Screens showing the roofline rebuild it."""
        if index is None or not 0 <= index < len(self.probe_results):
            self.probe_results.append(LoadedResults(document, written))
            index = len(self.probe_results) - 1
        else:
            self.probe_results[index] = LoadedResults(document, written)
        self.results_version += 1
        if self.latest_sample is not None:
            for screen in self._gpuscope_screens():
                screen.receive_sample(self.latest_sample)
        return index

    def history_samples(self) -> list[Sample]:
        """The most recent samples seen (oldest first), for reports."""
        return self.recent_samples.to_list()

    def _gpuscope_screens(self) -> Iterable[GpuscopeScreen]:
        for screen in self.screen_stack:
            if isinstance(screen, GpuscopeScreen) and screen.is_mounted:
                yield screen

    # --- live polling ------------------------------------------------------------------------

    def _scan_period_s(self) -> float | None:
        """Seconds between host process scans the screen on show wants (None: none): every poll
        while the processes screen shows, every ``TOP_PROCESSES_PERIOD_S`` while the dashboard's
        top-processes panel shows."""
        screen = self.screen if self.screen_stack else None
        return screen.wants_host_processes() if isinstance(screen, GpuscopeScreen) else None

    def _update_poll_wants(self) -> None:
        """Tell the sampling thread what the screen on show wants: how often to scan host
        processes, and whether it lists GPU processes (read every second only then)."""
        if self._poller is not None:
            self._poller.scan_period_s = self._scan_period_s()
            screen = self.screen if self.screen_stack else None
            self._poller.source.set_gpu_processes_shown(
                isinstance(screen, GpuscopeScreen) and screen.shows_gpu_processes
            )

    def refresh_host_processes(self) -> None:
        """Scan host processes now, off the UI thread (a screen that shows them just opened)."""
        if self.source is None:
            self.host_processes = Unavailable(
                Reason.NOT_APPLICABLE, "a replay has no host processes (they are not in the log)"
            )
            return
        source = self.source

        def scan() -> None:
            found = source.host_processes()
            self.call_from_thread(self._processes_arrived, found)

        self.run_worker(scan, thread=True, group="processes", name="processes", exclusive=True, exit_on_error=False)

    def _processes_arrived(self, processes: list[HostProcess] | Unavailable) -> None:
        self.host_processes = processes
        if self.latest_sample is not None:
            for screen in self._gpuscope_screens():
                screen.processes_changed()

    def on_poll_result(self, message: PollResult) -> None:
        result, poller = message.result, self._poller
        if isinstance(result, Polled):
            self._poll_errors = 0
            if result.processes is not None:
                self.host_processes = result.processes
            try:
                self._deliver(result.sample)
            finally:
                if poller is not None:
                    self._update_poll_wants()
                    poller.ack()
            return
        self._poll_errors = result.failures
        delay = result.retry_in_s
        if result.failures in (1, 4) or delay >= MAX_BACKOFF_S and result.failures % 10 == 0:
            self.notify(f"Telemetry failed: {result.error}; retrying in {delay:.0f} s", severity="error", markup=False)

    def _deliver(self, sample: Sample, push_history: bool = True) -> None:
        self.latest_sample = sample
        if push_history:
            self.history.push(sample)
            self.recent_samples.append(sample)
        try:
            self.alerts = evaluate(sample, self.alert_thresholds)
        except Exception as exc:  # noqa: BLE001 - a malformed record must not stop the UI
            self.alerts = [Alert("warning", "error", None, "", f"alerts not evaluated: {exc}")]
        self.alerts = self.topology_feed.merge(self.alerts)
        for screen in self._gpuscope_screens():
            screen.receive_sample(sample)

    def topology_changed(self, alerts_changed: bool) -> None:
        """A topology read arrived: new link alerts reach every screen on the stack (as a sample
        does); otherwise only the topology screen redraws."""
        if self.latest_sample is None:
            return
        if alerts_changed:
            self._deliver(self.latest_sample, push_history=False)
            return
        for screen in self._gpuscope_screens():
            if isinstance(screen, TopologyScreen):
                screen.redraw()

    # --- replay ------------------------------------------------------------------------------

    def _schedule_replay(self) -> None:
        if self._replay_timer is not None:
            self._replay_timer.stop()
            self._replay_timer = None
        assert self.replay is not None
        delay = self.replay.delay_to_next_s()
        if delay is not None:
            self._replay_timer = self.set_timer(max(MIN_TIMER_S, delay), self._replay_tick, name="replay")

    def _replay_tick(self) -> None:
        assert self.replay is not None
        self._replay_timer = None
        self._deliver(self.replay.step(1))
        self._schedule_replay()

    def _replay_jumped(self) -> None:
        """After a seek or a backward step: rebuild the charts' history up to the new position."""
        assert self.replay is not None
        self.history.clear()
        self.history.extend(self.replay.window(self.history.capacity - 1)[:-1])
        self._deliver(self.replay.current)
        self._schedule_replay()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action.startswith("replay_"):
            return self.replay is not None
        return True

    def action_replay_toggle(self) -> None:
        assert self.replay is not None
        self.replay.paused = not self.replay.paused
        if self.replay.at_end and not self.replay.paused:
            self.replay.seek_fraction(0)
            self._replay_jumped()
            return
        self._deliver(self.replay.current, push_history=False)
        self._schedule_replay()

    def action_replay_step(self, count: int) -> None:
        assert self.replay is not None
        self.replay.paused = True
        if count == 1 and not self.replay.at_end:
            self._deliver(self.replay.step(1))
            self._schedule_replay()
        else:
            self.replay.step(count)
            self._replay_jumped()

    def action_replay_seek(self, fraction_delta: float) -> None:
        assert self.replay is not None
        duration = self.replay.end_s - self.replay.start_s
        self.replay.seek_s(self.replay.elapsed_s + fraction_delta * duration)
        self._replay_jumped()

    def action_replay_seek_fraction(self, fraction: float) -> None:
        assert self.replay is not None
        self.replay.seek_fraction(float(fraction))
        self._replay_jumped()

    def action_replay_speed(self, factor: float) -> None:
        assert self.replay is not None
        self.replay.speed = min(64.0, max(1 / 16, self.replay.speed * float(factor)))
        self._deliver(self.replay.current, push_history=False)
        self._schedule_replay()

    # --- screenshots, reports, commands ------------------------------------------------------

    def action_save_screenshot(self) -> None:
        """Save an SVG of the current screen into :func:`config.screenshots_dir`."""
        folder = config.screenshots_dir()
        try:
            folder.mkdir(parents=True, exist_ok=True)
            name = f"gpuscope-{self.current_mode}-{time.strftime('%Y%m%d-%H%M%S')}.svg"
            path = self.save_screenshot(filename=name, path=str(folder))
        except OSError as exc:
            self.notify(f"Could not save screenshot in {folder}: {exc.strerror or exc}", severity="error", markup=False)
            return
        self.notify(f"Screenshot saved: {path}", markup=False)

    def action_cycle_window(self) -> None:
        """Switch the history charts' window: 1, 5, 15 minutes (bounded by the history kept)."""
        position = WINDOWS_S.index(self.history_window_s) if self.history_window_s in WINDOWS_S else -1
        self.history_window_s = WINDOWS_S[(position + 1) % len(WINDOWS_S)]
        kept_s = self.history.capacity * self.interval_s if self.replay is None else None
        note = (
            f" (history keeps {window_label(kept_s)} at this interval)"
            if kept_s and kept_s < self.history_window_s
            else ""
        )
        self.notify(
            f"History charts: last {window_label(self.history_window_s)}{note} (press w to change)",
            timeout=2,
            markup=False,
        )
        if self.latest_sample is not None:
            self._deliver(self.latest_sample, push_history=False)

    def action_save_report(self) -> None:
        """Write a snapshot report (gpuscope.report) from what the app has seen."""
        save_report(self)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        for mode, key, label in SCREEN_TABS:
            yield SystemCommand(
                f"Screen: {label}", f"Show the {label.lower()} screen (key {key})", lambda m=mode: self.switch_mode(m)
            )
        yield SystemCommand(
            "Save screenshot (SVG)",
            f"Save the current screen as SVG in {config.screenshots_dir()} (key s)",
            self.action_save_screenshot,
        )
        yield SystemCommand(
            "Save snapshot report",
            f"Write a report of this session in {config.screenshots_dir()} (key R)",
            self.action_save_report,
        )
        for name in PANELS:
            yield SystemCommand(
                f"Toggle {name} panel",
                f"Hide or show the dashboard's {name} panel (key {PANEL_KEYS[name]} on the dashboard)",
                lambda n=name: self._toggle_panel(n),
            )
        if self.replay is not None:
            yield SystemCommand("Replay: pause/resume", "Pause or resume the replay (space)", self.action_replay_toggle)
            yield SystemCommand(
                "Replay: to start", "Seek to the first sample (home)", lambda: self.action_replay_seek_fraction(0)
            )
            yield SystemCommand(
                "Replay: to end", "Seek to the last sample (end)", lambda: self.action_replay_seek_fraction(1)
            )
        for command in super().get_system_commands(screen):
            if command.title != "Screenshot":  # ours saves to the documented folder
                yield command

    # --- switching screens -------------------------------------------------------------------

    def switch_mode(self, mode: str) -> AwaitMount:
        """Show the screen of ``mode`` with the latest sample (a screen shown before is brought up
        to date in the same step, so its first frame is not the old data), and tell the poller
        what the new screen wants (host or GPU processes, or neither)."""
        if self._poller is not None:
            self.call_after_refresh(self._update_poll_wants)
        mounted = super().switch_mode(mode)
        screen = self.screen
        if isinstance(screen, GpuscopeScreen) and screen.is_mounted and self.latest_sample is not None:
            screen.receive_sample(self.latest_sample)
        return mounted

    def _toggle_panel(self, name: str) -> None:
        self.switch_mode("dashboard")
        self.call_after_refresh(lambda: self.screen.run_action(f"toggle_panel('{name}')"))
