"""Runs a suite on one device and assembles the results document.

API (used by ``gpuscope probe`` and the TUI)::

    from gpuscope.probing.runner import ProbeRunner
    from gpuscope.probing.suite import load_suite
    runner = ProbeRunner(load_suite("quick"), "cpu",
                         on_progress=lambda done, total, label: ...,   # before each step and at the end
                         on_measurement=lambda measurement: ...)       # each finished Measurement
    results = runner.run(cancel_event)   # a threading.Event; set it to stop within about a second

``run`` returns the typed results (:class:`~gpuscope.schema.results.Results`; ``partial`` true when
cancelled); ``snapshot()`` returns a copy of the results so far from any thread. Callbacks run on the thread
that called ``run`` (the TUI runs it in a worker thread and posts messages from the callbacks).
Constructing a runner is cheap; torch is imported when ``run`` starts.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import msgspec
import psutil

from gpuscope.errors import BadInputError
from gpuscope.probing import collective, matmul, memory, peaks, transfer
from gpuscope.probing.context import ProbeContext, finish_measurement
from gpuscope.probing.derive import derive_ceilings, derive_workloads, summary_of
from gpuscope.probing.environment import (
    DeviceSpec,
    MemoryBudget,
    device_info,
    first_line,
    is_out_of_memory,
    parse_device,
    system_info,
    versions,
)
from gpuscope.probing.errors import ProbeCancelled
from gpuscope.probing.suite import ProbeSpec, Suite
from gpuscope.probing.telemetry import ProbeTelemetry, TelemetryFactory
from gpuscope.probing.timing import Clock, TimingPolicy
from gpuscope.probing.transformer import transformer_shapes
from gpuscope.results import empty_results
from gpuscope.roofline.sweep import derive_sweeps
from gpuscope.schema.core import DetailMap, as_detail, decode_json, detail_map, encode_json
from gpuscope.schema.results import Contention, Measurement, Results, RunSummary, contention_notes
from gpuscope.schema.suites import (
    CollectiveOptions,
    MatmulOptions,
    MatmulShape,
    MemoryOptions,
    PeakOptions,
    TransferOptions,
    TransformerOptions,
)
from gpuscope.telemetry.simulated import simulation_note
from gpuscope.telemetry.topology import Topology
from gpuscope.telemetry.topology_read import read_topology

__all__ = ["ProbeRunner", "wait_interruptible", "exit_at_once"]

ProgressCallback = Callable[[int, int, str], None]
#: How a probe hands each finished measurement to the runner.
MeasurementCallback = Callable[[Measurement], None]


@dataclass
class _Step:
    label: str
    run: Callable[[ProbeContext, MeasurementCallback], object]  # what it returns is not used


class ProbeRunner:
    """Plans the suite's probes for ``device`` and runs them (see the module docstring)."""

    def __init__(
        self,
        suite: Suite,
        device: str | DeviceSpec = "cpu",
        *,
        memory_fraction: float = 0.5,
        on_progress: ProgressCallback | None = None,
        on_measurement: Callable[[Measurement], None] | None = None,
        on_message: Callable[[str], None] | None = None,
        telemetry: bool = True,
        telemetry_factory: TelemetryFactory | None = None,
        free_bytes: Callable[[], int] | None = None,
        clock_factory: Callable[[], Clock] | None = None,
    ) -> None:
        self.suite = suite
        self.device = device if isinstance(device, DeviceSpec) else parse_device(device)
        self.memory_fraction = memory_fraction
        self.budget = MemoryBudget(self.device, memory_fraction, free_bytes)
        self.on_progress = on_progress
        self.on_measurement = on_measurement
        self.on_message = on_message or (lambda message: None)
        self._telemetry = ProbeTelemetry(self.device, enabled=telemetry, factory=telemetry_factory)
        self._clock_factory = clock_factory
        self._lock = threading.Lock()
        self._results: Results | None = None
        self._busy_before: float | None = None
        self.steps = self._plan()

    # --- planning -----------------------------------------------------------------------

    def _plan(self) -> list[_Step]:
        steps: list[_Step] = []
        for spec in self.suite.probes:
            if not spec.runs_on(self.device.type):
                continue
            steps.extend(self._steps_for(spec))
        return steps

    def _steps_for(self, spec: ProbeSpec) -> list[_Step]:
        o = spec.options
        if isinstance(o, MatmulOptions) and o.role == "ceiling":
            libraries = list(o.libraries) if not self.device.is_gpu else ["torch"]
            # partials, not lambdas with default arguments: they bind each value and type-check
            ceiling = matmul.matmul_ceiling
            shapes = o.matmul_shapes()
            return [_Step(f"matmul {d} ceiling", functools.partial(ceiling, d, shapes, libraries)) for d in o.dtypes]
        if isinstance(o, (MatmulOptions, TransformerOptions)):  # workload points
            steps = []
            for dtype in o.dtypes:
                for shape in o.matmul_shapes() if isinstance(o, MatmulOptions) else transformer_shapes(o):
                    name = None if isinstance(o, MatmulOptions) else f"{o.model or 'transformer'} {shape.label} {dtype}"
                    label = name or f"matmul {dtype} {shape.describe()}"
                    steps.append(_Step(label, functools.partial(_workload_step, shape, dtype, name)))
            return steps
        if isinstance(o, MemoryOptions):
            dtype = o.dtype or ("fp32" if self.device.is_gpu else "fp64")
            return [
                _Step(
                    f"memory {kernel}",
                    _with_samples(
                        o.samples,
                        functools.partial(
                            memory.memory_probe,
                            [kernel],
                            o.working_sets_bytes(),
                            dtype,
                            dram_array_bytes=o.dram_array_size_bytes(),
                        ),
                    ),
                )
                for kernel in o.kernels
            ]
        if isinstance(o, TransferOptions):
            return [
                _Step(
                    f"transfer {direction}",
                    functools.partial(transfer.transfer_probe, [direction], list(o.host_memory), o.sizes_bytes()),
                )
                for direction in o.directions
            ]
        if isinstance(o, PeakOptions):
            fma = [_Step(f"peak {d}", _with_samples(o.samples, functools.partial(peaks.fma_peak, d))) for d in o.dtypes]
            levels = [level for level in o.kernels if level != "fma"]
            bandwidth = [
                _Step(f"peak {lv} bandwidth", _with_samples(o.samples, functools.partial(peaks.bandwidth_peak, lv)))
                for lv in levels
                if self.device.is_gpu
            ]
            return (fma if "fma" in o.kernels else []) + bandwidth
        if isinstance(o, CollectiveOptions):
            return [
                _Step(
                    f"collective {', '.join(o.ops)}",
                    _with_samples(
                        o.samples,
                        functools.partial(collective.collective_probe, list(o.ops), o.sizes_bytes(), o.world_size),
                    ),
                )
            ]
        raise ValueError(f"unknown probe kind {spec.kind}")

    # --- running ------------------------------------------------------------------------

    def snapshot(self) -> Results | None:
        """The results so far with ``summary`` and ``duration_s`` (safe from any thread); None
        before the run starts."""
        with self._lock:
            if self._results is None:
                return None
            results = self._results
            return msgspec.structs.replace(
                results,
                measurements=list(results.measurements),
                warnings=list(results.warnings),
                summary=summary_of(results.measurements),
                duration_s=results.duration_s if results.duration_s is not None else time.monotonic() - self._started_s,
            )

    def _topology(self) -> Topology | None:
        """How the node is wired as the run starts (NVML for a GPU run, sysfs); None when
        telemetry is off or the read failed (a probe never fails for it)."""
        if not self._telemetry.enabled:
            return None
        try:
            return read_topology(nvml=self.device.is_gpu, simulated=simulation_note())
        except Exception:  # noqa: BLE001 - the topology is context, not a measurement
            return None

    def partial_results(self, reason: str = "cancelled (Ctrl-C) before the suite finished") -> Results:
        """The results so far marked partial (with ``summary`` and ``duration_s``); an empty results
        document when nothing ran yet."""
        results = self.snapshot() or empty_results(
            suite=self.suite.ref(), device=self.device.name, summary=RunSummary(), duration_s=0.0
        )
        return msgspec.structs.replace(results, partial=True, partial_reason=reason)

    def run(self, cancel: threading.Event | None = None) -> Results:
        """Run every step; stops within about a second of ``cancel`` being set."""
        cancel = cancel or threading.Event()
        # durations from the monotonic clock: a wall clock that NTP steps back would make them negative
        started = self._started_s = time.monotonic()
        self._telemetry.open()
        driver = self._telemetry.driver_version() if self.device.is_gpu else None
        version_info = versions(self.device, driver)
        telemetry = self._telemetry
        results = empty_results(
            system=system_info(self.device, driver), suite=self.suite.ref(), partial=True,
            partial_reason="in progress", device=self.device.name,
            devices=[device_info(self.device, measure_clock=True)],
            memory_fraction=self.memory_fraction, settings=self.suite.settings.to_dict(),
            telemetry={"available": telemetry.available, "reason": telemetry.reason,
                       "gpu_unavailable": telemetry.gpu_unavailable},
            topology=self._topology(),
        )  # fmt: skip
        with self._lock:
            self._results = results
        for warning in self._preflight_warnings():
            self._warn(warning)
        settings = self.suite.settings
        ctx = ProbeContext(
            device=self.device, budget=self.budget, cancel=cancel, telemetry=self._telemetry, versions=version_info,
            ceiling_policy=TimingPolicy(samples=settings.samples, target_sample_s=settings.target_sample_s,
                                        warmup_max_s=settings.warmup_max_s),
            workload_policy=TimingPolicy(samples=settings.workload_samples,
                                         target_sample_s=settings.workload_target_sample_s,
                                         warmup_max_s=settings.warmup_max_s),
            max_call_s=settings.max_call_s, contention_retries=settings.contention_retries,
            contention_threshold_percent=settings.contention_threshold_percent,
            retry_budget_s=settings.contention_retry_budget_s, log=self._warn, clock_factory=self._clock_factory,
        )  # fmt: skip
        total = len(self.steps)
        cancelled = False
        try:
            for done, step in enumerate(self.steps):
                if cancel.is_set():
                    cancelled = True
                    break
                if self.on_progress is not None:
                    self.on_progress(done, total, step.label)
                try:
                    step.run(ctx, self._emit)
                except ProbeCancelled:
                    cancelled = True
                    break
                except Exception as exc:  # noqa: BLE001 - one broken step must not end the run
                    self._emit(_step_failure(step.label, exc, self.device.name, version_info))
            if cancel.is_set():
                cancelled = True
        finally:
            ctx.close()
            self._telemetry.close()
            with self._lock:
                results.duration_s = time.monotonic() - started
                results.partial = cancelled
                results.partial_reason = "cancelled (Ctrl-C) before the suite finished" if cancelled else None
                threshold = settings.contention_threshold_percent
                contended = [m.host_contention_percent or 0.0 for m in results.measurements]
                contended = [percent for percent in contended if percent > threshold]
                if contended:
                    message = (
                        f"{len(contended)} measurement(s) ran while other processes used more than "
                        f"{threshold:g}% of the cores "
                        f"(up to {max(contended):.0f}%; see host_contention_percent); their numbers may be low"
                    )
                    if message not in results.warnings:
                        results.warnings.append(message)
                results.contention = _contention(results, threshold, contended, self._busy_before)
        if self.on_progress is not None and not cancelled:
            self.on_progress(total, total, "done")
        final = self.snapshot()
        assert final is not None
        return final

    def _emit(self, record: Measurement) -> None:
        """Take one probe's measurement, numbered and checked as the file will hold it."""
        with self._lock:
            assert self._results is not None
            results = self._results
            measurement = checked_measurement(record, f"m{len(results.measurements) + 1:04d}")
            results.measurements.append(measurement)
            results.ceilings = derive_ceilings(results.measurements)
            results.sweeps = derive_sweeps(results.measurements, results.devices) or None
            results.workloads = derive_workloads(results.measurements)
        if self.on_measurement is not None:
            self.on_measurement(measurement)

    def _warn(self, message: str) -> None:
        with self._lock:
            if self._results is not None and message not in self._results.warnings:
                self._results.warnings.append(message)
        self.on_message(message)

    def _preflight_warnings(self) -> list[str]:
        out: list[str] = []
        if not self._telemetry.available:
            out.append(f"telemetry unavailable: {self._telemetry.reason}")
        snapshot = self._telemetry.snapshot() if self._telemetry.available else {}
        listed = snapshot.get("other_processes")
        others = [detail_map(p) for p in listed if isinstance(p, dict)] if isinstance(listed, list) else []
        if others:
            names = ", ".join(f"{p.get('pid')} ({p.get('name') or '?'})" for p in others[:5])
            out.append(f"{len(others)} other process(es) use {self.device.name}: {names}; numbers may be low")
        if not self.device.is_gpu:
            busy = self._busy_before = _cpu_busy_percent()
            if busy is not None and busy > 25:
                out.append(
                    f"the CPU was {busy:.0f}% busy before the run (other processes); numbers may be low and noisy"
                )
        return out


