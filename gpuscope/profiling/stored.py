"""The ``profile`` object of a profile workload, as a results file stores it (docs/profile.md):
written by :meth:`gpuscope.profiling.result.ProfileResult.profile_json`, read back by
:func:`read_profile` for the painters that only have the file (the TUI's roofline screen, the
report, ``compare``). Fields in the order they are written; every field may be missing when read.

The results schema keeps ``Workload.profile`` free detail (any JSON), so a results file with a
profile this version does not understand still reads: :func:`read_profile` then returns None and
the workload is drawn as a plain point.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from gpuscope.schema.core import Detail
from gpuscope.schema.results import Results, Workload

__all__ = ["PROFILE_SCHEMA_VERSION", "StoredGroup", "StoredModule", "StoredProfile", "StoredGeneration",
           "StoredPhase", "StoredRegion", "Profiled", "read_profile", "read_compare_eager", "read_generation",
           "profiled_workloads"]  # fmt: skip

PROFILE_SCHEMA_VERSION = 1


class StoredGroup(msgspec.Struct, kw_only=True):
    """One op group with its verdict, per step (seconds, FLOPs, bytes), most time lost first."""

    op: str | None = None
    label: str | None = None
    shapes: list[list[int]] = msgspec.field(default_factory=list)
    dtype: str | None = None
    calls: float | None = None
    time_s: float | None = None
    flops: float | None = None
    counter_flops: float | None = None
    pointwise_flops: float | None = None
    bytes: float | None = None
    counted: bool | None = None
    no_formula: bool | None = None
    modules: list[str] = msgspec.field(default_factory=list)  # module paths, most time first
    backward: bool | None = None
    bound: str | None = None  # "compute" | "memory" | "unknown"
    roof: str | None = None
    roof_source: str | None = None
    attainable_flop_per_s: float | None = None
    time_at_roof_s: float | None = None
    time_lost_s: float | None = None
    efficiency: float | None = None
    step_speedup: float | None = None
    intensity_flop_per_byte: float | None = None
    above_roof: bool | None = None
    note: str | None = None
    fused_ops: list[str] | None = None  # a compiled kernel: the eager ops it holds (absent: an aten op)

    @property
    def name(self) -> str:
        """The label, else the op."""
        return str(self.label or self.op)

    @property
    def first_module(self) -> str:
        """The module path the group spent most time in, or ``"-"``."""
        return self.modules[0] if self.modules else "-"


class StoredModule(msgspec.Struct, kw_only=True):
    """One nn.Module path and everything that ran inside it, per step."""

    path: str | None = None
    time_s: float | None = None
    flops: float | None = None
    bytes: float | None = None
    calls: float | None = None


class StoredProfile(msgspec.Struct, kw_only=True):
    """The ``profile`` object: totals per step, the groups with their verdicts, the module totals."""

    version: int | None = None
    steps: int | None = None
    warmup_steps: int | None = None
    time_basis: str | None = None
    step_s: float | None = None
    ops_s: float | None = None
    outside_ops_s: float | None = None
    traced_s: float | None = None
    flop_counter_flops: float | None = None
    pointwise_flops: float | None = None
    bytes_rule: str | None = None
    roofs: str | None = None
    unmatched_ops: int | None = None
    uncounted_ops: dict[str, float] = msgspec.field(default_factory=dict)
    groups: list[StoredGroup] = msgspec.field(default_factory=list)
    modules: list[StoredModule] = msgspec.field(default_factory=list)
    # absent from files written before these fields: read as None
    coverage: float | None = None  # share of ops_s with a known FLOP count or genuine data movement
    unknown_s: float | None = None  # ops_s of the groups whose FLOPs are unknown (verdict "unknown")
    data_movement_rule: str | None = None  # which ops count as genuine data movement
    incomplete: bool | None = None  # fewer profiled steps than asked for (the program stopped early)
    steps_requested: int | None = None  # profiled steps asked for; ``steps`` is how many ran
    step_bound: str | None = None  # the whole step as one point: "memory" | "compute"
    step_efficiency: float | None = None  # achieved / attainable FLOP/s of the whole step
    step_roof: str | None = None  # the roof bounding the whole step ("dram.triad", "fp32")
    step_intensity_flop_per_byte: float | None = None  # the x the step was placed at
    # torch.compile'd code: regions (frame/compile -> s per step), graph_breaks, fused_kernels, fused_kernels_s
    compiled: dict[str, object] | None = None
    # a generate() call (gpuscope.profile_generation): batch, prompt/new tokens, tokens_per_s, j_per_token,
    # phases (prefill, decode, loop: FLOPs, bytes, time, bound, roof), steps (one per forward call)
    generation: dict[str, object] | None = None

    def top_groups(self, limit: int | None = 10) -> list[StoredGroup]:
        """The first ``limit`` (None: all) groups, in the stored order (by time lost)."""
        return self.groups[:limit]


class StoredPhase(msgspec.Struct, kw_only=True):
    """One phase of a stored ``generation`` object: ``prefill``, ``decode`` (all decode steps) or
    ``loop`` (generate's own ops), per ``generate()`` call."""

    kind: str | None = None
    calls: float | None = None
    tokens: float | None = None
    time_s: float | None = None
    ops_s: float | None = None
    flops: float | None = None
    bytes: float | None = None
    intensity_flop_per_byte: float | None = None
    window_s: float | None = None
    tokens_per_s: float | None = None
    energy_j: float | None = None
    j_per_token: float | None = None
    j_per_token_unavailable: str | None = None  # "reason: detail", as written
    bound: str | None = None  # where roofs placed it: "compute" | "memory"
    efficiency: float | None = None
    roof: str | None = None


class StoredGeneration(msgspec.Struct, kw_only=True):
    """The ``generation`` object of a profile of a ``generate()`` call (docs/results-schema.md)."""

    batch: float | None = None
    prompt_tokens: float | None = None
    new_tokens: float | None = None
    forward_calls: float | None = None
    time_s: float | None = None
    timed_runs: float | None = None
    tokens_per_s: float | None = None
    energy_j: float | None = None
    j_per_token: float | None = None
    j_per_token_unavailable: str | None = None  # "reason: detail", as written
    dtype: str | None = None  # the compute roof's dtype the phases were placed with
    phases: list[StoredPhase] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)

    def phase(self, kind: str) -> StoredPhase | None:
        return next((phase for phase in self.phases if phase.kind == kind), None)


