"""Textual's private internals that gpuscope uses, here and in :mod:`gpuscope.tui.row_compositor`
(Textual 8.x; tests/test_tui_textual_compat.py fails when a release renames or removes one).

The fast screen switch (``GpuscopeApp.switch_mode``) brings a screen that is already mounted up to
date and paints it on the next frame, skipping Textual's 50 ms ``delay_update`` mask and the CSS
re-application on resume when nothing the styles depend on changed. It needs:

- ``App._screen_stacks``: whether a mode's screen is mounted already;
- ``App._css_update_count`` and ``App._PSEUDO_CLASSES``: what a suspended screen's styles depend on;
- ``App.delay_update(delay)``: the method the switch overrides to skip the mask.

Also here: :func:`repaint` (a widget's ``_dirty_regions``, ``_repaint_regions`` and
``_styles_cache``, the screen's ``_dirty_widgets``), :func:`set_border_title`
(``Widget._border_title``), :data:`LightStrip` (``Strip``'s slots and its caches' sizes) and
:func:`quiet_driver_class` (``LinuxDriver.run_input_thread``, the ``XTermParser``). The
row-cropped compositor (``Compositor`` internals, ``ChopsUpdate``) is in its own module.

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
