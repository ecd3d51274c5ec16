"""The alert line under the top bar: the thresholds the latest sample crosses, worst first
(hidden while there are none)."""

from __future__ import annotations

from gpuscope.telemetry.alerts import Alert
from gpuscope.tui.widgets.lines import LineWidget, Run

__all__ = ["AlertLine"]


class AlertLine(LineWidget):
    DEFAULT_CSS = """
    AlertLine { height: 1; width: 1fr; background: $panel; display: none; }
    AlertLine > .alert--careful { color: $accent; text-style: bold; }
    AlertLine > .alert--warning { color: $warning; text-style: bold; }
    AlertLine > .alert--critical { color: $error; text-style: bold reverse; }
    AlertLine > .alert--text { color: $text; }
    """
    COMPONENT_CLASSES = {"alert--careful", "alert--warning", "alert--critical", "alert--text"}

    def __init__(self) -> None:
        super().__init__(id="alert-line")
        self._alerts: tuple[tuple[str, str], ...] = ()

    def set_alerts(self, alerts: list[Alert]) -> None:
        shown = tuple((a.level, a.message) for a in alerts)
        if shown == self._alerts:
            return
        self._alerts = shown
        self.tooltip = "\n".join(f"{level.upper()} {message}" for level, message in shown[:20]) or None
        if self.display != bool(shown):
            self.display = bool(shown)
        self.invalidate()

    def build_lines(self, width: int, height: int) -> list[list[Run]]:
        runs: list[Run] = [(" ", None)]
        used = 1
        for position, (level, message) in enumerate(self._alerts):
            tag, text = f" {level.upper()} ", f" {message} "
            rest = len(self._alerts) - position - 1
            more = f" +{rest} more" if rest else ""
            if position and used + len(tag) + len(text) + len(more) > width:
                runs.append((f" +{len(self._alerts) - position} more", self.component_style("alert--text")))
                break
            runs.append((tag, self.component_style(f"alert--{level}")))
            runs.append((text, self.component_style("alert--text")))
            used += len(tag) + len(text)
        return [runs]
