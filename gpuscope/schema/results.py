"""The results file (``gpuscope.results``, version 1) as declared types; see docs/results-schema.md.

Written by ``gpuscope probe`` and ``gpuscope measure``; read by ``roofline``, ``report``,
``compare``, ``replay`` and the TUI. Fields a consumer reads are declared with their type and
range; detail fields nobody interprets (``parameters``, ``versions``, telemetry snapshots) are
:data:`~gpuscope.schema.core.Detail` (any JSON up to 6 levels deep): shown as text, never computed
with. Undeclared fields are allowed (the rules in :mod:`gpuscope.schema.core`).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from gpuscope.schema.core import MIN_MAGNITUDE, Count, Detail, Finite, Magnitude, NonEmpty, NonNegative, Seconds

__all__ = [
    "RESULTS_SCHEMA",
    "RESULTS_SCHEMA_VERSION",
    "CEILING_KINDS",
    "CEILING_UNITS",
    "Ceiling",
    "Device",
    "Measurement",
    "Workload",
    "System",
    "SuiteRef",
    "RunSummary",
    "Distributed",
    "Results",
]

RESULTS_SCHEMA = "gpuscope.results"
RESULTS_SCHEMA_VERSION = 1
CEILING_KINDS = ("compute", "memory", "transfer", "collective")
CEILING_UNITS = ("FLOP/s", "B/s")

CeilingKind = Literal["compute", "memory", "transfer", "collective"]
Rank = Count


class _Placed(msgspec.Struct, kw_only=True):
    """Where an entry ran (a multi-rank file's host and rank), and whether it is a straggler
    (``straggler``: set by ``probe --distributed``, gpuscope.probing.cluster)."""

    host: str | None = None
    rank: Rank | None = None
    straggler: bool | None = None


class _Measured(_Placed, kw_only=True):
    """Energy over the measured window (gpuscope.telemetry.energy): joules, or why not."""

    energy_j: NonNegative | None = None
    energy_unavailable: str | None = None
    energy_method: str | None = None
    energy_window_s: Seconds | None = None
    flop_per_j: NonNegative | None = None


class _Rated(_Measured, kw_only=True):
    """The timing statistics and rates of one call (a measurement's, a workload's)."""

    n: Count | None = None
    time_p10_s: Seconds | None = None
    time_p90_s: Seconds | None = None
    flop_per_s: NonNegative | None = None
    bytes_per_s: NonNegative | None = None
    intensity_flop_per_byte: NonNegative | None = None


class SuiteRef(msgspec.Struct, kw_only=True):
    """The suite a run used."""

    name: str | None = None
    path: str | None = None
    description: str | None = None


class System(msgspec.Struct, kw_only=True):
    """The machine a run used (``system``)."""

    hostname: str | None = None
    cpu_model: str | None = None
    logical_cores: Count | None = None
    physical_cores: Count | None = None
    simd: Detail = None
    os: str | None = None
    python: str | None = None
    torch: str | None = None
    cuda: str | None = None
    driver: str | None = None
    blas: str | None = None
    numpy_blas: Detail = None
    numpy: Detail = None
    argv: Detail = None  # a list of strings, or "[redacted]" in a redacted report


class Device(_Placed, kw_only=True):
    """One probed device (``devices[]``); CPU and GPU details beyond these are free detail."""

    device: NonEmpty
    type: str | None = None
    name: str | None = None
    memory_total_bytes: NonNegative | None = None
    #: A GPU's UUID as NVML spells it (``GPU-...``/``MIG-...``; torch's bare form when NVML did
    #: not list it), null when unknown: the same GPU across files (gpuscope.roofline.loading).
    uuid: str | None = None
    #: A CPU's datasheet peaks as the probe computed them on that machine (gpuscope.roofline.loading).
    datasheet_peak_fp32_flop_per_s: NonNegative | None = None
    datasheet_peak_fp64_flop_per_s: NonNegative | None = None


class Ceiling(_Measured, kw_only=True):
    """One roof: the best ok measurement of ``name`` on ``device``, in ``unit``."""

    device: NonEmpty
    kind: CeilingKind
    name: NonEmpty
    value: Magnitude
    unit: Literal["FLOP/s", "B/s"]
    measurement_id: str | int | None = None
    statistic: str | None = None
    n: Count | None = None
    note: str | None = None
    dtype: str | None = None
    library: str | None = None
    libraries_flop_per_s: dict[str, Magnitude | None] | None = None
    blas: str | None = None
    level: str | None = None
    kernel: str | None = None
    implementation: str | None = None
    footprint_bytes: NonNegative | None = None
    size_bytes: NonNegative | None = None
    backend: str | None = None
    world_size: Count | None = None
    shape: str | None = None
    #: A ceiling that is not a roof (failed, skipped): named by its status and left out.
    status: str | None = None
    #: The median of this ceiling across the ranks of a multi-rank run, and this one's fraction of it.
    median_value: Finite | None = None
    fraction_of_median: Finite | None = None


class Measurement(_Rated, kw_only=True):
    """One measurement, ok, failed or skipped (``measurements[]``)."""

    id: str | int | None = None
    kind: str | None = None
    name: str | None = None
    device: str = ""
    status: str | None = None
    error: str | None = None
    parameters: Detail = None
    flops: NonNegative | None = None
    bytes: NonNegative | None = None
    counting_rule: Detail = None
    statistic: str | None = None
    samples_s: list[Finite] | None = None
    time_s: Seconds | None = None
    time_min_s: Seconds | None = None
    time_median_s: Seconds | None = None
    time_max_s: Seconds | None = None
    spread: Finite | None = None
    #: A collective's bus and algorithm bandwidth (nccl-tests' busbw and algbw).
    busbw_bytes_per_s: NonNegative | None = None
    algbw_bytes_per_s: NonNegative | None = None
    validation_error: Finite | None = None
    validation_tolerance: Finite | None = None
    start: Finite | None = None
    end: Finite | None = None
    library: str | None = None
    implementation: str | None = None
    level: str | None = None
    workload_name: str | None = None
    ceiling_name: str | None = None
    host_contention_percent: Finite | None = None
    timing: Detail = None
    versions: Detail = None
    telemetry_before: Detail = None
    telemetry_after: Detail = None
    telemetry_during: Detail = None
    attempts: Detail = None


class Workload(_Rated, kw_only=True):
    """One roofline point (``workloads[]``): FLOPs and bytes of one call and its median time."""

    name: str
    device: str = ""
    flops: NonNegative
    bytes: NonNegative
    time_s: Seconds
    bytes_rule: Detail = None
    dtype: str | None = None
    cache_state: str | None = None
    #: ``gpuscope measure``: timed with warm caches (the label), and DRAM bytes from GPM telemetry.
    warm: bool | None = None
    dram_bytes_measured: NonNegative | None = None
    source: str | None = None
    measurement_id: str | int | None = None
    profile: Detail = None  # gpuscope.profile: groups, verdicts, modules (docs/profile.md)

    def __post_init__(self) -> None:
        # 0 or a magnitude: a denormal count or time would turn rates and intensities into inf.
        for field in ("flops", "bytes", "time_s"):
            if 0 < getattr(self, field) < MIN_MAGNITUDE:
                raise ValueError(f"field `{field}` must be 0 or at least {MIN_MAGNITUDE:g}")


class Distributed(msgspec.Struct, kw_only=True):
    """A multi-rank run's ranks and hosts (``distributed``; per-rank detail under ``ranks``)."""

    world_size: Count | None = None
    nnodes: Count | None = None
    hosts: list[str] | None = None
    collective_backend: str | None = None
    missing_ranks: list[Rank] | None = None


class RunSummary(msgspec.Struct, kw_only=True):
    """Measurements by status."""

    ok: Count = 0
    failed: Count = 0
    skipped: Count = 0


class Results(msgspec.Struct, kw_only=True):
    """A whole results file."""

    schema: Literal["gpuscope.results"]
    schema_version: Literal[1]
    gpuscope_version: str | None = None
    created: Finite | None = None
    partial: bool = False
    partial_reason: str | None = None
    suite: SuiteRef | None = None
    settings: Detail = None
    device: str | None = None
    memory_fraction: Finite | None = None
    system: System = msgspec.field(default_factory=System)
    devices: list[Device] = msgspec.field(default_factory=list)
    ceilings: list[Ceiling] = msgspec.field(default_factory=list)
    measurements: list[Measurement] = msgspec.field(default_factory=list)
    workloads: list[Workload] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)
    telemetry: Detail = None
    summary: RunSummary | None = None
    duration_s: Seconds | None = None
    #: A multi-rank run (``probe --distributed``, gpuscope.probing.cluster), and the margin that
    #: flags a straggler (a fraction below the median); its ``stragglers`` list is derived detail.
    distributed: Distributed | None = None
    straggler_margin: Finite | None = None
