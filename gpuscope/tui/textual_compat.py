"""Every use of Textual's private internals, in one place (Textual 8.x; tests/test_tui_textual_compat.py
fails when a release renames or removes one).

The fast screen switch (``GpuscopeApp.switch_mode``) brings a screen that is already mounted up to
date and paints it on the next frame, skipping Textual's 50 ms ``delay_update`` mask and the CSS
re-application on resume when nothing the styles depend on changed. It needs:

- ``App._screen_stacks``: whether a mode's screen is mounted already;
- ``App._css_update_count`` and ``App._PSEUDO_CLASSES``: what a suspended screen's styles depend on;
- ``App.delay_update(delay)``: the method the switch overrides to skip the mask.

Also here: the row-cropped compositor (``Compositor`` internals, and ``ChopsUpdate`` for the
terminal text), :func:`repaint` (a widget's ``_dirty_regions``, ``_repaint_regions`` and
``_styles_cache``, the screen's ``_dirty_widgets``), :func:`set_border_title`
(``Widget._border_title``) and :data:`LightStrip` (``Strip``'s slots and its caches' sizes).

When any of them is missing, :data:`FAST_SWITCH` is False and the app falls back to plain
``switch_mode`` (correct, about 50 ms slower per switch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.app import App
from textual.dom import NoScreen
from textual.widget import Widget

if TYPE_CHECKING:
    from textual.strip import Strip

__all__ = ["FAST_SWITCH", "LightStrip", "mode_is_mounted", "repaint", "set_border_title", "style_state"]


def _has_internals() -> bool:
    return (
        isinstance(getattr(App, "_PSEUDO_CLASSES", None), dict)
        and callable(getattr(App, "delay_update", None))
        and callable(getattr(App, "batch_update", None))
    )


#: True when this Textual has what the fast switch relies on (instance attributes are checked per call).
FAST_SWITCH = _has_internals()


def mode_is_mounted(app: Any, mode: str) -> bool:
    """True when ``mode``'s screen was composed before (so the fast switch applies); False when it
    was not, or when this Textual does not expose that (the caller uses plain ``switch_mode``)."""
    stacks = getattr(app, "_screen_stacks", None)
    return FAST_SWITCH and isinstance(stacks, dict) and mode in stacks


def style_state(app: Any) -> tuple[object, ...] | None:
    """What a suspended screen's styles depend on besides its own nodes (the app's CSS generation
    and active pseudo-classes), or None when unknown (then styles are always re-applied)."""
    count = getattr(app, "_css_update_count", None)
    pseudo = getattr(type(app), "_PSEUDO_CLASSES", None)
    if not FAST_SWITCH or count is None or not isinstance(pseudo, dict):
        return None
    return (count, tuple(name for name, test in pseudo.items() if test(app)))


def set_border_title(widget: Any, title: str) -> None:
    """Set ``widget``'s border title and repaint only its top row. Textual's ``border_title``
    setter repaints the whole widget, every line of every child under it included (a process
    count in a panel title changed every few seconds); this stores the title as the setter does
    (``Widget._border_title``) and refreshes the one row that shows it. Falls back to the setter
    when that attribute is missing or the widget has no top border."""
    from textual.content import Content
    from textual.geometry import Region

    if (
        not isinstance(getattr(widget, "_border_title", None), (Content, type(None)))
        or not widget.is_mounted
        or not widget.styles.border_top[0]
    ):
        widget.border_title = title
        return
    widget._border_title = widget.render_str(title).expand_tabs(4).split()[0]
    offset = widget.content_offset  # refresh regions are relative to the content area
    repaint(widget, Region(-offset.x, -offset.y, widget.outer_size.width, 1))


def repaint(widget: Any, *regions: Any) -> None:
    """``widget.refresh(*regions)`` for new content (no layout change), handed to the screen at
    once. Textual's ``refresh`` posts a Prompt to the widget, whose idle handler posts an Update
    to the screen: two messages and a wake-up of the widget's task, for each of the dozen
    widgets a sample changes. This marks the regions dirty as ``refresh`` does and adds the
    widget to the screen's dirty widgets as the screen's Update handler does (``_dirty_widgets``;
    the screen's own Prompt starts its update timer). Regions are marked as ``_set_dirty`` marks
    them, with the content offset taken from the styles' gutter alone (``content_offset`` adds
    the scrollbar gutter, which takes room on the right and bottom only, after working out
    whether each scrollbar shows: most of a repaint's cost). Falls back to ``refresh`` when
    those internals are missing or the widget is not mounted and shown on a screen.

    A widget out of view (scrolled out of the body, or not laid out yet) is marked but not
    handed to the screen: it has nothing to paint, and its marked lines are rendered when a
    scroll or layout brings it into view. Handing it over was a bug: the compositor's
    ``update_widgets`` takes a widget outside its visible map for a new one and invalidates its
    full map, and the next ``widget.region`` lookup rebuilds that map from the DOM as it is
    *now*. When a layout change was pending in the same cycle (the alert line shown, a line
    hidden: the Layout message reaches the screen from the changed widget's idle handler, after
    the screen painted this repaint), that rebuild took in the new geometry without marking what
    moved, and the reflow that followed found nothing changed: the terminal kept the old rows
    (tests/test_tui_terminal_state.py).

    The screen and the checks on the widget's internals are remembered on the widget after the
    first repaint (``widget.screen`` walks up the DOM each time: a third of a repaint's cost);
    what can change (mounted, closing, shown, the screen laid out) is checked every time."""
    known = widget.__dict__.get("_gpuscope_repaint") if isinstance(widget, Widget) else None
    if known is not None and widget._parent is not None:
        screen, dirty, compositor = known
        fast = (
            not widget._closing
            and widget.display
            and screen._compositor is compositor
            and screen in compositor
            and screen._dirty_widgets is dirty
        )
    else:
        screen, dirty, compositor, fast = _repaint_target(widget)
    if not fast:
        widget.refresh(*regions)
        return
    widget._layout_cache.clear()
    if regions:
        offset = widget.styles.gutter.top_left
        moved = [region.translate(offset) for region in regions]
        widget._dirty_regions.update(moved)
        widget._repaint_regions.update(moved)
        widget._styles_cache.set_dirty(*moved)
    else:
        widget._set_dirty()
    widget.clear_cached_dimensions()
    widget._rich_style_cache.clear()
    if widget in compositor.visible_widgets:  # (see the docstring: never a widget out of view)
        dirty.add(widget)
        screen.check_idle()


def _repaint_target(widget: Any) -> tuple[Any, Any, Any, bool]:
    """(screen, its dirty widgets, its compositor, whether :func:`repaint` may hand ``widget``
    to it directly), remembered on ``widget`` when it may."""
    try:
        screen = widget.screen if widget.is_mounted else None
    except NoScreen:
        screen = None
    dirty = getattr(screen, "_dirty_widgets", None)
    compositor = getattr(screen, "_compositor", None)
    fast = not (
        screen is None
        or compositor is None
        or not isinstance(widget, Widget)
        or not isinstance(dirty, set)
        or not isinstance(getattr(type(compositor), "visible_widgets", None), property)
        or widget._closing
        or not widget.display
        or screen not in compositor
        or not hasattr(widget, "_layout_cache")
        or not hasattr(widget, "_rich_style_cache")
        or not hasattr(widget, "_dirty_regions")
        or not hasattr(widget, "_repaint_regions")
        or not hasattr(widget, "_styles_cache")
    )
    if fast:
        widget.__dict__["_gpuscope_repaint"] = (screen, dirty, compositor)
    return screen, dirty, compositor, fast


def row_cropped_compositor() -> Any:
    """A compositor that, on a partial update, renders only the widgets that can show in the
    updated area. Textual's ``Compositor._get_renders`` hands every widget whose *clip* overlaps
    the dirty area to ``render_lines`` with its whole region: inside a scrolling body (the
    dashboard) that is every panel and container, every frame, though only the updated spans
    are painted. Here each band of adjacent updated rows is rendered on its own, and a widget is
    skipped when it lies outside the band's columns or when the widgets above it (rendered
    first, the first render of a cut wins) already cover its part of the band: the containers
    under the panels. The picture is the same. Falls back to Textual's own compositor when the
    internals it relies on (``_get_renders``, ``visible_widgets``) are missing."""
    from textual import _compositor
    from textual._compositor import Compositor
    from textual.geometry import Region

    ChopsUpdate: Any = getattr(_compositor, "ChopsUpdate", None)  # a private Textual class, or None
    needed = ("_get_renders", "_regions_to_spans", "render_partial_update")
    if (
        ChopsUpdate is None
        or not all(callable(getattr(Compositor, name, None)) for name in needed)
        or not isinstance(getattr(Compositor, "visible_widgets", None), property)
        or not isinstance(getattr(Compositor, "cuts", None), property)
    ):
        return Compositor()

    from rich.control import Control

    #: (x, y) -> the cursor move there (rich makes a Control and its Segment for each move).
    moves: dict[tuple[int, int], str] = {}

    class Update(ChopsUpdate):  # type: ignore[misc]  # a private Textual class (typed Any here)
        def render_segments(self, console: Any) -> str:
            """``ChopsUpdate.render_segments`` (the same text) with each cursor move made once."""
            sequences: list[str] = []
            append = sequences.append
            chops, chop_ends = self.chops, self.chop_ends
            last_y = self.spans[-1][0]
            for y, x1, x2 in self.spans:
                for end, (x, strip) in zip(chop_ends[y], chops[y].items()):
                    if strip is None or x > x2 or end <= x1:
                        continue
                    if not (x2 > x >= x1 and end <= x2):
                        strip = strip.crop(0, min(end, x2) - x)
                    move = moves.get((x, y))
                    if move is None:
                        move = moves[x, y] = Control.move_to(x, y).segment.text
                    append(move)
                    append(strip.render(console))
                if y != last_y:
                    append("\n")
            return "".join(sequences)

    class RowCroppedCompositor(Compositor):
        def render_partial_update(self) -> Any:
            """Render each band of adjacent updated rows on its own (the clock on the first row
            and a chart further down are two small bands, not every row between them), cropped
            to the columns its spans touch."""
            update_regions = self._dirty_regions.copy()
            self._dirty_regions.clear()
            if not update_regions:
                return None
            spans = list(self._regions_to_spans(update_regions))
            extent: dict[int, tuple[int, int]] = {}
            for y, x1, x2 in spans:
                known = extent.get(y)
                if known is None:
                    extent[y] = (x1, x2)
                else:
                    extent[y] = (known[0] if known[0] < x1 else x1, known[1] if known[1] > x2 else x2)
            rows = sorted(extent)
            screen = self.size.region
            dirty = [
                (r.x, r.y, r.right, r.bottom)
                for r in (region.intersection(screen) for region in update_regions)
                if r.width and r.height
            ]
            cuts = self.cuts
            chops: list[Any] = [None] * len(cuts)  # ChopsUpdate reads only the rows of the spans
            start = 0
            for index, y in enumerate(rows):
                if index + 1 < len(rows) and rows[index + 1] == y + 1:
                    continue
                first = rows[start]
                left = min(extent[row][0] for row in rows[start : index + 1])
                right = max(extent[row][1] for row in rows[start : index + 1])
                band = [box for box in dirty if box[1] >= first and box[3] <= y + 1]
                self._render_band(Region(left, first, right - left, y + 1 - first), cuts, chops, band)
                start = index + 1
            ends = getattr(self, "_gpuscope_ends", None)
            if ends is None or ends[0] is not cuts:  # the cuts change with the arrangement only
                ends = self._gpuscope_ends = (cuts, [cut_set[1:] for cut_set in cuts])
            return Update(chops, spans, ends[1])

        def _render_band(
            self, crop: Region, cuts: list[list[int]], chops: list[Any], dirty: list[tuple[int, int, int, int]]
        ) -> None:
            """Fill ``chops`` for the rows of ``crop`` (``Compositor._render_chops`` for those
            rows only: it makes a dict for every row of the screen, per band)."""
            for y in range(crop.y, crop.bottom):
                chops[y] = dict.fromkeys(cuts[y][:-1])
            # (row, first column, last column) -> the cuts there, and them relative to the first
            spans: dict[tuple[int, int, int], tuple[list[int], list[int]]]
            known = getattr(self, "_gpuscope_cuts", None)
            if known is None or known[0] is not cuts:  # the cuts change with the arrangement only
                spans = {}
                self._gpuscope_cuts = (cuts, spans)
            else:
                spans = known[1]
            for region, clip, strips in self._get_renders(crop, dirty):
                render_region = region.intersection(clip)
                render_x = render_region.x
                first_cut, last_cut = render_region.column_span
                for y, strip in zip(render_region.line_range, strips):
                    line = chops[y]
                    span = spans.get((y, first_cut, last_cut))
                    if span is None:
                        final = [cut for cut in cuts[y] if last_cut >= cut >= first_cut]
                        span = spans[y, first_cut, last_cut] = (final, [cut - render_x for cut in final[1:]])
                    final_cuts, relative = span
                    if len(relative) == 1 and relative[0] == strip.cell_length:
                        # one piece, the strip itself: what divide() returns, but divide() also
                        # caches [self] in the strip, a cycle that only the garbage collector
                        # frees (a Strip, its seven caches and its segments, per line per frame)
                        pieces: Any = (strip,)
                    else:
                        pieces = strip.divide(relative)
                    for cut, piece in zip(final_cuts, pieces):  # front to back: the first render of a cut wins
                        if line.get(cut) is None:
                            line[cut] = piece

        def _visible_boxes(self) -> tuple[list[tuple[Any, Region, Region, int, int, int, int]], list[list[int]]]:
            """(widget, region, clip, x1, y1, x2, y2 of the part that shows) front to back, and
            for each screen row the indexes of those that show on it, made once per arrangement
            (``visible_widgets`` is a new dict after each)."""
            visible = self.visible_widgets
            boxes = getattr(self, "_gpuscope_boxes", None)
            if boxes is None or boxes[0] is not visible:
                shown = []
                for widget, (region, clip) in visible.items():
                    x, y, width, height = region.intersection(clip)
                    if width and height:
                        shown.append((widget, region, clip, x, y, x + width, y + height))
                by_row: list[list[int]] = [[] for _ in range(max((box[6] for box in shown), default=0))]
                for index, box in enumerate(shown):
                    for row in range(max(0, box[4]), box[6]):
                        by_row[row].append(index)
                boxes = self._gpuscope_boxes = (visible, (shown, by_row))
            return boxes[1]

        def _get_renders(self, crop: Region | None = None, dirty: list[tuple[int, int, int, int]] | None = None) -> Any:
            """Front to back, the widgets that show part of the updated areas ``dirty`` (x1, y1,
            x2, y2; default: all of ``crop``) inside ``crop``. A widget in front that covers an
            updated area takes it: the widgets behind it (the containers under a GPU card) are
            not rendered for it, and the walk stops when every updated area is taken."""
            if not crop:
                yield from super()._get_renders(crop)
                return
            top, bottom, left, right = crop.y, crop.bottom, crop.x, crop.right
            pending = [(left, top, right, bottom)] if dirty is None else list(dirty)
            painted: list[tuple[int, int, int, int]] = []  # (x1, y1, x2, y2) of what shows already
            shown_boxes, by_row = self._visible_boxes()
            rows = by_row[max(0, top) : bottom]  # the widgets showing on the band's rows, in order
            order = rows[0] if len(rows) == 1 else sorted(set().union(*rows))
            for index in order:
                widget, region, clip, x, shown_y1, x2, shown_y2 = shown_boxes[index]
                if not pending:
                    return
                if x2 <= left or x >= right:
                    continue  # beside the band
                y = shown_y1 if shown_y1 > top else top
                y2 = shown_y2 if shown_y2 < bottom else bottom
                shown = (max(x, left), y, min(x2, right), y2)
                if _covered(shown, painted):
                    continue
                painted.append((x, y, x2, y2))
                if not any(dx1 < x2 and dx2 > x and dy1 < y2 and dy2 > y for dx1, dy1, dx2, dy2 in pending):
                    continue  # nothing updated shows here: its area keeps what the terminal has
                pending = [
                    box for box in pending if not (box[0] >= x and box[1] >= y and box[2] <= x2 and box[3] <= y2)
                ]
                clip_top = max(clip.y, top)
                rows_clip = Region(clip.x, clip_top, clip.width, min(clip.bottom, bottom) - clip_top)
                yield (region, rows_clip, widget.render_lines(Region(x - region.x, y - region.y, x2 - x, y2 - y)))

    return RowCroppedCompositor()


#: Strip's seven caches (slot name -> size), each a FIFOCache made in ``Strip.__init__``.
_STRIP_CACHES = {
    "_divide_cache": 4,
    "_crop_cache": 16,
    "_style_cache": 16,
    "_filter_cache": 4,
    "_line_length_cache": 4,
    "_crop_extend_cache": 4,
    "_offsets_cache": 4,
}
#: Strip's other slots, set in ``Strip.__init__``.
_STRIP_FIELDS = ("_segments", "_cell_length", "_render_cache", "_link_ids", "_cell_count")


def _light_strip_class() -> type[Strip]:
    """A Strip that makes each of its seven caches when first used, or ``Strip`` itself when
    this Textual's Strip has other slots or caches. A Strip makes them all in ``__init__``
    (seven FIFOCaches and their dicts: fifteen objects, most of a new line's cost), yet a line
    a widget builds for a frame is mostly rendered once and never cropped, divided or styled.
    Textual makes its own Strips (crops, pieces) as ever; only the lines gpuscope's line
    widgets build are light ones."""
    from textual.cache import FIFOCache
    from textual.strip import Strip

    try:
        probe = Strip([], 0)
        caches = {name: getattr(probe, name) for name in _STRIP_CACHES}
        fields_known = all(hasattr(probe, name) for name in _STRIP_FIELDS)
    except AttributeError:
        return Strip
    if (
        set(getattr(Strip, "__slots__", ())) != {*_STRIP_CACHES, *_STRIP_FIELDS}
        or not fields_known
        or any(type(cache) is not FIFOCache or cache._maxsize != _STRIP_CACHES[name] for name, cache in caches.items())
    ):
        return Strip

    class LightStrip(Strip):
        """``Strip(segments, cell_length)`` with its caches made on first use (same behaviour)."""

        __slots__ = ()

        def __init__(self, segments: list[Any], cell_length: int | None = None) -> None:
            self._segments = segments
            self._cell_length = cell_length
            self._render_cache = None
            self._link_ids = None
            self._cell_count = None

        def __getattr__(self, name: str) -> Any:  # only for a slot not set yet: a cache
            size = _STRIP_CACHES.get(name)
            if size is None:
                raise AttributeError(name)
            cache: FIFOCache[Any, Any] = FIFOCache(size)
            setattr(self, name, cache)
            return cache

    return LightStrip


#: ``LightStrip(segments, cell_length)``: a Strip (a subclass) whose caches are made when first
#: used; ``Strip`` itself on a Textual whose Strip differs. ``segments`` must be a new list
#: (it is kept, not copied).
LightStrip: type[Strip] = _light_strip_class()


def _covered(box: tuple[int, int, int, int], painted: list[tuple[int, int, int, int]]) -> bool:
    """True when the rectangles in ``painted`` (x1, y1, x2, y2) cover all of ``box``."""
    x1, y1, x2, y2 = box
    if any(rx1 <= x1 and ry1 <= y1 and rx2 >= x2 and ry2 >= y2 for rx1, ry1, rx2, ry2 in painted):
        return True  # the common case: one widget above covers it all
    over = [rect for rect in painted if rect[0] < x2 and rect[2] > x1 and rect[1] < y2 and rect[3] > y1]
    if not over:
        return False
    edges = sorted({y1, y2, *(r[1] for r in over if y1 < r[1] < y2), *(r[3] for r in over if y1 < r[3] < y2)})
    for low, high in zip(edges, edges[1:]):  # rows low..high-1 meet the same rectangles
        reach = x1
        for rx1, _, rx2, _ in sorted(r for r in over if r[1] <= low and r[3] >= high):
            if rx1 > reach:
                break
            reach = max(reach, rx2)
            if reach >= x2:
                break
        if reach < x2:
            return False
    return True


#: Seconds the input thread waits for input while an escape sequence is incomplete (Textual's
#: parser turns a lone ESC into the escape key after a short timeout, so it needs ticks then).
_PENDING_TICK_S = 0.1


def quiet_driver_class(default: type[Any]) -> type[Any]:
    """``default`` (Textual's LinuxDriver) with an input thread that sleeps until input arrives.
    Textual's waits in ``select(0.1)``: ten wake-ups a second whether or not a key was pressed,
    about a fifth of an idle app's CPU time. Here the wait has no timeout unless an escape
    sequence is incomplete (then Textual's 0.1 s tick), and setting ``exit_event`` wakes it
    through a pipe. Returns ``default`` itself when it is not the LinuxDriver this was written
    against (``run_input_thread``, ``exit_event``, ``fileno``, ``process_message``, the parser's
    ``_timeout_time``)."""
    import os
    import selectors
    import threading
    from codecs import getincrementaldecoder

    try:
        from textual._xterm_parser import XTermParser
        from textual.drivers.linux_driver import LinuxDriver
    except ImportError:
        return default
    if (
        default is not LinuxDriver
        or not callable(getattr(LinuxDriver, "run_input_thread", None))
        or not callable(getattr(LinuxDriver, "process_message", None))
        or not hasattr(XTermParser(), "_timeout_time")
    ):
        return default

    class _WakingEvent(threading.Event):
        """``exit_event``: setting it also wakes the input thread's select."""

        def __init__(self, wake_fd: int) -> None:
            super().__init__()
            self.wake_fd = wake_fd

        def set(self) -> None:
            super().set()
            try:
                os.write(self.wake_fd, b"x")
            except OSError:
                pass

    class QuietLinuxDriver(LinuxDriver):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._wake_read, wake_write = os.pipe()
            os.set_blocking(self._wake_read, False)
            self._waking = self.exit_event = _WakingEvent(wake_write)

        def close(self) -> None:
            super().close()
            wake_write, self._waking.wake_fd = self._waking.wake_fd, -1
            if wake_write >= 0:
                os.close(wake_write)
                os.close(self._wake_read)

        def run_input_thread(self) -> None:
            wake = self._wake_read
            selector = selectors.SelectSelector()
            selector.register(self.fileno, selectors.EVENT_READ)
            selector.register(wake, selectors.EVENT_READ)
            parser = XTermParser(self._debug)
            decode = getincrementaldecoder("utf-8")().decode

            def process(events: list[tuple[Any, int]]) -> None:
                for key, _mask in events:
                    if key.fd == wake:
                        try:
                            os.read(wake, 64)
                        except OSError:
                            pass
                        continue
                    data = decode(os.read(self.fileno, 1024 * 4))
                    for event in parser.feed(data) if data else ():
                        self.process_message(event)
                for event in parser.tick():
                    self.process_message(event)

            try:
                while not self.exit_event.is_set():
                    process(selector.select(None if parser._timeout_time is None else _PENDING_TICK_S))
                selector.unregister(self.fileno)
            finally:
                selector.close()
                try:
                    for _event in parser.feed(""):
                        pass
                except Exception:  # noqa: BLE001 - as Textual: an incomplete sequence at exit is dropped
                    pass

    return QuietLinuxDriver
