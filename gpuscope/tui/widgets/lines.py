"""A cheap base for widgets that redraw every sample: they build their lines as (text, style)
runs, cached as Strips until the data, size or styles change (Textual's line API, which skips
the markup/content machinery that dominated the dashboard's frame time).

When the data changes (:meth:`LineWidget.invalidate`) the lines are rebuilt at once and compared
with the ones on screen: only the lines that differ are repainted (Textual would otherwise
re-render every line of the widget, its border included, and every widget under it), and
nothing at all when the text came out the same. A line whose runs did not change keeps its
Strip.

A widget with no border, padding, outline, tint, hatch or opacity hands its cached lines to the
compositor itself (:meth:`PlainLines.render_lines`): Textual's generic path would copy every
line through its styles cache to add nothing. The strips are the same either way
(tests/test_tui_lines.py).
"""

from __future__ import annotations

from typing import TypeVar

from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.css.styles import StylesBase
from textual.dom import DOMNode
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from gpuscope.tui.textual_compat import repaint

__all__ = ["LineWidget", "PlainLines", "Run", "query_cached", "set_title"]


def set_title(widget: Widget, title: str) -> None:
    """Set ``widget``'s border title only when it changed, repainting only the row that shows
    it (Textual's setter repaints the whole widget and its children, even to the same text)."""
    if widget.border_title != title:
        from gpuscope.tui.textual_compat import set_border_title

        set_border_title(widget, title)


QueryType = TypeVar("QueryType", bound=Widget)


def query_cached(node: DOMNode, selector: str, expect_type: type[QueryType]) -> QueryType:
    """``node.query_one(selector, expect_type)``, remembered on ``node`` while the widget stays
    mounted (a DOM query per widget per sample added up on the UI thread)."""
    cache: dict[str, Widget] = node.__dict__.setdefault("_gpuscope_query_cache", {})
    widget = cache.get(selector)
    if widget is None or widget.parent is None:
        widget = cache[selector] = node.query_one(selector, expect_type)
    return widget  # type: ignore[return-value]  # stored as expect_type above


#: One styled run of text; a line is a list of runs.
Run = tuple[str, Style | None]


class PlainLines(Widget):
    """A widget whose :meth:`render_line` gives finished lines: when it draws no border,
    padding, outline, tint, hatch or opacity, the compositor gets those lines directly (after
    the app's line filters) instead of copies made by Textual's styles cache."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        #: (plain box?, background for the line filters), until the styles change.
        self._box: tuple[bool, Color] | None = None

    def notify_style_update(self) -> None:
        self._box = None
        super().notify_style_update()

    def plain_lines(self, start: int, end: int, width: int, height: int) -> list[Strip]:
        """Lines ``start`` to ``end`` of a ``width`` x ``height`` widget (override for speed)."""
        return [self.render_line(y) for y in range(start, end)]

    def render_lines(self, crop: Region) -> list[Strip]:
        box = self._box
        if box is None:
            box = self._box = (_plain_box(self.styles) and self.opacity == 1.0, self.background_colors[1])
        plain, background = box
        if not plain:
            return super().render_lines(crop)
        region = self.region
        strips = self.plain_lines(crop.y, crop.bottom, region.width, region.height)
        for line_filter in self.app.get_line_filters():
            strips = [strip.apply_filter(line_filter, background) for strip in strips]
        if crop.x or crop.width != region.width:
            strips = [strip.crop(crop.x, crop.right) for strip in strips]
        if self.auto_links:  # the hovered link (a clickable tab) lights up, as Textual does it
            hover = self.hover_style
            if hover.link_id and hover.meta and "@click" in hover.meta and self.link_style_hover:
                strips = [strip.style_links(hover.link_id, self.link_style_hover) for strip in strips]
        return strips


class LineWidget(PlainLines):
    """Subclasses implement :meth:`build_lines` and call :meth:`invalidate` when their data changed."""

    #: Repaint the changed lines as one region, from the first to the last (fewer compositor
    #: bands where repainting a line between them is cheap, as in a dense GPU card).
    merge_changed_lines = False

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        #: The lines last built (None: never, or the styles changed) and whether the data changed since.
        self._strips: list[Strip] | None = None
        self._stale = True
        self._strips_for: tuple[int, int] = (-1, -1)
        self._styles: dict[str, Style] = {}
        #: The runs behind each strip of the last build (a line whose runs are the same keeps its strip).
        self._runs: list[list[Run]] = []

    def build_lines(self, width: int, height: int) -> list[list[Run]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def invalidate(self, layout: bool = False) -> None:
        """The data changed: repaint the lines whose text or style changed (all of them when
        the layout changes or nothing was painted yet)."""
        old = self._strips
        self._stale = True
        width, height = self.size  # one region lookup (each ``self.size`` is one)
        if layout or old is None or self._strips_for != (width, height) or not self.display:
            self.refresh(layout=layout)
            return
        new = self._lines((width, height))
        if len(new) != len(old):
            repaint(self)
            return
        changed = [y for y, (before, after) in enumerate(zip(old, new)) if before is not after and before != after]
        if changed and self.merge_changed_lines:
            repaint(self, Region(0, changed[0], width, changed[-1] + 1 - changed[0]))
            return
        start = 0
        for index, y in enumerate(changed):  # one region per run of adjacent changed lines
            if index + 1 < len(changed) and changed[index + 1] == y + 1:
                continue
            first = changed[start]
            repaint(self, Region(0, first, width, y + 1 - first))
            start = index + 1

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
        self._runs = []
        super().notify_style_update()

    def _lines(self, size: tuple[int, int] | None = None) -> list[Strip]:
        width, height = size or self.size
        old = self._strips
        if old is None or self._stale or self._strips_for != (width, height):
            base = self.component_style("")
            if old is None or self._strips_for != (width, height):
                old, self._runs = [], []
            lines = self.build_lines(width, height)[:height]
            strips = []
            for y, runs in enumerate(lines):
                if y < len(old) and y < len(self._runs) and self._runs[y] == runs:
                    strips.append(old[y])
                    continue
                segments = [Segment(text, base + style if style is not None else base) for text, style in runs if text]
                strips.append(Strip(segments).adjust_cell_length(width, base))
            blank = Strip.blank(width, base)
            strips.extend(blank for _ in range(height - len(strips)))
            self._strips, self._strips_for, self._runs, self._stale = strips, (width, height), lines, False
            return strips
        return old

    def render_line(self, y: int) -> Strip:
        strips = self._lines()
        return strips[y] if 0 <= y < len(strips) else Strip.blank(self.size.width, self.component_style(""))

    def plain_lines(self, start: int, end: int, width: int, height: int) -> list[Strip]:
        return self._lines((width, height))[start:end]


def _plain_box(styles: StylesBase) -> bool:
    """True when Textual's styles cache would add nothing around a widget's content lines."""
    return (
        not any(edge for edge, _ in styles.border)
        and not any(edge for edge, _ in styles.outline)
        and not any(styles.padding)
        and styles.tint.a == 0
        and styles.text_opacity == 1.0
        and not (styles.has_rule("hatch") and styles.hatch != "none")
    )
