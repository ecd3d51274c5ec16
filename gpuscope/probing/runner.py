"""Runs a suite on one device and assembles the results document.

API (used by ``gpuscope probe`` and the TUI)::

    from gpuscope.probing import ProbeRunner, load_suite
    runner = ProbeRunner(load_suite("quick"), "cpu",
                         on_progress=lambda done, total, label: ...,   # before each step and at the end
                         on_measurement=lambda record: ...)            # each finished measurement
    results = runner.run(cancel_event)   # a threading.Event; set it to stop within about a second

``run`` returns the results dict (``gpuscope.results`` schema; ``partial`` true when cancelled);
``snapshot()`` returns a copy of the results so far from any thread. Callbacks run on the thread
that called ``run`` (the TUI runs it in a worker thread and posts messages from the callbacks).
Constructing a runner is cheap; torch is imported when ``run`` starts.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuscope.probing.context import ProbeContext
from gpuscope.probing.environment import DeviceSpec, MemoryBudget, device_info, parse_device, system_info, versions
from gpuscope.probing.errors import ProbeCancelled
from gpuscope.probing.suite import ProbeSpec, Suite
from gpuscope.probing.telemetry import ProbeTelemetry
from gpuscope.probing.timing import Clock, TimingPolicy

__all__ = ["ProbeRunner", "derive_ceilings", "derive_workloads", "wait_interruptible", "exit_at_once"]

ProgressCallback = Callable[[int, int, str], None]
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
        on_measurement: MeasurementCallback | None = None,
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
        self._results: dict[str, Any] | None = None
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
        if spec.kind == "matmul":
            if o["role"] == "ceiling":
                libraries = o["libraries"] if not self.device.is_gpu else ["torch"]
                return [
                    _Step(
                        f"matmul {dtype} ceiling",
                        # partials, not lambdas with default arguments: they bind each value and type-check
                        functools.partial(matmul.matmul_ceiling, dtype, o["shapes"], libraries),
                    )
                    for dtype in o["dtypes"]
                ]
            return [
                _Step(
                    f"matmul {dtype} {shape.describe()}",
                    functools.partial(_matmul_workload_step, shape, dtype),
                )
                for dtype in o["dtypes"]
                for shape in o["shapes"]
            ]
        if spec.kind == "transformer":
            model = o.get("model") or "transformer"
            out = []
            for dtype in o["dtypes"]:
                for shape in transformer.transformer_shapes(o):

                    def run(
                        ctx: ProbeContext, emit: MeasurementCallback, dtype: str = dtype, shape: Any = shape
                    ) -> None:
                        record = matmul.matmul_workload(shape, dtype, ctx)
                        record["workload_name"] = f"{model} {shape.label} {dtype}"
                        emit(record)

                    out.append(_Step(f"{model} {shape.label} {dtype}", run))
            return out
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

    def snapshot(self) -> dict[str, Any]:
        """A copy of the results so far (safe from any thread)."""
        from gpuscope.results import summarize_run

        with self._lock:
            if self._results is None:
                return {}
            return summarize_run(copy.deepcopy(self._results), time.time() - self._started_s)

    def partial_results(self, reason: str = "cancelled (Ctrl-C) before the suite finished") -> dict[str, Any]:
        """The results so far marked partial (with ``summary`` and ``duration_s``); an empty results
        document when nothing ran yet."""
        results = self.snapshot()
        if not results:
            from gpuscope.results import new_results, summarize_run

            results = summarize_run(new_results(suite=self.suite.to_json()), 0.0)
            results["device"] = self.device.name
        results["partial"] = True
        results["partial_reason"] = reason
        return results

    def run(self, cancel: threading.Event | None = None) -> dict[str, Any]:
        """Run every step; stops within about a second of ``cancel`` being set."""
        from gpuscope.results import new_results

        cancel = cancel or threading.Event()
        started = self._started_s = time.time()
        self._telemetry.open()
        driver = self._telemetry.driver_version() if self.device.is_gpu else None
        version_info = versions(self.device, driver)
        results = new_results(system=system_info(self.device, driver), suite=self.suite.to_json())
        results.update(
            partial=True,
            partial_reason="in progress",
            device=self.device.name,
            devices=[device_info(self.device)],
            memory_fraction=self.memory_fraction,
            warnings=[],
            telemetry={
                "available": self._telemetry.available,
                "reason": self._telemetry.reason,
                "gpu_unavailable": self._telemetry.gpu_unavailable,
            },
            settings=self.suite.settings.to_dict(),
        )
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
                results["duration_s"] = time.time() - started
                results["partial"] = cancelled
                results["partial_reason"] = "cancelled (Ctrl-C) before the suite finished" if cancelled else None
                threshold = settings.contention_threshold_percent
                contended = [
                    m for m in results["measurements"] if (m.get("host_contention_percent") or 0.0) > threshold
                ]
                if contended:
                    worst = max(m["host_contention_percent"] for m in contended)
                    message = (
                        f"{len(contended)} measurement(s) ran while other processes used more than "
                        f"{threshold:g}% of the cores "
                        f"(up to {worst:.0f}%; see host_contention_percent); their numbers may be low"
                    )
                    if message not in results["warnings"]:
                        results["warnings"].append(message)
                statuses = [m["status"] for m in results["measurements"]]
                results["summary"] = {s: statuses.count(s) for s in ("ok", "failed", "skipped")}
        if self.on_progress is not None and not cancelled:
            self.on_progress(total, total, "done")
        return self.snapshot()

    def _emit(self, record: dict[str, Any]) -> None:
        with self._lock:
            assert self._results is not None
            record["id"] = f"m{len(self._results['measurements']) + 1:04d}"
            self._results["measurements"].append(record)
            self._results["ceilings"] = derive_ceilings(self._results["measurements"])
            self._results["workloads"] = derive_workloads(self._results["measurements"])
        if self.on_measurement is not None:
            self.on_measurement(record)

    def _warn(self, message: str) -> None:
        with self._lock:
            if self._results is not None and message not in self._results["warnings"]:
                self._results["warnings"].append(message)
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


def _ceiling(record: dict[str, Any], kind: str, name: str, value: float, unit: str, **extra: Any) -> dict[str, Any]:
    """A ``ceilings`` entry from its best measurement, with that measurement's energy (joules over
    its timed samples, or why they are unavailable)."""
    timing = record.get("timing") or {}
    energy = {key: timing[key] for key in CEILING_ENERGY_FIELDS if key in timing}
    if kind != "compute":
        energy.pop("flop_per_j", None)  # FLOP/J of a bandwidth roof's kernel is no roof
    return {
        "device": record["device"],
        "kind": kind,
        "name": name,
        "value": value,
        "unit": unit,
        "measurement_id": record["id"],
        "statistic": record.get("statistic", "best"),
        "n": record.get("n"),
        "host": None,
        "rank": 0,
        **energy,
        **extra,
    }


def derive_ceilings(measurements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The best ok measurement per ceiling name (see docs/results-schema.md for the names)."""
    best: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}

    def offer(kind: str, name: str, value: float | None, unit: str, record: dict[str, Any], **extra: Any) -> None:
        if value is None or value <= 0:
            return
        key = (record["device"], name)
        if key not in best or value > best[key][0]:
            best[key] = (value, _ceiling(record, kind, name, value, unit, **extra))

    for m in measurements:
        if m.get("status") != "ok":
            continue
        p = m.get("parameters", {})
        if m["kind"] == "matmul" and p.get("role") == "ceiling":
            offer(
                "compute", p["dtype"], m["flop_per_s"], "FLOP/s", m,
                dtype=p["dtype"], library=m.get("library"), blas=m.get("implementation"), shape=m["name"],
                note=f"{m.get('implementation')}, {m['name']}, best of {m.get('n')}",
            )  # fmt: skip
        elif m["kind"] == "memory" and m.get("level"):
            offer(
                "memory", f"{m['level']}.{p['kernel']}", m["bytes_per_s"], "B/s", m,
                level=m["level"], kernel=p["kernel"], implementation=m.get("implementation"),
                footprint_bytes=p.get("footprint_bytes"),
                note=f"STREAM byte count, {m.get('implementation')}, working set {p.get('footprint_bytes')} B",
            )  # fmt: skip
        elif m["kind"] == "transfer":
            offer("transfer", m["ceiling_name"], m["bytes_per_s"], "B/s", m, size_bytes=p.get("size_bytes"))
        elif m["kind"] == "collective":
            for bandwidth in ("busbw", "algbw"):
                offer(
                    "collective", f"{p['op']}.{bandwidth}", m.get(f"{bandwidth}_bytes_per_s"), "B/s", m,
                    backend=p.get("backend"), world_size=p.get("world_size"), size_bytes=p.get("size_bytes"),
                )  # fmt: skip
    # say how each GEMM library did, so a CPU ceiling says which BLAS won and by how much
    libraries: dict[tuple[str, str], dict[str, float]] = {}
    for m in measurements:
        p = m.get("parameters", {})
        if m.get("status") == "ok" and m["kind"] == "matmul" and p.get("role") == "ceiling" and m.get("library"):
            per = libraries.setdefault((m["device"], p["dtype"]), {})
            per[m["library"]] = max(per.get(m["library"], 0.0), m["flop_per_s"])
    for (device, name), (_, entry) in best.items():
        if entry["kind"] == "compute" and (device, name) in libraries:
            entry["libraries_flop_per_s"] = libraries[(device, name)]
    order = {"compute": 0, "memory": 1, "transfer": 2, "collective": 3}
    return sorted((entry for _, entry in best.values()), key=lambda c: (order[c["kind"]], c["name"]))


