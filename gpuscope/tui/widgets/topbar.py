"""The top line of every screen: screen tabs (clickable), the host, the data source and the
time of the sample shown."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip

from gpuscope.textsafe import safe_text
from gpuscope.tui.format import fmt_time_of_day
from gpuscope.tui.textual_compat import repaint
from gpuscope.tui.widgets.lines import PlainLines

__all__ = ["TopBar", "SCREEN_TABS"]

#: (mode name, key, label) in display order.
SCREEN_TABS = (
    ("dashboard", "1", "Dashboard"),
    ("roofline", "2", "Roofline"),
    ("probes", "3", "Probes"),
    ("processes", "4", "Processes"),
)


class TopBar(PlainLines):
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
        #: (width, active) -> the tabs' strip and its cell length (rendered once through Rich Text)
        self._left: tuple[tuple[int, str], Strip, int] | None = None
        self._line: tuple[tuple[int, str, str], Strip] | None = None

    def set_status(self, host: str, source: str, timestamp: float | None) -> None:
        clock = fmt_time_of_day(timestamp)
        right = safe_text(f"{host} · {source} · {clock}")  # laid out as the line filter will show it
        if right != self._right:
            self._right = right
            repaint(self)

    def notify_style_update(self) -> None:
        self._left = self._line = None
        super().notify_style_update()

    def plain_lines(self, start: int, end: int, width: int, height: int) -> list[Strip]:
        return [self.render_line(y) if y == 0 else Strip.blank(width) for y in range(start, end)]

    def render_line(self, y: int) -> Strip:
        """The line from the cached tabs plus the host/source/clock text: the clock changes every
        second, and rendering the whole line through Rich Text each time cost more than the rest
        of the frame. :meth:`render` stays the reference (same picture)."""
        width = self.size.width
        if y != 0 or width <= 0:
            return super().render_line(y)
        key = (width, self.active, self._right)
        if self._line is not None and self._line[0] == key:
            return self._line[1]
        if self._left is None or self._left[0] != (width, self.active):
            right, self._right = self._right, ""
            try:
                self._render_content()
                tabs = self._tabs_text(width)
                left = self._render_cache.lines[0].crop(0, tabs.cell_len)
            finally:
                self._right = right
            self._left = ((width, self.active), left, tabs.cell_len)
        _, left, used = self._left
        base = self.visual_style.rich_style
        room = width - used - 1
        right = self._right
        while room < len(right) and " · " in right:
            right = right.split(" · ", 1)[-1]
        strips = [left]
        if room >= len(right):
            strips.append(Strip([Segment(" " * (room - len(right)) + right + " ", base)]))
        line = Strip.join(strips).adjust_cell_length(width, base)
        self._line = (key, line)
        return line

    def _tabs_text(self, width: int) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(" gpuscope ", style=self.get_component_rich_style("topbar--brand"))
        narrow = width < 100
        for mode, key, label in SCREEN_TABS:
            style = "topbar--active" if mode == self.active else "topbar--tab"
            shown = label[:4] if narrow and mode != self.active else label
            text.append(f" {key} {shown} ", style=self.get_component_rich_style(style) + _click(mode))
        return text

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(" gpuscope ", style=self.get_component_rich_style("topbar--brand"))
        narrow = self.size.width < 100
        for mode, key, label in SCREEN_TABS:
            style = "topbar--active" if mode == self.active else "topbar--tab"
            shown = label[:4] if narrow and mode != self.active else label
            text.append(f" {key} {shown} ", style=self.get_component_rich_style(style) + _click(mode))
        room = self.size.width - text.cell_len - 1
        right = self._right
        while room < len(right) and " · " in right:
            right = right.split(" · ", 1)[-1]  # drop the host, then the source; keep the clock
        if room >= len(right):
            text.append(" " * (room - len(right)) + right + " ")
        return text


def _click(mode: str) -> Style:
    return Style.from_meta({"@click": f"app.switch_mode('{mode}')"})
