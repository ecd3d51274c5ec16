"""``gpuscope.profile``: where one step of a model spends its time, op by op, against the roofline.

Two forms::

    prof = gpuscope.profile(name="train step", device="cpu", steps=3)
    for batch in loader:            # each ``with`` block is one step
        with prof:
            train_step(batch)
    print(prof.result.verdicts[0])

    result = gpuscope.profile(train_step, batch, steps=3)     # a callable: run it here

Steps, in order: ``warmup`` plain steps (skipped), one counting step (FLOPs, bytes, dtype and
module of every aten op, under FlopCounterMode), then ``steps`` profiled steps (torch.profiler,
CPU and CUDA activities, shapes recorded); later blocks run plain. The result is ready when the
last profiled step ends (:attr:`Profiler.result`). Inside one ``with`` block, :meth:`Profiler.step`
marks a step boundary (for a loop inside the block).

A profile whose steps stop early warns (:class:`IncompleteProfileWarning`, naming the steps run
and needed) when it is closed (:meth:`Profiler.close`), garbage-collected or the program exits,
and keeps a partial profile marked incomplete when a profiled step ran. torch's profiler prints
``USDT: ... profiler_start`` lines from C++; :mod:`gpuscope.profiling.quiet` keeps them (and only
them) off the terminal.

torch is imported when the first step begins, never at import.
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
import time
import warnings
import weakref
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Literal, overload

from gpuscope.errors import ResourceError, UsageError
from gpuscope.measuring.dram import DramCollector, match_gpu, measure_dram_bytes
from gpuscope.probing.environment import tensor_device, torch_device
from gpuscope.profiling.attribution import StepEvents, claim_events, join_counts
from gpuscope.profiling.build import append_profile, build_result
from gpuscope.profiling.compiled import python_stack_wanted
from gpuscope.profiling.compiled_attribution import CompiledStep, attribute_compiled, summarize_compiled
from gpuscope.profiling.quiet import drop_profiler_noise
from gpuscope.profiling.record import CountedStep, StepCounter
from gpuscope.profiling.result import ProfileResult
from gpuscope.telemetry.energy import EnergyMeter, EnergyResult
from gpuscope.telemetry.powercap import POWERCAP_ROOT
from gpuscope.telemetry.values import Reason, Unavailable

if TYPE_CHECKING:
    import torch
    import torch.profiler

__all__ = ["IncompleteProfileWarning", "Profiler", "profile"]


class IncompleteProfileWarning(UserWarning):
    """A profile ended (the program exited, or the profiler was dropped or closed) before every
    warm-up, counting and profiled step ran."""


#: Profilers not closed yet: each one still incomplete at exit warns then (:meth:`Profiler.close`).
_OPEN: weakref.WeakSet[Profiler] = weakref.WeakSet()


@atexit.register
def _close_open_profilers() -> None:
    for profiler in list(_OPEN):
        profiler.close()


class Profiler:
    """Re-enterable context manager; each entry is one step (see the module docstring)."""

    def __init__(
        self,
        name: str = "step",
        device: str | torch.device | None = None,
        *,
        steps: int = 3,
        warmup: int = 1,
        roofs: Sequence[str | os.PathLike[str]] = (),
        results: str | os.PathLike[str] | None = None,
        energy: bool = True,
        powercap_root: str | os.PathLike[str] = POWERCAP_ROOT,
        rerun: Callable[[], object] | None = None,
        telemetry: bool = True,
        collector_factory: Callable[[], DramCollector] | None = None,
    ) -> None:
        if steps < 1:
            raise UsageError(f"steps={steps}: at least 1 profiled step")
        if warmup < 0:
            raise UsageError(f"warmup={warmup}: must not be negative")
        self.name = name
        self.requested_device = device
        self.steps = steps
        self.warmup = warmup
        # Files named now, relative to the directory now: the profiled step may change directory.
        self.roofs = [os.path.abspath(path) for path in roofs]
        self.results = results
        self._results_path = None if results is None else os.path.abspath(results)
        self.energy = energy
        self.powercap_root = powercap_root
        self.rerun = rerun
        self.telemetry = telemetry
        self.collector_factory = collector_factory
        self.result: ProfileResult | None = None  # set when the last profiled step has ended
        self._index = 0  # steps begun
        self._running: Literal["plain", "count", "profile"] | None = None  # the current step's phase
        self._counter: StepCounter | None = None  # the counting step's modes, while it runs
        self._torch_profiler: torch.profiler.profile | None = None  # a profiled step's, while it runs
        self._device: torch.device | None = None
        self._counted: CountedStep | None = None
        self._step_events: list[StepEvents] = []
        self._compiled_steps: list[CompiledStep] = []
        self._step_times_s: list[float] = []
        self._energy: list[EnergyResult] = []
        self._meter: EnergyMeter | None = None
        self._started_s = 0.0
        self._closed = False
        self._site = _caller_site()  # where the warning of an incomplete profile points
        _OPEN.add(self)

    # --- phases -----------------------------------------------------------------------------

    @property
    def phase(self) -> str:
        """What the next (or current) step is: ``"warmup"``, ``"count"``, ``"profile"`` or ``"done"``."""
        index = self._index - 1 if self._running is not None else self._index
        if index < self.warmup:
            return "warmup"
        if index == self.warmup:
            return "count"
        if index <= self.warmup + self.steps:
            return "profile"
        return "done"

    def __enter__(self) -> Profiler:
        self._begin()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if exc_type is not None:
            self._abort()
        else:
            self._end()

    def step(self) -> None:
        """End the current step and begin the next (a step boundary inside one ``with`` block)."""
        self._end()
        self._begin()

    def _synchronize(self) -> None:
        if self._device is not None and self._device.type == "cuda":
            import torch

            torch.cuda.synchronize(self._device)

    def _begin(self) -> None:
        if self._running is not None:
            raise UsageError("gpuscope.profile: a step is already running (nested `with` blocks?)")
        if self._device is None:
            import torch

            default = "cuda" if torch.cuda.is_available() else "cpu"  # no device, no tensors: CUDA's current one
            self._device = torch_device(default if self.requested_device is None else self.requested_device)
        phase = self.phase
        self._index += 1
        if phase == "count":
            counter = StepCounter(self._synchronize)
            counter.__enter__()
            self._counter, self._running = counter, "count"
        elif phase == "profile":
            from torch.profiler import ProfilerActivity
            from torch.profiler import profile as torch_profile

            activities = [ProfilerActivity.CPU]
            if self._device.type == "cuda":
                activities.append(ProfilerActivity.CUDA)
            # compiled code: the Python stack shows each generated module's call and each fused C++ kernel
            # (gpuscope.profiling.compiled_attribution)
            with_stack = python_stack_wanted()
            profiler = torch_profile(activities=activities, record_shapes=True, with_stack=with_stack)
            with drop_profiler_noise():
                profiler.__enter__()
            if self.energy and self._meter is None:  # RAPL on a CPU; NVML's counter of the mapped GPU
                device = str(self._device) if self._device.type == "cuda" else "cpu"
                self._meter = EnergyMeter(device, powercap_root=self.powercap_root)
            self._synchronize()
            if self._meter is not None:
                self._meter.start()
            self._started_s = time.perf_counter()
            self._torch_profiler, self._running = profiler, "profile"
        else:
            self._running = "plain"

    def _abort(self) -> None:
        counter, profiler = self._counter, self._torch_profiler
        self._running = self._counter = self._torch_profiler = None
        if counter is not None:
            counter.__exit__(RuntimeError, None, None)
        elif profiler is not None:
            with drop_profiler_noise():
                profiler.__exit__(None, None, None)
            if self._meter is not None:
                self._meter.stop()
        self._index -= 1  # the step did not happen; the next block retries this phase

    def _end(self) -> None:
        if self._running is None:
            raise UsageError("gpuscope.profile: step() or exit without a running step")
        counter, profiler = self._counter, self._torch_profiler
        self._running = self._counter = self._torch_profiler = None
        if counter is not None:
            counter.__exit__(None, None, None)
            self._counted = counter.result
        elif profiler is not None:
            self._synchronize()
            wall_s = time.perf_counter() - self._started_s
            if self._meter is not None:
                self._energy.append(self._meter.stop())
            with drop_profiler_noise():
                profiler.__exit__(None, None, None)
            assert self._counted is not None and self._device is not None
            raw = profiler.events()
            events = claim_events(raw, self._counted.names, self._device.type)
            join_counts(events, self._counted)
            self._compiled_steps.append(attribute_compiled(raw, events, self._counted, self._device.type))
            self._step_events.append(events)
            self._step_times_s.append(wall_s)
            if len(self._step_events) == self.steps:
                self._finish()

    # --- the result ---------------------------------------------------------------------------

    @property
    def steps_needed(self) -> int:
        """Steps (``with`` blocks or :meth:`step` boundaries) a complete profile needs: warm-up +
        counting + profiled."""
        return self.warmup + 1 + self.steps

    @property
    def counting_step(self) -> StepCounter | None:
        """The counting step's recorder while that step runs (its ``position`` numbers the calls); else None."""
        return self._counter

    @property
    def counted(self) -> CountedStep | None:
        """What the counting step counted, once it has ended; else None."""
        return self._counted

    @property
    def step_events(self) -> list[StepEvents]:
        """Each profiled step's events, joined to their counts (a copy; one entry a profiled step ended)."""
        return list(self._step_events)

    @property
    def steps_run(self) -> int:
        """Steps that have ended (warm-up, counting and profiled), at most :attr:`steps_needed`."""
        return min(self._index - (1 if self._running is not None else 0), self.steps_needed)

    def close(self) -> ProfileResult | None:
        """End the profile now. A complete profile is left as it is. An incomplete one (fewer steps
        than :attr:`steps_needed` ran) warns with :class:`IncompleteProfileWarning`, naming the
        steps run and needed, and keeps what it has: when at least one profiled step ran,
        :attr:`result` becomes a partial profile marked ``incomplete`` and is appended to
        ``results``. Runs by itself when the profiler is garbage-collected or the program exits.
        Returns :attr:`result`."""
        if self._closed:
            return self.result
        self._closed = True
        _OPEN.discard(self)
        if self.result is not None or self._index == 0:  # complete, or never used: nothing to say
            return self.result
        if self._running is not None:
            self._abort()
        run, needed = self.steps_run, self.steps_needed
        counted = min(max(run - self.warmup, 0), 1)
        what = (
            f"{min(run, self.warmup)} of {self.warmup} warm-up, {counted} of 1 counting, "
            f"{len(self._step_times_s)} of {self.steps} profiled"
        )
        head = f"gpuscope.profile({self.name!r}): {run} of the {needed} steps it needs ran ({what})"
        if not self._step_events:
            hint = f"run {needed} `with` blocks, or lower steps= or warmup="
            self._warn(f"{head}: no profiled step ran, nothing to keep ({hint})")
            return None
        try:
            self._finish(incomplete=True)
        except Exception as exc:  # noqa: BLE001 - at exit or in a finaliser: say it, never raise
            self._warn(f"{head}: the partial profile could not be built: {exc}")
            return None
        where = f", appended to {self.results} marked incomplete" if self.results is not None else ""
        profiled = len(self._step_times_s)
        self._warn(f"{head}: kept a partial profile of {profiled} profiled step{'s' if profiled != 1 else ''}{where}")
        return self.result

    def _warn(self, message: str) -> None:
        """An :class:`IncompleteProfileWarning` pointing at the line that created the profiler."""
        filename, lineno, module = self._site
        warnings.warn_explicit(message, IncompleteProfileWarning, filename, lineno, module)

    def discard(self) -> None:
        """End the profile without a result, a warning or a write (what ran is dropped)."""
        self._closed = True
        _OPEN.discard(self)

    def __del__(self) -> None:
        try:
            if not getattr(self, "_closed", True):
                self.close()
        except Exception:  # noqa: BLE001 - never raise from a finaliser (interpreter shutdown)
            pass

    def _finish(self, incomplete: bool = False) -> None:
        assert self._counted is not None and self._device is not None
        if self._meter is not None:
            self._meter.close()
        self.result = build_result(
            name=self.name,
            device=self._device,
            counted=self._counted,
            step_events=self._step_events,
            step_times_s=self._step_times_s,
            warmup=self.warmup,
            roofs=self.roofs,
            energy=_energy_per_step(self._energy, len(self._step_times_s)) if self.energy else None,
            dram=self._dram_bytes(),
        )
        self.result.steps_requested = self.steps
        self.result.compiled = summarize_compiled(self._compiled_steps)
        if self.result.compiled is not None:  # the counted ops fused into kernels found their place
            compiled = self.result.compiled
            self.result.unmatched_ops = compiled.unplaced_ops
            self.result.notes = [note for note in self.result.notes if "had no twin" not in note]
            if compiled.unplaced_ops:
                self.result.notes.append(
                    f"{compiled.unplaced_ops} counted op calls per step are in no timed op or compiled kernel: "
                    "their FLOPs are in the total, not in a group"
                )
            self.result.notes.extend(compiled.notes)
        if incomplete:
            self.result.incomplete = True
            self.result.notes.append(
                f"INCOMPLETE: {len(self._step_times_s)} of {self.steps} profiled steps ran (the steps stopped early)"
            )
        else:
            self._closed = True
            _OPEN.discard(self)
        if self.results is not None:
            append_profile(self._results_path or self.results, self.result)
            self.result.results_path = str(self.results)

    def _dram_bytes(self) -> float | Unavailable:
        device = self._device
        if device is None or device.type != "cuda":
            return Unavailable(
                Reason.NOT_APPLICABLE, "DRAM traffic is measured on NVIDIA GPUs with GPM (Hopper and newer) only"
            )
        if not self.telemetry:
            return Unavailable(Reason.NOT_APPLICABLE, "telemetry turned off")
        if self.rerun is None:
            return Unavailable(
                Reason.NOT_APPLICABLE,
                "the with-block form cannot rerun the step for a GPM window: use gpuscope.profile(fn)",
            )
        import torch

        return measure_dram_bytes(
            self.rerun,
            max(min(self._step_times_s), 1e-6),
            1.0,
            self.collector_factory,
            synchronize=lambda: torch.cuda.synchronize(device),
            select_gpu=lambda sample: match_gpu(sample, device),
            device_text=str(device),
        )


