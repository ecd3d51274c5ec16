"""The replay position line: state, speed, time, a seek bar (clickable) and the keys."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual import events
from textual.widget import Widget

from gpuscope.tui.format import fmt_duration
from gpuscope.tui.sources import ReplayCursor

__all__ = ["ReplayBar"]


class ReplayBar(Widget):
    DEFAULT_CSS = """
    ReplayBar { height: 1; width: 1fr; background: $panel; }
    ReplayBar > .replay--done { color: $accent; }
    ReplayBar > .replay--todo { color: $text-disabled; }
    """
    COMPONENT_CLASSES = {"replay--done", "replay--todo"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        # (position, count, paused, speed, elapsed_s, duration_s, at_end); () before the first show
        self._state: tuple[int, int, bool, float, float, float, bool] | tuple[()] = ()
        self._bar_span = (0, 0)

    def show(self, cursor: ReplayCursor) -> None:
        state = (
            cursor.position,
            len(cursor),
            cursor.paused,
            cursor.speed,
            cursor.elapsed_s,
            cursor.end_s - cursor.start_s,
            cursor.at_end,
        )
        if state != self._state:
            self._state = state
            self.refresh()

    def render(self) -> Text:
        if not self._state:
            return Text("replay: loading…")
        position, count, paused, speed, elapsed, duration, at_end = self._state
        icon = "■ end" if at_end else ("‖ paused" if paused else "▶ playing")
        head = f" {icon} ×{speed:g}  {fmt_duration(elapsed)}/{fmt_duration(duration)}  {position + 1}/{count} "
        keys = " space pause · ←→ step · [ ] seek · +/- speed"
        width = self.size.width
        bar_width = max(0, width - len(head) - len(keys) - 1)
        if bar_width < 10:
            keys = ""
            bar_width = max(0, width - len(head) - 1)
        text = Text(head, no_wrap=True, overflow="crop")
        fraction = position / (count - 1) if count > 1 else 1.0
        done = round(fraction * bar_width)
        self._bar_span = (len(head), bar_width)
        text.append("━" * done, style=self.get_component_rich_style("replay--done"))
        text.append("─" * (bar_width - done), style=self.get_component_rich_style("replay--todo"))
        text.append(keys, style=Style(dim=True))
        return text

    def on_click(self, event: events.Click) -> None:
        start, width = self._bar_span
        if width and start <= event.x < start + width:
            fraction = (event.x - start) / max(1, width - 1)
            self.app.action_replay_seek_fraction(fraction)  # type: ignore[attr-defined]
