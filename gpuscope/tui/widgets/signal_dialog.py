"""A confirmation before sending a signal to a process: SIGTERM, SIGKILL or SIGINT, or cancel."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Static

from gpuscope.telemetry.hostprocs import SIGNALS, HostProcess
from gpuscope.tui.widgets.dialog import Dialog

__all__ = ["SignalDialog"]


class SignalDialog(Dialog[int | None]):
    """Dismisses with the chosen signal number, or None (cancel, escape, n)."""

    DEFAULT_CSS = """
    SignalDialog > Vertical { width: 72; border: thick $error; }
    SignalDialog #signal-question { height: auto; margin-bottom: 1; }
    SignalDialog Button { min-width: 10; }
    """
    BINDINGS = [Binding("n", "dismiss_none", "Cancel", show=False)]

    def __init__(self, process: HostProcess) -> None:
        super().__init__()
        self.process = process

    def compose(self) -> ComposeResult:
        p = self.process
        command = p.command if len(p.command) <= 120 else p.command[:119] + "…"
        with Vertical():
            yield Static(f"Send a signal to pid {p.pid} ({p.user})?\n{command}", id="signal-question", markup=False)
            with Horizontal():
                for name, number in SIGNALS:
                    yield Button(
                        name,
                        id=f"signal-{name.lower()}",
                        variant="error" if name == "SIGKILL" else "warning",
                        name=str(int(number)),
                    )
                yield Button("Cancel", id="signal-cancel", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#signal-cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(int(event.button.name) if event.button.name else None)
