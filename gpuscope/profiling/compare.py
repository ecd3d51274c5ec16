"""Two profiles of the same step (before and after a change), group by group.

Profiles pair by workload name, in input order: the first profile of a name is "before", each
later one is compared with it. Groups match on op + shapes + dtype; a group present on one side
only is listed as new or gone. Times are device time per step (seconds). Pure Python on results
documents, no torch.
"""

from __future__ import annotations

from typing import Any

from gpuscope.profiling.view import as_list, format_ms, profile_workloads, top_groups
from gpuscope.schema.core import finite_or_none

__all__ = ["profile_comparison", "render_profile_comparison"]


def _key(group: dict[str, Any]) -> tuple[Any, ...]:
    shapes = tuple(
        tuple(size for size in shape if isinstance(size, int))
        for shape in as_list(group.get("shapes"))
        if isinstance(shape, list)
    )
    return (str(group.get("op")), shapes, str(group.get("dtype")))


def profile_comparison(inputs: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every (before, after) pair of profiles with the same name in ``inputs`` (label, results
    document): step times and per-group times, largest change first."""
    seen: dict[str, tuple[str, dict[str, Any]]] = {}
    pairs = []
    for label, document in inputs:
        for workload in profile_workloads(document):
            name = str(workload.get("name"))
            if name not in seen:
                seen[name] = (label, workload)
                continue
            before_label, before = seen[name]
            pairs.append(_pair(name, before_label, before, label, workload))
    return pairs


def _pair(
    name: str, before_label: str, before: dict[str, Any], after_label: str, after: dict[str, Any]
) -> dict[str, Any]:
    groups_before = {_key(group): group for group in top_groups(before, limit=None)}
    groups_after = {_key(group): group for group in top_groups(after, limit=None)}
    rows: list[dict[str, Any]] = []
    for key in list(groups_before) + [key for key in groups_after if key not in groups_before]:
        old, new = groups_before.get(key), groups_after.get(key)
        old_s = finite_or_none(old.get("time_s")) if old else None
        new_s = finite_or_none(new.get("time_s")) if new else None
        rows.append(
            dict(
                label=str((old or new or {}).get("label") or key[0]),
                before_s=old_s,
                after_s=new_s,
                delta_s=(new_s or 0.0) - (old_s or 0.0),
                speedup=(old_s / new_s) if old_s and new_s else None,
                status="same" if old and new else ("gone" if old else "new"),
                before_lost_s=finite_or_none(old.get("time_lost_s")) if old else None,
                after_lost_s=finite_or_none(new.get("time_lost_s")) if new else None,
            )
        )
    rows.sort(key=lambda row: -abs(row["delta_s"]))
    step_before, step_after = finite_or_none(before.get("time_s")), finite_or_none(after.get("time_s"))
    return {
        "name": name,
        "before": before_label,
        "after": after_label,
        "device_before": before.get("device"),
        "device_after": after.get("device"),
        "step_before_s": step_before,
        "step_after_s": step_after,
        "step_speedup": (step_before / step_after) if step_before and step_after else None,
        "groups": rows,
    }


def render_profile_comparison(pairs: list[dict[str, Any]], width: int = 80, limit: int = 10) -> str:
    """Text: per pair the step times and the groups whose time changed most."""
    from gpuscope.roofline.tables import format_table

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
        for row in pair["groups"][:limit]:
            label = row["label"] if len(row["label"]) <= 36 else row["label"][:35] + "…"
            delta = row["delta_s"] * 1e3
            speedup = f"{row['speedup']:.2f}x" if row["speedup"] else row["status"]
            rows.append([label, format_ms(row["before_s"]), format_ms(row["after_s"]), f"{delta:+.3g}", speedup])
        lines.extend(
            "  " + line
            for line in format_table(["group", "before ms", "after ms", "delta", "speed-up"], rows, width=width - 2)
        )
        lines.append("")
    return "\n".join(lines)
