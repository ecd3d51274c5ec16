"""The report's tables as plain text cells, shared by the HTML and Markdown renderers (so both
show the same numbers). Cells are unescaped display text; each renderer escapes them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuscope.report.fmt import clean_text, fmt_number, fmt_percent, fmt_quantity, fmt_seconds, fmt_time_utc
from gpuscope.roofline.model import is_above_datasheet

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

    def add(self, cells: list[Any], flag: str = "") -> None:
        self.rows.append([clean_text(cell) for cell in cells])
        self.flags.append(flag)


def _where(row: dict[str, Any], show_source: bool, show_host: bool) -> list[str | None]:
    cells: list[str | None] = []
    if show_source:
        cells.append(row.get("source"))
    if show_host:
        host = row.get("host")
        rank = row.get("rank")
        cells.append(f"{host or '–'}" + (f" r{rank}" if rank is not None else ""))
    return cells


def _scope(report: dict[str, Any]) -> tuple[bool, bool]:
    """Whether the tables need a Source column (several results files) and a Host column
    (several hosts, or several ranks)."""
    sources = {s.get("label") for s in report.get("sources", []) if s.get("kind") == "results"}
    items = report.get("ceilings", []) + report.get("workloads", []) + report.get("measurements", [])
    places = {(item.get("host"), item.get("rank")) for item in items}
    hosts = {item.get("host") for item in items} | {s.get("host") for s in report.get("systems", [])}
    return len(sources) > 1, len(places) > 1 or len(hosts) > 1


def system_table(report: dict[str, Any]) -> Table:
    """One column per host (per results file): CPU, cores, GPUs and software versions."""
    systems = report.get("systems") or []
    headers = [
        "",
        *[
            f"{s.get('host') or 'unknown host'}" + (f" ({s.get('source')})" if len(systems) > 1 else "")
            for s in systems
        ],
    ]
    table = Table("system", "System", headers)

    def gpus(system: dict[str, Any]) -> str:
        items = system.get("gpus") or []
        if not items:
            return "none"
        names: list[str] = []
        for gpu in items:
            name = str(gpu.get("name") or "unknown GPU")
            if name not in names:
                names.append(name)
        devices = {
            name: [str(g.get("device")) for g in items if (g.get("name") or "unknown GPU") == name] for name in names
        }
        return "; ".join(f"{len(devs)}× {name} ({', '.join(devs)})" for name, devs in devices.items())

    rows: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
        ("CPU", lambda s: s.get("cpu_model")),
        ("Cores (logical / physical)", lambda s: f"{s.get('logical_cores') or '–'} / {s.get('physical_cores') or '–'}"),
        ("GPUs", gpus),
        ("Driver", lambda s: s.get("driver")),
        ("CUDA", lambda s: s.get("cuda")),
        ("torch", lambda s: s.get("torch")),
        ("BLAS", lambda s: s.get("blas")),
        ("OS", lambda s: s.get("os")),
        ("Python", lambda s: s.get("python")),
    ]
    for label, getter in rows:
        table.add([label, *[getter(s) for s in systems]])
    return table


def stragglers_table(report: dict[str, Any]) -> Table:
    """One row per straggler ceiling of a multi-rank run (empty for other reports)."""
    margin = report.get("straggler_margin")
    rule = f"more than {margin * 100:.0f}% below" if isinstance(margin, (int, float)) else "below"
    items = [item for item in report.get("stragglers") or [] if isinstance(item, dict)]
    sources = {item.get("source") for item in items}
    table = Table(
        "stragglers",
        "Stragglers",
        [
            *(["Source"] if len(sources) > 1 else []),
            "Host",
            "Rank",
            "Device",
            "Hardware",
            "Kind",
            "Ceiling",
            "Value",
            "Median",
            "% below median",
        ],
        note=f"Ranks whose ceiling is {rule} the median of the same ceiling on the same hardware across ranks, "
        "as flagged by `gpuscope probe --distributed`.",
    )
    first = 1 if len(sources) > 1 else 0
    table.numeric = {first + i for i in (1, 6, 7, 8)}
    for item in items:
        unit = str(item.get("unit") or "")
        table.add(
            [
                *([item.get("source")] if len(sources) > 1 else []),
                item.get("host") or "–",
                item.get("rank") if item.get("rank") is not None else "–",
                item.get("device"),
                item.get("device_name"),
                item.get("kind"),
                item.get("name"),
                fmt_quantity(item.get("value"), unit),
                fmt_quantity(item.get("median"), unit),
                fmt_percent(item.get("below_median_percent")),
            ],
            "straggler",
        )
    return table


def _ceiling_flag(c: dict[str, Any]) -> str:
    """The Flag cell of a ceiling: ``LOW``, ``STRAGGLER -20%``, both, or empty."""
    words = ["LOW"] if c.get("low") else []
    if is_above_datasheet(c.get("percent_of_spec")):
        words.append("ABOVE DATASHEET")
    if c.get("straggler"):
        below = c.get("below_median_percent")
        words.append("STRAGGLER" + (f" -{below:.0f}%" if isinstance(below, (int, float)) else ""))
    return " · ".join(words)


def report_tables(report: dict[str, Any]) -> list[Table]:
    """Every table of the report, in the order both formats show them (the stragglers of a
    multi-rank run first, right below the summary)."""
    show_source, show_host = _scope(report)
    where = (["Source"] if show_source else []) + (["Host"] if show_host else [])
    from gpuscope.report.model import threshold_text

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
    for c in report.get("ceilings") or []:
        ceilings.add(
            [
                *_where(c, show_source, show_host),
                c.get("device"),
                c.get("device_name"),
                c.get("kind"),
                c.get("name"),
                fmt_quantity(c.get("value"), str(c.get("unit") or "")),
                fmt_quantity(c.get("datasheet_value"), str(c.get("unit") or "")),
                fmt_percent(c.get("percent_of_spec")),
                c.get("n") if c.get("n") is not None else "–",
                fmt_percent(c.get("spread_percent")),
                _ceiling_flag(c),
            ],
            "low" if c.get("low") else ("straggler" if c.get("straggler") else ""),
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
    grouped: dict[tuple[Any, ...], list[str]] = {}
    for roof in (report.get("roofline") or {}).get("roofs") or []:
        if roof.get("origin") != "datasheet" or roof.get("chart"):
            continue
        key = (
            roof.get("host"),
            roof.get("rank"),
            roof.get("device_name"),
            roof.get("kind"),
            roof.get("name"),
            roof.get("value"),
            roof.get("unit"),
            roof.get("note"),
        )
        grouped.setdefault(key, []).append(str(roof.get("device")))
    for (_, _, hardware, kind, name, value, unit, note), devices in grouped.items():
        datasheet.add([", ".join(devices), hardware, kind, name, fmt_quantity(value, str(unit or "")), note or ""])
    if datasheet.rows:
        tables.append(datasheet)

    workloads = Table(
        "workloads",
        "Workloads",
        [
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
        ],
        note="Efficiency is achieved FLOP/s against the roof that bounds the workload at its intensity.",
    )
    workloads.numeric = {len(where) + i for i in (2, 3, 4, 5, 8, 9)}
    for w in report.get("workloads") or []:
        spread = w.get("spread_percent")
        time_text = fmt_seconds(w.get("time_s")) + (f" ±{fmt_percent(spread)}" if spread is not None else "")
        workloads.add(
            [
                *_where(w, show_source, show_host),
                w.get("name"),
                w.get("device"),
                fmt_number(w.get("intensity_flop_per_byte")),
                time_text,
                fmt_quantity(w.get("flop_per_s"), "FLOP/s"),
                fmt_quantity(w.get("bytes_per_s"), "B/s"),
                w.get("bound") or "–",
                w.get("roof") or "–",
                fmt_quantity(w.get("attainable_flop_per_s"), "FLOP/s"),
                fmt_percent(w.get("efficiency_percent")),
                "ABOVE ROOF" if w.get("above_roof") else "",
            ],
            "low" if w.get("above_roof") else "",
        )
    tables.append(workloads)

    telemetry = report.get("telemetry") or {}
    start = telemetry.get("start")
    runs = Table(
        "runs",
        "Probe runs",
        [
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
        ],
        note="Each run is marked on the telemetry charts by its number." if telemetry else "",
    )
    for number, m in enumerate(report.get("measurements") or [], start=1):
        if m.get("start") is None:
            start_text = "–"
        elif start is None:
            start_text = fmt_time_utc(m["start"])
        else:
            start_text = f"{m['start'] - start:.1f}"
        duration = (m["end"] - m["start"]) if (m.get("start") is not None and m.get("end") is not None) else None
        result = (
            ", ".join(
                text
                for text in (
                    fmt_quantity(m.get("flop_per_s"), "FLOP/s") if m.get("flop_per_s") else "",
                    fmt_quantity(m.get("bytes_per_s"), "B/s") if m.get("bytes_per_s") else "",
                )
                if text
            )
            or "–"
        )
        bad = m.get("status") not in (None, "ok", "passed", "success", "skipped")
        runs.add(
            [
                number,
                *_where(m, show_source, show_host),
                m.get("name"),
                m.get("kind"),
                m.get("device"),
                m.get("status"),
                start_text,
                fmt_seconds(duration),
                result,
                m.get("error") or "",
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
        for s in telemetry.get("stats") or []:
            stats.add(
                [
                    s.get("subject"),
                    s.get("label"),
                    s.get("unit"),
                    fmt_number(s.get("mean")),
                    fmt_number(s.get("p50")),
                    fmt_number(s.get("p95")),
                    fmt_number(s.get("max")),
                    s.get("n"),
                ]
            )
        tables.append(stats)
        energy = Table(
            "energy",
            "Energy",
            ["GPU", "Energy", "Method", "Over", "Mean power"],
            note="From the GPU's cumulative energy counter where it is available, else power integrated over time.",
        )
        energy.numeric = {1, 3, 4}
        for e in telemetry.get("energy") or []:
            energy.add(
                [
                    e.get("subject"),
                    fmt_quantity(e.get("energy_j"), "J"),
                    e.get("method") or "not available",
                    fmt_seconds(e.get("duration_s")),
                    fmt_quantity(e.get("mean_power_w"), "W"),
                ]
            )
        if energy.rows:
            tables.append(energy)
        missing = Table("unavailable", "Metrics not available", ["Subject", "Metric", "Why"])
        for u in telemetry.get("unavailable") or []:
            missing.add([u.get("subject"), u.get("label"), u.get("reason")])
        if telemetry.get("gpu_unavailable"):
            missing.add(["GPUs", "all GPU metrics", telemetry["gpu_unavailable"]])
        if missing.rows:
            tables.append(missing)
        processes = Table(
            "processes", "GPU processes seen", ["GPU", "PID", "Process", "User", "Max GPU memory", "Max SM %"]
        )
        processes.numeric = {1, 4, 5}
        for p in telemetry.get("processes") or []:
            processes.add(
                [
                    p.get("subject"),
                    p.get("pid"),
                    p.get("name"),
                    p.get("user"),
                    fmt_quantity(p.get("max_gpu_memory_bytes"), "B"),
                    fmt_percent(p.get("max_sm_percent")),
                ]
            )
        if processes.rows:
            tables.append(processes)
    return tables
