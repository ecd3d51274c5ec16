"""The result of a profile: groups with verdicts, module totals, step time, energy; and its
``workloads`` entry in a results file (one point for the whole step, with the groups under
``profile``). No torch."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import msgspec

from gpuscope.measuring.counting import POINTWISE_RULE
from gpuscope.profiling.attribution import ModuleTotal, OpGroup
from gpuscope.profiling.compiled_attribution import CompiledProfile
from gpuscope.profiling.generation_result import GenerationProfile
from gpuscope.profiling.record import DATA_MOVEMENT_RULE, OP_BYTES_RULE
from gpuscope.profiling.stored import PROFILE_SCHEMA_VERSION, StoredGroup, StoredModule, StoredProfile
from gpuscope.profiling.verdict import Verdict
from gpuscope.roofline.model import DeviceKey, DeviceRoofs, Placement, Point, place_point
from gpuscope.schema.core import Detail, timestamp_now_s
from gpuscope.schema.results import Workload
from gpuscope.telemetry.energy import EnergyResult, energy_fields, flop_per_joule
from gpuscope.telemetry.values import Unavailable

__all__ = ["FLOP_RULE", "ProfileResult", "main_dtype"]

FLOP_RULE = (
    "torch.utils.flop_counter.FlopCounterMode formulas (matmul, conv, attention) with gpuscope's formula table "
    "(gpuscope.measuring.formulas: fused transformer/attention paths, CPU attention, grouped matmuls, grouped "
    "convolution backward corrected) + gpuscope pointwise formulas, reported apart"
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
    device_key: DeviceKey | None = None  # the device the roofs belong to (for charts)
    device_roofs: DeviceRoofs | None = None  # the roofs the verdicts used, None when no roofs
    steps_requested: int | None = None  # profiled steps asked for (None: as many as ran)
    incomplete: bool = False  # the program stopped before every profiled step ran: a partial profile
    compiled: CompiledProfile | None = None  # torch.compile'd code ran: regions, graph breaks, fused kernels
    generation: GenerationProfile | None = None  # a generate() call: prefill, decode, loop (profiling.generation)

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
    def in_ops_share(self) -> float | None:
        """Groups' device time / step wall time (how much of the step the profiler's ops explain)."""
        return self.ops_s / self.step_s if self.step_s > 0 else None

    @property
    def unknown_s(self) -> float:
        """Device time per step of the groups whose FLOPs are unknown (:attr:`OpGroup.flops_known`)."""
        return sum(group.time_s for group in self.groups if not group.flops_known)

    @property
    def coverage(self) -> float | None:
        """Share (0..1) of the ops' device time with a known FLOP count or genuine data movement
        (:data:`gpuscope.profiling.record.DATA_MOVEMENT_RULE`); None when no op time was measured.
        The rest is :attr:`unknown_s`: those groups' verdict is ``unknown``."""
        ops_s = self.ops_s
        return (ops_s - self.unknown_s) / ops_s if ops_s > 0 else None

    @property
    def flops(self) -> int:
        """FLOPs of one step: FlopCounterMode's count + pointwise FLOPs."""
        return self.flop_counter_total + self.pointwise_flops

    def step_placement(self) -> Placement | None:
        """The whole step as one point (FLOPs, the sum of the ops' bytes or the DRAM bytes measured,
        mean step time) against the roofs the groups were judged by: memory- or compute-bound and
        its efficiency (achieved / attainable). None without roofs."""
        if self.device_roofs is None or self.device_key is None or self.step_s <= 0:
            return None
        dram = self.dram_bytes_measured
        point = Point(
            name=self.name, key=self.device_key, flops=float(self.flops), bytes=float(self.bytes_total),
            time_s=self.step_s, dtype=main_dtype(self.groups),
            dram_bytes_measured=None if isinstance(dram, Unavailable) else dram, source="profile", warm=True,
        )  # fmt: skip
        return place_point(point, self.device_roofs)

    @property
    def time_lost_s(self) -> float:
        return sum(verdict.time_lost_s or 0.0 for verdict in self.verdicts)

    @property
    def flop_per_j(self) -> float | Unavailable | None:
        return None if self.energy is None else flop_per_joule(self.flops, self.energy)

    # --- JSON -----------------------------------------------------------------------------

    def to_workload(self) -> Workload:
        """The ``workloads`` entry: the whole step as one roofline point, the groups under ``profile``."""
        dram = self.dram_bytes_measured
        step_s = self.step_s
        return Workload(
            name=self.name,
            device=self.device,
            host=self.host,
            device_name=self.device_name,
            flops=float(self.flops),
            bytes=float(self.bytes_total),
            bytes_rule="sum over the step's ops of " + OP_BYTES_RULE,
            flop_counting_rule=FLOP_RULE,
            pointwise_rule=POINTWISE_RULE,
            dtype=main_dtype(self.groups),
            time_s=step_s,
            time_p10_s=min(self.step_times_s) if self.step_times_s else None,
            time_p90_s=max(self.step_times_s) if self.step_times_s else None,
            n=len(self.step_times_s),
            statistic="mean of profiled steps",
            samples_s=list(self.step_times_s),
            flop_per_s=self.flops / step_s if step_s > 0 else None,
            intensity_flop_per_byte=self.flops / self.bytes_total if self.bytes_total else None,
            dram_bytes_measured=None if isinstance(dram, Unavailable) else dram,
            dram_bytes_unavailable=dram.to_json() if isinstance(dram, Unavailable) else None,
            cache_state="warm",
            warm=True,
            source="profile",
            notes=list(self.notes),
            created=timestamp_now_s(),
            profile=self.profile_json(),
            **energy_fields(self.energy, float(self.flops)),
        )

    def profile_json(self) -> Detail:
        """The ``profile`` object of the workload entry (:class:`~gpuscope.profiling.stored.StoredProfile`)."""
        stored = StoredProfile(
            version=PROFILE_SCHEMA_VERSION, steps=self.steps, warmup_steps=self.warmup, time_basis=self.time_basis,
            step_s=self.step_s, ops_s=self.ops_s, outside_ops_s=self.outside_ops_s, traced_s=self.traced_s,
            flop_counter_flops=self.flop_counter_total, pointwise_flops=self.pointwise_flops,
            bytes_rule=OP_BYTES_RULE, roofs=self.roofs, unmatched_ops=self.unmatched_ops,
            uncounted_ops=dict(self.uncounted_ops), groups=[_stored_group(verdict) for verdict in self.verdicts],
            modules=[StoredModule(path=m.path, time_s=m.time_s, flops=m.flops, bytes=m.bytes, calls=m.calls)
                     for m in self.modules],
            coverage=self.coverage, unknown_s=self.unknown_s, data_movement_rule=DATA_MOVEMENT_RULE,
            incomplete=self.incomplete or None, steps_requested=self.steps_requested,
            compiled={**self.compiled.to_json()} if self.compiled is not None else None,
            generation={**self.generation.to_json()} if self.generation is not None else None,
        )  # fmt: skip
        placement = self.step_placement()
        if placement is not None and placement.bound != "unknown":  # the whole step as one point
            roof = placement.bounding_roof
            stored.step_bound, stored.step_efficiency = placement.bound, placement.efficiency
            stored.step_roof = roof.name if roof is not None else None
            stored.step_intensity_flop_per_byte = placement.intensity_flop_per_byte
        detail: Detail = msgspec.to_builtins(stored)
        return detail


