"""``gpuscope replay FILE [--speed X]``: play a ``gpuscope log`` recording through the dashboard,
with pause (space), step (left/right), seek ([ ], home, end, click the bar) and speed (+/-).

FILE is a log (plain, ``.zst`` or ``.gz``), a folder, a glob or the base name of a rotated set.
The log is indexed, not loaded (:mod:`gpuscope.telemetry.logindex`): the first frame shows after
one block is decoded, whatever the log's length, and every sample of it can be shown.
"""

from __future__ import annotations

import argparse

from gpuscope.batchgc import few_collections
from gpuscope.results import read_results_file
from gpuscope.schema.kinds import reading_as
from gpuscope.telemetry.logindex import GAP_WAIT_S, LogIndex
from gpuscope.telemetry.records import Sample
from gpuscope.tui.sources import ReplayCursor

__all__ = ["run", "IndexedReplay", "open_replay"]


def open_replay(path: str, speed: float = 1.0) -> IndexedReplay:
    """The cursor over the log at ``path``; :class:`BadInputError` names a bad file."""
    with reading_as("replay"):
        index = LogIndex(path)
        return IndexedReplay(index, speed=speed)


def run(args: argparse.Namespace) -> int:
    replay = open_replay(args.file, speed=args.speed)
    with reading_as("replay --probes"):
        files = [read_results_file(path) for path in args.probes]

    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.terminal import run_in_terminal

    app = GpuscopeApp(replay=replay, theme=args.theme, probe_results=files)
    for message in [*replay.index.warnings, *replay.index.gaps]:
        app.add_startup_message(message)
    return run_in_terminal(app)


class IndexedReplay(ReplayCursor):
    """A :class:`ReplayCursor` over a :class:`LogIndex`: samples are decoded as they are shown."""

    def __init__(self, index: LogIndex, speed: float = 1.0) -> None:  # no super().__init__: no sample list
        self.index = index
        self.position = 0
        self.speed = speed
        self.paused = False
        self._start_s = index.sample(0).timestamp
        self._end_s = index.sample(len(index) - 1).timestamp

    def __len__(self) -> int:
        return len(self.index)

    @property
    def at_end(self) -> bool:
        return self.position >= len(self.index) - 1

    def step(self, count: int = 1) -> Sample:
        self.position = min(len(self.index) - 1, max(0, self.position + count))
        return self.current

    @property
    def current(self) -> Sample:
        return self.index.sample(self.position)

    @property
    def start_s(self) -> float:
        return self._start_s

    @property
    def end_s(self) -> float:
        return self._end_s

    @property
    def elapsed_s(self) -> float:
        return self.current.timestamp - self._start_s

    def seek_s(self, offset_s: float) -> Sample:
        with few_collections():
            self.position = self.index.position_at(self._start_s + max(0.0, offset_s))
            return self.current

    def delay_to_next_s(self) -> float | None:
        if self.paused or self.at_end:
            return None
        gap = self.index.sample(self.position + 1).timestamp - self.current.timestamp
        wait = max(0.0, gap) / max(self.speed, 1e-6)
        return min(wait, GAP_WAIT_S) if gap > 5.0 else wait

    def window(self, count: int) -> list[Sample]:
        first = max(0, self.position - count + 1)
        with few_collections():  # hundreds of samples decoded, none of them garbage
            return [self.index.sample(position) for position in range(first, self.position + 1)]