def _caller_site() -> tuple[str, int, str]:
    """(file, line, module) of the first frame outside gpuscope: where the user made the profiler."""
    frame = sys._getframe(1)
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        frame = frame.f_back
    return frame.f_code.co_filename, frame.f_lineno, str(frame.f_globals.get("__name__", "__main__"))


def _energy_per_step(results: list[EnergyResult], steps: int) -> EnergyResult | None:
    """The energy of one step: joules summed over the profiled steps' windows / steps."""
    if not results:
        return None
    available = [result for result in results if not isinstance(result.joules, Unavailable)]
    window_s = sum(result.window_s for result in results)
    if not available:
        first = results[0]
        return EnergyResult(first.joules, window_s / steps, first.method)
    total = sum(result.joules for result in available if not isinstance(result.joules, Unavailable))
    domains: dict[str, float] = {}
    for result in available:
        for key, value in result.domains_j.items():
            domains[key] = domains.get(key, 0.0) + value
    method = f"{available[0].method}, summed over {len(results)} profiled steps"
    return EnergyResult(total / steps, window_s / steps, method, {key: value / steps for key, value in domains.items()})


@overload
def profile(
    fn: None = None,
    *,
    name: str | None = None,
    device: str | torch.device | None = None,
    steps: int = 3,
    warmup: int = 1,
    roofs: Sequence[str | os.PathLike[str]] = (),
    results: str | os.PathLike[str] | None = None,
    energy: bool = True,
    powercap_root: str | os.PathLike[str] = POWERCAP_ROOT,
    telemetry: bool = True,
    collector_factory: Callable[[], DramCollector] | None = None,
) -> Profiler: ...


