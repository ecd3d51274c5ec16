"""The report's tables as plain text cells, shared by the HTML and Markdown renderers (so both
show the same numbers). Cells are unescaped display text; each renderer escapes them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gpuscope.report.fmt import clean_text, fmt_number, fmt_percent, fmt_quantity, fmt_seconds, fmt_time_utc
from gpuscope.report.model import FLEET_HOSTS, hosts_text, run_in_log, threshold_text
from gpuscope.report.telemetry_only import telemetry_only_tables
from gpuscope.roofline.model import is_above_datasheet
from gpuscope.schema.report import CeilingRow, MeasurementRow, Report, SystemSummary, WorkloadRow

__all__ = ["Table", "report_tables", "system_table", "stragglers_table"]


@dataclass
class Table:
    """``flags[i]`` marks row i: ``"low"`` (below spec, failed), ``"straggler"`` (a rank more
    than the margin below the median of a multi-rank run) or ``""``."""

    id: str
    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    note: str = ""
    numeric: set[int] = field(default_factory=set)  # right-aligned columns
    empty: str = ""  # what an empty table says instead of "No <title>."

    def add(self, cells: Sequence[object], flag: str = "") -> None:
        self.rows.append([clean_text(cell) for cell in cells])
        self.flags.append(flag)


Row = CeilingRow | WorkloadRow | MeasurementRow


def _where(row: Row, show_source: bool, show_host: bool) -> list[object]:
    cells: list[object] = []
    if show_source:
        cells.append(row.source)
    if show_host:
        cells.append(f"{row.host or '–'}" + (f" r{row.rank}" if row.rank is not None else ""))
    return cells


def _scope(report: Report) -> tuple[bool, bool]:
    """Whether the tables need a Source column (several results files) and a Host column
    (several hosts, or several ranks)."""
    sources = {s.label for s in report.sources or [] if s.kind == "results"}
    items: list[Row] = [*report.ceilings, *report.workloads, *report.measurements]
    places = {(item.host, item.rank) for item in items}
    hosts = {item.host for item in items} | {s.host for s in report.systems}
    return len(sources) > 1, len(places) > 1 or len(hosts) > 1


def system_table(report: Report) -> Table:
    """One column per host (per results file): CPU, cores, GPUs and software versions. With more
    than :data:`~gpuscope.report.model.FLEET_HOSTS` hosts, the hosts whose columns read alike
    share one column, headed by their count."""
    systems = report.systems
    headers = ["", *[f"{s.host or 'unknown host'}" + (f" ({s.source})" if len(systems) > 1 else "") for s in systems]]

    def gpus(system: SystemSummary) -> str:
        items = system.gpus or []
        if not items:
            return "none"
        devices: dict[str, list[str]] = {}
        for gpu in items:
            devices.setdefault(str(gpu.name or "unknown GPU"), []).append(str(gpu.device))
        return "; ".join(f"{len(devs)}× {name} ({', '.join(devs)})" for name, devs in devices.items())

    rows: list[tuple[str, Callable[[SystemSummary], object]]] = [
        ("CPU", lambda s: s.cpu_model),
        ("Cores (logical / physical)", lambda s: f"{s.logical_cores or '–'} / {s.physical_cores or '–'}"),
        ("GPUs", gpus),
        ("Driver", lambda s: s.driver),
        ("CUDA", lambda s: s.cuda),
        ("torch", lambda s: s.torch),
        ("BLAS", lambda s: s.blas),
        ("OS", lambda s: s.os),
        ("Python", lambda s: s.python),
    ]
    columns = [[getter(s) for _, getter in rows] for s in systems]
    if len(systems) > FLEET_HOSTS:  # a fleet: the hosts whose columns read alike share one
        hosts_of: dict[tuple[str, ...], tuple[list[object], list[str]]] = {}
        for header, column in zip(headers[1:], columns):
            hosts_of.setdefault(tuple(clean_text(cell) for cell in column), (column, []))[1].append(header)
        headers = ["", *(hosts_text(hosts) for _, hosts in hosts_of.values())]
        columns = [column for column, _ in hosts_of.values()]
    table = Table("system", "System", headers)
    for number, (label, _) in enumerate(rows):
        table.add([label, *(column[number] for column in columns)])
    return table


def stragglers_table(report: Report) -> Table:
    """One row per straggler ceiling of a multi-rank run (empty for other reports)."""
    margin = report.straggler_margin
    rule = f"more than {margin * 100:.0f}% below" if margin is not None else "below"
    items = report.stragglers or []
    sources = {item.source for item in items}
    headers = ["Host", "Rank", "Device", "Hardware", "Kind", "Ceiling", "Value", "Median", "% below median"]
    table = Table(
        "stragglers",
        "Stragglers",
        [*(["Source"] if len(sources) > 1 else []), *headers],
        note=f"Ranks whose ceiling is {rule} the median of the same ceiling on the same hardware across ranks, "
        "as flagged by `gpuscope probe --distributed`.",
    )
    first = 1 if len(sources) > 1 else 0
    table.numeric = {first + i for i in (1, 6, 7, 8)}
    for item in items:
        unit = str(item.unit or "")
        table.add(
            [
                *([item.source] if len(sources) > 1 else []),
                item.host or "–",
                item.rank if item.rank is not None else "–",
                item.device,
                item.device_name,
                item.kind,
                item.name,
                fmt_quantity(item.value, unit),
                fmt_quantity(item.median, unit),
                fmt_percent(item.below_median_percent),
            ],
            "straggler",
        )
    return table


def _ceiling_flag(c: CeilingRow) -> str:
    """The Flag cell of a ceiling: ``LOW``, ``STRAGGLER -20%``, both, or empty."""
    words = ["LOW"] if c.low else []
    if is_above_datasheet(c.percent_of_spec):
        words.append("ABOVE DATASHEET")
    if c.out_of_order:
        words.append("OUT OF ORDER")
    if c.straggler:
        below = c.below_median_percent
        words.append("STRAGGLER" + (f" -{below:.0f}%" if below is not None else ""))
    return " · ".join(words)


def report_tables(report: Report) -> list[Table]:
    """Every table of the report, in the order both formats show them (the stragglers of a
    multi-rank run first, right below the summary)."""
    show_source, show_host = _scope(report)
    where = (["Source"] if show_source else []) + (["Host"] if show_host else [])
    tables = [system_table(report)]
    stragglers = stragglers_table(report)
    if stragglers.rows:
        tables.insert(0, stragglers)

    ceilings = Table(
        "ceilings",
        "Ceilings: measured vs datasheet",
        [*where, "Device", "Hardware", "Kind", "Ceiling", "Measured", "Datasheet", "% of spec", "N", "Spread", "Flag"],
        note=f"LOW: {threshold_text(report).replace('flagged ', '')} of the datasheet (dense figures). "
        "Spread: how far the median timed sample was from the best (best-of-N statistic)."
        + (
            " STRAGGLER: below the median of the same ceiling across ranks (see Stragglers)." if stragglers.rows else ""
        ),
    )
    ceilings.numeric = {len(where) + i for i in (4, 5, 6, 7, 8)}
    for c in report.ceilings:
        ceilings.add(
            [
                *_where(c, show_source, show_host),
                c.device,
                c.device_name,
                c.kind,
                c.name,
                fmt_quantity(c.value, str(c.unit or "")),
                fmt_quantity(c.datasheet_value, str(c.unit or "")),
                fmt_percent(c.percent_of_spec),
                c.n if c.n is not None else "–",
                fmt_percent(c.spread_percent),
                _ceiling_flag(c),
            ],
            "low" if c.low else ("straggler" if c.straggler else ""),
        )
    tables.append(ceilings)

    datasheet = Table(
        "datasheet",
        "Datasheet roofs without a measurement",
        ["Device", "Hardware", "Kind", "Roof", "Datasheet", "Note"],
        note="Vendor figures (dense) for what was not measured; "
        "the chart draws the datasheet roofs that a measurement or a workload uses.",
    )
    datasheet.numeric = {4}
    grouped: dict[tuple[object, ...], list[str]] = {}
    for roof in report.roofline.roofs or []:
        if roof.origin != "datasheet" or roof.chart:
            continue
        key = (roof.host, roof.rank, roof.device_name, roof.kind, roof.name, roof.value, roof.unit, roof.note)
        grouped.setdefault(key, []).append(str(roof.device))
    for (_, _, hardware, kind, name, value, unit, note), devices in grouped.items():
        datasheet.add([", ".join(devices), hardware, kind, name, fmt_quantity(value, str(unit or "")), note or ""])
    if datasheet.rows:
        tables.append(datasheet)

    headers = [
        *where,
        "Workload",
        "Device",
        "Intensity (FLOP/B)",
        "Time",
        "FLOP/s",
        "B/s",
        "Bound",
        "Roof",
        "Attainable",
        "Efficiency",
        "Flag",
    ]
    workloads = Table(
        "workloads",
        "Workloads",
        headers,
        note="Efficiency is achieved FLOP/s against the roof that bounds the workload at its intensity.",
    )
    workloads.numeric = {len(where) + i for i in (2, 3, 4, 5, 8, 9)}
    for w in report.workloads:
        spread = w.spread_percent
        time_text = fmt_seconds(w.time_s) + (f" ±{fmt_percent(spread)}" if spread is not None else "")
        workloads.add(
            [
                *_where(w, show_source, show_host),
                w.name,
                w.device,
                fmt_number(w.intensity_flop_per_byte),
                time_text,
                fmt_quantity(w.flop_per_s, "FLOP/s"),
                fmt_quantity(w.bytes_per_s, "B/s"),
                w.bound or "–",
                w.roof or "–",
                fmt_quantity(w.attainable_flop_per_s, "FLOP/s"),
                fmt_percent(w.efficiency_percent),
                "ABOVE ROOF" if w.above_roof else "",
            ],
            "low" if w.above_roof else "",
        )
    tables.append(workloads)

    telemetry = report.telemetry
    start = telemetry.start if telemetry else None
    headers = [
        "#",
        *where,
        "Measurement",
        "Kind",
        "Device",
        "Status",
        "Start" if start is None else "Start (s into log)",
        "Duration",
        "Result",
        "Error",
    ]
    marked = [m for m in report.measurements if run_in_log(m, telemetry) is not None]
    if not telemetry:
        runs_note = ""
    elif len(marked) == len(report.measurements):
        runs_note = "Each run is marked on the telemetry charts by its number."
    elif marked:
        runs_note = "Each run inside the log is marked on the telemetry charts by its number; the others are not."
    else:
        runs_note = "No run falls inside the telemetry log, so none is marked on its charts."
    runs = Table("runs", "Probe runs", headers, note=runs_note)
    for number, m in enumerate(report.measurements, start=1):
        start_text = "–" if m.start is None else fmt_time_utc(m.start) if start is None else f"{m.start - start:.1f}"
        if telemetry and m.start is not None and run_in_log(m, telemetry) is None:
            start_text += " (outside the log)"
        duration = (m.end - m.start) if (m.start is not None and m.end is not None) else None
        rates = (
            fmt_quantity(m.flop_per_s, "FLOP/s") if m.flop_per_s else "",
            fmt_quantity(m.bytes_per_s, "B/s") if m.bytes_per_s else "",
        )
        bad = m.status not in (None, "ok", "passed", "success", "skipped")
        runs.add(
            [
                number,
                *_where(m, show_source, show_host),
                m.name,
                m.kind,
                m.device,
                m.status,
                start_text,
                fmt_seconds(duration),
                ", ".join(text for text in rates if text) or "–",
                m.error or "",
            ],
            "low" if bad else "",
        )
    if runs.rows:
        tables.append(runs)

    if telemetry:
        stats = Table(
            "telemetry", "Telemetry per metric", ["Subject", "Metric", "Unit", "Mean", "p50", "p95", "Max", "Samples"]
        )
        stats.numeric = {3, 4, 5, 6, 7}
        for s in telemetry.stats or []:
            stats.add([s.subject, s.label, s.unit, *map(fmt_number, (s.mean, s.p50, s.p95, s.max)), s.n])
        tables.append(stats)
        energy = Table(
            "energy",
            "GPU energy (telemetry)",
            ["GPU", "Energy", "Method", "Over", "Mean power"],
            note="From the GPU's cumulative energy counter where it is available, else power integrated over time.",
        )
        energy.numeric = {1, 3, 4}
        for e in telemetry.energy or []:
            energy.add(
                [
                    e.subject,
                    fmt_quantity(e.energy_j, "J"),
                    e.method or "not available",
                    fmt_seconds(e.duration_s),
                    fmt_quantity(e.mean_power_w, "W"),
                ]
            )
        if energy.rows:
            tables.append(energy)
        missing = Table("unavailable", "Metrics not available", ["Subject", "Metric", "Why"])
        for u in telemetry.unavailable or []:
            missing.add([u.subject, u.label, u.reason])
        if telemetry.gpu_unavailable:
            missing.add(["GPUs", "all GPU metrics", telemetry.gpu_unavailable])
        if missing.rows:
            tables.append(missing)
        processes = Table(
            "processes", "GPU processes seen", ["GPU", "PID", "Process", "User", "Max GPU memory", "Max SM %"]
        )
        processes.numeric = {1, 4, 5}
        for p in telemetry.processes or []:
            processes.add(
                [
                    p.subject,
                    p.pid,
                    p.name,
                    p.user,
                    fmt_quantity(p.max_gpu_memory_bytes, "B"),
                    fmt_percent(p.max_sm_percent),
                ]
            )
        if processes.rows:
            tables.append(processes)
        if telemetry.throttling is not None:
            throttling = Table(
                "throttling",
                "Clock throttling",
                ["GPU", "Reason", "Samples", "Of the log", "First", "Last"],
                note="Seconds from the log's start; share of the samples that read the GPU's throttle reasons.",
            )
            throttling.numeric = {2, 3, 4, 5}
            for t in telemetry.throttling:
                share = 100 * float(t.samples or 0) / float(t.of_samples) if t.of_samples else None
                throttling.add([t.subject, t.reason, t.samples, fmt_percent(share),
                                fmt_seconds(t.first_s), fmt_seconds(t.last_s)])  # fmt: skip
            if not throttling.rows:
                throttling.empty = "No GPU clock was held back in the log (or no GPU gave its throttle reasons)."
            tables.append(throttling)
        if telemetry.alerts is not None:
            alerts = Table(
                "alerts",
                "Alerts",
                ["Level", "Alert", "Subject", "Samples", "First", "Last", "Last message"],
                note="Thresholds the log's records crossed (docs/tui.md); seconds from the log's start.",
            )
            alerts.numeric = {3, 4, 5}
            for a in telemetry.alerts:
                alerts.add([a.level, a.kind, a.subject, a.samples, fmt_seconds(a.first_s), fmt_seconds(a.last_s),
                            a.message], "low" if a.level == "critical" else "")  # fmt: skip
            if not alerts.rows:
                alerts.empty = "No alert threshold was crossed in the log."
            tables.append(alerts)
    return telemetry_only_tables(report, tables)  # a log alone: its tables only