def checked_measurement(measurement: Measurement, measurement_id: str) -> Measurement:
    """``measurement`` numbered ``measurement_id`` as the file holds it (NaN and infinity as null),
    checked against the schema's ranges; one that breaks them is kept as a failed measurement that
    says why."""
    name = measurement.name or measurement_id
    numbered = msgspec.structs.replace(measurement, id=measurement_id)
    try:
        return decode_json(encode_json(numbered), Measurement, name)
    except BadInputError as exc:
        return Measurement(
            id=measurement_id, kind=measurement.kind, name=name, device=measurement.device, status="failed",
            error=f"the probe's record is invalid: {exc}",
        )  # fmt: skip


def _step_failure(label: str, exc: Exception, device: str, version_info: DetailMap) -> Measurement:
    """The measurement of a step that raised outside a measurement."""
    kind = label.split()[0] if label.split()[0] in ("matmul", "memory", "transfer", "collective", "peak") else "matmul"
    status = "skipped" if is_out_of_memory(exc) else "failed"
    error = (
        f"out of memory: {first_line(exc)}"
        if status == "skipped"
        else f"{label}: {type(exc).__name__}: {first_line(exc, 300)}"
    )
    draft = Measurement(
        kind=kind, name=label, device=device, parameters={"step": label}, flops=0, bytes=0, counting_rule={},
        versions=as_detail(version_info),
    )  # fmt: skip
    return finish_measurement(draft, statistic="best", status=status, error=error)


