"""The result of a profile: groups with verdicts, module totals, step time, energy; and its
``workloads`` entry in a results file (one point for the whole step, with the groups under
``profile``). No torch."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from gpuscope.profiling.attribution import ModuleTotal, OpGroup
from gpuscope.profiling.record import OP_BYTES_RULE
from gpuscope.profiling.verdict import Verdict
from gpuscope.roofline.counting import POINTWISE_RULE
from gpuscope.schema.core import timestamp_now_s
from gpuscope.telemetry.energy import EnergyResult, energy_fields, flop_per_joule
from gpuscope.telemetry.values import Unavailable

__all__ = ["FLOP_RULE", "PROFILE_SCHEMA_VERSION", "ProfileResult"]

PROFILE_SCHEMA_VERSION = 1
FLOP_RULE = (
    "torch.utils.flop_counter.FlopCounterMode formulas (matmul, conv, attention) + gpuscope pointwise formulas, "
    "reported apart"
)


@dataclass
class ProfileResult:
    """Where one step's time goes. Times are seconds per step (mean over the profiled steps)."""

    name: str
    device: str  # "cpu", "cuda:0"
    device_name: str | None
    host: str
    steps: int
    warmup: int
    step_times_s: list[float]  # wall time of each profiled step
    groups: list[OpGroup]
    verdicts: list[Verdict]  # most time lost first
    modules: list[ModuleTotal]
    traced_s: float  # per step: everything the profiler saw
    flop_counter_total: int  # FlopCounterMode's total for the counting step
    counter_flops: int  # the same count, summed over the counted ops
    pointwise_flops: int  # gpuscope's pointwise formulas, per step
    bytes_total: int  # sum of the ops' lower bounds, per step
    unmatched_ops: int  # counted ops with no timed twin (per step)
    uncounted_ops: dict[str, int]  # op -> calls per step, ops doing arithmetic with no formula
    roofs: str  # which roofs the verdicts use
    energy: EnergyResult | None  # per step
    dram_bytes_measured: float | Unavailable  # per step (GPM), or why not
    time_basis: str  # "CPU self time" | "CUDA kernel time"
    notes: list[str] = field(default_factory=list)
    results_path: str | None = None
    device_key: Any = None  # DeviceKey of the roofs (for charts)
    device_roofs: Any = None  # DeviceRoofs the verdicts used, None when no roofs

    # --- totals ---------------------------------------------------------------------------

    @property
    def step_s(self) -> float:
        """Mean wall time of one profiled step (a mean, like the groups' times, so they add up)."""
        return statistics.fmean(self.step_times_s) if self.step_times_s else 0.0

    @property
    def ops_s(self) -> float:
        """Device time of all groups, per step."""
        return sum(group.time_s for group in self.groups)

    @property
    def outside_ops_s(self) -> float:
        """Step wall time not inside any op's device time (Python, composite wrappers, idle GPU)."""
        return max(self.step_s - self.ops_s, 0.0)

    @property
    def coverage(self) -> float | None:
        """Groups' device time / step wall time."""
        return self.ops_s / self.step_s if self.step_s > 0 else None

    @property
    def flops(self) -> int:
        """FLOPs of one step: FlopCounterMode's count + pointwise FLOPs."""
        return self.flop_counter_total + self.pointwise_flops

    @property
    def time_lost_s(self) -> float:
        return sum(verdict.time_lost_s or 0.0 for verdict in self.verdicts)

    @property
    def flop_per_j(self) -> float | Unavailable | None:
        return None if self.energy is None else flop_per_joule(self.flops, self.energy)

    # --- JSON -----------------------------------------------------------------------------

    def to_workload(self) -> dict[str, Any]:
        """The ``workloads`` entry: the whole step as one roofline point, the groups under ``profile``."""
        dram = self.dram_bytes_measured
        step_s = self.step_s
        workload: dict[str, Any] = {
            "name": self.name,
            "device": self.device,
            "host": self.host,
            "device_name": self.device_name,
            "flops": float(self.flops),
            "bytes": float(self.bytes_total),
            "bytes_rule": "sum over the step's ops of " + OP_BYTES_RULE,
            "flop_counting_rule": FLOP_RULE,
            "pointwise_rule": POINTWISE_RULE,
            "dtype": _main_dtype(self.groups),
            "time_s": step_s,
            "time_p10_s": min(self.step_times_s) if self.step_times_s else None,
            "time_p90_s": max(self.step_times_s) if self.step_times_s else None,
            "n": len(self.step_times_s),
            "statistic": "mean of profiled steps",
            "samples_s": list(self.step_times_s),
            "flop_per_s": self.flops / step_s if step_s > 0 else None,
            "intensity_flop_per_byte": self.flops / self.bytes_total if self.bytes_total else None,
            "dram_bytes_measured": None if isinstance(dram, Unavailable) else dram,
            "dram_bytes_unavailable": dram.to_json() if isinstance(dram, Unavailable) else None,
            "cache_state": "warm",
            "warm": True,
            "source": "profile",
            "notes": list(self.notes),
            "created": timestamp_now_s(),
        }
        workload.update(energy_fields(self.energy, float(self.flops)))
        workload["profile"] = self.profile_json()
        return workload

    def profile_json(self) -> dict[str, Any]:
        """The ``profile`` object of the workload entry: groups, verdicts, modules, totals."""
        return {
            "version": PROFILE_SCHEMA_VERSION,
            "steps": self.steps,
            "warmup_steps": self.warmup,
            "time_basis": self.time_basis,
            "step_s": self.step_s,
            "ops_s": self.ops_s,
            "outside_ops_s": self.outside_ops_s,
            "traced_s": self.traced_s,
            "flop_counter_flops": self.flop_counter_total,
            "pointwise_flops": self.pointwise_flops,
            "bytes_rule": OP_BYTES_RULE,
            "roofs": self.roofs,
            "unmatched_ops": self.unmatched_ops,
            "uncounted_ops": dict(self.uncounted_ops),
            "groups": [_verdict_json(verdict) for verdict in self.verdicts],
            "modules": [
                {"path": m.path, "time_s": m.time_s, "flops": m.flops, "bytes": m.bytes, "calls": m.calls}
                for m in self.modules
            ],
        }


def _main_dtype(groups: list[OpGroup]) -> str | None:
    by_dtype: dict[str, int] = {}
    for group in groups:
        if group.dtype and group.flops:
            by_dtype[group.dtype] = by_dtype.get(group.dtype, 0) + group.flops
    return max(by_dtype.items(), key=lambda item: item[1])[0] if by_dtype else None


def _verdict_json(verdict: Verdict) -> dict[str, Any]:
    group = verdict.group
    out: dict[str, Any] = {"op": group.op, "label": group.label, "shapes": [list(shape) for shape in group.shapes]}
    out.update(dtype=group.dtype, calls=group.calls_per_step)
    out.update((key, getattr(group, key)) for key in _GROUP_FIELDS)
    out.update(modules=group.modules[:5], backward=group.backward, bound=verdict.bound, roof=verdict.roof_name)
    out.update((key, getattr(verdict, key)) for key in _VERDICT_FIELDS)
    out["note"] = verdict.note or None
    return out


_GROUP_FIELDS = ("time_s", "flops", "counter_flops", "pointwise_flops", "bytes", "counted", "no_formula")
_VERDICT_FIELDS = (
    "roof_source",
    "attainable_flop_per_s",
    "time_at_roof_s",
    "time_lost_s",
    "efficiency",
    "step_speedup",
    "intensity_flop_per_byte",
    "above_roof",
)
