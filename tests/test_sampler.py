"""RingBuffer bounds and the Sampler's drift-free schedule, with an injected clock."""

from __future__ import annotations

import threading

import pytest

from gpuscope.errors import UsageError
from gpuscope.telemetry.sampler import MIN_INTERVAL_S, RingBuffer, Sampler, check_interval

# --- RingBuffer ----------------------------------------------------------------------------------


def test_ring_buffer_keeps_the_newest_items_in_order() -> None:
    ring: RingBuffer[int] = RingBuffer(3)
    assert len(ring) == 0 and not ring and ring.latest() is None
    for value in range(1, 8):
        ring.append(value)
        assert len(ring) == min(value, 3)
    assert list(ring) == [5, 6, 7]
    assert ring[0] == 5 and ring[-1] == 7 and ring.latest() == 7
    assert ring[1:] == [6, 7]
    assert ring.to_list() == [5, 6, 7]
    with pytest.raises(IndexError):
        ring[3]
    with pytest.raises(IndexError):
        ring[-4]
    ring.clear()
    assert list(ring) == [] and ring.capacity == 3


def test_ring_buffer_never_grows() -> None:
    ring: RingBuffer[int] = RingBuffer(5)
    for value in range(10_000):
        ring.append(value)
    assert len(ring) == 5 and ring.maxlen == 5 and ring.capacity == 5
    assert list(ring) == [9995, 9996, 9997, 9998, 9999]


def test_ring_buffer_rejects_zero_capacity() -> None:
    with pytest.raises(ValueError):
        RingBuffer(0)


# --- interval validation ------------------------------------------------------------------------


def test_interval_below_minimum_has_a_clear_message() -> None:
    with pytest.raises(
        UsageError, match=r"interval 0\.05 s is below the minimum 0\.1 s \(GPM needs >100 ms between samples\)"
    ):
        check_interval(0.05)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_interval_must_be_positive_and_finite(bad: float) -> None:
    with pytest.raises(UsageError):
        check_interval(bad)


def test_minimum_interval_itself_is_accepted() -> None:
    assert check_interval(MIN_INTERVAL_S) == 0.1
    assert check_interval(1) == 1.0


# --- Sampler schedule ---------------------------------------------------------------------------


class FakeTime:
    """A monotonic clock that only moves when the sampler waits or when collect 'takes time'."""

    def __init__(self, start: float = 500.0) -> None:
        self.now = start
        self.waits: list[float] = []

    def clock(self) -> float:
        return self.now

    def wait(self, timeout_s: float) -> bool:
        self.waits.append(timeout_s)
        self.now += timeout_s
        return False


def test_ticks_land_on_start_plus_k_intervals_without_drift() -> None:
    fake = FakeTime()
    ticks: list[float] = []

    def collect() -> float:
        ticks.append(fake.now)
        fake.now += 0.013  # each collection costs 13 ms; the schedule must absorb it
        return fake.now

    sampler = Sampler(collect, 0.25, clock=fake.clock, wait=fake.wait, duration_s=25.0)
    sampler.run()
    assert len(ticks) == 100
    for k, at in enumerate(ticks):
        assert at == pytest.approx(500.0 + k * 0.25, abs=1e-9)
    assert sampler.ticks_skipped == 0
    assert all(w == pytest.approx(0.25 - 0.013) for w in fake.waits)


def test_late_ticks_are_skipped_not_burst() -> None:
    fake = FakeTime(0.0)
    ticks: list[float] = []

    def collect() -> None:
        ticks.append(fake.now)
        if len(ticks) == 3:
            fake.now += 2.35  # a stall covering several ticks

    sampler = Sampler(collect, 1.0, clock=fake.clock, wait=fake.wait, duration_s=8.0)
    sampler.run()
    # ticks at 0, 1, 2; the stall ends at 4.35: 3 and 4 are skipped, the next is 5, not 4.35 or a burst
    assert ticks == pytest.approx([0.0, 1.0, 2.0, 5.0, 6.0, 7.0])
    assert sampler.ticks_skipped == 2


def test_history_callback_and_duration() -> None:
    fake = FakeTime(0.0)
    counter = iter(range(1000))
    seen: list[int] = []
    sampler = Sampler(
        lambda: next(counter), 0.5, on_sample=seen.append, history=4, clock=fake.clock, wait=fake.wait, duration_s=5.0
    )
    sampler.run()
    assert seen == list(range(10))  # 5 s at 0.5 s: ticks 0 .. 4.5
    assert sampler.history is not None and list(sampler.history) == [6, 7, 8, 9]
    assert sampler.samples_taken == 10


def test_duration_shorter_than_interval_gives_one_sample() -> None:
    fake = FakeTime(0.0)
    seen: list[float] = []
    Sampler(fake.clock, 1.0, on_sample=seen.append, clock=fake.clock, wait=fake.wait, duration_s=0.2).run()
    assert len(seen) == 1


def test_non_positive_duration_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="duration"):
        Sampler(lambda: None, 1.0, duration_s=0.0)


def test_thread_stops_promptly_and_errors_reach_join() -> None:
    started = threading.Event()
    sampler = Sampler(lambda: started.set(), 60.0)  # would otherwise sleep a minute
    sampler.start()
    assert started.wait(5.0)
    sampler.stop()
    assert sampler.join(timeout_s=5.0)  # the 60 s wait is cut short by stop()
    assert not sampler.is_alive()

    def broken() -> None:
        raise RuntimeError("collector exploded")

    failing = Sampler(broken, 0.1)
    failing.start()
    with pytest.raises(RuntimeError, match="collector exploded"):
        failing.join(timeout_s=5.0)
