"""The top line of every screen: screen tabs (clickable), the host, the data source and the
time of the sample shown."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from gpuscope.textsafe import safe_text
from gpuscope.tui.format import fmt_time_of_day

__all__ = ["TopBar", "SCREEN_TABS"]

#: (mode name, key, label) in display order.
SCREEN_TABS = (
    ("dashboard", "1", "Dashboard"),
    ("roofline", "2", "Roofline"),
    ("probes", "3", "Probes"),
    ("processes", "4", "Processes"),
    ("topology", "5", "Topology"),
)


class TopBar(Widget):
    """One line; redraws only when its text changes."""

    DEFAULT_CSS = """
    TopBar { height: 1; width: 1fr; background: $panel; color: $text; }
    TopBar > .topbar--active { background: $primary; color: $text; text-style: bold; }
    TopBar > .topbar--tab { color: $text-muted; }
    TopBar > .topbar--brand { color: $accent; text-style: bold; }
    """
    COMPONENT_CLASSES = {"topbar--active", "topbar--tab", "topbar--brand"}

    def __init__(self, active: str) -> None:
        super().__init__()
        self.active = active
        self._right = ""

    def set_status(self, host: str, source: str, timestamp: float | None) -> None:
        clock = fmt_time_of_day(timestamp)
        right = safe_text(f"{host} · {source} · {clock}")  # laid out as the line filter will show it
        if right != self._right:
            self._right = right
            self.refresh()

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(" gpuscope ", style=self.get_component_rich_style("topbar--brand"))
        narrow = self.size.width < 100
        for mode, key, label in SCREEN_TABS:
            style = "topbar--active" if mode == self.active else "topbar--tab"
            shown = label[:4] if narrow and mode != self.active else label
            text.append(f" {key} {shown} ", style=self.get_component_rich_style(style) + _click(mode))
        room = self.size.width - text.cell_len - 2  # a space after the tabs, one at the end
        right = self._right
        while room < len(right) and " · " in right:
            right = right.split(" · ", 1)[-1]  # drop the host, then the source; keep the clock
        if room >= len(right):
            text.append(" " * (room - len(right)) + right + " ")
        return text


def _click(mode: str) -> Style:
    return Style.from_meta({"@click": f"app.switch_mode('{mode}')"})
