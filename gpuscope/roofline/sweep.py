"""Working-set sweeps: find the plateaus of a bandwidth curve and name them as memory levels.

A sweep measures one kernel at working sets from a few KiB to beyond the last-level cache (as
ERT and likwid-bench users do). Where bandwidth stays flat over several sizes is a level; the
drop after it is where that cache is full. :func:`find_plateaus` finds the flat runs from the
curve alone; :func:`sweep_levels` names each after the OS-reported cache whose size range holds
most of its points and says how its extent compares with that size. A level the OS reports but
no plateau shows is :data:`~gpuscope.schema.sweeps.NO_PLATEAU`, never a guess. Levels slower
than a level farther from the core are flagged (:mod:`gpuscope.roofline.hierarchy`).

Pure functions on numbers; no I/O.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpuscope.roofline.hierarchy import LEVELS, out_of_order
from gpuscope.schema.core import detail_map
from gpuscope.schema.results import Device, Measurement
from gpuscope.schema.sweeps import NO_PLATEAU, Sweep, SweepLevel, SweepPoint

__all__ = [
    "PLATEAU_TOLERANCE",
    "PLATEAU_MIN_POINTS",
    "PLATEAU_RULE",
    "MIN_SWEEP_POINTS",
    "CAPACITY_AGREES",
    "CacheSizes",
    "Plateau",
    "find_plateaus",
    "level_of",
    "sweep_levels",
    "derive_sweeps",
]

#: a point belongs to a plateau while it is within this fraction of the plateau's running median
PLATEAU_TOLERANCE = 0.15
#: a flat run needs at least this many working sets to count as a plateau
PLATEAU_MIN_POINTS = 3
PLATEAU_RULE = (
    f"a plateau is at least {PLATEAU_MIN_POINTS} consecutive working sets each within "
    f"{PLATEAU_TOLERANCE:.0%} of the run's median B/s; it is named after the OS-reported cache whose "
    "size range (per core for L1/L2, shared for the LLC, beyond the LLC for DRAM) holds most of its points"
)
#: a plateau's last working set per cache instance over the OS size, where they agree
CAPACITY_AGREES = (0.25, 1.5)
#: memory measurements of one kernel with at least this many working sets form a sweep
MIN_SWEEP_POINTS = 6


@dataclass(frozen=True)
class CacheSizes:
    """The OS-reported cache sizes a sweep is checked against (None: not reported)."""

    l1_bytes: int | None  # per core
    l2_bytes: int | None  # per core
    llc_bytes: int | None  # shared
    threads: int = 1


@dataclass(frozen=True)
class Plateau:
    """A flat run of a sweep: indexes ``first..last`` (inclusive) into the sorted points."""

    first: int
    last: int
    bytes_per_s: float  # the median over the run

    @property
    def count(self) -> int:
        return self.last - self.first + 1


def find_plateaus(
    bytes_per_s: Sequence[float], tolerance: float = PLATEAU_TOLERANCE, min_points: int = PLATEAU_MIN_POINTS
) -> list[Plateau]:
    """Flat runs of a bandwidth curve ordered by working set: each point of a run lies within
    ``tolerance`` of the run's median; runs shorter than ``min_points`` are transitions."""
    out: list[Plateau] = []
    start = 0
    n = len(bytes_per_s)
    while start < n:
        end = start
        while end + 1 < n:
            median = statistics.median(bytes_per_s[start : end + 2])
            run = bytes_per_s[start : end + 2]
            if median <= 0 or any(abs(v - median) > tolerance * median for v in run):
                break
            end += 1
        if end - start + 1 >= min_points:
            out.append(Plateau(start, end, statistics.median(bytes_per_s[start : end + 1])))
            start = end + 1
        else:
            start += 1
    return out


def level_of(footprint_bytes: float, caches: CacheSizes) -> str | None:
    """The level whose OS-reported size range holds a working set (all threads), or None when
    the sizes needed are not reported."""
    per_core = footprint_bytes / max(1, caches.threads)
    if caches.l1_bytes and per_core <= caches.l1_bytes:
        return "l1"
    if caches.l2_bytes and per_core <= caches.l2_bytes:
        return "l2" if caches.l1_bytes else None
    if caches.llc_bytes and footprint_bytes <= caches.llc_bytes:
        return "llc" if caches.l2_bytes else None
    return "dram" if caches.llc_bytes else None


def _os_bytes(level: str, caches: CacheSizes) -> int | None:
    return {"l1": caches.l1_bytes, "l2": caches.l2_bytes, "llc": caches.llc_bytes}.get(level)


