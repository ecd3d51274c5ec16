"""The report document (``gpuscope.report``, version 1) as declared types; docs/report-schema.md.

``gpuscope report`` writes it; ``report --from`` / ``--probes report.json`` and ``compare`` read it
back, checked in full here so the renderers can trust every field they read. Embedded results
documents (``results[].document``) are checked as :class:`~gpuscope.schema.results.Results`.

Field kinds: *text* (:data:`Scalar`: a JSON scalar shown as text and usable as a key), *detail*
(``Any``: copied from a results file, shown with ``str()``), *number* (:data:`Number`: null or a
finite number of magnitude up to 1e100), timestamps and durations (:data:`Timestamp`,
:data:`ElapsedS`: the ranges of the logs and results they come from), chart values (the results
files' own range, so every chart limit computed from them stays finite).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec

from gpuscope.schema.core import ElapsedS, Magnitude, Timestamp
from gpuscope.schema.results import Results

__all__ = ["REPORT_SCHEMA", "REPORT_SCHEMA_VERSION", "MAX_PANELS", "MAX_POINTS_PER_LINE", "LineStyle", "Report"]

REPORT_SCHEMA: Final = "gpuscope.report"
REPORT_SCHEMA_VERSION: Final = 1
#: Telemetry chart limits: panels per chart, points per line (the writer keeps at most 1200).
MAX_PANELS = 64
MAX_POINTS_PER_LINE = 1200
#: Line styles a telemetry chart line may name (matplotlib's).
LineStyle = Literal["-", "--", ":", "-.", "solid", "dashed", "dotted", "dashdot"]

#: A JSON scalar shown as text.
Scalar = str | int | float | bool | None
#: Report numbers: products and quotients of a few results numbers.
Number = Annotated[float, msgspec.Meta(ge=-1e100, le=1e100)] | None
ChartValue = Annotated[float, msgspec.Meta(ge=-1e30, le=1e30)]
Host = str | None
Rank = int | None


class _Where(msgspec.Struct, kw_only=True):
    """Where a row was measured: the results file, host and rank, device."""

    source: Scalar = None
    host: Host = None
    rank: Rank = None
    device: Scalar = None
    device_type: Scalar = None
    device_name: Scalar = None


class _Quantity(_Where, kw_only=True):
    """A named value (a ceiling, a roof) of a kind, in a unit."""

    kind: Scalar = None
    name: Scalar = None
    unit: Scalar = None
    value: Number = None


class _Subject(msgspec.Struct, kw_only=True):
    """A telemetry row's subject: ``key`` (``host``, ``gpu0``) and its display name."""

    key: Scalar = None
    subject: Scalar = None


class _Metric(_Subject, kw_only=True):
    metric: Scalar = None
    label: Scalar = None


class Source(msgspec.Struct, kw_only=True):
    kind: Scalar = None
    label: Scalar = None
    suite: Scalar = None
    gpuscope_version: Scalar = None
    samples: Scalar = None
    created: Timestamp | None = None
    partial: bool | None = None
    partial_reason: Any = None
    #: the results file's own warnings (contention included), or a log's; every output carries them
    warnings: list[Scalar] | None = None
    #: True when the results file says its numbers were measured under contention
    contended: bool | None = None
    #: what simulated the data (a demo or the fake NVML), else None
    simulated: Scalar = None


class GpuSummary(msgspec.Struct, kw_only=True):
    device: Any = None
    name: Any = None
    rank: Any = None
    memory_total_bytes: Any = None
    uuid: Any = None
    pci_bus_id: Any = None


class SystemSummary(msgspec.Struct, kw_only=True):
    source: Scalar = None
    host: Host = None
    cpu_model: Any = None
    logical_cores: Any = None
    physical_cores: Any = None
    os: Any = None
    python: Any = None
    torch: Any = None
    cuda: Any = None
    driver: Any = None
    blas: Any = None
    numpy: Any = None
    gpus: list[GpuSummary] | None = None


