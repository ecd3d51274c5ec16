"""Timing for ``gpuscope.measure``: the probe timing harness (:mod:`gpuscope.probing.timing`)
plus what a workload adds to it:

- caches flushed before each sample (``flush``), or the result labelled "warm"; a flushed
  sample must be a single call, so a call shorter than 20 timer ticks is timed warm and says so;
- the workload statistic: median per-call time with p10, p90 and N (:mod:`gpuscope.probing.stats`);
- the number of samples bounded by a time budget (at least 3).

The rules themselves (first call discarded, warm-up until the rate stops rising, every sample at
least 20 ticks and a target duration, CUDA events on the GPU, perf_counter on the CPU) live in
the probe harness, so probes and workloads are timed the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuscope.probing.stats import percentile, summarize
from gpuscope.probing.timing import Clock, CpuClock, CudaClock, TimingPolicy, time_kernel

if TYPE_CHECKING:
    import torch

__all__ = ["MIN_TIMER_TICKS", "TimingResult", "time_callable", "cpu_clock", "cuda_clock", "percentile"]

MIN_TIMER_TICKS = 20


def cpu_clock() -> Clock:
    """``time.perf_counter`` with its measured tick."""
    return CpuClock()


def cuda_clock(device: torch.device) -> Clock:
    """CUDA events on a stream of ``device`` (the timed function runs with it as current stream)."""
    return CudaClock(device)


@dataclass(frozen=True)
class TimingResult:
    """Per-call times of N samples and their summary. Times in seconds."""

    samples_s: tuple[float, ...]  # per-call time of each sample (sample time / reps)
    reps_per_sample: int
    median_s: float
    p10_s: float
    p90_s: float
    timer: str  # "perf_counter" | "cuda_event"
    timer_resolution_s: float
    cache_state: str  # "warm" | "flushed"
    warmup_samples: int
    notes: tuple[str, ...] = ()
    statistic: str = "median"

    @property
    def n(self) -> int:
        return len(self.samples_s)

    @property
    def ticks_per_sample(self) -> float:
        """How many timer ticks the median sample spanned."""
        return self.median_s * self.reps_per_sample / self.timer_resolution_s


class _FlushingClock:
    """Runs ``flush`` before each sample, outside the timed region."""

    def __init__(self, clock: Clock, flush: Callable[[], object]) -> None:
        self._clock = clock
        self._flush = flush
        self.name = clock.name
        self.resolution_s = clock.resolution_s

    @property
    def per_call_s(self) -> float | None:
        return getattr(self._clock, "per_call_s", None)

    @per_call_s.setter
    def per_call_s(self, value: float | None) -> None:
        if hasattr(self._clock, "per_call_s"):
            self._clock.per_call_s = value

    def sample(self, fn: Callable[[], object], inner_reps: int, cancel: threading.Event | None) -> float:
        self._flush()
        return self._clock.sample(fn, inner_reps, cancel)


def time_callable(
    call: Callable[[], object],
    *,
    clock: Clock,
    flush: Callable[[], object] | None = None,
    target_sample_s: float = 0.02,
    samples: int = 15,
    max_time_s: float = 10.0,
    per_call_estimate_s: float | None = None,
    warmup_max_s: float = 2.0,
    min_ticks: int = MIN_TIMER_TICKS,
    cancel: threading.Event | None = None,
) -> TimingResult:
    """Time ``call`` (no arguments) with the probe harness and summarise it as a workload.

    ``flush`` (None: warm) runs before every sample; flushed samples aim at one call each.
    ``per_call_estimate_s`` (e.g. from a first run) sizes the sample count to ``max_time_s``."""
    if samples < 1:
        raise ValueError("samples must be >= 1")
    notes: list[str] = []
    count = samples
    if per_call_estimate_s is not None and per_call_estimate_s > 0:
        sample_cost_s = per_call_estimate_s if flush is not None else max(per_call_estimate_s, target_sample_s)
        fits = int(max_time_s / sample_cost_s)
        if fits < samples:
            count = max(min(3, samples), fits)
            notes.append(
                f"{count} samples instead of {samples}: each takes about {sample_cost_s:.3g} s "
                f"and the budget is {max_time_s} s"
            )
    policy = TimingPolicy(
        samples=count,
        target_sample_s=0.0 if flush is not None else target_sample_s,
        min_ticks=min_ticks,
        warmup_max_s=warmup_max_s,
        # steady state: four samples in a row without a 1% gain (two stopped too early on a
        # busy CPU: 20.6, 19.2 then 4.3 ms for one function in one process)
        warmup_patience=4,
    )
    timed_clock: Clock = _FlushingClock(clock, flush) if flush is not None else clock
    timing = time_kernel(call, timed_clock, policy, cancel)
    cache_state = "warm"
    if flush is not None:
        if timing.inner_reps == 1:
            cache_state = "flushed"
            if timing.samples_s and min(timing.samples_s) < target_sample_s:
                notes.append(f"flushed samples are single calls, shorter than the {target_sample_s} s target")
        else:
            notes.append(
                f"one call is shorter than {min_ticks} timer ticks: each sample repeats it {timing.inner_reps} times, "
                "so only the first call of a sample starts with flushed caches; labelled warm"
            )
    summary = summarize(timing.samples_s, "median")
    return TimingResult(
        samples_s=tuple(timing.samples_s),
        reps_per_sample=timing.inner_reps,
        median_s=summary.time_median_s,
        p10_s=summary.time_p10_s,
        p90_s=summary.time_p90_s,
        timer=timing.clock,
        timer_resolution_s=timing.resolution_s,
        cache_state=cache_state,
        warmup_samples=len(timing.warmup_samples_s),
        notes=tuple(notes),
    )