def main_dtype(groups: list[OpGroup]) -> str | None:
    """The dtype of the most FLOPs among ``groups`` (whose compute roof judges the whole step); None
    when no group has FLOPs."""
    by_dtype: dict[str, int] = {}
    for group in groups:
        if group.dtype and group.flops:
            by_dtype[group.dtype] = by_dtype.get(group.dtype, 0) + group.flops
    return max(by_dtype.items(), key=lambda item: item[1])[0] if by_dtype else None


def _stored_group(verdict: Verdict) -> StoredGroup:
    group = verdict.group
    return StoredGroup(
        op=group.op, label=group.label, shapes=[list(shape) for shape in group.shapes], dtype=group.dtype,
        calls=group.calls_per_step, time_s=group.time_s, flops=group.flops, counter_flops=group.counter_flops,
        pointwise_flops=group.pointwise_flops, bytes=group.bytes, counted=group.counted, no_formula=group.no_formula,
        modules=group.modules[:5], backward=group.backward, bound=verdict.bound, roof=verdict.roof_name,
        roof_source=verdict.roof_source, attainable_flop_per_s=verdict.attainable_flop_per_s,
        time_at_roof_s=verdict.time_at_roof_s, time_lost_s=verdict.time_lost_s, efficiency=verdict.efficiency,
        step_speedup=verdict.step_speedup, intensity_flop_per_byte=verdict.intensity_flop_per_byte,
        above_roof=verdict.above_roof, note=verdict.note or None, fused_ops=list(group.fused) or None,
    )  # fmt: skip
