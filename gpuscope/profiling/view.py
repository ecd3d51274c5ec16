"""A profile read back from a results file, for painters that only have the file (the TUI's
roofline screen, the report): its groups as roofline points and as table rows. No torch, no
Textual.

The TUI's roofline screen shows a profile as a cloud of points with the table beside it::

    model = load_model(paths)                                    # roofs as usual
    for profiled in profiled_workloads(results):                 # gpuscope.profiling.stored
        key = model_key_of(profiled.workload)                    # the device's DeviceKey in model
        cloud = model.replace_points(profile_points(profiled.profile, key))
        rows = profile_rows(profiled.profile)                    # row n is point n on the chart
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from gpuscope.profiling.stored import StoredGroup, StoredPhase, StoredProfile, read_generation, read_profile
from gpuscope.roofline.model import DeviceKey, Point
from gpuscope.roofline.units import format_si
from gpuscope.schema.core import Detail, finite_or_none

__all__ = [
    "COMPARE_HEADERS",
    "PHASE_NOTE_PREFIX",
    "RegionTimes",
    "compare_rows",
    "PROFILE_ROW_HEADERS",
    "compiled_text",
    "coverage_text",
    "flops_unknown",
    "group_point",
    "profile_points",
    "profile_rows",
    "format_ms",
    "generation_dtype",
    "generation_phases",
    "generation_points",
    "phase_note",
    "group_numbers",
    "short_bound",
]

#: how a prefill or decode point's note begins (the TUI tells them from the op groups by it)
PHASE_NOTE_PREFIX = "generate(): "
PROFILE_ROW_HEADERS = ("#", "op dtype shapes", "module", "bound", "ms", "eff", "lost ms", "gain")


def format_ms(seconds: float | None) -> str:
    """Seconds as milliseconds: 3 significant digits below 100 ms, whole ms from there; ``-``
    when not a finite number. The one number rule of every profile table."""
    number = finite_or_none(seconds)
    if number is None:
        return "-"
    return f"{number * 1e3:.3g}" if number < 0.1 else f"{number * 1e3:.0f}"


def group_numbers(
    time_s: float | None, step_s: float | None, efficiency: float | None, lost_s: float | None, speedup: float | None
) -> tuple[str, ...]:
    """A profile group's number cells, as every painter of the groups shows them: ms per step,
    share of the step, efficiency (time at roof / time; at most 999%), ms lost to the roof and
    the step's speed-up at the roof (``1.25x``); ``-`` where a value is unknown."""
    time, step, eff, gain = (finite_or_none(value) for value in (time_s, step_s, efficiency, speedup))
    share = "-" if time is None or not step else f"{time / step * 100:.0f}%"
    percent = "-" if eff is None else f"{min(eff, 9.99) * 100:.0f}%"
    return format_ms(time), share, percent, format_ms(lost_s), "-" if gain is None else f"{gain:.2f}x"


def short_bound(bound: str | None) -> str:
    """``mem``, ``cmp`` or ``?``: a group's bound in a narrow column."""
    return {"memory": "mem", "compute": "cmp"}.get(str(bound), "?")


def group_point(name: str, key: DeviceKey, flops: float, nbytes: float, time_s: float, dtype: str | None) -> Point:
    """An op group of a profile as a roofline point (warm; bytes are the per-op lower bound)."""
    return Point(
        name=name,
        key=key,
        flops=flops,
        bytes=nbytes,
        time_s=time_s,
        dtype=dtype,
        source="profile",
        warm=True,
        bytes_rule="per-op lower bound",
    )


def flops_unknown(group: StoredGroup) -> bool:
    """Whether a stored group's FLOPs are unknown (no formula, or not seen by the counting step):
    its verdict is ``unknown`` and it is not data movement."""
    return bool(group.no_formula) or group.counted is False


def coverage_text(detail: Detail | StoredProfile) -> str:
    """``coverage 99.2%`` of a workload's ``profile`` object (or a :class:`StoredProfile`): the share
    of op time with a known FLOP count or genuine data movement; ``""`` when the file has none."""
    profile = detail if isinstance(detail, StoredProfile) else read_profile(detail)
    coverage = finite_or_none(profile.coverage) if profile is not None else None
    return "" if coverage is None else f"coverage {coverage * 100:.1f}%"


def compiled_text(detail: Detail | StoredProfile) -> str:
    """``compiled: 2 regions, 13 fused kernels, 1 graph break (...)`` of a workload's ``profile``
    object (or a :class:`StoredProfile`) of torch.compile'd code
    (:mod:`gpuscope.profiling.compiled_attribution`); ``""`` for an eager one."""
    profile = detail if isinstance(detail, StoredProfile) else read_profile(detail)
    compiled = profile.compiled if profile is not None else None
    if not isinstance(compiled, dict):
        return ""
    regions = compiled.get("regions")
    kernels = compiled.get("fused_kernels")
    breaks = compiled.get("graph_breaks")
    count = len(regions) if isinstance(regions, dict) else 0
    parts = [f"compiled: {count} region{'s' if count != 1 else ''}"]
    if isinstance(kernels, (int, float)):
        parts.append(f"{kernels:g} fused kernels")
    if isinstance(breaks, list) and breaks:
        parts.append(f"{len(breaks)} graph break{'s' if len(breaks) != 1 else ''} ({'; '.join(map(str, breaks[:3]))})")
    return ", ".join(parts)


