"""The Textual internals the fast screen switch uses (gpuscope/tui/textual_compat.py): this test fails
when a Textual release renames or removes one, and the fallback is plain switch_mode."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from textual.app import App

from gpuscope.tui import textual_compat


def test_textual_still_has_the_internals_we_use() -> None:
    assert textual_compat.FAST_SWITCH, "Textual changed: update gpuscope/tui/textual_compat.py"
    assert isinstance(App._PSEUDO_CLASSES, dict) and all(callable(test) for test in App._PSEUDO_CLASSES.values())
    assert list(inspect.signature(App.delay_update).parameters) == ["self", "delay"]
    app = App()
    assert isinstance(app._screen_stacks, dict)
    assert isinstance(app._css_update_count, int)
    assert textual_compat.style_state(app) is not None
    assert textual_compat.mode_is_mounted(app, "nothing") is False


class _Bare:
    """An app object of a Textual without those internals."""


def test_without_the_internals_the_switch_is_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    assert textual_compat.mode_is_mounted(_Bare(), "dashboard") is False
    assert textual_compat.style_state(_Bare()) is None
    monkeypatch.setattr(textual_compat, "FAST_SWITCH", False)
    app: Any = App()
    app._screen_stacks["dashboard"] = []
    assert textual_compat.mode_is_mounted(app, "dashboard") is False
    assert textual_compat.style_state(app) is None
