"""A base for widgets that redraw every sample (Textual's line API): they build their lines as
(text, style) runs, kept as Strips until the data, size or styles change.

When the data changes (:meth:`LineWidget.invalidate`) the lines are built again at once and
compared with the ones shown: only the lines that differ are refreshed, and nothing when the text
came out the same (Textual would otherwise render every line of the widget again). A line whose
runs did not change keeps its Strip.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from gpuscope.textsafe import has_unsafe, safe_text

__all__ = ["LineWidget", "Run", "set_title"]


def set_title(widget: Widget, title: str) -> None:
    """Set ``widget``'s border title only when it changed (Textual's setter repaints the widget
    even for the same text). Names in it are shown escaped (gpuscope.textsafe.safe_text)."""
    title = safe_text(title)
    if widget.border_title != title:
        widget.border_title = title


#: One styled run of text; a line is a list of runs.
Run = tuple[str, Style | None]


class LineWidget(Widget):
    """Subclasses implement :meth:`build_lines` and call :meth:`invalidate` when their data changed."""

    #: Refresh the changed lines as one region, from the first to the last (one refresh where
    #: the lines between them are cheap to render again, as in a dense GPU card).
    merge_changed_lines = False

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        #: The lines last built (None: never, or the styles changed) and whether the data changed since.
        self._strips: list[Strip] | None = None
        self._stale = True
        #: What they were built for: (width, height).
        self._size_built = (-1, -1)
        self._styles: dict[str, Style] = {}
        #: The runs behind each strip of the last build (a line whose runs are the same keeps its strip).
        self._runs: list[list[Run]] = []

    def build_lines(self, width: int, height: int) -> list[list[Run]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def invalidate(self, layout: bool = False) -> None:
        """The data changed: refresh the lines whose text or style changed (all of them when the
        layout changes or nothing was built yet at this size)."""
        old = self._strips
        self._stale = True
        if layout or not self.display:
            self.refresh(layout=layout)
            return
        width, height = self.size
        if old is None or self._size_built != (width, height):
            self.refresh()
            return
        new = self._lines(width, height)
        if len(new) != len(old):
            self.refresh()
            return
        changed = [y for y, (before, after) in enumerate(zip(old, new)) if before is not after and before != after]
        if changed and self.merge_changed_lines:
            self.refresh(Region(0, changed[0], width, changed[-1] + 1 - changed[0]))
            return
        start = 0
        for index, y in enumerate(changed):  # one region per run of adjacent changed lines
            if index + 1 < len(changed) and changed[index + 1] == y + 1:
                continue
            first = changed[start]
            self.refresh(Region(0, first, width, y + 1 - first))
            start = index + 1

    def component_style(self, name: str) -> Style:
        """A component class's style over the widget's own (kept until the styles change)."""
        style = self._styles.get(name)
        if style is None:
            base = self.rich_style
            style = self._styles[name] = self.get_component_rich_style(name) if name else base
        return style

    def notify_style_update(self) -> None:
        self._styles.clear()
        self._strips = None
        self._runs = []
        super().notify_style_update()

    def _lines(self, width: int, height: int) -> list[Strip]:
        """The lines at ``width`` x ``height``, built again where the data changed."""
        old = self._strips
        if old is not None and not self._stale and self._size_built == (width, height):
            return old
        if old is None or self._size_built != (width, height):
            old, self._runs = [], []
        base = self.component_style("")
        lines = self.build_lines(width, height)[:height]
        previous = self._runs
        strips = [
            old[y] if y < len(old) and y < len(previous) and previous[y] == runs else _strip(runs, base, width)
            for y, runs in enumerate(lines)
        ]
        if len(strips) < height:
            blank = Strip.blank(width, base)
            strips.extend(blank for _ in range(height - len(strips)))
        self._strips, self._size_built, self._runs, self._stale = strips, (width, height), lines, False
        return strips

    def render_line(self, y: int) -> Strip:
        width, height = self.size
        strips = self._lines(width, height)
        return strips[y] if 0 <= y < len(strips) else Strip.blank(width, self.component_style(""))


def _strip(runs: list[Run], base: Style, width: int) -> Strip:
    """One line of ``runs`` over ``base``, padded (or cut) to ``width`` cells: what
    ``Strip(segments).adjust_cell_length(width, base)`` gives. Text from outside (a name) is
    escaped before it is measured, so the line keeps its layout once shown."""
    segments: list[Segment] = []
    length = 0
    for text, style in runs:
        if text:
            if has_unsafe(text):
                text = safe_text(text)
            segments.append(Segment(text, base + style if style is not None else base))
            length += _cells(text)
    if length == width:
        return Strip(segments, width)
    if length < width:
        segments.append(Segment(" " * (width - length), base))
        return Strip(segments, width)
    return Strip(segments, length).adjust_cell_length(width, base)


#: Characters one cell wide in rich's table besides printable ASCII: the charts' block bars.
_ONE_CELL = " ▁▂▃▄▅▆▇█"


def _cells(text: str) -> int:
    """``rich.cells.cell_len(text)``: printable ASCII and chart bars (one cell a character) are
    counted without it (its cache misses on a chart's rows, which change every sample)."""
    if text.isascii() and text.isprintable() or not text.strip(_ONE_CELL):
        return len(text)
    return cell_len(text)