class CeilingRow(_Quantity, kw_only=True):
    n: Scalar = None
    datasheet_value: Number = None
    percent_of_spec: Number = None
    spread_percent: Number = None
    median_value: Number = None
    below_median_percent: Number = None
    statistic: Any = None
    low: bool | None = None
    straggler: bool | None = None
    #: a memory ceiling slower than a level farther from the core (gpuscope.roofline.hierarchy)
    out_of_order: str | None = None


class Straggler(_Quantity, kw_only=True):
    median: Number = None
    below_median_percent: Number = None


class WorkloadRow(_Where, kw_only=True):
    name: Scalar = None
    bound: Scalar = None
    roof: Scalar = None
    n: Any = None
    bytes_rule: Any = None
    flops: Number = None
    bytes: Number = None
    time_s: Number = None
    spread_percent: Number = None
    intensity_flop_per_byte: Number = None
    flop_per_s: Number = None
    bytes_per_s: Number = None
    attainable_flop_per_s: Number = None
    efficiency_percent: Number = None
    above_roof: bool | None = None


class MeasurementRow(_Where, kw_only=True):
    id: Any = None
    name: Any = None
    kind: Any = None
    status: Any = None
    statistic: Any = None
    error: Any = None
    n: Any = None
    start: Timestamp | None = None
    end: Timestamp | None = None
    flop_per_s: Number = None
    bytes_per_s: Number = None
    time_s: Number = None


class Roof(_Where, kw_only=True):
    kind: Scalar
    device: Scalar
    value: Magnitude | None
    name: Scalar = None
    unit: Scalar = None
    origin: Scalar = None
    label: Scalar = None
    note: Scalar = None
    level: Scalar = None
    chart: bool | None = None
    main: bool | None = None
    straggler: bool | None = None
    #: The "above datasheet" text when this measured roof is above its datasheet roof, else null.
    above_datasheet: Scalar = None


class Point(_Where, kw_only=True):
    name: Scalar = None
    dtype: Scalar = None
    intensity_basis: Scalar = None
    bound: Scalar = None
    roof: Scalar = None
    note: Scalar = None
    intensity_flop_per_byte: Number = None
    flop_per_s: Number = None
    attainable_flop_per_s: Number = None
    efficiency_percent: Number = None
    above_roof: bool | None = None
    straggler: bool | None = None


class DatasheetRoof(_Quantity, kw_only=True):
    """A datasheet roof of a device."""


class AboveDatasheet(_Quantity, kw_only=True):
    """A measured roof above its datasheet roof (``ratio`` = measured / datasheet)."""

    datasheet_value: Number = None
    ratio: Number = None
    text: Scalar = None


class Roofline(msgspec.Struct, kw_only=True):
    available: bool | None = None
    note: Scalar = None
    notes: list[Scalar] | None = None
    warnings: list[Scalar] | None = None
    roofs: list[Roof] | None = None
    points: list[Point] | None = None
    datasheet: list[DatasheetRoof] | None = None
    above_datasheet: list[AboveDatasheet] | None = None
    #: How the DRAM roof is chosen (gpuscope.roofline.model.DRAM_ROOF_RULE).
    dram_rule: Scalar = None
    #: The roofline model's own JSON (gpuscope.roofline.model_json, schema "gpuscope.roofline"),
    #: read back by gpuscope.roofline.model_json.model_from_json, which checks it field by field.
    model: dict[str, Any] | None = None


class Line(msgspec.Struct, kw_only=True):
    key: Scalar
    label: Scalar
    t: Annotated[list[ElapsedS], msgspec.Meta(max_length=MAX_POINTS_PER_LINE)]  # s since the log's start
    v: Annotated[list[ChartValue | None], msgspec.Meta(max_length=MAX_POINTS_PER_LINE)]
    metric: Scalar = None
    style: LineStyle | None = None

    def __post_init__(self) -> None:
        if len(self.t) != len(self.v):
            raise ValueError(f"{len(self.t)} times (t) but {len(self.v)} values (v)")


