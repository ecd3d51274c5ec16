"""Runs a suite on one device and assembles the results document.

API (used by ``gpuscope probe`` and the TUI)::

    from gpuscope.probing import ProbeRunner, load_suite
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from gpuscope.probing.context import ProbeContext
from gpuscope.probing.environment import DeviceSpec, MemoryBudget, device_info, parse_device, system_info, versions
from gpuscope.probing.errors import ProbeCancelled
from gpuscope.probing.suite import ProbeSpec, Suite
from gpuscope.probing.telemetry import ProbeTelemetry
from gpuscope.probing.timing import Clock, TimingPolicy
from gpuscope.schema.core import Detail
from gpuscope.schema.results import Ceiling, CeilingKind, CeilingUnit, Measurement, Results, RunSummary, Workload

__all__ = ["ProbeRunner", "derive_ceilings", "derive_workloads", "wait_interruptible", "exit_at_once"]

ProgressCallback = Callable[[int, int, str], None]
#: How a probe hands its measurement record (a dict, gpuscope.probing.context) to the runner.
MeasurementCallback = Callable[[dict[str, Any]], None]


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
        telemetry_factory: Callable[[], Any] | None = None,
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
        from gpuscope.probing import collective, matmul, memory, transfer, transformer

        o = spec.options
        if spec.kind == "matmul" and o["role"] == "ceiling":
            libraries = o["libraries"] if not self.device.is_gpu else ["torch"]
            # partials, not lambdas with default arguments: they bind each value and type-check
            ceiling = matmul.matmul_ceiling
            return [
                _Step(f"matmul {d} ceiling", functools.partial(ceiling, d, o["shapes"], libraries)) for d in o["dtypes"]
            ]
        if spec.kind in ("matmul", "transformer"):  # workload points
            model, steps = o.get("model") or "transformer", []
            for dtype in o["dtypes"]:
                for shape in o["shapes"] if spec.kind == "matmul" else transformer.transformer_shapes(o):
                    name = None if spec.kind == "matmul" else f"{model} {shape.label} {dtype}"
                    label = name or f"matmul {dtype} {shape.describe()}"
                    steps.append(_Step(label, functools.partial(_workload_step, shape, dtype, name)))
            return steps
        if spec.kind == "memory":
            dtype = o["dtype"] or ("fp32" if self.device.is_gpu else "fp64")
            return [
                _Step(
                    f"memory {kernel}",
                    _with_samples(
                        o.get("samples"),
                        functools.partial(
                            memory.memory_probe,
                            [kernel],
                            o["working_sets"],
                            dtype,
                            dram_array_bytes=o["dram_array_bytes"],
                        ),
                    ),
                )
                for kernel in o["kernels"]
            ]
        if spec.kind == "transfer":
            return [
                _Step(
                    f"transfer {direction}",
                    functools.partial(transfer.transfer_probe, [direction], o["host_memory"], o["sizes"]),
                )
                for direction in o["directions"]
            ]
        if spec.kind == "collective":
            return [
                _Step(
                    f"collective {', '.join(o['ops'])}",
                    _with_samples(
                        o.get("samples"),
                        functools.partial(collective.collective_probe, o["ops"], o["sizes"], o["world_size"]),
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
                summary=_summary(results.measurements),
                duration_s=results.duration_s if results.duration_s is not None else time.monotonic() - self._started_s,
            )

    def partial_results(self, reason: str = "cancelled (Ctrl-C) before the suite finished") -> Results:
        """The results so far marked partial (with ``summary`` and ``duration_s``); an empty results
        document when nothing ran yet."""
        from gpuscope.results import empty_results

        results = self.snapshot() or empty_results(
            suite=self.suite.ref(), device=self.device.name, summary=RunSummary(), duration_s=0.0
        )
        return msgspec.structs.replace(results, partial=True, partial_reason=reason)

    def run(self, cancel: threading.Event | None = None) -> Results:
        """Run every step; stops within about a second of ``cancel`` being set."""
        from gpuscope.results import empty_results

        cancel = cancel or threading.Event()
        # durations from the monotonic clock: a wall clock that NTP steps back would make them negative
        started = self._started_s = time.monotonic()
        self._telemetry.open()
        driver = self._telemetry.driver_version() if self.device.is_gpu else None
        version_info = versions(self.device, driver)
        telemetry = self._telemetry
        results = empty_results(
            system=system_info(self.device, driver), suite=self.suite.ref(), partial=True,
            partial_reason="in progress", device=self.device.name, devices=[device_info(self.device)],
            memory_fraction=self.memory_fraction, settings=self.suite.settings.to_dict(),
            telemetry={"available": telemetry.available, "reason": telemetry.reason,
                       "gpu_unavailable": telemetry.gpu_unavailable},
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
        if self.on_progress is not None and not cancelled:
            self.on_progress(total, total, "done")
        final = self.snapshot()
        assert final is not None
        return final

    def _emit(self, record: dict[str, Any]) -> None:
        """Take one probe's measurement record (the probes' own dicts) as a typed measurement."""
        with self._lock:
            assert self._results is not None
            results = self._results
            measurement = _typed_measurement(record, f"m{len(results.measurements) + 1:04d}")
            results.measurements.append(measurement)
            results.ceilings = derive_ceilings(results.measurements)
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
        others = snapshot.get("other_processes") or []
        if others:
            names = ", ".join(f"{p['pid']} ({p.get('name') or '?'})" for p in others[:5])
            out.append(f"{len(others)} other process(es) use {self.device.name}: {names}; numbers may be low")
        if not self.device.is_gpu:
            busy = _cpu_busy_percent()
            if busy is not None and busy > 25:
                out.append(
                    f"the CPU was {busy:.0f}% busy before the run (other processes); numbers may be low and noisy"
                )
        return out


def _summary(measurements: list[Measurement]) -> RunSummary:
    statuses = [m.status for m in measurements]
    return RunSummary(ok=statuses.count("ok"), failed=statuses.count("failed"), skipped=statuses.count("skipped"))


def _typed_measurement(record: dict[str, Any], measurement_id: str) -> Measurement:
    """A probe's record as the file holds it (NaN and infinity as null), checked; a record that
    breaks the schema is kept as a failed measurement that says why."""
    from gpuscope.errors import BadInputError
    from gpuscope.schema.core import decode_json, encode_json

    name = str(record.get("name") or measurement_id)
    try:
        measurement = decode_json(encode_json({**record, "id": measurement_id}), Measurement, name)
    except BadInputError as exc:
        return Measurement(
            id=measurement_id, kind=str(record.get("kind")), name=name, device=str(record.get("device") or ""),
            status="failed", error=f"the probe's record is invalid: {exc}",
        )  # fmt: skip
    return measurement


def _step_failure(label: str, exc: Exception, device: str, version_info: dict[str, Any]) -> dict[str, Any]:
    """A measurement record for a step that raised outside a measurement."""
    from gpuscope.probing.context import measurement_record
    from gpuscope.probing.environment import first_line, is_out_of_memory

    kind = label.split()[0] if label.split()[0] in ("matmul", "memory", "transfer", "collective") else "matmul"
    status = "skipped" if is_out_of_memory(exc) else "failed"
    error = (
        f"out of memory: {first_line(exc)}"
        if status == "skipped"
        else f"{label}: {type(exc).__name__}: {first_line(exc, 300)}"
    )
    record = measurement_record(
        kind=kind, name=label, device=device, parameters={"step": label}, flops=0, bytes_=0,
        counting_rule={}, statistic="best", status=status, error=error,
    )  # fmt: skip
    record["versions"] = version_info
    return record


def _cpu_busy_percent() -> float | None:
    try:
        import psutil

        return float(psutil.cpu_percent(interval=0.2))
    except Exception:  # noqa: BLE001
        return None


#: Copied from a measurement's ``timing`` into its ceiling (gpuscope.telemetry.energy.energy_fields).
CEILING_ENERGY_FIELDS = ("energy_j", "energy_window_s", "energy_method", "energy_unavailable", "flop_per_j")


def _mapping(detail: Detail) -> Mapping[str, Any]:
    """A free-detail field (``parameters``, ``timing``, ``counting_rule``) as a mapping ({} when not one)."""
    return detail if isinstance(detail, dict) else {}


def _ceiling(m: Measurement, kind: CeilingKind, name: str, value: float, unit: CeilingUnit, **extra: Any) -> Ceiling:
    """A ``ceilings`` entry from its best measurement, with that measurement's energy (joules over
    its timed samples, or why they are unavailable)."""
    timing = _mapping(m.timing)
    energy = {key: timing[key] for key in CEILING_ENERGY_FIELDS if key in timing}
    if kind != "compute":
        energy.pop("flop_per_j", None)  # FLOP/J of a bandwidth roof's kernel is no roof
    return Ceiling(
        device=m.device, kind=kind, name=name, value=value, unit=unit, measurement_id=m.id,
        statistic=m.statistic or "best", n=m.n, rank=0, **energy, **extra,
    )  # fmt: skip


def derive_ceilings(measurements: list[Measurement]) -> list[Ceiling]:
    """The best ok measurement per ceiling name (see docs/results-schema.md for the names)."""
    best: dict[tuple[str, str], Ceiling] = {}

    def offer(
        kind: CeilingKind, name: str, value: float | None, unit: CeilingUnit, m: Measurement, **extra: Any
    ) -> None:
        if value is None or value <= 0:
            return
        key = (m.device, name)
        if key not in best or value > best[key].value:
            best[key] = _ceiling(m, kind, name, value, unit, **extra)

    libraries: dict[tuple[str, str], dict[str, float | None]] = {}
    for m in measurements:
        if m.status != "ok":
            continue
        p = _mapping(m.parameters)
        if m.kind == "matmul" and p.get("role") == "ceiling":
            offer(
                "compute", p["dtype"], m.flop_per_s, "FLOP/s", m, dtype=p["dtype"], library=m.library,
                blas=m.implementation, shape=m.name, note=f"{m.implementation}, {m.name}, best of {m.n}",
            )  # fmt: skip
            if m.library:  # say how each GEMM library did: which BLAS won and by how much
                per = libraries.setdefault((m.device, p["dtype"]), {})
                per[m.library] = max(per.get(m.library) or 0.0, m.flop_per_s or 0.0)
        elif m.kind == "memory" and m.level:
            offer(
                "memory", f"{m.level}.{p['kernel']}", m.bytes_per_s, "B/s", m, level=m.level, kernel=p["kernel"],
                implementation=m.implementation, footprint_bytes=p.get("footprint_bytes"),
                note=f"STREAM byte count, {m.implementation}, working set {p.get('footprint_bytes')} B",
            )  # fmt: skip
        elif m.kind == "transfer" and m.ceiling_name:
            offer("transfer", m.ceiling_name, m.bytes_per_s, "B/s", m, size_bytes=p.get("size_bytes"))
        elif m.kind == "collective":
            for bandwidth, value in (("busbw", m.busbw_bytes_per_s), ("algbw", m.algbw_bytes_per_s)):
                offer(
                    "collective", f"{p['op']}.{bandwidth}", value, "B/s", m, backend=p.get("backend"),
                    world_size=p.get("world_size"), size_bytes=p.get("size_bytes"),
                )  # fmt: skip
    for key, entry in best.items():
        if entry.kind == "compute" and key in libraries:
            entry.libraries_flop_per_s = libraries[key]
    order = {"compute": 0, "memory": 1, "transfer": 2, "collective": 3}
    return sorted(best.values(), key=lambda c: (order[c.kind], c.name))


def derive_workloads(measurements: list[Measurement]) -> list[Workload]:
    """Roofline points: every ok workload-role GEMM (median time, p10/p90, N)."""
    out = []
    for m in measurements:
        p = _mapping(m.parameters)
        if m.status != "ok" or p.get("role") != "workload" or not m.time_median_s:
            continue
        flops, nbytes, time_s, rule = m.flops or 0.0, m.bytes or 0.0, m.time_median_s, m.counting_rule
        workload = Workload(
            name=m.workload_name or m.name or "", device=m.device, flops=flops, bytes=nbytes,
            bytes_rule=_mapping(rule).get("bytes") if isinstance(rule, dict) else rule, time_s=time_s,
            time_p10_s=m.time_p10_s, time_p90_s=m.time_p90_s, n=m.n, flop_per_s=flops / time_s,
            bytes_per_s=nbytes / time_s, intensity_flop_per_byte=flops / nbytes if nbytes else None,
            dtype=p.get("dtype"), cache_state="warm", source="probe", measurement_id=m.id,
        )  # fmt: skip
        out.append(workload)
    return out


def _workload_step(shape: Any, dtype: str, name: str | None, ctx: ProbeContext, emit: MeasurementCallback) -> None:
    """One GEMM workload point (``name``: its workload name, a transformer layer's GEMM)."""
    from gpuscope.probing.matmul import matmul_workload

    record = matmul_workload(shape, dtype, ctx)
    if name:
        record["workload_name"] = name
    emit(record)


def _with_samples(
    samples: int | None, run: Callable[[ProbeContext, MeasurementCallback], Any]
) -> Callable[[ProbeContext, MeasurementCallback], Any]:
    """``run`` with the ceiling policy's sample count set to a probe's own ``samples`` (if any)."""
    if samples is None:
        return run

    def wrapped(ctx: ProbeContext, emit: MeasurementCallback) -> Any:
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
