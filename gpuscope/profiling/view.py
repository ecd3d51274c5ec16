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

__all__ = [
    "PROFILE_ROW_HEADERS",
    "group_point",
    "profile_points",
    "profile_rows",
    "profile_workloads",
    "top_groups",
    "format_ms",
    "group_numbers",
    "short_bound",
]

PROFILE_ROW_HEADERS = ("#", "op dtype shapes", "module", "bound", "ms", "eff", "lost ms", "gain")


def format_ms(seconds: Any) -> str:
    """Seconds as milliseconds: 3 significant digits below 100 ms, whole ms from there; ``-``
    when not a finite number. The one number rule of every profile table."""
    number = finite_or_none(seconds)
    if number is None:
        return "-"
    return f"{number * 1e3:.3g}" if number < 0.1 else f"{number * 1e3:.0f}"


def group_numbers(time_s: Any, step_s: Any, efficiency: Any, lost_s: Any, speedup: Any) -> tuple[str, ...]:
    """A profile group's number cells, as every painter of the groups shows them: ms per step,
    share of the step, efficiency (time at roof / time; at most 999%), ms lost to the roof and
    the step's speed-up at the roof (``1.25x``); ``-`` where a value is unknown."""
    time, step, eff, gain = (finite_or_none(value) for value in (time_s, step_s, efficiency, speedup))
    share = "-" if time is None or not step else f"{time / step * 100:.0f}%"
    percent = "-" if eff is None else f"{min(eff, 9.99) * 100:.0f}%"
    return format_ms(time), share, percent, format_ms(lost_s), "-" if gain is None else f"{gain:.2f}x"


def short_bound(bound: Any) -> str:
    """``mem``, ``cmp`` or ``?``: a group's bound in a narrow column."""
    return {"memory": "mem", "compute": "cmp"}.get(str(bound), "?")


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


def top_groups(workload: dict[str, Any], limit: int | None = 10) -> list[dict[str, Any]]:
    """The first ``limit`` (None: all) groups of a profile workload (stored by time lost)."""
    return [g for g in as_list(workload["profile"].get("groups")) if isinstance(g, dict)][:limit]


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


def profile_points(workload: dict[str, Any], key: DeviceKey, limit: int = 10) -> list[Point]:
    """The top ``limit`` groups (by time lost, the stored order) as points on device ``key``; a
    group without FLOPs or bytes becomes a point with no rate, which painters skip while it keeps
    its number, so point n is row n of :func:`profile_rows`."""
    points = []
    for group in top_groups(workload, limit):
        flops, nbytes, time_s = (finite_or_none(group.get(key)) or 0.0 for key in ("flops", "bytes", "time_s"))
        dtype = group.get("dtype") if isinstance(group.get("dtype"), str) else None
        name = str(group.get("label") or group.get("op"))
        points.append(group_point(name, key, flops, nbytes, time_s if flops > 0 else 0.0, dtype))
    return points


def profile_rows(workload: dict[str, Any], limit: int = 10) -> list[tuple[str, ...]]:
    """Table rows (:data:`PROFILE_ROW_HEADERS`) of the top ``limit`` groups."""
    rows: list[tuple[str, ...]] = []
    for rank, group in enumerate(top_groups(workload, limit), 1):
        ms, _share, eff, lost, gain = group_numbers(
            group.get("time_s"), None, group.get("efficiency"), group.get("time_lost_s"), group.get("step_speedup")
        )
        label, bound = str(group.get("label") or group.get("op")), short_bound(group.get("bound"))
        rows.append((str(rank), label, first_module(group), bound, ms, eff, lost, gain))
    return rows
