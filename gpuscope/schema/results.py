"""The results file (``gpuscope.results``, version 1) as declared types; see docs/results-schema.md.

Written by ``gpuscope probe``, ``measure`` and ``profile`` (which build these types); read by
``roofline``, ``report``, ``compare``, ``replay`` and the TUI. Every field a gpuscope writer puts
in a file is declared with its type and range; detail fields nobody interprets (``parameters``,
``versions``, telemetry snapshots) are :data:`~gpuscope.schema.core.Detail` (any JSON up to 6
levels deep): shown as text, never computed with. Undeclared fields are allowed when reading (the
rules in :mod:`gpuscope.schema.core`). Entries leave out fields that are null (absent = null).

Versions: adding an optional field keeps ``schema_version`` 1 (every version-1 file still reads, and
an older reader ignores the new field); a change that an older reader would misread bumps it.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from gpuscope.schema.core import (
    MIN_MAGNITUDE,
    Count,
    Detail,
    Magnitude,
    NonEmpty,
    NonNegative,
    Real,
    Seconds,
    Timestamp,
)
from gpuscope.schema.sweeps import Sweep
from gpuscope.telemetry.topology import Topology

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
    "CacheLevel",
    "DramCheck",
    "RankInfo",
    "Straggler",
    "Contention",
    "CONTENTION_MARKERS",
    "contention_notes",
    "Results",
]

RESULTS_SCHEMA = "gpuscope.results"
RESULTS_SCHEMA_VERSION = 1
CEILING_KINDS = ("compute", "memory", "transfer", "collective")
CEILING_UNITS = ("FLOP/s", "B/s")

CeilingKind = Literal["compute", "memory", "transfer", "collective"]
CeilingUnit = Literal["FLOP/s", "B/s"]
Rank = Count


class _Placed(msgspec.Struct, kw_only=True, omit_defaults=True):
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
    #: joules per RAPL domain (``package-0``...) or NVML counter over the window
    energy_domains_j: dict[str, NonNegative | None] | None = None
    flop_per_j: NonNegative | None = None


class _Rated(_Measured, kw_only=True):
    """The timing statistics and rates of one call (a measurement's, a workload's)."""

    n: Count | None = None
    statistic: str | None = None  # "best", "median", "mean of profiled steps"
    samples_s: list[Real] | None = None
    time_p10_s: Seconds | None = None
    time_p90_s: Seconds | None = None
    flop_per_s: NonNegative | None = None
    bytes_per_s: NonNegative | None = None
    intensity_flop_per_byte: NonNegative | None = None


class SuiteRef(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The suite a run used."""

    name: str | None = None
    path: str | None = None
    description: str | None = None


class System(msgspec.Struct, kw_only=True, omit_defaults=True):
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
    argv: list[str] | str | None = None  # a list of strings, or "[redacted]" in a redacted report


