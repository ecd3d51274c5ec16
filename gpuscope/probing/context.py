"""What every probe gets: the device, the timing policy, the memory budget, the cancel event,
telemetry, and :meth:`ProbeContext.measure`, which times a kernel with telemetry around it and
returns a finished measurement record (see docs/results-schema.md, ``measurements``). Each
context owns one energy meter for its device (NVML's energy counter of the mapped GPU, or RAPL on
a CPU), read around every measurement's timed samples: ``timing.energy_j`` or
``timing.energy_unavailable``."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

from gpuscope.probing.environment import DeviceSpec, MemoryBudget, first_line, is_out_of_memory
from gpuscope.probing.errors import ProbeCancelled, ProbeFailed, ProbeSkipped
from gpuscope.probing.stats import Summary, summarize
from gpuscope.probing.telemetry import ProbeTelemetry
from gpuscope.probing.timing import Clock, CpuClock, CudaClock, Timing, TimingPolicy, check_cancel, time_kernel
from gpuscope.schema.core import Detail, DetailMap, as_detail
from gpuscope.schema.results import Measurement
from gpuscope.telemetry.energy import EnergyMeter, EnergyResult
from gpuscope.telemetry.powercap import POWERCAP_ROOT
from gpuscope.telemetry.values import Reason, Unavailable

if TYPE_CHECKING:  # the types only: torch loads when a probe runs
    import torch

__all__ = ["ProbeContext", "finish_measurement", "graph_decision", "NEVER_GRAPHED_KINDS"]

#: Measurement kinds never captured into a CUDA graph: copies to/from host memory (a pageable
#: copy synchronizes, which capture forbids; a failed capture can leave the caching allocator's
#: private pool behind), peer copies, and collectives (NCCL has its own launch path).
NEVER_GRAPHED_KINDS = frozenset({"transfer", "collective"})


def graph_decision(
    kind: str | None, graphable: bool | None, *, enabled: bool = True, is_gpu: bool = True
) -> tuple[bool, str]:
    """Whether :meth:`ProbeContext.measure` may try to capture the call into a CUDA graph, and
    why (recorded in ``timing.launch``). ``graphable``: what the probe said (None: decide by
    ``kind``); a transfer or collective is never captured, whatever the probe says."""
    if not is_gpu:
        return False, "not a GPU"
    if not enabled:
        return False, "CUDA graphs turned off"
    if kind in NEVER_GRAPHED_KINDS:
        return False, f"{kind}s are never captured into a CUDA graph"
    if graphable is False:
        return False, "the probe marked this call not capturable"
    return True, "short calls are replayed from a CUDA graph"


def finish_measurement(
    draft: Measurement,
    *,
    statistic: str,
    status: str = "ok",
    error: str | None = None,
    timing: DetailMap | None = None,
    summary: Summary | None = None,
    validation_error: float | None = None,
    validation_tolerance: float | None = None,
) -> Measurement:
    """``draft`` (what a probe measures: kind, name, device, parameters, flops, bytes, counting rule)
    as a finished ``measurements`` entry. ``status`` is ``ok``, ``failed`` (no number: validation or
    error) or ``skipped`` (did not run: budget, out of memory, unsupported); the rates come from
    ``summary`` only when ok."""
    details = dict(timing or {})
    samples = details.pop("samples_s", None)
    flops, nbytes = draft.flops or 0.0, draft.bytes or 0.0
    finished = msgspec.structs.replace(
        draft, statistic=statistic, status=status, error=error,
        samples_s=[float(s) for s in samples if isinstance(s, (int, float))] if isinstance(samples, list) else [],
        intensity_flop_per_byte=flops / nbytes if nbytes else None, validation_error=validation_error,
        validation_tolerance=validation_tolerance, timing=details,
    )  # fmt: skip
    if summary is None or status != "ok":
        return finished
    time_s = summary.time_s
    return msgspec.structs.replace(
        finished, n=summary.n, time_s=time_s, time_min_s=summary.time_min_s, time_median_s=summary.time_median_s,
        time_p10_s=summary.time_p10_s, time_p90_s=summary.time_p90_s, time_max_s=summary.time_max_s,
        spread=summary.spread,
        flop_per_s=flops / time_s if flops and time_s > 0 else (0.0 if not flops else None),
        bytes_per_s=nbytes / time_s if nbytes and time_s > 0 else (0.0 if not nbytes else None),
    )  # fmt: skip


@dataclass
class ProbeContext:
    """Shared state for one probe run. ``emit`` receives each finished measurement record."""

    device: DeviceSpec
    budget: MemoryBudget
    ceiling_policy: TimingPolicy = TimingPolicy()
    workload_policy: TimingPolicy = TimingPolicy(samples=15, target_sample_s=0.02)
    cancel: threading.Event = field(default_factory=threading.Event)
    telemetry: ProbeTelemetry | None = None
    versions: DetailMap = field(default_factory=dict)
    max_call_s: float = 1.0  # a ceiling search skips shapes whose single call is predicted longer
    log: Callable[[str], None] = lambda message: None
    clock_factory: Callable[[], Clock] | None = None  # tests inject a fake clock
    cuda_graphs: bool = True  # GPU: replay short kernels from a CUDA graph (no launch overhead)
    graph_below_s: float = 50e-6  # ... when one eager call takes less than this
    contention_retries: int = 2  # CPU: re-time a measurement disturbed by other processes
    contention_threshold_percent: float = 10.0  # of all cores, taken by other processes (and steal)
    retry_budget_s: float = 30.0  # total time the run may spend on such retries
    energy: bool = True  # read the device's energy counter around each measurement's samples
    powercap_root: str | os.PathLike[str] = POWERCAP_ROOT  # RAPL's tree (tests: a fake one)
    _cuda_clock: Clock | None = None
    _energy_meter: EnergyMeter | _ClosedMeter | None = None

    def check_cancel(self) -> None:
        check_cancel(self.cancel)

    def policy(self, statistic: str) -> TimingPolicy:
        return self.ceiling_policy if statistic == "best" else self.workload_policy

    def clock(self) -> Clock:
        """perf_counter on CPU; CUDA events on this context's probe stream on GPU."""
        if self.clock_factory is not None:
            return self.clock_factory()
        if self.device.is_gpu:
            if self._cuda_clock is None:
                self._cuda_clock = CudaClock(self.device.torch_device)
            return self._cuda_clock
        return CpuClock()

    @property
    def stream(self) -> torch.cuda.Stream | None:
        """The CUDA stream probe kernels run on (None on CPU)."""
        clock = self.clock()
        return clock.stream if isinstance(clock, CudaClock) else None

    def synchronize(self) -> None:
        if self.device.is_gpu:
            import torch

            torch.cuda.synchronize(self.device.torch_device)

    def measure(
        self,
        fn: Callable[[], object],
        *,
        statistic: str,
        validate: Callable[[], tuple[float, float]] | None,
        record: Measurement,
        graphable: bool | None = None,
    ) -> Measurement:
        """Time ``fn`` (a closure that runs the kernel once), validate its output, and finish
        ``record`` (the probe's draft, :func:`finish_measurement`). ``graphable``: whether ``fn``
        may be captured into a CUDA graph when it is short (None: by ``record.kind``; transfers and
        collectives never are, see :func:`graph_decision`).

        A failed validation or an error turns into ``status: failed`` with no number;
        :class:`ProbeSkipped` into ``status: skipped``; :class:`ProbeCancelled` propagates.
        """
        policy = self.policy(statistic)
        self.synchronize()  # inputs were made on the default stream; the probe stream must see them
        launch: dict[str, Detail] = {"mode": "eager"}
        kernels_per_call = 1
        may_graph, why = graph_decision(record.kind, graphable, enabled=self.cuda_graphs, is_gpu=self.device.is_gpu)
        if not may_graph and self.device.is_gpu:
            launch["cuda_graph"] = f"not captured: {why}"
        if may_graph and self.clock_factory is None:
            try:
                fn, kernels_per_call, launch = self._graphed(fn)
            except ProbeCancelled:
                raise
            except Exception as exc:  # noqa: BLE001 - fall back to eager launches, say why
                launch = {"mode": "eager", "cuda_graph_error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                # A failed capture can leave the stream or the allocator's private pool in a
                # capture state: wait for the device and capture nothing more in this run.
                self.cuda_graphs = False
                try:
                    self.synchronize()
                except Exception as sync_exc:  # noqa: BLE001 - reported, the eager timing follows
                    launch["cuda_graph_cleanup_error"] = f"{type(sync_exc).__name__}: {str(sync_exc)[:200]}"
        telemetry = self.telemetry
        off: dict[str, Detail] = {"available": False, "reason": "telemetry turned off"}
        before = telemetry.snapshot() if telemetry is not None else off
        during_sampler = telemetry.start_during() if telemetry is not None else None
        timing = None
        status, error = "ok", None
        validation_error = tolerance = None
        attempts: list[dict[str, Detail]] = []
        try:
            timing = self._time_with_retries(fn, policy, statistic, attempts)
            self.synchronize()
            if kernels_per_call > 1:  # one graph replay ran the kernel this many times
                timing.samples_s = [sample / kernels_per_call for sample in timing.samples_s]
                timing.warmup_samples_s = [sample / kernels_per_call for sample in timing.warmup_samples_s]
                timing.inner_reps *= kernels_per_call
            if validate is not None:
                validation_error, tolerance = validate()
        except ProbeCancelled:
            if during_sampler is not None:
                during_sampler.stop()
            raise
        except ProbeSkipped as exc:
            status, error = "skipped", str(exc)
        except ProbeFailed as exc:
            status, error = "failed", str(exc)
            validation_error, tolerance = exc.error, exc.tolerance
        except Exception as exc:  # noqa: BLE001 - one broken kernel must not end the run
            if is_out_of_memory(exc):
                status, error = "skipped", f"out of memory: {first_line(exc)}"
            else:
                status, error = "failed", f"{type(exc).__name__}: {first_line(exc, 300)}"
        during = during_sampler.stop() if during_sampler is not None else None
        after = telemetry.snapshot() if telemetry is not None else before
        summary = summarize(timing.samples_s, statistic) if timing is not None and status == "ok" else None
        details: DetailMap = timing.to_json() if timing is not None else {}
        if self.device.is_gpu:
            details["launch"] = as_detail(launch)
        energy_j = details.get("energy_j")
        if status == "ok" and timing is not None and isinstance(energy_j, (int, float)) and energy_j and record.flops:
            calls = len(timing.samples_s) * timing.inner_reps  # the calls the energy window covered
            details["flop_per_j"] = float(record.flops) * calls / float(energy_j)
        if during is None and not self.device.is_gpu:
            reason = "not sampled during CPU probes (the sampler would share the measured cores)"
            during = {"available": False, "reason": reason}
        during = during or (off if telemetry is None else {**off, "reason": telemetry.reason})
        reported = during.get("dram_bandwidth_bytes_per_s_mean")
        result = finish_measurement(
            record, statistic=statistic, status=status, error=error, timing=details,
            summary=summary, validation_error=validation_error, validation_tolerance=tolerance,
        )  # fmt: skip
        return msgspec.structs.replace(
            result, versions=self.versions, telemetry_before=before, telemetry_after=after, telemetry_during=during,
            host_contention_percent=_number(attempts[-1].get("kept_contention_percent")) if attempts else None,
            attempts=list(attempts[:-1]) if attempts else None,
            # what the GPU said, next to bytes_per_s
            reported_dram_bytes_per_s=_number(reported),
        )  # fmt: skip

    def energy_meter(self) -> EnergyMeter | _ClosedMeter | None:
        """This context's :class:`~gpuscope.telemetry.energy.EnergyMeter` (made on first use), or
        None when energy is turned off. On a GPU it reads the NVML GPU that the one NVML<->CUDA
        mapping finds for the device (by torch's UUID, else CUDA_VISIBLE_DEVICES and PCI order)."""
        if not self.energy:
            return None
        if self._energy_meter is None:
            try:
                if self.device.is_gpu:
                    uuid = self.telemetry.cuda_uuid if self.telemetry is not None else None
                    self._energy_meter = EnergyMeter(f"cuda:{self.device.index or 0}", cuda_uuid=uuid)
                else:
                    self._energy_meter = EnergyMeter("cpu", powercap_root=self.powercap_root)
            except Exception as exc:  # noqa: BLE001 - energy must never break a probe
                problem = Unavailable(Reason.ERROR, f"energy meter failed to open: {type(exc).__name__}: {exc}")
                self._energy_meter = _ClosedMeter(EnergyResult(problem, 0.0, "none"))
        return self._energy_meter

    def close(self) -> None:
        """Release what the context opened (the energy meter's NVML session)."""
        meter, self._energy_meter = self._energy_meter, None
        if meter is not None:
            meter.close()

    def _graphed(self, fn: Callable[[], object]) -> tuple[Callable[[], object], int, dict[str, Detail]]:
        """Short GPU kernels are bounded by Python's launch cost (several us), not the GPU: when
        one call takes under ``graph_below_s``, capture enough calls into one CUDA graph to last
        about 0.5 ms and time graph replays instead. Returns (callable, kernels per call, info)."""
        import torch

        stream = self.stream
        assert stream is not None  # graphs are captured on a GPU only (graph_decision)
        with torch.cuda.stream(stream):
            for _ in range(3):  # warm-up on the capture stream (library handles, workspaces)
                fn()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record(stream)
            for _ in range(20):
                fn()
            end.record(stream)
        end.synchronize()
        per_call_s = start.elapsed_time(end) / 1e3 / 20
        if per_call_s >= self.graph_below_s:
            return fn, 1, {"mode": "eager", "eager_per_call_s": per_call_s}
        reps = max(2, min(1000, int(5e-4 / max(per_call_s, 1e-7))))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(reps):
                fn()
        stream.synchronize()
        self.check_cancel()
        return graph.replay, reps, {"mode": "cuda_graph", "kernels_per_replay": reps, "eager_per_call_s": per_call_s}

    def _time_with_retries(
        self, fn: Callable[[], object], policy: TimingPolicy, statistic: str, attempts: list[dict[str, Detail]]
    ) -> Timing:
        """Time ``fn``; on a CPU, while other processes took more than ``contention_threshold_percent``
        of the cores during the attempt, try again (up to ``contention_retries`` times) and keep the
        best attempt (ceilings) or the least contended one (workloads). ``attempts`` receives one
        entry per attempt and a last entry with the kept attempt's contention."""
        if self.device.is_gpu or self.clock_factory is not None:
            return time_kernel(fn, self.clock(), policy, self.cancel, energy=self.energy_meter())
        kept = None
        kept_key = None
        kept_contention = None
        last_attempt_s = 0.0
        for attempt in range(self.contention_retries + 1):
            if attempt > 0 and (self.retry_budget_s <= 0 or last_attempt_s > self.retry_budget_s):
                break
            started = time.monotonic()
            before = _cpu_counters()
            timing = time_kernel(fn, self.clock(), policy, self.cancel, energy=self.energy_meter())
            contention = _contention_percent(before, _cpu_counters())
            time_s = (
                min(timing.samples_s) if statistic == "best" else sorted(timing.samples_s)[len(timing.samples_s) // 2]
            )
            attempts.append({"attempt": attempt + 1, "host_contention_percent": contention, "time_s": time_s})
            last_attempt_s = time.monotonic() - started
            if attempt > 0:
                self.retry_budget_s -= last_attempt_s
            key = time_s if statistic == "best" else (contention if contention is not None else 0.0)
            if kept_key is None or key < kept_key:
                kept, kept_key, kept_contention = timing, key, contention
            if contention is None or contention <= self.contention_threshold_percent:
                break
        attempts.append({"kept_contention_percent": kept_contention})
        assert kept is not None  # the first attempt always runs
        return kept

    def skipped(self, record: Measurement, reason: str, statistic: str = "best") -> Measurement:
        """A measurement that did not run, with the reason."""
        result = finish_measurement(record, statistic=statistic, status="skipped", error=reason)
        return msgspec.structs.replace(result, versions=self.versions)


@dataclass(frozen=True)
class _ClosedMeter:
    """A meter that could not open: every window is unavailable with the reason."""

    result: EnergyResult

    def start(self) -> None:
        pass

    def stop(self) -> EnergyResult:
        return self.result

    def close(self) -> None:
        pass


def _number(value: Detail) -> float | None:
    """A telemetry detail that is a number, as a float; else None."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _cpu_counters() -> tuple[float, float, float] | None:
    """(monotonic s, busy CPU s of the whole machine incl. steal, CPU s of this process)."""
    try:
        import psutil

        times = psutil.cpu_times()
        busy = sum(getattr(times, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq", "steal"))
        own = psutil.Process().cpu_times()
        return time.monotonic(), busy, own.user + own.system
    except Exception:  # noqa: BLE001 - psutil missing: no contention figure
        return None


def _contention_percent(
    before: tuple[float, float, float] | None, after: tuple[float, float, float] | None
) -> float | None:
    """Percent of all cores other processes (or the hypervisor) used between the two readings."""
    if before is None or after is None:
        return None
    wall = after[0] - before[0]
    if wall <= 0:
        return None
    cores = os.cpu_count() or 1
    others = (after[1] - before[1]) - (after[2] - before[2])
    return max(0.0, min(100.0, 100.0 * others / (wall * cores)))
