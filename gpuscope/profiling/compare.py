"""Two profiles of the same step (before and after a change), group by group.

Profiles pair by workload name, in input order: the first profile of a name is "before", each
later one is compared with it. Groups match on op + shapes + dtype; a group present on one side
only is listed as new or gone. Times are device time per step (seconds). Pure Python on results
documents, no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from gpuscope.profiling.stored import Profiled, StoredGroup, profiled_workloads
from gpuscope.profiling.view import format_ms
from gpuscope.roofline.columns import distinct_cuts
from gpuscope.roofline.tables import format_table
from gpuscope.schema.core import finite_or_none
from gpuscope.schema.results import Results

__all__ = ["GroupChange", "ProfilePair", "profile_comparison", "render_profile_comparison"]


class GroupChange(TypedDict):
    """One op group before and after (seconds per step); ``status`` ``same``, ``gone`` or ``new``."""

    label: str
    before_s: float | None
    after_s: float | None
    delta_s: float
    speedup: float | None
    status: str
    before_lost_s: float | None
    after_lost_s: float | None


class ProfilePair(TypedDict):
    """Two profiles of one step (``compare --format json`` writes it under ``profiles``)."""

    name: str
    before: str
    after: str
    device_before: str
    device_after: str
    step_before_s: float | None
    step_after_s: float | None
    step_speedup: float | None
    groups: list[GroupChange]


def _key(group: StoredGroup) -> tuple[str, tuple[tuple[int, ...], ...], str]:
    return (str(group.op), tuple(tuple(shape) for shape in group.shapes), str(group.dtype))


def profile_comparison(inputs: Sequence[tuple[str, Results]]) -> list[ProfilePair]:
    """Every (before, after) pair of profiles with the same name in ``inputs`` (label, results):
    step times and per-group times, largest change first."""
    seen: dict[str, tuple[str, Profiled]] = {}
    pairs = []
    for label, document in inputs:
        for profiled in profiled_workloads(document):
            name = profiled.workload.name
            if name not in seen:
                seen[name] = (label, profiled)
                continue
            before_label, before = seen[name]
            pairs.append(_pair(name, before_label, before, label, profiled))
    return pairs


def _pair(name: str, before_label: str, before: Profiled, after_label: str, after: Profiled) -> ProfilePair:
    groups_before = {_key(group): group for group in before.profile.top_groups(limit=None)}
    groups_after = {_key(group): group for group in after.profile.top_groups(limit=None)}
    rows: list[GroupChange] = []
    for key in list(groups_before) + [key for key in groups_after if key not in groups_before]:
        old, new = groups_before.get(key), groups_after.get(key)
        old_s = finite_or_none(old.time_s) if old else None
        new_s = finite_or_none(new.time_s) if new else None
        either = old or new
        rows.append(
            {
                "label": str((either.label if either else None) or key[0]),
                "before_s": old_s,
                "after_s": new_s,
                "delta_s": (new_s or 0.0) - (old_s or 0.0),
                "speedup": (old_s / new_s) if old_s and new_s else None,
                "status": "same" if old and new else ("gone" if old else "new"),
                "before_lost_s": finite_or_none(old.time_lost_s) if old else None,
                "after_lost_s": finite_or_none(new.time_lost_s) if new else None,
            }
        )
    rows.sort(key=lambda row: -abs(row["delta_s"]))
    step_before, step_after = finite_or_none(before.workload.time_s), finite_or_none(after.workload.time_s)
    return {
        "name": name,
        "before": before_label,
        "after": after_label,
        "device_before": before.workload.device,
        "device_after": after.workload.device,
        "step_before_s": step_before,
        "step_after_s": step_after,
        "step_speedup": (step_before / step_after) if step_before and step_after else None,
        "groups": rows,
    }


def render_profile_comparison(pairs: list[ProfilePair], width: int = 80, limit: int = 10) -> str:
    """Text: per pair the step times and the groups whose time changed most."""
    lines: list[str] = []
    for pair in pairs:
        speedup = pair["step_speedup"]
        lines.append(f"profile {pair['name']}: {pair['before']} -> {pair['after']}")
        lines.append(
            f"  step {format_ms(pair['step_before_s'])} ms -> {format_ms(pair['step_after_s'])} ms"
            + (f" ({speedup:.2f}x)" if speedup else "")
            + (
                ""
                if pair["device_before"] == pair["device_after"]
                else f"  (devices differ: {pair['device_before']} / {pair['device_after']})"
            )
        )
        rows = []
        groups = pair["groups"][:limit]
        labels = distinct_cuts([row["label"] for row in groups], 36)  # alike cuts keep their last words
        for row, label in zip(groups, labels, strict=True):
            delta = row["delta_s"] * 1e3
            gain = f"{row['speedup']:.2f}x" if row["speedup"] else row["status"]
            rows.append([label, format_ms(row["before_s"]), format_ms(row["after_s"]), f"{delta:+.3g}", gain])
        lines.extend(
            "  " + line
            for line in format_table(["group", "before ms", "after ms", "delta", "speed-up"], rows, width=width - 2)
        )
        lines.append("")
    return "\n".join(lines)
