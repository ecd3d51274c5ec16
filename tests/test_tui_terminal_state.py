"""What reaches the terminal equals what the screen holds.

The TUI paints by partial updates: a row that no update repaints keeps what the terminal had. A
snapshot test renders the whole screen at once and cannot see such a stale row, so here the app
runs with a driver (Textual's public ``Driver``) that plays every update it writes onto a
character grid (a minimal terminal: cursor moves and text), and after each step the grid must
equal a full repaint of the screen, played onto a fresh grid.

Seen at 80x24: when the alert line appeared or went (the body under it moves by a row) in the
same cycle as the GPU cards' repaints, the cards' old rows stayed on the terminal (two title
rows, a missing "util" row) until something repainted them; any layout change in the cycle of a
sample's repaints could lose rows that way (a repaint path through Textual's internals, since
removed), so a line hidden right after a sample, panel toggles, resizes and the switch to dense
cards are played here too, each in the same cycle as a sample.

Seen with 8 fake GPUs (issue 25): a start drew the GPU cards without their top and bottom borders
(so without the GPUs' names) until a screen switch repainted them. The first frames are checked
from the first byte written, with the first sample arriving before, during and after the first
layout.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.app import App
from textual.driver import Driver
from textual.geometry import Size
from textual.pilot import Pilot
from tui_samples import (  # noqa: F401 - tui_env is a fixture
    fake_nvml_samples,
    h200,
    make_app,
    run_async,
    sample,
    shown,
    tui_env,
    wait_for_sample,
)

from gpuscope.tui.app import GpuscopeApp
from gpuscope.tui.sources import ScriptedSource

_TOKEN = re.compile(r"\x1b\[(\d+);(\d+)H|\x1b\[[0-9;:?]*[A-Za-z]|\x1b[P\]_^][^\x1b]*(?:\x1b\\)?|\n|([^\x1b\n])")
#: What a fresh grid holds before the full repaint: any cell left unpainted shows it.
_UNPAINTED = "\u00a4"


class Terminal:
    """The characters on a ``width`` x ``height`` terminal after the escape text written to it
    (cursor positioning and text; styles are dropped)."""

    def __init__(self, width: int, height: int, fill: str = " ") -> None:
        self.width, self.height = width, height
        self.cells = [[fill] * width for _ in range(height)]
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
    """A terminal for an app run by :meth:`driver`: what the app writes is played onto
    :attr:`terminal` (resized when the app's size changed before a write)."""

    def __init__(self, width: int, height: int) -> None:
        self.terminal = Terminal(width, height)
        self.app: App[Any] | None = None
        self.writes = 0

    def driver(self) -> type[Driver]:
        """A Driver class whose instances write to this recorder (give it to ``app.driver_class``)."""
        recorder = self

        class RecordingDriver(Driver):
            def __init__(self, app: App[Any], **kwargs: Any) -> None:
                super().__init__(app, **kwargs)
                recorder.app = app
                self.owner = app

            def write(self, data: str) -> None:
                size = self.owner.size
                if (size.width, size.height) != (recorder.terminal.width, recorder.terminal.height):
                    recorder.terminal.resize(size.width, size.height)  # resized before this paint
                recorder.terminal.write(data)
                recorder.writes += 1

            def start_application_mode(self) -> None:
                size = Size(recorder.terminal.width, recorder.terminal.height)
                self.owner.post_message(events.Resize(size, size))

            def disable_input(self) -> None:
                pass

            def stop_application_mode(self) -> None:
                pass

        return RecordingDriver

    async def stale_rows(self, pilot: Pilot[Any]) -> list[str]:
        """The rows where the terminal differs from a full repaint of the screen (played onto a
        fresh grid, which then stands for the terminal)."""
        assert self.app is not None
        for _ in range(50):  # until the app has painted what it had pending (a frame in flight is not stale)
            writes = self.writes
            await pilot.pause(0.05)
            if self.writes == writes:
                break
        recorded = self.terminal
        self.terminal = Terminal(recorded.width, recorded.height, _UNPAINTED)
        self.app.screen.refresh()
        await pilot.pause(0.1)
        full = self.terminal
        assert (full.width, full.height) == (recorded.width, recorded.height), "resized during the check"
        unpainted = [row for row, line in enumerate(full.lines()) if _UNPAINTED in line]
        assert not unpainted, f"the full repaint left rows {unpainted} unpainted"
        return [
            f"row {row}: terminal {got!r}, screen {want!r}"
            for row, (got, want) in enumerate(zip(recorded.lines(), full.lines()))
            if got != want
        ]

    async def check(self, pilot: Pilot[Any], what: str) -> None:
        stale = await self.stale_rows(pilot)
        assert not stale, f"after {what}:\n" + "\n".join(stale)


@asynccontextmanager
async def recorded(app: GpuscopeApp, size: tuple[int, int]) -> AsyncIterator[tuple[Pilot[Any], Recorder]]:
    """``app`` shown at ``size`` with its terminal recorded from its first byte, once its first
    sample is drawn and settled."""
    recorder = Recorder(*size)
    app.driver_class = recorder.driver()
    async with app.run_test(headless=False, size=size) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.pause(0.1)
        await recorder.check(pilot, "the first frames")
        yield pilot, recorder


class _LateSource(ScriptedSource):
    """``samples`` in order, the first one ``delay_s`` late (NVML's start, on the poller thread)."""

    def __init__(self, samples: list[Any], delay_s: float) -> None:
        super().__init__(samples, label="live (fake NVML: simulated GPUs)")
        self.delay_s = delay_s

    def sample(self) -> Any:
        delay_s, self.delay_s = self.delay_s, 0.0
        time.sleep(delay_s)
        return super().sample()


_EIGHT_H200: list[Any] = []


def _eight_h200_samples() -> list[Any]:
    """Three samples of 8 fake H200s from the real collector (``GPUSCOPE_FAKE_NVML=gpus=8xh200``)."""
    if not _EIGHT_H200:
        from gpuscope.testing.fake_nvml import FakeGpu

        _EIGHT_H200.extend(fake_nvml_samples(3, gpus=[FakeGpu.h200() for _ in range(8)]))
    return _EIGHT_H200


@pytest.mark.parametrize("size", [(160, 48), (120, 40), (80, 24)])
@pytest.mark.parametrize("delay_s", [0.0, 0.05, 0.3])
def test_first_frames_with_eight_gpus_draw_every_card_whole(
    tui_env: Path, size: tuple[int, int], delay_s: float
) -> None:
    """From the first byte written, 8 GPUs whose first sample comes before, during or after the
    first layout: the terminal is the full repaint, and at 160x48 every card shows its top
    border with the GPU's name and its bottom border."""
    series = _eight_h200_samples()

    async def check() -> None:
        app = GpuscopeApp(_LateSource(series[-1:], delay_s), interval_s=3600.0, persist_settings=False)
        app.history.extend(series[:-1])
        async with recorded(app, size) as (pilot, recorder):
            text = "\n".join(recorder.terminal.lines())
            if size == (160, 48):
                for index in range(8):
                    assert f"╭─ GPU {index} · NVIDIA H200" in text, f"GPU {index}'s title row is missing:\n{text}"
                assert text.count("╰") >= 8, text

    asyncio.run(check())


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
            await recorder.check(pilot, f"sample {step} (alerts {reasons})")


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
            await recorder.check(pilot, f"sample {step}, hint {'shown' if hint.display else 'hidden'}")


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
            await recorder.check(pilot, f"key {key} {'before' if key_first else 'after'} sample {step}")
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
            await recorder.check(pilot, f"resize to {size} with sample {step}")


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
            await recorder.check(pilot, f"sample {step} with {count} GPUs")


@run_async
async def test_a_lost_gpu_and_a_new_theme_reach_the_dense_cards_on_the_terminal(tui_env: Path) -> None:
    """A GPU lost (its card's border and title restyled, LOST in the title) and a theme change
    reach the terminal whole: no card keeps old rows."""
    app = make_app(persist_settings=False)
    async with recorded(app, (160, 48)) as (pilot, recorder):
        app._deliver(_with_gpus(40, 8))
        await pilot.pause(0.3)
        await recorder.check(pilot, "8 GPUs")
        lost = _with_gpus(41, 8)
        lost.gpus[3] = dataclasses.replace(lost.gpus[3], state="lost")
        app._deliver(lost)
        await pilot.pause(0.3)
        await recorder.check(pilot, "GPU 3 lost")
        assert any("╭─ GPU 3 · NVIDIA H200 · Hopper · LOST" in line for line in recorder.terminal.lines())
        app.theme = "gpuscope-light"
        await pilot.pause(0.3)
        await recorder.check(pilot, "the light theme")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_real_starts_with_eight_fake_gpus_draw_every_card_whole(tmp_path: Path) -> None:
    """``GPUSCOPE_FAKE_NVML=gpus=8xh200 gpuscope`` started three times in a real terminal (tmux,
    160x48), as a new user would: each time, once two samples are on screen, every card shows
    its top border with the GPU's name and its bottom border."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("TMUX")}
    env.update(GPUSCOPE_FAKE_NVML="gpus=8xh200", GPUSCOPE_CONFIG_DIR=str(tmp_path / "config"), HOME=str(tmp_path))
    socket = ""

    def tmux(*args: str) -> str:
        # a server per start: a new session on the socket of a server still exiting after the
        # last kill-session fails with "server exited unexpectedly"
        done = subprocess.run(["tmux", "-S", socket, "-f", "/dev/null", *args], capture_output=True, text=True, env=env)
        assert done.returncode == 0, f"tmux {args[0]}: {done.stderr.strip()}"
        return done.stdout

    command = shlex.join([sys.executable, "-m", "gpuscope"])
    for start in range(3):
        socket = str(tmp_path / f"tmux{start}.sock")
        tmux("new-session", "-d", "-s", f"start{start}", "-x", "160", "-y", "48", command)
        try:
            clocks: set[str] = set()
            deadline = time.monotonic() + 90  # liveness on a loaded machine, not a timing check
            text = ""
            while len(clocks) < 2 and time.monotonic() < deadline:  # two samples drawn
                time.sleep(0.2)
                text = tmux("capture-pane", "-p", "-t", f"start{start}")
                first = text.splitlines()[0] if text else ""
                if "GPU 7" in text:
                    clocks.update(re.findall(r"\d\d:\d\d:\d\d", first))
            assert len(clocks) >= 2, f"start {start}: never drew two samples:\n{text}"
            for index in range(8):
                assert f"╭─ GPU {index} · NVIDIA H200" in text, f"start {start}: GPU {index}'s title row:\n{text}"
            assert text.count("╰") >= 8, f"start {start}: bottom borders:\n{text}"
        finally:
            tmux("kill-session", "-t", f"start{start}")
