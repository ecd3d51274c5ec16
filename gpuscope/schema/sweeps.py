"""A working-set sweep in a results file (``sweeps[]``): bandwidth against working set for one
kernel, and the cache levels its plateaus revealed (gpuscope.roofline.sweep finds them).

A level is either a plateau (``status`` ``"ok"``: its median bandwidth, the working sets it spans,
the size the OS reports for that cache and how the two compare) or ``"unavailable: no plateau"``.
"""

from __future__ import annotations

import msgspec

from gpuscope.schema.core import Count, NonNegative, Real

__all__ = ["SweepPoint", "SweepLevel", "Sweep", "NO_PLATEAU"]

#: The status of a level whose plateau the sweep did not show.
NO_PLATEAU = "unavailable: no plateau"


class SweepPoint(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One working set of a sweep: all arrays of all threads (bytes) and the best rate (B/s, STREAM count)."""

    footprint_bytes: NonNegative
    bytes_per_s: NonNegative
    measurement_id: str | int | None = None


class SweepLevel(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One memory level as the sweep saw it. ``status``: ``ok`` or :data:`NO_PLATEAU`."""

    level: str  # l1, l2, llc, dram
    status: str
    #: median B/s over the plateau's points, and its first and last working set (bytes, all threads)
    plateau_bytes_per_s: NonNegative | None = None
    first_footprint_bytes: NonNegative | None = None
    last_footprint_bytes: NonNegative | None = None
    points: Count | None = None
    #: the cache size the OS reports (per core for l1/l2, shared for llc), and the largest working
    #: set per cache instance on the plateau divided by it (about 0.5-1 when they agree)
    os_cache_bytes: NonNegative | None = None
    capacity_ratio: Real | None = None
    #: a level slower than a level farther from the core: a measurement problem
    out_of_order: str | None = None
    note: str | None = None


class Sweep(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Bandwidth against working set for one kernel on one device, and its levels."""

    device: str
    kernel: str
    dtype: str | None = None
    threads: Count | None = None
    points: list[SweepPoint] = msgspec.field(default_factory=list)
    levels: list[SweepLevel] = msgspec.field(default_factory=list)
    #: the rule used to find plateaus (tolerance, minimum points)
    rule: str | None = None