def _contention(
    results: Results, threshold: float, contended: list[float], busy_before: float | None
) -> Contention | None:
    """The ``contention`` record of a run: its contention warnings (kept in every report, compare
    and chart made from the file) and the figures behind them; None when there were none."""
    notes = contention_notes(msgspec.structs.replace(results, contention=None))
    if not notes:
        return None
    return Contention(
        cpu_busy_percent_before=busy_before, threshold_percent=threshold, contended_measurements=len(contended),
        max_percent=max(contended) if contended else None, notes=notes,
    )  # fmt: skip


def _cpu_busy_percent() -> float | None:
    try:
        return float(psutil.cpu_percent(interval=0.2))
    except Exception:  # noqa: BLE001 - no busy figure, no warning
        return None


def _workload_step(
    shape: MatmulShape, dtype: str, name: str | None, ctx: ProbeContext, emit: MeasurementCallback
) -> None:
    """One GEMM workload point (``name``: its workload name, a transformer layer's GEMM)."""
    record = matmul.matmul_workload(shape, dtype, ctx)
    emit(msgspec.structs.replace(record, workload_name=name) if name else record)


def _with_samples(
    samples: int | None, run: Callable[[ProbeContext, MeasurementCallback], object]
) -> Callable[[ProbeContext, MeasurementCallback], object]:
    """``run`` with the ceiling policy's sample count set to a probe's own ``samples`` (if any)."""
    if samples is None:
        return run

    def wrapped(ctx: ProbeContext, emit: MeasurementCallback) -> object:
        policy = ctx.ceiling_policy
        ctx.ceiling_policy = dataclasses.replace(policy, samples=samples)
        try:
            return run(ctx, emit)
        finally:
            ctx.ceiling_policy = policy

    return wrapped