class StoredRegion(msgspec.Struct, kw_only=True):
    """One row of a compiled profile's ``compare_eager`` (``--compare-eager``): a region's time per
    step and FLOPs, compiled and eager."""

    region: str = "?"
    compiled_s: float = 0.0
    eager_s: float = 0.0
    speedup: float | None = None
    compiled_flops: float = 0.0
    eager_flops: float = 0.0


def read_compare_eager(compiled: object) -> list[StoredRegion]:
    """The ``compare_eager`` rows of a stored profile's ``compiled`` object; [] when there are none
    or they are not such rows."""
    rows = compiled.get("compare_eager") if isinstance(compiled, dict) else None
    if not isinstance(rows, list):
        return []
    try:
        return msgspec.convert(rows, list[StoredRegion])
    except msgspec.ValidationError:
        return []


def read_generation(generation: object) -> StoredGeneration | None:
    """A stored profile's ``generation`` object, typed; None when there is none or it is not one
    (the rest of the profile still reads)."""
    if not isinstance(generation, dict):
        return None
    try:
        return msgspec.convert(generation, StoredGeneration)
    except msgspec.ValidationError:
        return None


@dataclass(frozen=True)
class Profiled:
    """A profile workload of a results file and its profile."""

    workload: Workload
    profile: StoredProfile

    @property
    def step_s(self) -> float:
        """Mean time of one profiled step: the profile's, else the workload's."""
        return self.profile.step_s or self.workload.time_s


def read_profile(detail: Detail) -> StoredProfile | None:
    """A workload's ``profile`` detail as a :class:`StoredProfile`; None when it is not one."""
    if not isinstance(detail, dict):
        return None
    try:
        return msgspec.convert(detail, StoredProfile)
    except msgspec.ValidationError:
        return None


def profiled_workloads(results: Results) -> list[Profiled]:
    """The profile workloads of a results document (``source == "profile"`` with a profile object)."""
    found = []
    for workload in results.workloads:
        profile = read_profile(workload.profile) if workload.source == "profile" else None
        if profile is not None:
            found.append(Profiled(workload, profile))
    return found