class CacheLevel(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One CPU cache level of a device entry (gpuscope.telemetry.cpuinfo)."""

    level: Count | None = None
    kind: str | None = None  # "Data", "Instruction", "Unified"
    size_bytes: NonNegative | None = None  # one instance
    instances: Count | None = None


class Device(_Placed, kw_only=True):
    """One probed device (``devices[]``): a CPU's cores and caches, a GPU's SMs and L2."""

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
    #: bf16 where the ISA has it (AVX512_BF16 dot products, AMX tiles); the clock the datasheet
    #: peaks use (MHz) and where it came from ("measured clock", "cpufreq max", "cpuinfo", ...),
    #: and the rule as one line (gpuscope.roofline.datasheet.CpuDatasheet)
    datasheet_peak_bf16_flop_per_s: NonNegative | None = None
    datasheet_clock_mhz: NonNegative | None = None
    datasheet_clock_source: str | None = None
    datasheet_rule: str | None = None
    #: A multi-rank run's rank on its host (torchrun's LOCAL_RANK).
    local_rank: Rank | None = None
    logical_cores: Count | None = None
    physical_cores: Count | None = None
    simd: Detail = None
    caches: list[CacheLevel] | None = None
    last_level_cache_bytes: NonNegative | None = None
    multiprocessors: Count | None = None
    compute_capability: str | None = None  # "9.0"
    l2_cache_bytes: NonNegative | None = None


class Ceiling(_Measured, kw_only=True):
    """One roof: the best ok measurement of ``name`` on ``device``, in ``unit``."""

    device: NonEmpty
    kind: CeilingKind
    name: NonEmpty
    value: Magnitude
    unit: CeilingUnit
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
    #: A multi-rank collective's group (``probe --distributed``).
    group_ranks: list[Rank] | None = None
    group_hosts: list[str] | None = None
    #: A ceiling that is not a roof (failed, skipped): named by its status and left out.
    status: str | None = None
    #: The median of this ceiling across the ranks of a multi-rank run, and this one's fraction of it.
    median_value: Real | None = None
    fraction_of_median: Real | None = None
    #: A memory ceiling slower than a level farther from the core (gpuscope.roofline.hierarchy):
    #: the flag text; such a ceiling is not drawn as a roof.
    out_of_order: str | None = None


class DramCheck(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A GPU memory measurement checked against the GPU's own DRAM counter (gpuscope.probing.memory):
    ``l2``: DRAM traffic near zero; ``dram``: the two rates agree. ``ok`` null: not checkable."""

    level: str | None = None
    probe_bytes_per_s: NonNegative | None = None
    reported_dram_bytes_per_s: NonNegative | None = None
    ratio: Real | None = None
    ok: bool | None = None
    near_zero: bool | None = None
    rule: str | None = None
    reason: str | None = None


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
    time_s: Seconds | None = None
    time_min_s: Seconds | None = None
    time_median_s: Seconds | None = None
    time_max_s: Seconds | None = None
    spread: Real | None = None
    #: A collective's bus and algorithm bandwidth (nccl-tests' busbw and algbw).
    busbw_bytes_per_s: NonNegative | None = None
    algbw_bytes_per_s: NonNegative | None = None
    #: busbw / algbw: 2(n-1)/n for all-reduce, (n-1)/n for all-gather and reduce-scatter.
    bus_factor: NonNegative | None = None
    group_hosts: list[str] | None = None
    #: What the GPU's DRAM counter said during the measurement (mean B/s), next to ``bytes_per_s``.
    reported_dram_bytes_per_s: NonNegative | None = None
    dram_check: DramCheck | None = None
    validation_error: Real | None = None
    validation_tolerance: Real | None = None
    start: Timestamp | None = None
    end: Timestamp | None = None
    library: str | None = None
    implementation: str | None = None
    level: str | None = None
    workload_name: str | None = None
    ceiling_name: str | None = None
    host_contention_percent: Real | None = None
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
    # --- ``gpuscope measure`` and ``gpuscope profile`` points: how they were counted and timed
    device_name: str | None = None
    created: Timestamp | None = None
    read_bytes: NonNegative | None = None
    written_bytes: NonNegative | None = None
    flop_counting_rule: str | None = None
    #: FLOPs per element of the pointwise ops counted (gpuscope.measuring.counting.POINTWISE_RULE).
    pointwise_rule: str | None = None
    flops_by_dtype: dict[str, NonNegative] | None = None
    uncounted_ops: dict[str, Count] | None = None  # op -> calls, ops with no FLOP formula
    #: ``gpuscope measure``: which call (1 = the first) FLOPs and bytes were counted on (a warm one).
    counted_call: Count | None = None
    reps_per_sample: Count | None = None
    timer: str | None = None
    timer_resolution_s: Seconds | None = None
    warmup_samples: Count | None = None
    dram_bytes_unavailable: str | None = None
    dram_intensity_flop_per_byte: NonNegative | None = None
    notes: list[str] | None = None

    def __post_init__(self) -> None:
        # 0 or a magnitude: a denormal count or time would turn rates and intensities into inf.
        for field in ("flops", "bytes", "time_s"):
            if 0 < getattr(self, field) < MIN_MAGNITUDE:
                raise ValueError(f"field `{field}` must be 0 or at least {MIN_MAGNITUDE:g}")


class RankInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One rank of a multi-rank run and what became of it."""

    rank: Rank
    host: str | None = None
    local_rank: Rank | None = None
    device: str | None = None
    status: str | None = None  # "ok", "partial", "missing"
    reason: str | None = None
    measurements: Count | None = None
    duration_s: Seconds | None = None
    system: System | None = None


class Straggler(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A rank's ceiling more than ``straggler_margin`` below the median of its peers."""

    host: str | None = None
    rank: Rank | None = None
    device: str | None = None
    device_name: str | None = None
    kind: str | None = None
    name: str | None = None
    unit: str | None = None
    value: Real | None = None
    median: Real | None = None
    fraction_of_median: Real | None = None
    below_median_percent: Real | None = None


class Distributed(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A multi-rank run's ranks and hosts (``distributed``)."""

    world_size: Count | None = None
    nnodes: Count | None = None
    hosts: list[str] | None = None
    collective_backend: str | None = None
    missing_ranks: list[Rank] | None = None
    ranks: list[RankInfo] | None = None


class RunSummary(msgspec.Struct, kw_only=True):
    """Measurements by status."""

    ok: Count = 0
    failed: Count = 0
    skipped: Count = 0


class Contention(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What other processes took while a CPU probe ran (``contention``): the numbers may be low.
    ``notes`` are the one-line texts every report, compare and chart made from the file repeats."""

    cpu_busy_percent_before: Real | None = None  # psutil, over 0.2 s before the first measurement
    threshold_percent: Real | None = None  # a measurement above it counts as contended
    contended_measurements: Count | None = None
    max_percent: Real | None = None  # the most contended measurement's host_contention_percent
    notes: list[str] = msgspec.field(default_factory=list)


#: Words of the contention warnings gpuscope writes (files from before ``contention`` existed
#: carry them in ``warnings`` only).
CONTENTION_MARKERS = ("busy before the run", "while other processes used", "under contention", "other process(es) use")


class Results(msgspec.Struct, kw_only=True):
    """A whole results file."""

    schema: Literal["gpuscope.results"]
    schema_version: Literal[1]
    gpuscope_version: str | None = None
    created: Timestamp | None = None
    partial: bool = False
    partial_reason: str | None = None
    suite: SuiteRef | None = None
    settings: Detail = None
    device: str | None = None
    memory_fraction: Real | None = None
    system: System = msgspec.field(default_factory=System)
    devices: list[Device] = msgspec.field(default_factory=list)
    ceilings: list[Ceiling] = msgspec.field(default_factory=list)
    measurements: list[Measurement] = msgspec.field(default_factory=list)
    workloads: list[Workload] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)
    #: Contention during the run (also among ``warnings``); null: none seen, or an older file.
    contention: Contention | None = None
    telemetry: Detail = None
    summary: RunSummary | None = None
    duration_s: Seconds | None = None
    #: A multi-rank run (``probe --distributed``, gpuscope.probing.cluster), the margin that
    #: flags a straggler (a fraction below the median), and the ceilings it flagged.
    distributed: Distributed | None = None
    straggler_margin: Real | None = None
    stragglers: list[Straggler] | None = None
    #: Working-set sweeps (``working_sets = "sweep"``): bandwidth against working set per kernel
    #: and the levels its plateaus show (gpuscope.roofline.sweep).
    sweeps: list[Sweep] | None = None
    #: How GPUs, CPUs, NUMA nodes and NICs were wired when the run started (``gpuscope topo
    #: --json``'s record, gpuscope.telemetry.topology); null: not read, or an older file.
    topology: Topology | None = None


def contention_notes(results: Results) -> list[str]:
    """The contention warnings of a results file: ``contention.notes``, else (an older file) the
    ``warnings`` that name contention (:data:`CONTENTION_MARKERS`)."""
    if results.contention is not None and results.contention.notes:
        return list(results.contention.notes)
    return [text for text in results.warnings if any(marker in text for marker in CONTENTION_MARKERS)]