# --- stopping on Ctrl-C ---------------------------------------------------------------------------
#
# Why SIGABRT happened: Ctrl-C raised KeyboardInterrupt inside ``Thread.join`` on the main
# thread. CPython 3.11's join (``_wait_for_tstate_lock``, the bpo-45274 fix) then releases the
# running thread's state lock and marks it stopped, so ``is_alive()`` turned false while the
# probe thread was still inside torch; the command returned, the interpreter shut down around
# the live thread and C++ destructors ran under it: "terminate called without an active
# exception", exit 134. Now SIGINT only sets the cancel event (no exception anywhere), the probe
# thread stops between samples, the main thread waits for it to really end, and the command
# returns normally. Only if it does not stop in time (or a second Ctrl-C) does the process end
# with os._exit, which runs no destructors.

#: How long to wait for the probe thread after Ctrl-C, seconds (a sample lasts well under one).
STOP_WAIT_S = 20.0


def wait_interruptible(
    thread: threading.Thread,
    cancel: threading.Event,
    on_interrupt: Callable[[], None] | None = None,
    timeout_s: float = STOP_WAIT_S,
) -> tuple[bool, bool]:
    """Wait for ``thread`` to end; a SIGINT sets ``cancel`` (and calls ``on_interrupt`` once)
    instead of raising. Returns ``(interrupted, stopped)``: whether Ctrl-C came, and whether the
    thread ended (false only after a second Ctrl-C or ``timeout_s`` seconds after the first)."""
    signals: list[float] = []

    def handler(signum: int, frame: object) -> None:
        signals.append(time.monotonic())
        cancel.set()

    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, handler)
    announced = False
    try:
        while thread.is_alive():
            thread.join(timeout=0.1)
            if signals and not announced:
                announced = True
                if on_interrupt is not None:
                    on_interrupt()
            if len(signals) > 1 or (signals and time.monotonic() - signals[0] > timeout_s):
                break
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    return bool(signals), not thread.is_alive()


def exit_at_once(code: int) -> None:
    """Flush the standard streams and end the process now, without interpreter shutdown (for a
    probe thread that is still inside torch)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
