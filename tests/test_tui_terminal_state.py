"""What reaches the terminal equals what the screen holds.

The TUI paints by partial updates (and its own fast repaint path, ``textual_compat.repaint``):
a row that no update repaints keeps what the terminal had. A snapshot test renders the whole
screen at once and cannot see such a stale row, so here every update the app writes is played
onto a character grid (a minimal terminal: cursor moves and text), and after each sample the
grid must equal a full render of the screen.

Seen at 80x24: when the alert line appeared or went (the body under it moves by a row) in the
same cycle as the GPU cards' repaints, the cards' old rows stayed on the terminal (two title
rows, a missing "util" row) until something repainted them.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from tui_samples import make_app, run_async, sample, shown, tui_env  # noqa: F401 - tui_env is a fixture

_TOKEN = re.compile(r"\x1b\[(\d+);(\d+)H|\x1b\[[0-9;:?]*[A-Za-z]|\n|([^\x1b\n])")


class Terminal:
    """The characters on a ``width`` x ``height`` terminal after the escape text written to it
    (cursor positioning and text; styles are dropped)."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.cells = [[" "] * width for _ in range(height)]
        self.row = self.column = 0

    def write(self, text: str) -> None:
        for match in _TOKEN.finditer(text):
            if match.group(1):
                self.row, self.column = int(match.group(1)) - 1, int(match.group(2)) - 1
            elif match.group(3) is not None:
                if 0 <= self.row < self.height and 0 <= self.column < self.width:
                    self.cells[self.row][self.column] = match.group(3)
                self.column += 1

    def lines(self) -> list[str]:
        return ["".join(row) for row in self.cells]


def _with_throttle(step: int, reasons: list[str]) -> Any:
    """Sample ``step`` whose only alert is GPU 1 held back by ``reasons`` (no alert line when
    there are none)."""
    base = sample(step)
    gpus = [
        dataclasses.replace(gpu, throttle_reasons=reasons if gpu.index == 1 else [], ecc_corrected_errors=0)
        for gpu in base.gpus
    ]
    return dataclasses.replace(base, gpus=gpus)


@run_async
async def test_alert_line_coming_and_going_leaves_no_stale_rows(tui_env: Path) -> None:
    from textual._compositor import CompositorUpdate

    width, height = 80, 24  # two GPU cards: the body scrolls
    app = make_app(persist_settings=False)
    async with shown(app, (width, height)) as pilot:
        terminal = Terminal(width, height)

        def display(screen: Any, update: Any) -> None:
            if isinstance(update, CompositorUpdate):
                terminal.write(update.render_segments(app.console))

        app._display = display  # type: ignore[method-assign]  # what the app writes, onto the grid
        app.screen.refresh()
        await pilot.pause(0.1)
        alert = app.screen.query_one("#alert-line")
        for step, reasons in enumerate([[], ["sw_power_cap"], ["sw_power_cap"], [], ["hw_slowdown"], []], start=40):
            app._deliver(_with_throttle(step, reasons))
            await pilot.pause(0.2)
            assert alert.display == bool(reasons)
            full = Terminal(width, height)
            full.write(app.screen._compositor.render_update(full=True).render_segments(app.console))
            stale = [
                f"row {row}: terminal {got!r}, screen {want!r}"
                for row, (got, want) in enumerate(zip(terminal.lines(), full.lines()))
                if got != want
            ]
            assert not stale, f"after sample {step} (alerts {reasons}):\n" + "\n".join(stale)