@overload
def profile(
    fn: Callable[..., object],
    *args: object,
    name: str | None = None,
    device: str | torch.device | None = None,
    steps: int = 3,
    warmup: int = 1,
    kwargs: dict[str, object] | None = None,
    roofs: Sequence[str | os.PathLike[str]] = (),
    results: str | os.PathLike[str] | None = None,
    energy: bool = True,
    powercap_root: str | os.PathLike[str] = POWERCAP_ROOT,
    telemetry: bool = True,
    collector_factory: Callable[[], DramCollector] | None = None,
) -> ProfileResult: ...


def profile(
    fn: Callable[..., object] | None = None,
    *args: object,
    name: str | None = None,
    device: str | torch.device | None = None,
    steps: int = 3,
    warmup: int = 1,
    kwargs: dict[str, object] | None = None,
    roofs: Sequence[str | os.PathLike[str]] = (),
    results: str | os.PathLike[str] | None = None,
    energy: bool = True,
    powercap_root: str | os.PathLike[str] = POWERCAP_ROOT,
    telemetry: bool = True,
    collector_factory: Callable[[], DramCollector] | None = None,
) -> Profiler | ProfileResult:
    """Profile a step. Without ``fn``: a :class:`Profiler` to use as ``with prof: step()``; with
    ``fn``: run ``fn(*args, **kwargs)`` for ``warmup`` + 1 + ``steps`` steps and return the
    :class:`~gpuscope.profiling.result.ProfileResult`.

    ``device``: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` (default: the first tensor argument's device,
    else CUDA's current device when CUDA is available, else CPU). ``roofs``: probe results files
    whose measured ceilings (same device and dtype) judge the ops; the datasheet otherwise.
    ``results``: a results file to append the profile to as a workload. ``energy``: read NVML's or
    RAPL's energy counter over the profiled steps. Whatever ``fn`` raises propagates unchanged
    (``SystemExit`` included) and ``results`` is left as it was."""
    if fn is None and args:
        raise UsageError("gpuscope.profile(): positional arguments need a function first")
    if fn is not None and not callable(fn):
        raise UsageError(f"gpuscope.profile(): {fn!r} is not callable")
    call_kwargs = dict(kwargs or {})
    if fn is not None and device is None:
        device = tensor_device((args, call_kwargs))
    profiler = Profiler(
        name or getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or "step",
        device,
        steps=steps,
        warmup=warmup,
        roofs=roofs,
        results=results,
        energy=energy,
        powercap_root=powercap_root,
        rerun=None if fn is None else functools.partial(fn, *args, **call_kwargs),
        telemetry=telemetry,
        collector_factory=collector_factory,
    )
    if fn is None:
        return profiler
    try:
        for _ in range(warmup + 1 + steps):
            with profiler:
                fn(*args, **call_kwargs)
    except BaseException:
        profiler.discard()  # what fn raised propagates; no partial profile, ``results`` as it was
        raise
    if profiler.result is None:  # pragma: no cover - the loop above always completes the phases
        raise ResourceError("gpuscope.profile: the profile did not complete")
    return profiler.result
