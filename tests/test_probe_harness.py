"""The timing harness and its statistics: tick rule, warm-up, best-of-N vs median, cancellation."""

from __future__ import annotations

import threading

import pytest

from gpuscope.probing.errors import ProbeCancelled
from gpuscope.probing.stats import percentile, summarize
from gpuscope.probing.timing import CpuClock, TimingPolicy, time_kernel


class VirtualTime:
    """A clock that advances only when the kernel runs; readings are quantised to ``tick_s``."""

    def __init__(self, tick_s: float) -> None:
        self.now_s = 0.0
        self.tick_s = tick_s

    def read(self) -> float:
        return (self.now_s // self.tick_s) * self.tick_s


def test_percentile_interpolates() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 0.5) == 3.0
    assert percentile([1.0, 2.0], 0.5) == 1.5
    assert percentile([10.0, 0.0], 0.1) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        percentile([], 0.5)


def test_best_is_minimum_and_median_is_middle() -> None:
    samples = [3.0, 1.0, 2.0, 10.0, 4.0]
    best = summarize(samples, "best")
    median = summarize(samples, "median")
    assert best.time_s == 1.0 and best.statistic == "best"
    assert median.time_s == 3.0 and median.statistic == "median"
    assert median.n == best.n == 5
    assert median.time_p10_s < median.time_s < median.time_p90_s
    with pytest.raises(ValueError):
        summarize(samples, "mean")


def test_every_sample_spans_twenty_ticks_of_a_coarse_clock() -> None:
    clock_time = VirtualTime(tick_s=1e-3)  # a 1 ms clock
    per_call_s = 5e-5  # the kernel takes 50 us: 1/20 of a tick

    def kernel() -> None:
        clock_time.now_s += per_call_s

    clock = CpuClock(now=clock_time.read, resolution_s=1e-3)
    policy = TimingPolicy(samples=4, target_sample_s=0.0, min_ticks=20, warmup_max_s=1.0)
    timing = time_kernel(kernel, clock, policy)
    assert timing.inner_reps * per_call_s >= 20 * 1e-3
    assert len(timing.samples_s) == 4
    for sample in timing.samples_s:
        assert sample == pytest.approx(per_call_s, rel=0.06)  # quantisation error below 1 tick in 20


def test_target_duration_sizes_the_repetitions() -> None:
    clock_time = VirtualTime(tick_s=1e-9)

    def kernel() -> None:
        clock_time.now_s += 1e-4

    clock = CpuClock(now=clock_time.read, resolution_s=1e-9)
    timing = time_kernel(kernel, clock, TimingPolicy(samples=3, target_sample_s=0.05, warmup_max_s=1.0))
    assert timing.inner_reps * 1e-4 >= 0.05
    assert timing.min_sample_s == 0.05


def test_warmup_continues_while_the_rate_rises() -> None:
    clock_time = VirtualTime(tick_s=1e-9)
    durations = iter([1.0, 1.0, 0.9, 0.8, 0.7, 0.6, 0.5] + [0.5] * 100)

    def kernel() -> None:
        clock_time.now_s += next(durations)

    clock = CpuClock(now=clock_time.read, resolution_s=1e-9)
    timing = time_kernel(
        kernel, clock, TimingPolicy(samples=3, target_sample_s=0.0, warmup_max_s=60.0, warmup_patience=2)
    )
    # it kept warming while each sample got faster, and stopped after two without gain
    assert timing.samples_s == pytest.approx([0.5, 0.5, 0.5])
    assert timing.warmup_samples_s[-2:] == pytest.approx([0.5, 0.5])
    assert timing.warmup_samples_s[:6] == pytest.approx([1.0, 0.9, 0.8, 0.7, 0.6, 0.5])


def test_cancel_inside_a_sample_stops_quickly() -> None:
    cancel = threading.Event()
    clock_time = VirtualTime(tick_s=1e-9)
    calls = {"n": 0}

    def kernel() -> None:
        calls["n"] += 1
        clock_time.now_s += 0.2  # 0.2 s "per call": one chunk holds one call
        if calls["n"] == 6:
            cancel.set()

    clock = CpuClock(now=clock_time.read, resolution_s=1e-9)
    with pytest.raises(ProbeCancelled):
        time_kernel(kernel, clock, TimingPolicy(samples=50, target_sample_s=1.0, warmup_max_s=100.0), cancel)
    assert calls["n"] <= 8


def test_real_clock_resolution_is_positive_and_small() -> None:
    clock = CpuClock()
    assert 0 < clock.resolution_s < 1e-3