def sweep_levels(points: Sequence[SweepPoint], caches: CacheSizes) -> list[SweepLevel]:
    """Every level the OS reports (and DRAM), each with its plateau or :data:`NO_PLATEAU`."""
    ordered = sorted(points, key=lambda p: p.footprint_bytes)
    rates = [p.bytes_per_s for p in ordered]
    found: dict[str, tuple[Plateau, int]] = {}
    for plateau in find_plateaus(rates):
        votes: dict[str, int] = {}
        for point in ordered[plateau.first : plateau.last + 1]:
            level = level_of(point.footprint_bytes, caches)
            if level is not None:
                votes[level] = votes.get(level, 0) + 1
        if not votes:
            continue
        level, count = max(votes.items(), key=lambda item: (item[1], -LEVELS.index(item[0])))
        if level not in found or count > found[level][1]:
            found[level] = (plateau, count)
    wanted = [level for level in LEVELS if level == "dram" and caches.llc_bytes or _os_bytes(level, caches)]
    out: list[SweepLevel] = []
    for level in wanted:
        if level not in found:
            out.append(SweepLevel(level=level, status=NO_PLATEAU, os_cache_bytes=_os_bytes(level, caches)))
            continue
        plateau, _ = found[level]
        first, last = ordered[plateau.first], ordered[plateau.last]
        os_bytes = _os_bytes(level, caches)
        ratio = note = None
        if os_bytes:
            per_instance = last.footprint_bytes / (max(1, caches.threads) if level in ("l1", "l2") else 1)
            ratio = per_instance / os_bytes
            if ratio > CAPACITY_AGREES[1]:
                note = "the plateau runs past the size the OS reports: the next level ran at about the same rate"
            elif ratio < CAPACITY_AGREES[0]:
                note = "the plateau ends well before the size the OS reports"
        out.append(
            SweepLevel(
                level=level, status="ok", plateau_bytes_per_s=plateau.bytes_per_s,
                first_footprint_bytes=first.footprint_bytes, last_footprint_bytes=last.footprint_bytes,
                points=plateau.count, os_cache_bytes=os_bytes, capacity_ratio=ratio, note=note,
            )
        )  # fmt: skip
    flags = out_of_order({entry.level: entry.plateau_bytes_per_s for entry in out if entry.status == "ok"})
    for entry in out:
        entry.out_of_order = flags.get(entry.level)
    return out


def _caches_of(device: Device | None, threads: int) -> CacheSizes:
    if device is None:
        return CacheSizes(None, None, None, threads)
    sizes: dict[int, int] = {}
    for cache in device.caches or []:
        kind = (cache.kind or "").lower()
        if cache.level and cache.size_bytes and kind in ("data", "unified", ""):
            sizes[int(cache.level)] = int(cache.size_bytes)
    llc = device.last_level_cache_bytes or (sizes[max(sizes)] if len(sizes) >= 3 else None)
    return CacheSizes(sizes.get(1), sizes.get(2), int(llc) if llc else None, threads)


def derive_sweeps(measurements: Iterable[Measurement], devices: Iterable[Device]) -> list[Sweep]:
    """One :class:`Sweep` per (device, kernel, dtype) of ok memory measurements marked
    ``parameters.sweep`` with at least :data:`MIN_SWEEP_POINTS` working sets (best rate per size)."""
    groups: dict[tuple[str, str, str], dict[float, SweepPoint]] = {}
    threads_of: dict[tuple[str, str, str], int] = {}
    for m in measurements:
        p = detail_map(m.parameters)
        footprint, kernel = p.get("footprint_bytes"), p.get("kernel")
        if m.kind != "memory" or m.status != "ok" or not p.get("sweep") or not m.bytes_per_s:
            continue
        if not isinstance(footprint, (int, float)) or not isinstance(kernel, str):
            continue
        key = (m.device, kernel, str(p.get("dtype") or ""))
        threads = p.get("threads")
        threads_of[key] = threads if isinstance(threads, int) and threads > 0 else threads_of.get(key, 1)
        points = groups.setdefault(key, {})
        if footprint not in points or m.bytes_per_s > points[footprint].bytes_per_s:
            points[footprint] = SweepPoint(footprint_bytes=footprint, bytes_per_s=m.bytes_per_s, measurement_id=m.id)
    by_name = {device.device: device for device in devices}
    out = []
    for key, points in groups.items():
        if len(points) < MIN_SWEEP_POINTS:
            continue
        device_name, kernel, dtype = key
        ordered = sorted(points.values(), key=lambda p: p.footprint_bytes)
        caches = _caches_of(by_name.get(device_name), threads_of[key])
        out.append(
            Sweep(
                device=device_name, kernel=kernel, dtype=dtype or None, threads=threads_of[key], points=ordered,
                levels=sweep_levels(ordered, caches), rule=PLATEAU_RULE,
            )
        )  # fmt: skip
    return sorted(out, key=lambda s: (s.device, s.kernel, s.dtype or ""))
