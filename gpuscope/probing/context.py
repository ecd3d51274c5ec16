"""What every probe gets: the device, the timing policy, the memory budget, the cancel event,
telemetry, and :meth:`ProbeContext.measure`, which times a kernel with telemetry around it and
returns a finished measurement record (see docs/results-schema.md, ``measurements``)."""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from gpuscope.probing.environment import DeviceSpec, MemoryBudget
from gpuscope.probing.errors import ProbeCancelled, ProbeFailed, ProbeSkipped
from gpuscope.probing.stats import summarize
from gpuscope.probing.telemetry import ProbeTelemetry
from gpuscope.probing.timing import Clock, CpuClock, TimingPolicy, time_kernel

__all__ = ["ProbeContext", "measurement_record"]


def measurement_record(
    *,
    kind: str,
    name: str,
    device: str,
    parameters: dict[str, Any],
    flops: float,
    bytes_: float,
    counting_rule: str,
    statistic: str,
    status: str = "ok",
    error: str | None = None,
    timing: dict[str, Any] | None = None,
    summary: dict[str, Any] | None = None,
    validation_error: float | None = None,
    validation_tolerance: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A ``measurements`` entry. ``status`` is ``ok``, ``failed`` (no number: validation or
    error) or ``skipped`` (did not run: budget, out of memory, unsupported)."""
    record: dict[str, Any] = {
        "id": None,  # set by the runner
        "kind": kind,
        "name": name,
        "device": device,
        "status": status,
        "error": error,
        "parameters": parameters,
        "flops": flops,
        "bytes": bytes_,
        "counting_rule": counting_rule,
        "statistic": statistic,
        "samples_s": (timing or {}).get("samples_s", []),
        "time_s": None,
        "flop_per_s": None,
        "bytes_per_s": None,
        "intensity_flop_per_byte": (flops / bytes_) if bytes_ else None,
        "validation_error": validation_error,
        "validation_tolerance": validation_tolerance,
        "timing": {k: v for k, v in (timing or {}).items() if k != "samples_s"},
    }
    if summary is not None and status == "ok":
        record.update({k: v for k, v in summary.items() if k not in ("statistic",)})
        time_s = summary["time_s"]
        record["time_s"] = time_s
        record["flop_per_s"] = flops / time_s if flops and time_s > 0 else (0.0 if not flops else None)
        record["bytes_per_s"] = bytes_ / time_s if bytes_ and time_s > 0 else (0.0 if not bytes_ else None)
    record.update(extra)
    return record


@dataclass
class ProbeContext:
    """Shared state for one probe run. ``emit`` receives each finished measurement record."""

    device: DeviceSpec
    budget: MemoryBudget
    ceiling_policy: TimingPolicy = TimingPolicy()
    workload_policy: TimingPolicy = TimingPolicy(samples=15, target_sample_s=0.02)
    cancel: threading.Event = field(default_factory=threading.Event)
    telemetry: ProbeTelemetry | None = None
    versions: dict[str, Any] = field(default_factory=dict)
    max_call_s: float = 1.0  # a ceiling search skips shapes whose single call is predicted longer
    log: Callable[[str], None] = lambda message: None
    clock_factory: Callable[[], Clock] | None = None  # tests inject a fake clock
    _cuda_clock: Any = None

    def check_cancel(self) -> None:
        if self.cancel.is_set():
            raise ProbeCancelled("cancelled")

    def policy(self, statistic: str) -> TimingPolicy:
        return self.ceiling_policy if statistic == "best" else self.workload_policy

    def clock(self) -> Clock:
        """perf_counter on CPU; CUDA events on this context's probe stream on GPU."""
        if self.clock_factory is not None:
            return self.clock_factory()
        if self.device.is_gpu:
            if self._cuda_clock is None:
                from gpuscope.probing.timing import CudaClock

                self._cuda_clock = CudaClock(self.device.torch_device)
            return self._cuda_clock
        return CpuClock()

    @property
    def stream(self) -> Any:
        """The CUDA stream probe kernels run on (None on CPU)."""
        clock = self.clock()
        return getattr(clock, "stream", None)

    def synchronize(self) -> None:
        if self.device.is_gpu:
            import torch

            torch.cuda.synchronize(self.device.torch_device)

    def measure(
        self,
        fn: Callable[[], Any],
        *,
        statistic: str,
        validate: Callable[[], float | tuple[float, float]] | None,
        record: dict[str, Any],
    ) -> dict[str, Any]:
        """Time ``fn`` (a closure that runs the kernel once), validate its output, and fill
        ``record`` (keyword arguments of :func:`measurement_record` less timing/summary).

        A failed validation or an error turns into ``status: failed`` with no number;
        :class:`ProbeSkipped` into ``status: skipped``; :class:`ProbeCancelled` propagates.
        """
        policy = self.policy(statistic)
        telemetry = self.telemetry
        before = telemetry.snapshot() if telemetry is not None else {"available": False, "reason": "telemetry turned off"}
        during_sampler = telemetry.start_during() if telemetry is not None else None
        timing = None
        status, error = "ok", None
        validation_error = tolerance = None
        try:
            timing = time_kernel(fn, self.clock(), policy, self.cancel)
            self.synchronize()
            if validate is not None:
                checked = validate()
                if isinstance(checked, tuple):
                    validation_error, tolerance = checked
                else:
                    validation_error = checked
        except ProbeCancelled:
            if during_sampler is not None:
                during_sampler.stop()
            raise
        except ProbeSkipped as exc:
            status, error = "skipped", str(exc)
        except ProbeFailed as exc:
            status, error = "failed", str(exc)
            validation_error = getattr(exc, "error", None)
            tolerance = getattr(exc, "tolerance", None)
        except Exception as exc:  # noqa: BLE001 - one broken kernel must not end the run
            from gpuscope.probing.environment import is_out_of_memory

            if is_out_of_memory(exc):
                status, error = "skipped", f"out of memory: {str(exc).splitlines()[0][:200]}"
            else:
                status, error = "failed", f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
        during = during_sampler.stop() if during_sampler is not None else None
        after = telemetry.snapshot() if telemetry is not None else before
        summary = summarize(timing.samples_s, statistic) if timing is not None and status == "ok" else None
        result = measurement_record(
            statistic=statistic,
            status=status,
            error=error,
            timing=timing.to_json() if timing is not None else None,
            summary=summary,
            validation_error=validation_error,
            validation_tolerance=tolerance,
            **record,
        )
        result["versions"] = self.versions
        result["telemetry_before"] = before
        result["telemetry_after"] = after
        result["telemetry_during"] = during if during is not None else {
            "available": False,
            "reason": "not sampled during CPU probes (the sampler would share the measured cores)"
            if not self.device.is_gpu
            else (telemetry.reason if telemetry is not None else "telemetry turned off"),
        }
        if result["samples_s"] is None:
            result["samples_s"] = []
        return result

    def skipped(self, record: dict[str, Any], reason: str, statistic: str = "best") -> dict[str, Any]:
        """A measurement that did not run, with the reason."""
        result = measurement_record(statistic=statistic, status="skipped", error=reason, **record)
        result["versions"] = self.versions
        return result


def replace_policy(policy: TimingPolicy, **changes: Any) -> TimingPolicy:
    """A copy of ``policy`` with ``changes`` (unknown keys raise TypeError)."""
    return dataclasses.replace(policy, **changes)
