"""What reaches the terminal equals what the screen holds.

The TUI paints by partial updates (and its own fast repaint path, ``textual_compat.repaint``):
a row that no update repaints keeps what the terminal had. A snapshot test renders the whole
screen at once and cannot see such a stale row, so here every update the app writes is played
onto a character grid (a minimal terminal: cursor moves and text), and after each sample the
grid must equal a full render of the screen.

Seen at 80x24: when the alert line appeared or went (the body under it moves by a row) in the
same cycle as the GPU cards' repaints, the cards' old rows stayed on the terminal (two title
rows, a missing "util" row) until something repainted them. The cause was in
``textual_compat.repaint``: it handed the screen widgets scrolled out of view, which made the
compositor rebuild its map from the new layout, unmarked, before the layout pass (see its
docstring). Any layout change in the cycle of a sample's repaints could lose rows that way, so a
line hidden right after a sample, panel toggles, resizes and the switch to dense cards are
played here too, each in the same cycle as a sample.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from tui_samples import h200, make_app, run_async, sample, shown, tui_env  # noqa: F401 - tui_env is a fixture

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

    def resize(self, width: int, height: int) -> None:
        """Keep what fits (as a terminal that is resized without clearing), blank the rest."""
        self.cells = [
            (self.cells[row][:width] if row < self.height else []) + [" "] * max(0, width - self.width)
            for row in range(height)
        ]
        self.cells = [row + [" "] * (width - len(row)) for row in self.cells]
        self.width, self.height = width, height

    def lines(self) -> list[str]:
        return ["".join(row) for row in self.cells]


class Recorder:
    """Every update ``app`` writes, played onto a :class:`Terminal`."""

    def __init__(self, app: Any, width: int, height: int) -> None:
        from textual._compositor import CompositorUpdate

        self.app = app
        self.terminal = Terminal(width, height)

        def display(screen: Any, update: Any) -> None:
            if isinstance(update, CompositorUpdate):
                width, height = app.size
                if (width, height) != (self.terminal.width, self.terminal.height):
                    self.terminal.resize(width, height)  # the terminal was resized before this paint
                self.terminal.write(update.render_segments(app.console))

        app._display = display  # what the app writes, onto the grid

    def stale_rows(self) -> list[str]:
        """The rows where the terminal differs from a full render of the screen."""
        compositor = self.app.screen._compositor
        width, height = compositor.size
        assert (width, height) == (self.terminal.width, self.terminal.height), "no paint since the resize"
        full = Terminal(width, height)
        full.write(compositor.render_update(full=True).render_segments(self.app.console))
        return [
            f"row {row}: terminal {got!r}, screen {want!r}"
            for row, (got, want) in enumerate(zip(self.terminal.lines(), full.lines()))
            if got != want
        ]

    def check(self, what: str) -> None:
        stale = self.stale_rows()
        assert not stale, f"after {what}:\n" + "\n".join(stale)


@asynccontextmanager
async def recorded(app: Any, size: tuple[int, int]) -> Iterator[tuple[Any, Recorder]]:
    """``app`` shown at ``size`` with its terminal recorded from a full paint on."""
    async with shown(app, size) as pilot:
        recorder = Recorder(app, *size)
        app.screen.refresh()
        await pilot.pause(0.1)
        recorder.check("the first full paint")
        yield pilot, recorder


def _with_throttle(step: int, reasons: list[str]) -> Any:
    """Sample ``step`` whose only alert is GPU 1 held back by ``reasons`` (no alert line when
    there are none)."""
    base = sample(step)
    gpus = [
        dataclasses.replace(gpu, throttle_reasons=reasons if gpu.index == 1 else [], ecc_corrected_errors=0)
        for gpu in base.gpus
    ]
    return dataclasses.replace(base, gpus=gpus)


def _with_gpus(step: int, count: int) -> Any:
    """Sample ``step`` with ``count`` H200s (no alerts)."""
    return dataclasses.replace(sample(step), gpus=[h200(step, index) for index in range(count)])


@run_async
async def test_alert_line_coming_and_going_leaves_no_stale_rows(tui_env: Path) -> None:
    width, height = 80, 24  # two GPU cards: the body scrolls
    app = make_app(persist_settings=False)
    async with recorded(app, (width, height)) as (pilot, recorder):
        alert = app.screen.query_one("#alert-line")
        for step, reasons in enumerate([[], ["sw_power_cap"], ["sw_power_cap"], [], ["hw_slowdown"], []], start=40):
            app._deliver(_with_throttle(step, reasons))
            await pilot.pause(0.2)
            assert alert.display == bool(reasons)
            recorder.check(f"sample {step} (alerts {reasons})")


@run_async
async def test_line_hidden_right_after_a_samples_repaints_leaves_no_stale_rows(tui_env: Path) -> None:
    """The hint line above the footer hidden and shown again right after a sample (the body
    grows and shrinks by its last row): the order of a key handled just after a sample."""
    app = make_app(persist_settings=False)
    async with recorded(app, (80, 24)) as (pilot, recorder):
        hint = app.screen.query_one("#hint")
        for step in range(40, 44):
            app._deliver(sample(step))  # the alerts stay as they were: no alert line change
            hint.display = not hint.display
            await pilot.pause(0.2)
            recorder.check(f"sample {step}, hint {'shown' if hint.display else 'hidden'}")


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
@run_async
async def test_panel_toggle_on_a_tick_leaves_no_stale_rows(tui_env: Path, size: tuple[int, int]) -> None:
    """Each of g c m n pressed (hide, then show) in the same cycle as a sample, before it and
    after it."""
    app = make_app(persist_settings=False)
    async with recorded(app, size) as (pilot, recorder):
        step = 40
        for key in ("g", "c", "m", "n", "n", "m", "c", "g", "c", "g", "g", "c", "m", "g", "g", "m"):
            name = {"g": "gpus", "c": "cpu", "m": "memory", "n": "network"}[key]
            key_first = step % 2 == 0
            if key_first:
                app.screen.action_toggle_panel(name)
            app._deliver(sample(step))
            if not key_first:
                app.screen.action_toggle_panel(name)
            await pilot.pause(0.2)
            recorder.check(f"key {key} {'before' if key_first else 'after'} sample {step}")
            step += 1


@run_async
async def test_resize_on_a_tick_leaves_no_stale_rows(tui_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sample handled right after the screen's resize handler re-laid out the panels."""
    from gpuscope.tui.screens.dashboard import DashboardScreen

    app = make_app(persist_settings=False)
    pending: list[Callable[[], None]] = []
    on_resize = DashboardScreen.on_resize

    def resized(self: DashboardScreen) -> None:
        on_resize(self)
        while pending:
            pending.pop()()

    monkeypatch.setattr(DashboardScreen, "on_resize", resized)
    async with recorded(app, (80, 24)) as (pilot, recorder):
        for step, size in enumerate([(100, 30), (80, 24), (160, 48), (120, 40), (80, 24), (79, 23)], start=40):
            pending.append(lambda step=step: app._deliver(sample(step)))
            await pilot.resize_terminal(*size)
            await pilot.pause(0.2)
            assert not pending and app.screen.size == size
            recorder.check(f"resize to {size} with sample {step}")


@run_async
async def test_switch_to_dense_cards_on_a_tick_leaves_no_stale_rows(tui_env: Path) -> None:
    """More GPUs arrive (the cards turn dense) and go (full cards again) with a sample."""
    from gpuscope.tui.widgets.gpu_card import DenseGpuCard, GpuCard

    app = make_app(persist_settings=False)
    async with recorded(app, (160, 48)) as (pilot, recorder):
        for step, count in enumerate([2, 8, 8, 2, 2, 6, 8, 1], start=40):
            app._deliver(_with_gpus(step, count))
            await pilot.pause(0.3)
            cards = app.screen.query(DenseGpuCard if count >= 3 else GpuCard)
            assert len(cards) == count
            recorder.check(f"sample {step} with {count} GPUs")
