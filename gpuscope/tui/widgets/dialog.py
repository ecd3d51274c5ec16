"""The modal box the dialogs share: centred, framed, its buttons in a row; escape dismisses with None."""

from __future__ import annotations

from typing import TypeVar

from textual.binding import Binding
from textual.screen import ModalScreen

__all__ = ["Dialog"]

ResultT = TypeVar("ResultT")


class Dialog(ModalScreen[ResultT]):
    """A subclass sets its box's ``width`` and ``border`` (``Name > Vertical``) and composes a
    ``Vertical`` holding its question and a ``Horizontal`` row of buttons."""

    DEFAULT_CSS = """
    Dialog { align: center middle; }
    Dialog > Vertical { max-width: 95%; height: auto; background: $surface; padding: 1 2; }
    Dialog Horizontal { height: auto; }
    Dialog Button { margin-right: 1; }
    """
    BINDINGS = [Binding("escape", "dismiss_none", "Cancel", show=False)]

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
