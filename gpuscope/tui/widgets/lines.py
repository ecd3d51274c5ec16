"""A cheap base for widgets that redraw every sample: they build their lines as (text, style)
runs, cached as Strips until the data, size or styles change (Textual's line API, which skips
the markup/content machinery that dominated the dashboard's frame time)."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

__all__ = ["LineWidget", "Run", "set_title"]


def set_title(widget: Widget, title: str) -> None:
    """Set ``widget``'s border title only when it changed (setting it repaints the whole
    widget and its children, every tick, even to the same text)."""
    if widget.border_title != title:
        widget.border_title = title


#: One styled run of text; a line is a list of runs.
Run = tuple[str, Style | None]


class LineWidget(Widget):
    """Subclasses implement :meth:`build_lines` and call :meth:`invalidate` when their data changed."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._strips: list[Strip] | None = None
        self._strips_for: tuple[int, int] = (-1, -1)
        self._styles: dict[str, Style] = {}

    def build_lines(self, width: int, height: int) -> list[list[Run]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def invalidate(self, layout: bool = False) -> None:
        """The data changed: rebuild the lines on the next paint."""
        self._strips = None
        self.refresh(layout=layout)

    def component_style(self, name: str) -> Style:
        """A component class's style over the widget's own (cached until styles change)."""
        style = self._styles.get(name)
        if style is None:
            base = self.rich_style
            style = self._styles[name] = self.get_component_rich_style(name) if name else base
        return style

    def notify_style_update(self) -> None:
        self._styles.clear()
        self._strips = None
        super().notify_style_update()

    def _lines(self) -> list[Strip]:
        width, height = self.size.width, self.size.height
        if self._strips is None or self._strips_for != (width, height):
            base = self.component_style("")
            strips = []
            for runs in self.build_lines(width, height)[:height]:
                segments = [Segment(text, base + style if style is not None else base) for text, style in runs if text]
                strips.append(Strip(segments).adjust_cell_length(width, base))
            blank = Strip.blank(width, base)
            strips.extend(blank for _ in range(height - len(strips)))
            self._strips, self._strips_for = strips, (width, height)
        return self._strips

    def render_line(self, y: int) -> Strip:
        strips = self._lines()
        return strips[y] if 0 <= y < len(strips) else Strip.blank(self.size.width, self.component_style(""))
