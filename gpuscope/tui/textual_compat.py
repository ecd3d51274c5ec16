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