def profile_points(profile: StoredProfile, key: DeviceKey, limit: int = 10) -> list[Point]:
    """The top ``limit`` groups (by time lost, the stored order) as points on device ``key``; a
    group without FLOPs or bytes becomes a point with no rate, which painters skip while it keeps
    its number, so point n is row n of :func:`profile_rows`. A group whose FLOPs are unknown gets
    neither FLOPs nor bytes (it is not data movement: no verdict)."""
    points = []
    for group in profile.top_groups(limit):
        flops, nbytes, time_s = (finite_or_none(value) or 0.0 for value in (group.flops, group.bytes, group.time_s))
        if flops_unknown(group):
            flops = nbytes = 0.0
        points.append(group_point(group.name, key, flops, nbytes, time_s if flops > 0 else 0.0, group.dtype))
    return points


def generation_phases(profile: StoredProfile) -> list[StoredPhase]:
    """The prefill and decode of a profile of a ``generate()`` call that can be points (FLOPs,
    bytes and a time), prefill first; [] for any other profile."""
    generation = read_generation(profile.generation)
    if generation is None:
        return []
    phases = (generation.phase("prefill"), generation.phase("decode"))
    return [
        phase
        for phase in phases
        if phase is not None and all((finite_or_none(v) or 0.0) > 0 for v in (phase.flops, phase.bytes, phase.time_s))
    ]


def generation_dtype(profile: StoredProfile, fallback: str | None) -> str | None:
    """The dtype whose compute roof a ``generate()`` profile's phases were placed against (the
    profile's main dtype); ``fallback`` (the workload's) for files written without it."""
    generation = read_generation(profile.generation)
    return (generation.dtype if generation is not None else None) or fallback


def generation_points(profile: StoredProfile, key: DeviceKey, dtype: str | None = None) -> list[Point]:
    """The prefill and decode of :func:`generation_phases` as roofline points on device ``key``
    (named ``prefill`` and ``decode``; each the FLOPs and bytes of its forward calls over their
    unprofiled wall time), with the dtype the profile placed them with (files without it: ``dtype``,
    the profile workload's)."""
    placed = generation_dtype(profile, dtype)
    return [
        group_point(str(phase.kind), key, phase.flops or 0.0, phase.bytes or 0.0, phase.time_s or 0.0, placed)
        for phase in generation_phases(profile)
    ]


def phase_note(phase: StoredPhase) -> str:
    """``generate(): 32 tokens, 8307 tokens/s, 120 mJ/token`` of a stored generation phase."""
    tokens = phase.tokens if phase.kind == "prefill" else phase.calls
    what = f"{tokens:g} {'tokens' if phase.kind == 'prefill' else 'steps'}" if tokens is not None else str(phase.kind)
    parts = [what]
    if phase.tokens_per_s is not None:
        parts.append(f"{format_si(phase.tokens_per_s, '', 4)} tokens/s")
    if phase.j_per_token is not None:
        parts.append(f"{format_si(phase.j_per_token, 'J')}/token")
    return PHASE_NOTE_PREFIX + ", ".join(parts)


class RegionTimes(Protocol):
    """A region of an eager-vs-compiled comparison, as measured (``RegionDiff``) or as stored
    (:class:`~gpuscope.profiling.stored.StoredRegion`)."""

    @property
    def region(self) -> str: ...
    @property
    def compiled_s(self) -> float: ...
    @property
    def eager_s(self) -> float: ...
    @property
    def speedup(self) -> float | None: ...
    @property
    def compiled_flops(self) -> float: ...
    @property
    def eager_flops(self) -> float: ...


#: The columns of the eager-vs-compiled table (``profile --compare-eager`` and the report).
COMPARE_HEADERS = ["region", "compiled ms", "eager ms", "speed-up", "FLOPs c/e"]


def compare_rows(rows: Sequence[RegionTimes]) -> list[list[str]]:
    """:data:`COMPARE_HEADERS` cells of each region: times per step in ms, eager / compiled time,
    compiled / eager FLOPs."""
    return [
        [
            row.region,
            f"{row.compiled_s * 1e3:.3f}",
            f"{row.eager_s * 1e3:.3f}",
            f"{row.speedup:.2f}x" if row.speedup is not None else "-",
            f"{row.compiled_flops / row.eager_flops:.3f}" if row.eager_flops else "-",
        ]
        for row in rows
    ]


def profile_rows(profile: StoredProfile, limit: int = 10) -> list[tuple[str, ...]]:
    """Table rows (:data:`PROFILE_ROW_HEADERS`) of the top ``limit`` groups."""
    rows: list[tuple[str, ...]] = []
    for rank, group in enumerate(profile.top_groups(limit), 1):
        ms, _share, eff, lost, gain = _numbers(group, None)
        rows.append((str(rank), group.name, group.first_module, short_bound(group.bound), ms, eff, lost, gain))
    return rows


def _numbers(group: StoredGroup, step_s: float | None) -> tuple[str, ...]:
    return group_numbers(group.time_s, step_s, group.efficiency, group.time_lost_s, group.step_speedup)
