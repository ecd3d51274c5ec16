"""Verdicts: each op group against the roofs of its device and dtype.

For a group with FLOPs F, bytes B (lower bound) and measured time T per step:

- the group is placed with :func:`gpuscope.roofline.model.place_point` (the same placement as
  every roofline point): compute roof of its dtype (measured when the results give one, else
  datasheet) and DRAM roof; bound = memory left of the ridge, compute right of it;
- an op whose FLOPs are unknown (no formula, or not seen by the counting step) is ``unknown``,
  never memory-bound: only genuine data movement (:data:`gpuscope.profiling.record.DATA_MOVEMENT_OPS`)
  is judged against the DRAM roof with zero FLOPs;
- time at roof = F / attainable(F/B); for an op that does no arithmetic (copies) = B / DRAM roof;
- efficiency = time at roof / T; time lost = T - time at roof (0 when above the roof, which is
  flagged as a counting problem);
- step speed-up if this group reached its roof = step / (step - time lost).

Pure Python, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuscope.profiling.attribution import OpGroup
from gpuscope.roofline.model import DeviceKey, DeviceRoofs, Point, Roof, compute_roof_for, memory_roof_for, place_point

__all__ = ["Verdict", "judge_group", "judge_groups", "roofs_statement"]


@dataclass(frozen=True)
class Verdict:
    """One group's place under its roofs. Times in seconds per step."""

    group: OpGroup
    bound: str  # "compute" | "memory" | "unknown"
    roof_source: str | None  # "measured" | "datasheet" | None (the bounding roof's source)
    roof_name: str | None  # "fp32", "dram.triad"
    attainable_flop_per_s: float | None
    time_at_roof_s: float | None
    time_lost_s: float | None
    efficiency: float | None  # time at roof / measured time, 0..1
    step_speedup: float | None  # step time / (step time - time lost)
    intensity_flop_per_byte: float | None
    above_roof: bool
    note: str

    @property
    def flop_per_s(self) -> float | None:
        return self.group.flops / self.group.time_s if self.group.time_s > 0 else None


def _unknown(group: OpGroup, note: str) -> Verdict:
    return Verdict(group, "unknown", None, None, None, None, None, None, None, None, False, note)


def judge_group(group: OpGroup, device: DeviceRoofs | None, step_s: float, key: DeviceKey) -> Verdict:
    """The verdict of one group on ``device`` (None: no roofs known)."""
    if not group.counted:
        return _unknown(group, "not seen by the counting step: FLOPs and bytes unknown")
    if group.no_formula:
        return _unknown(group, f"no FLOP formula for {group.op}: FLOPs unknown, so no verdict (its time is listed)")
    if group.time_s <= 0:
        return _unknown(group, "no time measured")
    if device is None:
        return _unknown(group, f"no roofs for {key.device}")
    intensity = group.flops / group.bytes if group.bytes > 0 else None
    if group.flops == 0:
        memory = memory_roof_for(device)
        if group.bytes == 0:
            return _unknown(group, "moves no data and does no arithmetic (view or allocation)")
        if memory is None:
            return _unknown(group, "data movement only, and no DRAM roof (give probe results with a memory ceiling)")
        at_roof = group.bytes / memory.value
        return _finish(group, "memory", memory, None, at_roof, step_s, 0.0, "data movement only: against the DRAM roof")
    flops, nbytes = float(group.flops), float(group.bytes)
    point = Point(
        name=group.label, key=key, flops=flops, bytes=nbytes, time_s=group.time_s, dtype=group.dtype, source="profile"
    )
    placement = place_point(point, device)
    if placement.attainable_flop_per_s is None or placement.attainable_flop_per_s <= 0:
        return _unknown(group, placement.note or "no roof")
    at_roof = group.flops / placement.attainable_flop_per_s
    roof = placement.bounding_roof
    return _finish(
        group, placement.bound, roof, placement.attainable_flop_per_s, at_roof, step_s, intensity, placement.note
    )


def _finish(
    group: OpGroup,
    bound: str,
    roof: Roof | None,
    attainable: float | None,
    at_roof: float,
    step_s: float,
    intensity: float | None,
    note: str,
) -> Verdict:
    efficiency = at_roof / group.time_s
    above = efficiency > 1.05
    lost = max(group.time_s - at_roof, 0.0)
    speedup = step_s / (step_s - lost) if step_s > lost else None
    return Verdict(
        group=group,
        bound=bound,
        roof_source=roof.source if roof else None,
        roof_name=roof.name if roof else None,
        attainable_flop_per_s=attainable,
        time_at_roof_s=at_roof,
        time_lost_s=lost,
        efficiency=efficiency,
        step_speedup=speedup,
        intensity_flop_per_byte=intensity,
        above_roof=above,
        note=note,
    )


def judge_groups(groups: list[OpGroup], device: DeviceRoofs | None, step_s: float, key: DeviceKey) -> list[Verdict]:
    """Verdicts of every group, most time lost first (groups without a verdict last, by time)."""
    verdicts = [judge_group(group, device, step_s, key) for group in groups]
    return sorted(verdicts, key=lambda v: (v.time_lost_s is None, -(v.time_lost_s or 0.0), -v.group.time_s))


def roofs_statement(device: DeviceRoofs | None, dtypes: list[str]) -> str:
    """One line: which roofs the verdicts use and where they come from."""
    if device is None:
        return "no roofs for this device: no verdicts"
    parts = []
    for dtype in dtypes:
        roof = compute_roof_for(device, dtype)
        if roof is not None:
            parts.append(f"{dtype} {roof.value / 1e9:.4g} GFLOP/s ({roof.source})")
    memory = memory_roof_for(device)
    if memory is not None:
        parts.append(f"{memory.name} {memory.value / 1e9:.4g} GB/s ({memory.source})")
    else:
        parts.append("no DRAM roof (datasheet has none for this device: pass --roofs PROBE_RESULTS.json)")
    return "roofs: " + "; ".join(parts)