def derive_workloads(measurements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Roofline points: every ok workload-role GEMM (median time, p10/p90, N)."""
    out = []
    for m in measurements:
        if m.get("status") != "ok" or m.get("parameters", {}).get("role") != "workload":
            continue
        out.append(
            {
                "name": m.get("workload_name") or m["name"],
                "device": m["device"],
                "flops": m["flops"],
                "bytes": m["bytes"],
                "bytes_rule": m["counting_rule"]["bytes"]
                if isinstance(m["counting_rule"], dict)
                else m["counting_rule"],
                "time_s": m["time_median_s"],
                "time_p10_s": m["time_p10_s"],
                "time_p90_s": m["time_p90_s"],
                "n": m["n"],
                "flop_per_s": m["flops"] / m["time_median_s"],
                "bytes_per_s": m["bytes"] / m["time_median_s"],
                "intensity_flop_per_byte": m["flops"] / m["bytes"] if m["bytes"] else None,
                "dtype": m["parameters"].get("dtype"),
                "cache_state": "warm",
                "source": "probe",
                "measurement_id": m["id"],
            }
        )
    return out


def _matmul_workload_step(shape: Any, dtype: str, ctx: ProbeContext, emit: MeasurementCallback) -> None:
    from gpuscope.probing.matmul import matmul_workload

    emit(matmul_workload(shape, dtype, ctx))


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
