"""One labelled metric: ``label value``. Unavailable metrics read "n/a", become focusable and
carry their reason as a tooltip (hover) and in the screen's hint line (focus)."""

from __future__ import annotations

from collections.abc import Callable

from rich.style import Style
from textual.message import Message

from gpuscope.telemetry.values import Metric, Unavailable
from gpuscope.tui.format import NA, reason_text
from gpuscope.tui.widgets.lines import LineWidget, Run

__all__ = ["MetricCell"]

#: An optional coloured addition after the value: (text, colour), e.g. a level bar.
Suffix = tuple[str, str]


class MetricCell(LineWidget):
    """A one-line metric. Redraws only when its text changes."""

    DEFAULT_CSS = """
    MetricCell { height: 1; width: 1fr; min-width: 12; }
    MetricCell > .metric--label { color: $text-muted; }
    MetricCell > .metric--na { color: $text-disabled; text-style: italic; }
    MetricCell:focus { background: $accent 30%; }
    MetricCell:hover { background: $boost; }
    """
    COMPONENT_CLASSES = {"metric--label", "metric--na"}

    class Explained(Message):
        """Posted when a cell gains or loses focus: ``text`` is the reason, or "" on blur."""

        def __init__(self, cell: MetricCell, text: str) -> None:
            super().__init__()
            self.cell = cell
            self.text = text

    def __init__(self, label: str, *, label_width: int = 0, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.label = label
        self.label_width = label_width or len(label)
        self._value_text = NA
        self._reason: str | None = "not read yet"
        self._suffix: Suffix | None = None
        self.can_focus = False

    @property
    def value_text(self) -> str:
        """The value as shown (``n/a`` when unavailable)."""
        return self._value_text

    @property
    def reason(self) -> str | None:
        """Why the metric is unavailable, or None when it has a value."""
        return self._reason

    def set_value(
        self, value: Metric[float] | None, formatter: Callable[[float], str] = str, suffix: Suffix | None = None
    ) -> None:
        """Show ``formatter(value)``, or n/a with the reason for an :class:`Unavailable`."""
        if isinstance(value, Unavailable):
            self.set_text(NA, reason=reason_text(value), suffix=suffix)
        elif value is None:
            self.set_text(NA, reason="no reading", suffix=suffix)
        else:
            self.set_text(formatter(value), reason=None, suffix=suffix)

    def set_text(self, text: str, reason: str | None = None, suffix: Suffix | None = None) -> None:
        """Show ``text``; a ``reason`` marks it unavailable (focusable, tooltip)."""
        if text == self._value_text and reason == self._reason and suffix == self._suffix:
            return
        self._value_text = text
        self._suffix = suffix
        if reason != self._reason:
            self._reason = reason
            self.can_focus = reason is not None
            self.tooltip = f"{self.label}: {reason}" if reason else None
            if self.has_focus and reason is None:
                self.screen.focus_next()
        self.invalidate()

    def build_lines(self, width: int, height: int) -> list[list[Run]]:
        runs: list[Run] = [(self.label.ljust(self.label_width) + " ", self.component_style("metric--label"))]
        if self._reason is not None:
            runs.append((self._value_text, self.component_style("metric--na")))
        else:
            runs.append((self._value_text, None))
        if self._suffix is not None:
            text, colour = self._suffix
            runs.append((" ", None))
            runs.append((text, Style(color=colour)))
        if sum(len(text) for text, _ in runs) > width > 1:  # an ellipsis rather than a silent cut
            runs = _crop(runs, width - 1) + [("…", None)]
        return [runs]

    def on_focus(self) -> None:
        self.post_message(self.Explained(self, f"{self.label}: {self._reason}" if self._reason else ""))

    def on_blur(self) -> None:
        self.post_message(self.Explained(self, ""))


def _crop(runs: list[Run], width: int) -> list[Run]:
    out: list[Run] = []
    for text, style in runs:
        if width <= 0:
            break
        out.append((text[:width], style))
        width -= len(text[:width])
    return out
