"""Every use of Textual's private internals, in one place (Textual 8.x; tests/test_tui_textual_compat.py
fails when a release renames or removes one).

The fast screen switch (``GpuscopeApp.switch_mode``) brings a screen that is already mounted up to
date and paints it on the next frame, skipping Textual's 50 ms ``delay_update`` mask and the CSS
re-application on resume when nothing the styles depend on changed. It needs:

- ``App._screen_stacks``: whether a mode's screen is mounted already;
- ``App._css_update_count`` and ``App._PSEUDO_CLASSES``: what a suspended screen's styles depend on;
- ``App.delay_update(delay)``: the method the switch overrides to skip the mask.

When any of them is missing, :data:`FAST_SWITCH` is False and the app falls back to plain
``switch_mode`` (correct, about 50 ms slower per switch).
"""

from __future__ import annotations

from typing import Any

from textual.app import App

__all__ = ["FAST_SWITCH", "mode_is_mounted", "style_state"]


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


def row_cropped_compositor() -> Any:
    """A compositor that, on a partial update, renders only the rows being updated of only the
    widgets on those rows. Textual's ``Compositor._get_renders`` hands every widget whose *clip*
    overlaps the dirty area to ``render_lines`` with its whole region: inside a scrolling body
    (the dashboard) that is every panel, every frame, though only the rows of the update are
    painted. The picture is the same (the rows outside the update are dropped by
    ``_render_chops`` either way). Falls back to Textual's own compositor when the internals it
    relies on (``_get_renders``, ``visible_widgets``) are missing."""
    from textual import _compositor
    from textual._compositor import Compositor
    from textual.geometry import Region

    ChopsUpdate: Any = getattr(_compositor, "ChopsUpdate", None)  # a private Textual class, or None
    needed = ("_get_renders", "_render_chops", "_regions_to_spans", "render_partial_update")
    if (
        ChopsUpdate is None
        or not all(callable(getattr(Compositor, name, None)) for name in needed)
        or not isinstance(getattr(Compositor, "visible_widgets", None), property)
        or not isinstance(getattr(Compositor, "cuts", None), property)
    ):
        return Compositor()

    class RowCroppedCompositor(Compositor):
        def render_partial_update(self) -> Any:
            """Render each band of adjacent updated rows on its own (the clock on the first row
            and a chart further down are two small bands, not every row between them)."""
            update_regions = self._dirty_regions.copy()
            self._dirty_regions.clear()
            if not update_regions:
                return None
            spans = list(self._regions_to_spans(update_regions))
            rows = sorted({y for y, _, _ in spans})
            is_rendered_line = set(rows).__contains__
            width = self.size.width
            chops: Any = None
            start = 0
            for index, y in enumerate(rows):
                if index + 1 < len(rows) and rows[index + 1] == y + 1:
                    continue
                first = rows[start]
                band = self._render_chops(Region(0, first, width, y + 1 - first), is_rendered_line)
                if chops is None:
                    chops = band
                else:
                    chops[first : y + 1] = band[first : y + 1]
                start = index + 1
            chop_ends = [cut_set[1:] for cut_set in self.cuts]
            return ChopsUpdate(chops, spans, chop_ends)

        def _get_renders(self, crop: Region | None = None) -> Any:
            if not crop:
                yield from super()._get_renders(crop)
                return
            top, bottom = crop.y, crop.bottom
            for widget, (region, clip) in self.visible_widgets.items():
                clip_top, clip_bottom = max(clip.y, top), min(clip.bottom, bottom)
                if clip_bottom <= clip_top:
                    continue
                rows_clip = Region(clip.x, clip_top, clip.width, clip_bottom - clip_top)
                x, y, width, height = region.intersection(rows_clip)
                if width and height:
                    yield (
                        region,
                        rows_clip,
                        widget.render_lines(Region(x - region.x, y - region.y, width, height)),
                    )

    return RowCroppedCompositor()
