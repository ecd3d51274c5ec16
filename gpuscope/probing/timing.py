"""The timing harness: how one kernel becomes a list of timed samples.

Rules (docs/results-schema.md, ANCHORS section 4):

1. The first call is discarded (allocation, library initialisation, code paths picked on first use).
2. Repetitions per sample (``inner_reps``) are sized so every timed sample lasts at least
   ``min_ticks`` ticks of the clock *and* ``target_sample_s``; short kernels repeat inside one sample.
3. Warm-up repeats samples until the rate stops rising (GPU clocks ramp, CPU caches and TLBs fill):
   it stops after ``warmup_patience`` samples in a row that do not beat the best by more than
   ``warmup_tolerance``, or after ``warmup_max_s``.
4. Then ``samples`` timed samples; each reports the time of one call (sample time / inner_reps).
   With an ``energy`` meter, its counters are read right before and right after these samples
   (warm-up excluded), so the joules cover exactly ``samples * inner_reps`` calls.

Clocks: :class:`CpuClock` uses ``time.perf_counter``; :class:`CudaClock` records CUDA events on
the stream the work runs on (the caller's kernel must enqueue on the current stream, which the
clock sets). Both check the cancel event between samples and between chunks of a sample
(chunks last about 0.1 s), so a cancel lands within a second.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, cast

from gpuscope.probing.errors import ProbeCancelled
from gpuscope.schema.core import Detail, DetailMap, as_detail
from gpuscope.telemetry.energy import EnergyResult, energy_fields

if TYPE_CHECKING:  # the types only: torch loads when a GPU probe runs
    import torch

__all__ = ["TimingPolicy", "Timing", "Clock", "CpuClock", "CudaClock", "time_kernel", "check_cancel"]

#: A cancel check lands at least this often while a sample runs (seconds).
CANCEL_CHUNK_S = 0.1


@dataclass(frozen=True)
class TimingPolicy:
    """How long and how often to time. Seconds throughout."""

    samples: int = 7  # N timed samples
    target_sample_s: float = 0.05  # minimum length of one timed sample
    min_ticks: int = 20  # every sample spans at least this many clock ticks
    warmup_max_s: float = 3.0
    warmup_tolerance: float = 0.01  # a sample "beats" the best when it is this much faster
    warmup_patience: int = 2  # stop warming up after this many samples in a row without a gain
    max_inner_reps: int = 1 << 22

    def min_sample_s(self, resolution_s: float) -> float:
        """The shortest allowed timed sample for a clock of ``resolution_s``."""
        return max(self.target_sample_s, self.min_ticks * resolution_s)


@dataclass
class Timing:
    """What :func:`time_kernel` measured. ``samples_s`` are per-call times (seconds)."""

    samples_s: list[float]
    inner_reps: int
    warmup_samples_s: list[float] = field(default_factory=list)
    clock: str = "perf_counter"
    resolution_s: float = 1e-9
    min_sample_s: float = 0.0
    energy: EnergyResult | None = None  # over the timed samples; None: no meter was given

    def to_json(self) -> DetailMap:
        """The timing as a results ``timing`` entry, with the energy fields
        (:func:`gpuscope.telemetry.energy.energy_fields`: ``energy_j`` or ``energy_unavailable``)."""
        fields: DetailMap = {
            "samples_s": as_detail(list[Detail](self.samples_s)),
            "inner_reps": self.inner_reps,
            "warmup_samples_s": as_detail(list[Detail](self.warmup_samples_s)),
            "warmup_samples": len(self.warmup_samples_s),
            "clock": self.clock,
            "clock_resolution_s": self.resolution_s,
            "min_sample_s": self.min_sample_s,
        }
        return fields | cast(DetailMap, energy_fields(self.energy))  # a TypedDict of JSON values


class EnergyMeterLike(Protocol):
    """What :func:`time_kernel` needs of an energy meter (:class:`~gpuscope.telemetry.energy.EnergyMeter`)."""

    def start(self) -> None: ...

    def stop(self) -> EnergyResult: ...


class Clock(Protocol):
    name: str
    resolution_s: float

    def sample(self, fn: Callable[[], object], inner_reps: int, cancel: threading.Event | None) -> float:
        """Run ``fn`` ``inner_reps`` times and return the elapsed seconds for all of them."""
        ...


def check_cancel(cancel: threading.Event | None) -> None:
    """Raise :class:`ProbeCancelled` when ``cancel`` is set."""
    if cancel is not None and cancel.is_set():
        raise ProbeCancelled("cancelled")


def _chunks(inner_reps: int, per_call_s: float | None) -> list[int]:
    """Split ``inner_reps`` so each chunk lasts about :data:`CANCEL_CHUNK_S`."""
    size = min(inner_reps, max(1, int(CANCEL_CHUNK_S / per_call_s)) if per_call_s and per_call_s > 0 else 1)
    full, rest = divmod(inner_reps, size)
    return [size] * full + ([rest] if rest else [])


class CpuClock:
    """``time.perf_counter`` (or an injected ``now`` for tests) around the repetitions."""

    name = "perf_counter"

    def __init__(self, now: Callable[[], float] = time.perf_counter, resolution_s: float | None = None) -> None:
        self._now = now
        self.resolution_s = resolution_s if resolution_s is not None else measured_resolution_s(now)
        self.per_call_s: float | None = None  # updated by time_kernel, sizes cancel chunks

    def sample(self, fn: Callable[[], object], inner_reps: int, cancel: threading.Event | None) -> float:
        chunks = _chunks(inner_reps, self.per_call_s)
        start = self._now()
        for chunk in chunks:
            check_cancel(cancel)
            for _ in range(chunk):
                fn()
        return self._now() - start


def measured_resolution_s(now: Callable[[], float] = time.perf_counter) -> float:
    """The clock's tick: the larger of the declared resolution and the smallest step seen
    between consecutive reads (reading perf_counter itself takes tens of ns)."""
    declared = time.get_clock_info("perf_counter").resolution if now is time.perf_counter else 0.0
    smallest = math.inf
    for _ in range(200):
        first = now()
        second = now()
        while second == first:
            second = now()
        smallest = min(smallest, second - first)
    return max(declared, smallest)


class CudaClock:
    """CUDA events recorded on ``stream`` around the repetitions; ``fn`` runs with ``stream``
    as the current stream, so its kernels and the events share one stream."""

    name = "cuda_event"
    #: CUDA documents event timing resolution of about half a microsecond.
    resolution_s = 0.5e-6

    def __init__(self, device: torch.device | str, stream: torch.cuda.Stream | None = None) -> None:
        import torch

        self._torch = torch
        self.device = device
        self.stream = stream if stream is not None else torch.cuda.Stream(device=device)
        self.per_call_s: float | None = None

    def sample(self, fn: Callable[[], object], inner_reps: int, cancel: threading.Event | None) -> float:
        torch = self._torch
        chunks = _chunks(inner_reps, self.per_call_s)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(self.stream):
            start.record(self.stream)
            for chunk in chunks:
                if cancel is not None and cancel.is_set():
                    self.stream.synchronize()
                    raise ProbeCancelled("cancelled")
                for _ in range(chunk):
                    fn()
            end.record(self.stream)
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3  # ms -> s


def time_kernel(
    fn: Callable[[], object],
    clock: Clock,
    policy: TimingPolicy = TimingPolicy(),
    cancel: threading.Event | None = None,
    energy: EnergyMeterLike | None = None,
) -> Timing:
    """Time ``fn`` by the rules in the module docstring. ``energy``: a meter
    (:class:`gpuscope.telemetry.energy.EnergyMeter`) read around the timed samples; its result
    goes into :attr:`Timing.energy`. Raises :class:`ProbeCancelled`."""
    check_cancel(cancel)
    min_sample_s = policy.min_sample_s(clock.resolution_s)
    clock.sample(fn, 1, cancel)  # discarded first call
    inner = 1
    elapsed = clock.sample(fn, inner, cancel)
    while elapsed < min_sample_s and inner < policy.max_inner_reps:
        per_call = max(elapsed, clock.resolution_s) / inner
        _set_per_call(clock, per_call)
        wanted = math.ceil(min_sample_s / per_call * 1.1)
        inner = min(policy.max_inner_reps, max(inner * 2, wanted))
        check_cancel(cancel)
        elapsed = clock.sample(fn, inner, cancel)
    best = elapsed / inner
    _set_per_call(clock, best)
    warmup: list[float] = [best]
    started = time.monotonic()
    stale = 0
    while time.monotonic() - started < policy.warmup_max_s and stale < policy.warmup_patience:
        check_cancel(cancel)
        per_call = clock.sample(fn, inner, cancel) / inner
        warmup.append(per_call)
        if per_call < best * (1.0 - policy.warmup_tolerance):
            stale = 0
        else:
            stale += 1
        best = min(best, per_call)
    samples: list[float] = []
    check_cancel(cancel)
    if energy is not None:
        energy.start()
    for _ in range(policy.samples):
        check_cancel(cancel)
        samples.append(clock.sample(fn, inner, cancel) / inner)
    energy_result = energy.stop() if energy is not None else None
    return Timing(
        samples_s=samples,
        inner_reps=inner,
        warmup_samples_s=warmup,
        clock=clock.name,
        resolution_s=clock.resolution_s,
        min_sample_s=min_sample_s,
        energy=energy_result,
    )


def _set_per_call(clock: Clock, per_call_s: float) -> None:
    if hasattr(clock, "per_call_s"):
        clock.per_call_s = per_call_s
