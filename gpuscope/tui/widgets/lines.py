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

from collections.abc import Sequence
from typing import TypeVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.css.styles import StylesBase
from textual.dom import DOMNode
from textual.filter import ANSIToTruecolor, DimFilter, LineFilter, Monochrome, NoColor
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from gpuscope.textsafe import has_unsafe, safe_text
from gpuscope.tui.safe_lines import SafeText
from gpuscope.tui.textual_compat import LightStrip, repaint

__all__ = ["Edges", "LineWidget", "Paint", "PlainLines", "Run", "query_cached", "set_title"]


def set_title(widget: Widget, title: str) -> None:
    """Set ``widget``'s border title only when it changed, repainting only the row that shows
    it (Textual's setter repaints the whole widget and its children, even to the same text).
    Names in it are shown escaped (gpuscope.textsafe.safe_text)."""
    title = safe_text(title)
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

    def filtered_lines(
        self, start: int, end: int, size: tuple[int, int], filters: Sequence[LineFilter], background: Color
    ) -> list[Strip]:
        """:meth:`plain_lines` through the app's line ``filters`` (override to filter each line once)."""
        return [_finished(strip, filters, background) for strip in self.plain_lines(start, end, *size)]

    def render_lines(self, crop: Region) -> list[Strip]:
        box = self._box
        if box is None:
            box = self._box = (_plain_box(self.styles) and self.opacity == 1.0, self.background_colors[1])
        plain, background = box
        if not plain:
            return super().render_lines(crop)
        width, height = self.outer_size  # the region's size (``region`` looks it up on the screen)
        strips = self.filtered_lines(crop.y, crop.bottom, (width, height), self.app.get_line_filters(), background)
        if crop.x or crop.width != width:
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
        #: What they were built for: (width, height, line filters applied, their background, edges).
        self._paint: Paint = (-1, -1, (), _UNFILTERED, None)
        self._styles: dict[str, Style] = {}
        #: The runs behind each strip of the last build (a line whose runs are the same keeps its strip).
        self._runs: list[list[Run]] = []
        #: (paint, base style) -> {a run's style: the style its segment gets, filters applied}.
        self._final: tuple[object, dict[Style | None, Style]] = (None, {})
        #: (outer size, content size) until the outer size or the styles change.
        self._sized: tuple[Size, tuple[int, int]] | None = None

    def content_wh(self) -> tuple[int, int]:
        """``self.size`` as (width, height), worked out again only when the outer size or the
        styles changed (``size`` looks the widget up on its screen each time)."""
        outer = self.outer_size
        sized = self._sized
        if sized is None or sized[0] != outer:
            gutter = self.styles.gutter
            sized = self._sized = (outer, (outer.width - gutter.width, outer.height - gutter.height))
        return sized[1]

    def build_lines(self, width: int, height: int) -> list[list[Run]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def invalidate(self, layout: bool = False) -> None:
        """The data changed: repaint the lines whose text or style changed (all of them when
        the layout changes or nothing was painted yet)."""
        old = self._strips
        self._stale = True
        width, height = self.content_wh()
        paint = self._paint
        if layout or not self.display:
            self.refresh(layout=layout)
            return
        if old is None or paint[0] != width or paint[1] != height:
            repaint(self)  # not painted yet at this size (nothing to paint while out of view)
            return
        new = self._lines(paint)
        if len(new) != len(old):
            repaint(self)
            return
        changed = [y for y, (before, after) in enumerate(zip(old, new)) if before is not after and before != after]
        if changed and self.merge_changed_lines:
            self.repaint_rows(changed[0], changed[-1] + 1 - changed[0])
            return
        start = 0
        for index, y in enumerate(changed):  # one region per run of adjacent changed lines
            if index + 1 < len(changed) and changed[index + 1] == y + 1:
                continue
            first = changed[start]
            self.repaint_rows(first, y + 1 - first)
            start = index + 1

    def repaint_rows(self, y: int, rows: int) -> None:
        """Repaint ``rows`` content lines from ``y`` (override to widen the region)."""
        repaint(self, Region(0, y, self._paint[0], rows))

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
        self._sized = None
        super().notify_style_update()

    def _lines(self, paint: Paint) -> list[Strip]:
        """The lines for ``paint`` (width, height, line filters, background, edges), built again
        where the data changed: each new line is one Strip, padded, filtered and between the
        edges as it is made (Textual would make a Strip for the runs, one for the padding, one
        per filter, and one to join a border's pieces)."""
        old = self._strips
        if old is not None and not self._stale and self._paint == paint:
            return old
        width, height, filters, background, edges = paint
        base = self.component_style("")
        if old is None or self._paint != paint:
            old, self._runs = [], []
        if self._final[0] != (paint, base):
            self._final = ((paint, base), {})
        final = self._final[1]
        per_style = _per_style(filters)
        lines = self.build_lines(width, height)[:height]
        strips = []
        previous = self._runs
        for y, runs in enumerate(lines):
            if y < len(old) and y < len(previous) and previous[y] == runs:
                strips.append(old[y])
            else:
                strips.append(_strip(runs, base, width, filters, background, final, edges, per_style))
        if len(strips) < height:
            blank = _finished(Strip.blank(width, base), filters, background, edges)
            strips.extend(blank for _ in range(height - len(strips)))
        self._strips, self._paint, self._runs, self._stale = strips, paint, lines, False
        return strips

    def render_line(self, y: int) -> Strip:
        width, height = self.size
        strips = self._lines((width, height, (), _UNFILTERED, None))
        return strips[y] if 0 <= y < len(strips) else Strip.blank(width, self.component_style(""))

    def filtered_lines(
        self, start: int, end: int, size: tuple[int, int], filters: Sequence[LineFilter], background: Color
    ) -> list[Strip]:
        return self._lines((*size, tuple(filters), background, None))[start:end]


#: Segments to put before and after each line (a border's pieces), and the cells of each.
Edges = tuple[tuple[Segment, ...], tuple[Segment, ...], int, int]
#: What a LineWidget's strips were made for: (width, height, line filters applied, their
#: background, the edges around each line or None).
Paint = tuple[int, int, tuple[LineFilter, ...], Color, Edges | None]
#: The background of strips made without filters (Textual's styles cache filters them).
_UNFILTERED = Color(0, 0, 0)


def _strip(
    runs: list[Run],
    base: Style,
    width: int,
    filters: tuple[LineFilter, ...],
    background: Color,
    final: dict[Style | None, Style],
    edges: Edges | None = None,
    per_style: bool | None = None,
) -> Strip:
    """One line of ``runs`` over ``base``, padded (or cut) to ``width`` cells, through ``filters``,
    between ``edges``: the segments ``Strip(...).adjust_cell_length(width, base).apply_filter(...)``
    would give (joined with the edges), in one Strip. ``final`` remembers each run style's
    filtered style (Textual's filters map each segment's style on its own; an unknown filter
    gets the segments); ``per_style`` is ``_per_style(filters)``, passed when known."""
    if per_style is None:
        per_style = _per_style(filters)
    segments = list(edges[0]) if edges is not None else []
    length = 0
    for text, style in runs:
        if text:
            if has_unsafe(text):  # a name from outside: shown escaped, measured as shown
                text = safe_text(text)
            resolved = final.get(style) if per_style else None
            if resolved is None:
                resolved = base + style if style is not None else base
                if per_style:
                    resolved = final[style] = _filtered_style(resolved, filters, background)
            segments.append(_segment(Segment, (text, resolved, None)))  # Segment(text, resolved)
            length += _cells(text)
    if length > width or not per_style:  # rare: Textual cuts it, or filters we cannot map by style
        strip = Strip(
            [Segment(safe_text(text), base + style if style is not None else base) for text, style in runs if text]
        ).adjust_cell_length(width, base)
        return _finished(strip, filters, background, edges)
    if length < width:
        padding = final.get(None)
        if padding is None:
            padding = final[None] = _filtered_style(base, filters, background)
        segments.append(Segment(" " * (width - length), padding))
    if edges is None:
        return LightStrip(segments, width)
    segments.extend(edges[1])
    return LightStrip(segments, width + edges[2] + edges[3])


#: Characters one cell wide in rich's table besides printable ASCII: the charts' block bars.
_ONE_CELL = " ▁▂▃▄▅▆▇█"


def _cells(text: str) -> int:
    """``rich.cells.cell_len(text)``: printable ASCII and chart bars (one cell a character) are
    counted without it (its cache misses on a chart's rows, which change every sample)."""
    if text.isascii() and text.isprintable() or not text.strip(_ONE_CELL):
        return len(text)
    return cell_len(text)


def _finished(strip: Strip, filters: Sequence[LineFilter], background: Color, edges: Edges | None = None) -> Strip:
    """``strip`` through the line ``filters`` and between ``edges``, as Textual does it (a new Strip
    per step): the general way, for the lines :func:`_strip` cannot build in one."""
    for line_filter in filters:
        strip = strip.apply_filter(line_filter, background)
    return strip if edges is None else Strip.join([Strip(edges[0]), strip, Strip(edges[1])])


#: ``_segment(Segment, (text, style, None))`` is ``Segment(text, style)`` without the named
#: tuple's Python-level ``__new__`` (a line of a GPU card is a dozen segments).
_segment = tuple.__new__

#: Line filters that map each segment's style on its own: Textual's (text unchanged), and the
#: text-safety filter, whose work :func:`_strip` does as it builds a line (styles unchanged).
_STYLE_FILTERS = frozenset((ANSIToTruecolor, DimFilter, Monochrome, NoColor, SafeText))


def _per_style(filters: Sequence[LineFilter]) -> bool:
    """True when every one of ``filters`` maps each segment's style on its own."""
    return all(type(line_filter) in _STYLE_FILTERS for line_filter in filters)


def _filtered_style(style: Style, filters: tuple[LineFilter, ...], background: Color) -> Style:
    segments = [Segment(" ", style)]
    for line_filter in filters:
        segments = line_filter.apply(segments, background)
    return segments[0].style or style


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
