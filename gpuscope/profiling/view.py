"""A profile read back from a results file, for painters that only have the JSON (the TUI's
roofline screen, the report): its groups as roofline points and as table rows. No torch, no
Textual.

The TUI's roofline screen shows a profile as a cloud of points with the table beside it::

    model = load_model(paths)                                    # roofs as usual
    for workload in profile_workloads(document):
        key = model_key_of(workload)                            # the device's DeviceKey in model
        cloud = model.replace_points(profile_points(workload, key))
        rows = profile_rows(workload)                           # row n is point n on the chart
"""

from __future__ import annotations

from typing import Any

from gpuscope.roofline.model import DeviceKey, Point
from gpuscope.schema.core import finite_or_none

__all__ = ["PROFILE_ROW_HEADERS", "profile_points", "profile_rows", "profile_workloads"]

PROFILE_ROW_HEADERS = (
    "#",
    "op dtype shapes",
    "module",
    "bound",
    "ms",
    "eff",
    "lost ms",
    "gain",
)


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a list, else ``[]`` (a results file is input: any field may be wrong)."""
    return value if isinstance(value, list) else []


def first_module(group: dict[str, Any]) -> str:
    """The module path a group spent most time in, or ``"-"``."""
    modules = as_list(group.get("modules"))
    return str(modules[0]) if modules else "-"


def profile_workloads(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The profile workloads (``source == "profile"`` with a ``profile`` object) of a results document."""
    return [
        w
        for w in document.get("workloads") or []
        if isinstance(w, dict) and w.get("source") == "profile" and isinstance(w.get("profile"), dict)
    ]


def _groups(workload: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    return [g for g in as_list(workload["profile"].get("groups")) if isinstance(g, dict)][:limit]


def profile_points(workload: dict[str, Any], key: DeviceKey, limit: int = 10) -> list[Point]:
    """The top ``limit`` groups (by time lost, the stored order) as points on device ``key``; a
    group without FLOPs or bytes becomes a point with no rate, which painters skip while it keeps
    its number, so point n is row n of :func:`profile_rows`."""
    points = []
    for group in _groups(workload, limit):
        flops, nbytes, time_s = (
            finite_or_none(group.get("flops")) or 0.0,
            finite_or_none(group.get("bytes")) or 0.0,
            finite_or_none(group.get("time_s")) or 0.0,
        )
        points.append(
            Point(
                name=str(group.get("label") or group.get("op")),
                key=key,
                flops=flops,
                bytes=nbytes,
                time_s=time_s if flops > 0 else 0.0,
                dtype=group.get("dtype") if isinstance(group.get("dtype"), str) else None,
                source="profile",
                warm=True,
                bytes_rule="per-op lower bound",
            )
        )
    return points


def profile_rows(workload: dict[str, Any], limit: int = 10) -> list[tuple[str, ...]]:
    """Table rows (:data:`PROFILE_ROW_HEADERS`) of the top ``limit`` groups."""
    rows: list[tuple[str, ...]] = []
    for rank, group in enumerate(_groups(workload, limit), 1):
        time_s, lost, efficiency, gain = (
            finite_or_none(group.get(k)) for k in ("time_s", "time_lost_s", "efficiency", "step_speedup")
        )
        rows.append(
            (
                str(rank),
                str(group.get("label") or group.get("op")),
                first_module(group),
                {"memory": "mem", "compute": "cmp"}.get(str(group.get("bound")), "?"),
                "-" if time_s is None else f"{time_s * 1e3:.3g}",
                "-" if efficiency is None else f"{efficiency * 100:.0f}%",
                "-" if lost is None else f"{lost * 1e3:.3g}",
                "-" if gain is None else f"{gain:.2f}x",
            )
        )
    return rows
