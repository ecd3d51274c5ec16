"""A one-line key legend for the bottom of each screen: the screen's and the app's shown
bindings, each clickable. Replaces Textual's Footer, which rebuilds itself on every screen
switch (about three quarters of a switch's CPU time here)."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.app import App
from textual.widget import Widget

__all__ = ["KeyBar"]


class KeyBar(Widget):
    DEFAULT_CSS = """
    KeyBar { height: 1; width: 1fr; background: $panel; }
    KeyBar > .keybar--key { color: $accent; text-style: bold; }
    KeyBar > .keybar--description { color: $text; }
    """
    COMPONENT_CLASSES = {"keybar--key", "keybar--description"}

    def __init__(self) -> None:
        super().__init__()
        self._entries: list[tuple[str, str, str]] | None = None  # (key text, description, action)

    def _collect(self) -> list[tuple[str, str, str]]:
        entries: list[tuple[str, str, str]] = []
        seen: set[str] = set()
        for active in self.screen.active_bindings.values():
            node, binding = active.node, active.binding
            prefix = "app" if isinstance(node, App) else "screen" if node is self.screen else None
            if prefix is None:
                continue  # bindings of the focused widget change with focus; the palette lists them
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            entries.append((self.app.get_key_display(binding), binding.description, f"{prefix}.{binding.action}"))
        return entries

    def render(self) -> Text:
        if self._entries is None:
            self._entries = self._collect()
        key_style = self.get_component_rich_style("keybar--key")
        text_style = self.get_component_rich_style("keybar--description")
        text = Text(no_wrap=True, overflow="crop")
        # screen bindings first, then the app's
        ordered = [e for e in self._entries if e[2].startswith("screen.")] + [
            e for e in self._entries if e[2].startswith("app.")
        ]
        for key, description, action in ordered:
            click = Style.from_meta({"@click": action})
            text.append(f" {key}", style=key_style + click)
            text.append(f" {description} ", style=text_style + click)
        palette = " ^p palette "
        room = self.size.width - text.cell_len
        if room >= len(palette):
            text.append(" " * (room - len(palette)))
            text.append(palette, style=key_style + Style.from_meta({"@click": "app.command_palette"}))
        return text
