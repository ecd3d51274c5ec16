"""Replay from an index (issue 35): the first frame without decoding the log, seeks that decode
one block, every sample reachable, rotated sets with gaps, bad files in one line."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
from tui_samples import T0, run_async, samples, tui_env  # noqa: F401 - tui_env is a fixture

from gpuscope.commands.replay import IndexedReplay, open_replay
from gpuscope.errors import BadInputError
from gpuscope.telemetry import logindex
from gpuscope.telemetry.logfile import open_log_writer, read_log
from gpuscope.telemetry.logindex import GAP_WAIT_S, LogIndex
from gpuscope.tui.app import GpuscopeApp
from gpuscope.tui.widgets.gpu_card import GpuCard
from gpuscope.tui.widgets.replay_bar import ReplayBar
from gpuscope.tui.widgets.topbar import TopBar

REPO = Path(__file__).resolve().parent.parent


def three_records_of_bytes(tmp_path: Path) -> int:
    """A block size of about three records (so a plain 40-record log spans many blocks), whatever a
    record's size is as fields are added."""
    plain = write_log(tmp_path / "sizing.jsonl", 40)
    return 3 * plain.stat().st_size // 40


def write_log(path: Path, count: int, start: int = 0) -> Path:
    fmt = "csv" if ".csv" in path.name else "jsonl"
    with open_log_writer(path, fmt) as writer:
        for sample in samples(count)[start:]:
            writer.write(sample)
    return path


@pytest.mark.parametrize("name", ["run.jsonl.zst", "run.csv.gz", "run.jsonl", "run.csv"])
def test_every_sample_is_reachable_and_matches_the_log(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logindex, "_BLOCK_BYTES", three_records_of_bytes(tmp_path))  # several blocks in a plain log too
    path = write_log(tmp_path / name, 40)
    replay = open_replay(str(path))
    assert len(replay.index.blocks) >= 4
    expected = [s.timestamp for s in read_log(path)]
    assert len(replay) == 40
    assert [replay.index.sample(k).timestamp for k in range(40)] == expected
    assert replay.seek_s(17.5).timestamp == expected[17]
    assert replay.window(5)[-1].timestamp == expected[17] and len(replay.window(5)) == 5
    assert replay.step(100).timestamp == expected[-1] and replay.at_end
    assert replay.seek_fraction(0).timestamp == expected[0]


def test_the_first_frame_decodes_only_the_first_and_last_block(tmp_path: Path) -> None:
    path = write_log(tmp_path / "run.jsonl.zst", 60)
    index = LogIndex(str(path))
    assert len(index.blocks) == 12 and len(index) == 60
    replay = IndexedReplay(index)
    assert replay.current.timestamp == T0
    assert sorted(index._cache) == [0, 11]
    replay.seek_s(31)
    assert sorted(index._cache) == [0, 6, 11]


def test_a_rotated_set_with_a_gap_replays_as_one_with_the_gap_skipped_quickly(tmp_path: Path) -> None:
    first = write_log(tmp_path / "run.2023-11-14T22-13-20.000Z.jsonl.zst", 10)
    later = samples(10)
    for sample in later:
        sample.timestamp += 7200
    with open_log_writer(tmp_path / "run.2023-11-15T00-13-20.000Z.jsonl.zst", "jsonl") as writer:
        for sample in later:
            writer.write(sample)
    for spelling in (str(tmp_path), str(tmp_path / "run.jsonl.zst"), str(tmp_path / "run.*.jsonl.zst")):
        replay = open_replay(spelling)
        assert len(replay) == 20 and replay.end_s - replay.start_s == 7209
        assert len(replay.index.gaps) == 1 and first.name in replay.index.gaps[0]
        replay.seek_s(9)
        assert replay.position == 9
        assert replay.delay_to_next_s() == GAP_WAIT_S  # not two hours
        replay.step(1)
        assert replay.delay_to_next_s() == 1.0


def test_a_cut_last_frame_is_skipped_with_a_note(tmp_path: Path) -> None:
    path = write_log(tmp_path / "run.jsonl.zst", 12)
    path.write_bytes(path.read_bytes()[:-5])
    replay = open_replay(str(path))
    assert len(replay) == 10
    assert any("incomplete last frame" in note for note in replay.index.warnings)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "empty telemetry log"),
        (b"\x28\xb5\x2f\xfd garbage that is no zstd frame\n", "empty telemetry log"),
        (b"this is not json\n", "bad.jsonl.zst:1: not a gpuscope telemetry log"),
    ],
)
def test_bad_files_are_one_line_errors(tmp_path: Path, content: bytes, expected: str) -> None:
    bad = tmp_path / "bad.jsonl.zst"
    bad.write_bytes(content)
    with pytest.raises(BadInputError, match=expected):
        open_replay(str(bad))


def test_replay_command_bad_input_is_one_line_with_exit_3(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00 cut")
    result = subprocess.run(
        [sys.executable, "-m", "gpuscope", "replay", str(bad)],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuscope: error: ") and "bad.jsonl.gz" in lines[0]


def test_replay_run_names_the_file(tmp_path: Path) -> None:
    from gpuscope.commands import replay

    with pytest.raises(BadInputError, match="a folder with no log in it"):
        replay.run(argparse.Namespace(file=str(tmp_path), speed=1.0, theme=None, probes=[]))


@run_async
async def test_the_dashboard_replays_a_compressed_log_from_its_index(tui_env: Path, tmp_path: Path) -> None:
    path = write_log(tmp_path / "run.jsonl.zst", 40)
    app = GpuscopeApp(replay=open_replay(str(path), speed=20.0))
    async with app.run_test(size=(120, 40)) as pilot:
        cursor = app.replay
        assert cursor is not None
        await pilot.press("space")
        await pilot.press("home")
        assert cursor.position == 0
        assert "22:13:20" in str(app.screen.query_one(TopBar).render())
        await pilot.press("end")
        assert cursor.at_end
        await pilot.pause()
        card = app.screen.query(GpuCard).first()
        assert card.cells.cell("power").value_text == f"{512 + 39}/700 W"
        bar = str(app.screen.query_one(ReplayBar).render())
        assert "40/40" in bar and "0:00:39/0:00:39" in bar
        assert len(app.history.timestamps) == 40
    assert T0 == samples(1)[0].timestamp


def test_a_bad_line_deep_in_a_log_is_named_by_its_line_in_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logindex, "_BLOCK_BYTES", three_records_of_bytes(tmp_path))
    path = write_log(tmp_path / "run.jsonl", 40)
    lines = path.read_bytes().split(b"\n")
    lines[29] = b'{"schema_version":1,"timestamp":"later"}'
    path.write_bytes(b"\n".join(lines))
    replay = open_replay(str(path))
    assert replay.current.timestamp == T0
    with pytest.raises(BadInputError, match=r"run\.jsonl:30: not a gpuscope telemetry record"):
        replay.seek_s(29)
