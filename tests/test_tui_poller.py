"""The live sampling thread (gpuscope/tui/poller.py): results in order, one at a time (the next
sample waits for the receiver's ack), failures back off and are counted, process scans follow
the wanted period, the source is opened once and closed when the poller stops."""

from __future__ import annotations

import queue
import threading

from tui_samples import sample

from gpuscope.telemetry.records import Sample
from gpuscope.tui.poller import Polled, Poller, PollFailed
from gpuscope.tui.sources import TelemetrySource


class _Source(TelemetrySource):
    label = "test"

    def __init__(self, fail_first: int = 0) -> None:
        self.fail_first = fail_first
        self.calls = 0
        self.scans = 0
        self.opened = self.closed = 0

    def open(self) -> None:
        self.opened += 1

    def close(self) -> None:
        self.closed += 1

    def sample(self) -> Sample:
        self.calls += 1
        if self.calls <= self.fail_first:
            raise RuntimeError(f"failure {self.calls}")
        return sample(self.calls)

    def host_processes(self) -> list:  # type: ignore[override]
        self.scans += 1
        return [self.scans]


def _poller(source: _Source, interval_s: float = 0.01) -> tuple[Poller, queue.Queue]:
    results: queue.Queue = queue.Queue()
    return Poller(source, interval_s, results.put), results


def test_results_come_one_at_a_time_until_acknowledged() -> None:
    source = _Source()
    poller, results = _poller(source)
    poller.start()
    try:
        first = results.get(timeout=5)
        assert isinstance(first, Polled) and first.sample.timestamp == sample(1).timestamp
        assert first.processes is None  # no scan wanted
        assert not poller._acked.wait(0.1)  # nothing acknowledged: no second sample was taken
        assert source.calls == 1 and results.empty()
        poller.ack()
        second = results.get(timeout=5)
        assert isinstance(second, Polled) and second.sample.timestamp == sample(2).timestamp
    finally:
        poller.stop()
    assert not poller.running
    assert (source.opened, source.closed) == (1, 1)


def test_failures_back_off_and_are_counted() -> None:
    source = _Source(fail_first=2)
    poller, results = _poller(source, interval_s=0.001)
    poller.start()
    try:
        failures = [results.get(timeout=5), results.get(timeout=5)]
        assert all(isinstance(f, PollFailed) for f in failures)
        assert [f.failures for f in failures] == [1, 2]  # type: ignore[union-attr]
        assert failures[1].retry_in_s == 2 * failures[0].retry_in_s  # type: ignore[union-attr]
        assert "failure 2" in str(failures[1].error)  # type: ignore[union-attr]
        assert isinstance(results.get(timeout=5), Polled)  # the third call succeeds
    finally:
        poller.stop()


def test_processes_are_scanned_twice_at_once_then_per_period() -> None:
    source = _Source()
    poller, results = _poller(source)
    poller.scan_period_s = 3600.0
    poller.start()
    try:
        got = []
        for _ in range(4):
            got.append(results.get(timeout=5))
            poller.ack()
    finally:
        poller.stop()
    assert [r.processes for r in got] == [[1], [2], None, None]  # type: ignore[union-attr]


def test_stop_ends_a_thread_waiting_for_an_ack() -> None:
    source = _Source()
    poller, results = _poller(source)
    poller.start()
    results.get(timeout=5)
    stopper = threading.Thread(target=poller.stop)
    stopper.start()
    stopper.join(5)
    assert not stopper.is_alive() and not poller.running
    assert source.closed == 1
