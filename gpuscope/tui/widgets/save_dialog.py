"""Ask for a file path (a "save as"): enter saves, escape cancels."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Static

from gpuscope.tui.widgets.dialog import Dialog

__all__ = ["SaveDialog"]


class SaveDialog(Dialog[str | None]):
    """Dismisses with the path typed, or None."""

    DEFAULT_CSS = """
    SaveDialog > Vertical { width: 90; border: thick $primary; }
    SaveDialog Input { margin: 1 0; }
    """

    def __init__(self, default: str, title: str = "Save as") -> None:
        super().__init__()
        self.default = default
        self.title_text = title

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"{self.title_text} (a JSON results file; enter saves, escape cancels):", markup=False)
            yield Input(self.default, id="save-path")
            with Horizontal():
                yield Button("Save", id="save-ok", variant="primary")
                yield Button("Cancel", id="save-cancel")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(self.query_one(Input).value.strip() or None if event.button.id == "save-ok" else None)
