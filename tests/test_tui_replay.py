"""Replay: the cursor (pure) and `gpuscope replay` driving the dashboard with pause, step, seek."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from tui_samples import T0, run_async, samples, tui_env  # noqa: F401 - tui_env is a fixture

from gpuscope.errors import BadInputError
from gpuscope.telemetry.logfile import open_log_writer
from gpuscope.tui.app import GpuscopeApp
from gpuscope.tui.sources import ReplayCursor, ScriptedSource, load_replay
from gpuscope.tui.widgets.gpu_card import GpuCard
from gpuscope.tui.widgets.replay_bar import ReplayBar
from gpuscope.tui.widgets.topbar import TopBar


def write_log(path: Path, count: int, fmt: str = "jsonl") -> Path:
    with open_log_writer(path, fmt) as writer:
        for sample in samples(count):
            writer.write(sample)
    return path


def test_cursor_step_seek_and_delay() -> None:
    cursor = ReplayCursor(samples(11), speed=2.0)
    assert cursor.position == 0 and cursor.delay_to_next_s() == pytest.approx(0.5)
    cursor.step(3)
    assert cursor.current.timestamp == T0 + 3
    cursor.step(-10)
    assert cursor.position == 0
    cursor.seek_fraction(0.5)
    assert cursor.elapsed_s == 5
    cursor.seek_s(7.5)
    assert cursor.position == 7
    cursor.seek_fraction(1)
    assert cursor.at_end and cursor.delay_to_next_s() is None
    cursor.seek_fraction(0)
    cursor.paused = True
    assert cursor.delay_to_next_s() is None
    assert [s.timestamp for s in cursor.window(3)] == [T0]
    with pytest.raises(ValueError):
        ReplayCursor([])


def test_scripted_source_repeats_last() -> None:
    source = ScriptedSource(samples(2))
    assert [source.sample().timestamp for _ in range(4)] == [T0, T0 + 1, T0 + 1, T0 + 1]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_load_replay_reads_log_writer_output(tmp_path: Path, fmt: str) -> None:
    path = write_log(tmp_path / f"run.{fmt}", 5, fmt)
    loaded, stride = load_replay(path)
    assert stride == 1 and len(loaded) == 5
    assert loaded[0].gpus[1].dram_bandwidth_bytes_per_s.detail == "GPM needs Hopper or newer"
    loaded, stride = load_replay(path, limit=3)
    assert stride == 2 and [s.timestamp - T0 for s in loaded] == [0, 2, 4]  # thinned evenly, end kept


def test_replay_command_rejects_bad_file_in_one_line(tmp_path: Path) -> None:
    from gpuscope.commands import replay

    bad = tmp_path / "bad.jsonl"
    bad.write_text("this is not json\n")
    with pytest.raises(BadInputError) as info:
        replay.run(argparse.Namespace(file=str(bad), speed=1.0, theme=None, probes=[]))
    assert "bad.jsonl" in str(info.value)


def test_replay_speed_option_is_checked() -> None:
    from gpuscope.cli import main

    with pytest.raises(SystemExit) as info:
        main(["replay", "x.jsonl", "--speed", "1000"])
    assert info.value.code == 2


@run_async
async def test_replay_plays_pauses_steps_and_seeks(tui_env: Path, tmp_path: Path) -> None:
    path = write_log(tmp_path / "run.jsonl", 40)
    loaded, _ = load_replay(path)
    app = GpuscopeApp(replay=ReplayCursor(loaded, speed=20.0))
    async with app.run_test(size=(120, 40)) as pilot:
        cursor = app.replay
        assert cursor is not None
        for _ in range(400):  # playing at 20x: a few samples within 0.15 s, however busy the machine is
            if cursor.position > 2:
                break
            await pilot.pause(0.025)
        assert cursor.position > 2 and not cursor.at_end
        await pilot.press("space")
        assert cursor.paused
        frozen = cursor.position
        await pilot.pause(0.3)
        assert cursor.position == frozen
        await pilot.press("right")
        assert cursor.position == frozen + 1
        await pilot.press("left", "left")
        assert cursor.position == frozen - 1
        await pilot.press("home")
        assert cursor.position == 0
        assert "22:13:20" in str(app.screen.query_one(TopBar).render())
        await pilot.press("right_square_bracket")  # seek +10%
        assert cursor.position == 3
        await pilot.press("end")
        assert cursor.at_end
        await pilot.pause()
        # the dashboard shows the recorded values of that instant
        card = app.screen.query(GpuCard).first()
        assert card.cells.cell("power").value_text == f"{512 + 39}/700 W"
        bar = str(app.screen.query_one(ReplayBar).render())
        assert "40/40" in bar and "0:00:39/0:00:39" in bar
        # history was rebuilt for the charts up to the seek position
        assert len(app.history.timestamps) == 40
        await pilot.press("minus")
        assert cursor.speed == 10.0


@run_async
async def test_clicking_the_replay_bar_seeks(tui_env: Path, tmp_path: Path) -> None:
    path = write_log(tmp_path / "run.jsonl", 21)
    loaded, _ = load_replay(path)
    app = GpuscopeApp(replay=ReplayCursor(loaded, speed=1.0))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("space")  # pause
        bar = app.screen.query_one(ReplayBar)
        start, width = bar._bar_span
        await pilot.click(ReplayBar, offset=(start + width - 1, 0))
        assert app.replay is not None and app.replay.at_end
        await pilot.pause()
        start, width = bar._bar_span  # the text before the bar changed length
        await pilot.click(ReplayBar, offset=(start, 0))
        assert app.replay.position == 0