class Panel(msgspec.Struct, kw_only=True):
    title: Scalar
    unit: Scalar
    lines: list[Line]
    id: Scalar = None


class GpuKey(msgspec.Struct, kw_only=True):
    key: Scalar
    label: Scalar = None
    index: Scalar = None
    name: Scalar = None
    uuid: Scalar = None


class Stat(_Metric, kw_only=True):
    unit: Scalar = None
    n: Scalar = None
    mean: Number = None
    p50: Number = None
    p95: Number = None
    max: Number = None


class Energy(_Subject, kw_only=True):
    method: Scalar = None
    energy_j: Number = None
    duration_s: ElapsedS | None = None
    mean_power_w: Number = None


class Missing(_Metric, kw_only=True):
    reason: Scalar = None


class ProcessRow(_Subject, kw_only=True):
    pid: Scalar = None
    name: Any = None
    user: Any = None
    kind: Scalar = None
    max_gpu_memory_bytes: Number = None
    max_sm_percent: Number = None
    first_seen: Timestamp | None = None
    last_seen: Timestamp | None = None


class ThrottleRow(_Subject, kw_only=True):
    """One clock-throttle reason of one GPU over the log: in how many of the samples that read the
    GPU's reasons it was active, and when (seconds from the log's start)."""

    reason: Scalar = None
    samples: Scalar = None
    of_samples: Scalar = None
    first_s: ElapsedS | None = None
    last_s: ElapsedS | None = None


class AlertRow(msgspec.Struct, kw_only=True):
    """One alert (level, kind, subject) over the log: the samples that carried it, when (seconds
    from the log's start), and its last message."""

    level: Scalar = None
    kind: Scalar = None
    subject: Scalar = None
    samples: Scalar = None
    first_s: ElapsedS | None = None
    last_s: ElapsedS | None = None
    message: Scalar = None


class Telemetry(msgspec.Struct, kw_only=True):
    source: Scalar = None
    samples: Scalar = None
    gpu_unavailable: Scalar = None
    start: Timestamp | None = None
    end: Timestamp | None = None
    duration_s: ElapsedS | None = None
    interval_s: ElapsedS | None = None
    mean_sample_cost_s: ElapsedS | None = None
    #: Hostnames the log names (``--redact`` replaces them everywhere) and the NVIDIA driver.
    hostnames: list[Scalar] | None = None
    driver: Scalar = None
    #: what scripted the log's GPUs (the records' ``simulated``), else None
    simulated: Scalar = None
    gpus: list[GpuKey] | None = None
    stats: list[Stat] | None = None
    energy: list[Energy] | None = None
    unavailable: list[Missing] | None = None
    panels: Annotated[list[Panel], msgspec.Meta(max_length=MAX_PANELS)] | None = None
    processes: list[ProcessRow] | None = None
    #: per GPU, each throttle reason seen (None: a log written before reports read them)
    throttling: list[ThrottleRow] | None = None
    #: the alerts the log's records carry, worst first
    alerts: list[AlertRow] | None = None


class EmbeddedResults(msgspec.Struct, kw_only=True):
    document: Results
    label: Scalar = None


class Report(msgspec.Struct, kw_only=True):
    """A whole report document."""

    schema: Literal["gpuscope.report"]
    schema_version: Literal[1]
    systems: list[SystemSummary]
    ceilings: list[CeilingRow]
    workloads: list[WorkloadRow]
    measurements: list[MeasurementRow]
    roofline: Roofline
    results: list[EmbeddedResults]
    gpuscope_version: Scalar = None
    title: Scalar = None
    created: Timestamp | None = None
    redacted: bool | None = None
    low_percent_of_spec: dict[str, Annotated[float, msgspec.Meta(ge=-1e100, le=1e100)]] = msgspec.field(
        default_factory=dict
    )
    sources: list[Source] | None = None
    stragglers: list[Straggler] | None = None
    straggler_margin: Number = None
    telemetry: Telemetry | None = None
    summary: list[Scalar] | None = None
    warnings: list[Scalar] | None = None
