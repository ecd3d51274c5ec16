"""The report data model: typed results files plus an optional telemetry section, reduced to the
typed :class:`~gpuscope.schema.report.Report` (``"schema": "gpuscope.report"``, version 1) from
which every format is rendered.

The report holds everything the renderers draw (so ``report.json`` re-renders the same HTML
byte for byte) and, under ``results``, the input results documents themselves. It never holds
the time it was generated: ``created`` is the newest ``created`` of its inputs.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import msgspec

from gpuscope.report.fmt import clean_text, fmt_percent, fmt_quantity, fmt_seconds, fmt_time_utc
from gpuscope.report.io import REPORT_SCHEMA, REPORT_SCHEMA_VERSION, ResultsInput
from gpuscope.report.roofview import DatasheetIndex, DeviceFacts, device_type, roofline_view
from gpuscope.roofline.loading import out_of_order_ceilings
from gpuscope.roofline.model import is_above_datasheet
from gpuscope.roofline.stragglers import below_median_percent, below_text
from gpuscope.schema.core import JsonObject, Scalar, finite_or_none
from gpuscope.schema.report import (
    CeilingRow,
    EmbeddedResults,
    GpuSummary,
    MeasurementRow,
    Point,
    Report,
    Roofline,
    Source,
    Straggler,
    SystemSummary,
    Telemetry,
    WorkloadRow,
)
from gpuscope.schema.results import Ceiling, Device, Measurement, Results, System, Workload, contention_notes
from gpuscope.version import __version__

__all__ = [
    "build_report",
    "LOW_PERCENT_OF_SPEC",
    "measurement_span",
    "ceiling_spread_percent",
    "workload_spread_percent",
    "placement_of",
    "run_in_log",
    "log_overlap_warning",
    "FLEET_HOSTS",
    "hosts_text",
]

T = TypeVar("T")


def _distinct(values: Iterable[T]) -> list[T]:
    """``values`` without repeats, in first-seen order."""
    return list(dict.fromkeys(values))


#: A measured ceiling below this percent of its datasheet value is flagged, per ceiling kind.
#: Healthy machines reach about 80% of dense tensor-core peak (bf16 GEMM on H100/H200), 87-92% of
#: HBM bandwidth and 55-85% of PCIe each way (ANCHORS section 5), so lower is worth a look.
LOW_PERCENT_OF_SPEC: dict[str, float] = {"compute": 70.0, "memory": 80.0, "transfer": 60.0, "collective": 60.0}

Place = tuple[str | None, int | None]

#: More hosts than this (a multi-node run): hosts that read alike share one summary line and one
#: System column, and the title counts the hosts instead of naming each.
FLEET_HOSTS = 8


def measurement_span(measurement: Measurement) -> tuple[float | None, float | None]:
    """Wall-clock start and end (epoch seconds) of a measurement, or ``(None, None)``: its own
    ``start``/``end``, else the timestamps of its telemetry before and after."""
    spans = [(measurement.start, measurement.end)]
    before, after = measurement.telemetry_before, measurement.telemetry_after
    if isinstance(before, dict) and isinstance(after, dict):
        spans.append((finite_or_none(before.get("timestamp")), finite_or_none(after.get("timestamp"))))
    for start, end in spans:
        if start is not None and end is not None and end >= start:
            return start, end
    return None, None


def run_in_log(run: MeasurementRow, telemetry: Telemetry | None) -> tuple[float, float] | None:
    """``(start, end)`` of ``run`` in seconds into the log when the run overlaps the log's time
    span (clipped to it), else None: what the telemetry chart marks and the runs table calls
    "in the log". The one overlap rule of every output."""
    if telemetry is None or run.start is None or run.end is None or telemetry.start is None:
        return None
    duration = float(telemetry.duration_s or 0.0)
    a, b = run.start - telemetry.start, run.end - telemetry.start
    if b < 0 or a > duration:
        return None
    return max(a, 0.0), min(b, duration)


def log_overlap_warning(telemetry: Telemetry, runs: Sequence[MeasurementRow]) -> str | None:
    """The warning for a log and probe runs recorded apart: none of the timed runs inside the
    log's span (the log describes another time), or only some of them; None when all overlap."""
    timed = [run for run in runs if run.start is not None and run.end is not None]
    if not timed or telemetry.start is None:
        return None
    inside = [run for run in timed if run_in_log(run, telemetry) is not None]
    if len(inside) == len(timed):
        return None
    first = min(run.start for run in timed if run.start is not None)
    last = max(run.end for run in timed if run.end is not None)
    span = (
        f"the log {telemetry.source} covers {fmt_seconds(telemetry.duration_s)} from {fmt_time_utc(telemetry.start)}; "
        f"the probe runs went from {fmt_time_utc(first)} to {fmt_time_utc(last)}"
    )
    if not inside:
        return f"The telemetry log and the probe runs do not overlap in time ({span}): they were not recorded together, so no run is marked on the telemetry charts."  # noqa: E501
    return f"{len(timed) - len(inside)} of {len(timed)} probe runs fall outside the telemetry log ({span}): only the {len(inside)} inside are marked on the telemetry charts."  # noqa: E501


def ceiling_spread_percent(measurement: Measurement | None) -> tuple[float | None, int | None]:
    """How far the typical timed sample was from the best one, in percent of the best rate
    (``median_time / best_time - 1``), and the number of samples. ``(None, n)`` with < 2 samples."""
    if measurement is None:
        return None, None
    samples = [value for value in measurement.samples_s or [] if value > 0]
    if len(samples) < 2:
        return None, len(samples) or None
    return finite_or_none((statistics.median(samples) / min(samples) - 1.0) * 100.0), len(samples)


def workload_spread_percent(workload: Workload) -> float | None:
    """Half the p10-p90 range of a workload's time, in percent of its median time."""
    p10, p90 = workload.time_p10_s, workload.time_p90_s
    if not workload.time_s or p10 is None or p90 is None or p90 < p10:
        return None
    return (p90 - p10) / 2.0 / workload.time_s * 100.0


def placement_of(doc: Results) -> Callable[[Ceiling | Measurement | Workload], Place]:
    """A function giving the (host, rank) of a ceiling, workload or measurement: its own fields,
    else those of its device in ``devices`` (when the device appears there once), else the
    file's ``system.hostname`` (the rule :mod:`gpuscope.roofline.loading` uses)."""
    default_host = doc.system.hostname or None
    seen: dict[str, set[Place]] = {}
    for entry in doc.devices:
        seen.setdefault(entry.device, set()).add((entry.host or default_host, entry.rank))
    unique = {device: next(iter(places)) for device, places in seen.items() if len(places) == 1}

    def place(item: Ceiling | Measurement | Workload) -> Place:
        host, rank = unique.get(item.device, (default_host, None))
        return item.host or host, item.rank if item.rank is not None else rank

    return place


def median_of(ceiling: Ceiling) -> float | None:
    """The median of the same ceiling across the ranks of a multi-rank run (``median_value``, a
    positive number in the ceiling's unit), or None."""
    median = ceiling.median_value
    return median if median is not None and median > 0 else None


def build_report(
    inputs: Sequence[ResultsInput],
    telemetry: Telemetry | None = None,
    warnings: Iterable[str] = (),
    low_percent_of_spec: dict[str, float] | None = None,
) -> Report:
    """The report of ``inputs`` (label, typed results, the document as written) and an optional
    telemetry section (:func:`gpuscope.report.telemetry.summarize_samples`)."""
    notes: list[str] = list(warnings)
    thresholds = dict(LOW_PERCENT_OF_SPEC if low_percent_of_spec is None else low_percent_of_spec)
    roofline = roofline_view([(item.label, item.results) for item in inputs])
    notes.extend(str(w) for w in roofline.warnings or [])
    datasheet = DatasheetIndex(roofline.datasheet or [])
    systems: list[SystemSummary] = []
    ceilings: list[CeilingRow] = []
    measurements: list[MeasurementRow] = []
    sources: list[Source] = []
    margins: list[float] = []
    for label, doc, _ in inputs:
        contended = contention_notes(doc)
        file_warnings: list[Scalar] = _distinct([*doc.warnings, *contended])
        sources.append(
            Source(kind="results", label=label, created=doc.created, gpuscope_version=doc.gpuscope_version,
                   suite=doc.suite.name if doc.suite else None, partial=doc.partial, partial_reason=doc.partial_reason,
                   warnings=file_warnings or None, contended=bool(contended))
        )  # fmt: skip
        notes.extend(note for w in file_warnings if (note := f"{label}: {w}") not in notes)  # warnings as data
        if doc.partial:
            notes.append(f"{label}: results are partial ({doc.partial_reason or 'no reason given'})")
        margin = doc.straggler_margin
        if margin is not None and 0 < margin < 1 and margin not in margins:
            margins.append(margin)
        systems.extend(_systems(label, doc.system, doc.devices))
        ceilings.extend(_ceilings(label, doc, datasheet, thresholds))
        place = placement_of(doc)
        for measurement in doc.measurements:
            start, end = measurement_span(measurement)
            host, rank = place(measurement)
            measurements.append(
                MeasurementRow(
                    source=label, id=measurement.id, name=measurement.name, kind=measurement.kind,
                    device=measurement.device or None, host=host, rank=rank, status=measurement.status,
                    start=start, end=end, flop_per_s=measurement.flop_per_s, bytes_per_s=measurement.bytes_per_s,
                    time_s=measurement.time_s, statistic=measurement.statistic,
                    n=len(measurement.samples_s or []) or None, error=measurement.error,
                )
            )  # fmt: skip
    if telemetry is not None:
        sources.append(
            Source(kind="log", label=telemetry.source, created=telemetry.start, samples=telemetry.samples,
                   simulated=simulated_log(telemetry))
        )  # fmt: skip
        notes.extend(note for note in [log_overlap_warning(telemetry, measurements)] if note and note not in notes)
    created = [s.created for s in sources if s.kind == "results" and s.created is not None]
    systems = merged_systems(systems)
    hosts = _distinct(s.host for s in systems)
    simulated = next((found for _, _, written in inputs if (found := _simulated(written))), None)
    simulated = simulated or next((str(s.simulated) for s in sources if s.simulated), None)
    report = Report(
        schema=REPORT_SCHEMA,
        schema_version=REPORT_SCHEMA_VERSION,
        gpuscope_version=__version__,
        title=(f"SIMULATED DATA ({simulated}), not real hardware: " if simulated else "")
        + "gpuscope report"
        + (f": {_hosts_title([h for h in hosts if h])}" if any(hosts) else ""),
        created=max(created) if created else (telemetry.start if telemetry else None),
        redacted=False,
        low_percent_of_spec=thresholds,
        sources=sources,
        systems=systems,
        ceilings=ceilings,
        workloads=_workloads(inputs, roofline),
        measurements=measurements,
        straggler_margin=margins[0] if len(margins) == 1 else None,
        stragglers=stragglers_of(ceilings),
        roofline=roofline,
        telemetry=telemetry,
        warnings=list(notes),
        results=[EmbeddedResults(label=item.label, document=item.results) for item in inputs],
    )
    report.summary = list(summary_lines(report))
    return report


def _ceilings(label: str, doc: Results, datasheet: DatasheetIndex, thresholds: dict[str, float]) -> list[CeilingRow]:
    """The report's ceiling rows of one results file."""
    by_id: dict[str | int | None, Measurement] = {m.id: m for m in doc.measurements if m.id is not None}
    place = placement_of(doc)
    facts = DeviceFacts(doc.devices, doc.system)
    disordered = out_of_order_ceilings(doc.ceilings)
    rows = []
    for ceiling in doc.ceilings:
        host, rank = place(ceiling)
        measurement = by_id.get(ceiling.measurement_id)
        spread, count = ceiling_spread_percent(measurement)
        spec = datasheet.value(ceiling.kind, ceiling.name, ceiling.device, host, rank)
        percent = ceiling.value / spec * 100.0 if spec else None
        median = median_of(ceiling)
        rows.append(
            CeilingRow(
                source=label, host=host, rank=rank, device=ceiling.device,
                device_type=facts.type_of(ceiling.device), device_name=facts.name_of(ceiling.device, host),
                kind=ceiling.kind, name=ceiling.name, value=ceiling.value, unit=ceiling.unit,
                datasheet_value=spec, percent_of_spec=percent,
                low=percent is not None and percent < thresholds.get(ceiling.kind, 0.0), n=count,
                statistic=(measurement.statistic if measurement else None) or ceiling.statistic,
                spread_percent=spread, straggler=ceiling.straggler is True, median_value=median,
                below_median_percent=below_median_percent(ceiling.value, median),
                out_of_order=disordered.get((ceiling.device, ceiling.name)),
            )
        )  # fmt: skip
    return rows


def stragglers_of(ceilings: list[CeilingRow]) -> list[Straggler]:
    """The report's ``stragglers``: every ceiling a multi-rank probe run flagged (more than its
    margin below the median of the same ceiling across ranks), slowest first."""
    rows = [
        Straggler(
            source=c.source, host=c.host, rank=c.rank, device=c.device, device_name=c.device_name, kind=c.kind,
            name=c.name, value=c.value, unit=c.unit, median=c.median_value, below_median_percent=c.below_median_percent,
        )
        for c in ceilings
        if c.straggler
    ]  # fmt: skip
    return sorted(rows, key=lambda r: (-(r.below_median_percent or 0.0), str(r.host), -1 if r.rank is None else r.rank))


def _systems(label: str, system: System, devices: list[Device]) -> list[SystemSummary]:
    """One entry per host of a results file (multi-node results have devices on several hosts);
    the ``system`` block describes its ``hostname`` (or the only host)."""
    hosts = _distinct([system.hostname] + [d.host for d in devices if d.host])
    # each host's GPUs, in file order: those on it and those with no host (one pass over the devices)
    on_host: dict[str | None, list[int]] = {}
    for position, d in enumerate(devices):
        if (d.type if d.type in ("cpu", "gpu") else device_type(d.device)) == "gpu":
            on_host.setdefault(d.host if len(hosts) > 1 else None, []).append(position)
    out = []
    for host in hosts:
        mine = sorted({*on_host.get(None, []), *on_host.get(host, [])})
        gpus = [
            GpuSummary(device=d.device, name=d.name, rank=d.rank, memory_total_bytes=d.memory_total_bytes, uuid=d.uuid)
            for d in (devices[position] for position in mine)
        ]
        if host == system.hostname or len(hosts) == 1:
            out.append(
                SystemSummary(
                    source=label, host=host, gpus=gpus, cpu_model=system.cpu_model, logical_cores=system.logical_cores,
                    physical_cores=system.physical_cores, os=system.os, python=system.python, torch=system.torch,
                    cuda=system.cuda, driver=system.driver, blas=system.blas, numpy=system.numpy,
                )
            )  # fmt: skip
        else:
            out.append(SystemSummary(source=label, host=host, gpus=gpus))
    return out


def merged_systems(systems: Sequence[SystemSummary]) -> list[SystemSummary]:
    """One entry per host: the entries of one host from several files joined (sources listed
    together, each field from the first file that has it, GPUs once each), in first-seen order."""
    merged: list[SystemSummary] = []
    for system in systems:
        # one hostname with two CPU models is two machines: kept apart
        same = (m for m in merged if m.host == system.host and _same_cpu(m.cpu_model, system.cpu_model))
        found = next(same, None)
        if found is None:
            merged.append(msgspec.structs.replace(system, gpus=list(system.gpus or [])))
            continue
        if system.source not in str(found.source or "").split(", "):
            found.source = f"{found.source}, {system.source}" if found.source else system.source
        for field in found.__struct_fields__:
            missing = field not in ("source", "host", "gpus") and getattr(found, field) in (None, "")
            if missing and getattr(system, field):
                setattr(found, field, getattr(system, field))
        seen = {(g.uuid or None, g.device, g.rank) for g in found.gpus or []}
        for gpu in system.gpus or []:
            if (gpu.uuid or None, gpu.device, gpu.rank) not in seen:
                (found.gpus or []).append(gpu)
                seen.add((gpu.uuid or None, gpu.device, gpu.rank))
    return merged


def _same_cpu(first: object, second: object) -> bool:
    """True when two system entries may be one machine's: the same CPU model, or one not named."""
    return first is None or second is None or first == second


def _workloads(inputs: Sequence[ResultsInput], roofline: Roofline) -> list[WorkloadRow]:
    """The Workloads table: each workload with the roofline model's own placement of it (bound,
    roof, attainable, efficiency), read and never recomputed. The model places one point per
    workload with a device, in file order (:func:`gpuscope.roofline.loading.build_model`), so
    each file's points are taken in turn; the model's device key (which merges ranks, UUIDs and a
    host's CPU) is never rebuilt here."""
    queues: dict[Scalar, list[Point]] = {}
    for p in roofline.points or []:
        queues.setdefault(p.source, []).append(p)
    rows = []
    for label, doc, _ in inputs:
        place = placement_of(doc)
        facts = DeviceFacts(doc.devices, doc.system)
        queue = queues.get(label, [])
        for workload in doc.workloads:
            host, rank = place(workload)
            point = _next_point(queue, workload) if workload.device else None
            intensity = point.intensity_flop_per_byte if point else workload.intensity_flop_per_byte
            rows.append(
                WorkloadRow(
                    source=label, host=host, rank=rank, name=workload.name, device=workload.device or None,
                    device_type=facts.type_of(workload.device), flops=workload.flops,
                    bytes=workload.bytes, bytes_rule=workload.bytes_rule, time_s=workload.time_s, n=workload.n,
                    spread_percent=workload_spread_percent(workload),
                    intensity_flop_per_byte=intensity,
                    flop_per_s=point.flop_per_s if point else workload.flop_per_s,
                    bytes_per_s=workload.bytes / workload.time_s if workload.time_s else None,
                    bound=point.bound if point else None, roof=point.roof if point else None,
                    attainable_flop_per_s=point.attainable_flop_per_s if point else None,
                    efficiency_percent=point.efficiency_percent if point else None,
                    above_roof=bool(point and point.above_roof),
                )
            )  # fmt: skip
    return rows


def _next_point(queue: list[Point], workload: Workload) -> Point | None:
    """The model's point of ``workload``: the first of its file's remaining points with its name
    (the next one, unless the model skipped a workload), taken off ``queue``. The device is not
    compared: the model names a device by machine identity (a host's one CPU is ``cpu``)."""
    for position, point in enumerate(queue):
        if point.name == workload.name:
            del queue[: position + 1]
            return point
    return None


#: What the fake NVML (gpuscope.testing.fake_nvml) puts in every GPU UUID it makes up: a log
#: written under GPUSCOPE_FAKE_NVML before the records said ``simulated`` carries it in each record.
FAKE_NVML_UUID_MARK = "-fake-"


def simulated_log(telemetry: Telemetry) -> str | None:
    """What scripted the log's GPUs (its records' ``simulated``; for older logs of the fake NVML,
    ``"fake NVML GPUs, UUIDs GPU-…-fake-…"``), else None."""
    if telemetry.simulated:
        return str(telemetry.simulated)
    fake = [g for g in telemetry.gpus or [] if FAKE_NVML_UUID_MARK in str(g.uuid or "")]
    return "fake NVML GPUs, UUIDs GPU-…-fake-…" if fake else None


def _simulated(written: JsonObject) -> str | None:
    """What a demo's results file says it simulated (``system.simulated``, undeclared), else None."""
    system = written.get("system")
    value = system.get("simulated") if isinstance(system, dict) else None
    return str(value) if value else None


def threshold_text(report: Report) -> str:
    """``"flagged below 70% compute, 80% memory, 60% transfer"``."""
    parts = [f"{value:g}% {kind}" for kind, value in report.low_percent_of_spec.items() if kind != "collective"]
    return "flagged below " + ", ".join(parts)


def summary_lines(report: Report) -> list[str]:
    """A few sentences for the top of a report and for pasting into an issue tracker."""
    logged_gpus = len(report.telemetry.gpus or []) if report.telemetry else 0
    texts = [(system.host or "unknown host", _system_text(system, logged_gpus)) for system in report.systems]
    if len(texts) <= FLEET_HOSTS:
        lines = [f"{host}: {text}" for host, text in texts]
    else:  # a fleet: the hosts that read alike share one line
        hosts_of: dict[str, list[str]] = {}
        for host, text in texts:
            hosts_of.setdefault(text, []).append(host)
        lines = [f"{hosts_text(hosts)}: {text}" for text, hosts in hosts_of.items()]
    contended = [source for source in report.sources or [] if source.contended]
    if contended:
        said = "; ".join(f"{source.label}: {w}" for source in contended for w in (source.warnings or [])[:2])
        lines.append(
            f"Measured under contention ({said}): low numbers below may be the load, not the hardware; "
            "measure again on an idle machine before acting on them."
        )
    stragglers = report.stragglers or []
    if stragglers:
        margin = report.straggler_margin
        rule = f"more than {margin * 100:.0f}% below" if margin is not None else "below"
        ranks = _distinct((s.host, s.rank) for s in stragglers)
        listed = "; ".join(_straggler_text(s) for s in stragglers[:5]) + ("; ..." if len(stragglers) > 5 else "")
        lines.append(
            f"{len(stragglers)} straggler ceiling{'s' if len(stragglers) != 1 else ''} "
            f"on {len(ranks)} rank{'s' if len(ranks) != 1 else ''} "
            f"({rule} the median of the same ceiling across ranks): {listed}."
        )
    ceilings = report.ceilings
    rated = [(c, c.percent_of_spec) for c in ceilings if c.percent_of_spec is not None]
    low = [(c, p) for c, p in rated if c.low]
    above = [(c, p) for c, p in rated if is_above_datasheet(p)]
    if above:
        listed = "; ".join(f"{c.device} {c.name} {fmt_percent(p)} of spec" for c, p in above[:5])
        lines.append(
            f"{len(above)} of {_rated_text(len(rated), len(ceilings))} are above their datasheet value: "
            f"the datasheet entry or the measurement is wrong: {listed}."
        )
    disordered = [c for c in ceilings if c.out_of_order]
    if disordered:
        lines.append(
            f"{len(disordered)} memory ceiling{'s are' if len(disordered) != 1 else ' is'} slower than a level "
            "farther from the core (a measurement problem; not drawn as roofs): "
            + "; ".join(f"{c.device} {c.out_of_order}" for c in disordered[:5]) + "."
        )  # fmt: skip
    if low:
        worst = sorted(low, key=lambda item: item[1])[:5]
        listed = "; ".join(f"{c.device} {c.name} {fmt_percent(p)} of spec" for c, p in worst)
        lines.append(
            f"{len(low)} of {_rated_text(len(rated), len(ceilings))} are low against the datasheet "
            f"({threshold_text(report)}): {listed}" + (" (measured under contention)." if contended else ".")
        )
    elif rated and not above:
        lines.append(
            f"All {_rated_text(len(rated), len(ceilings))[4:]} are within the expected range of it "
            f"({threshold_text(report)})."
        )
    elif ceilings and not rated:
        lines.append(f"{len(ceilings)} ceilings measured; none has a datasheet value to compare with.")
    elif not ceilings:
        lines.append("No ceilings measured.")
    failed = [m for m in report.measurements if m.status not in (None, "ok", "passed", "success", "skipped")]
    skipped = [m for m in report.measurements if m.status == "skipped"]
    if skipped:
        lines.append(
            f"{len(skipped)} measurement{'s' if len(skipped) != 1 else ''} skipped: "
            + ", ".join(f"{m.name} ({clean_text(m.error, 80)})" for m in skipped[:3])
            + ("." if len(skipped) <= 3 else ", ...")
        )
    if failed:
        lines.append(
            f"{len(failed)} measurement{'s' if len(failed) != 1 else ''} did not succeed: "
            + ", ".join(f"{m.name} ({m.status})" for m in failed[:5])
            + "."
        )
    if report.workloads:
        lines.append(_workloads_line(report.workloads))
    if report.telemetry:
        lines.append(_telemetry_line(report.telemetry))
    return lines


def _rated_text(rated: int, measured: int) -> str:
    """``"the 2 ceilings with a datasheet figure (of 28 measured)"``: what an "n of m" counts."""
    text = f"the {rated} ceiling{'s' if rated != 1 else ''} with a datasheet figure"
    return text + (f" (of {measured} measured)" if measured != rated else "")


def _system_text(system: SystemSummary, logged_gpus: int = 0) -> str:
    """A host's summary sentence less its name: CPU, cores, GPUs, versions. A results file with no
    GPU beside a log with ``logged_gpus`` GPUs says both, never a bare "no GPU"."""
    gpus = Counter(g.name for g in system.gpus or [])
    gpu_text = ", ".join(f"{count}× {name}" for name, count in gpus.items() if name) or (
        f"no GPU in the results file (the telemetry log shows {logged_gpus})" if logged_gpus else "no GPU"
    )
    parts = [system.cpu_model or "CPU unknown"]
    if system.logical_cores:
        parts.append(f"{system.logical_cores} logical cores")
    parts.append(gpu_text)
    versions = [
        f"{key} {value}"
        for key, value in (("driver", system.driver), ("cuda", system.cuda), ("torch", system.torch))
        if value
    ]
    return ", ".join(parts) + (f" ({', '.join(versions)})" if versions else "") + "."


def _hosts_title(hosts: list[str]) -> str:
    return ", ".join(hosts) if len(hosts) <= FLEET_HOSTS else hosts_text(hosts)


def hosts_text(hosts: Sequence[str]) -> str:
    """``"node-0001"``, or ``"124 hosts (node-0001 … node-0124)"``."""
    return hosts[0] if len(hosts) == 1 else f"{len(hosts)} hosts ({hosts[0]} … {hosts[-1]})"


def _workloads_line(workloads: list[WorkloadRow]) -> str:
    bounds = [w.bound for w in workloads if w.bound]
    text = f"{len(workloads)} workloads"
    if bounds:
        counts = {b: bounds.count(b) for b in _distinct(bounds)}
        text += " (" + ", ".join(f"{n} {b}-bound" for b, n in counts.items()) + ")"
    rated = [(w, w.efficiency_percent) for w in workloads if w.efficiency_percent is not None]
    if rated:
        worst, efficiency = min(rated, key=lambda item: item[1])
        text += f"; lowest efficiency {worst.name} at {fmt_percent(efficiency)} of its roof"
    above = [w for w in workloads if w.above_roof]
    if above:
        text += f"; {len(above)} above their roof (a counting error)"
    return text + "."


def _telemetry_line(telemetry: Telemetry) -> str:
    text = f"Telemetry: {telemetry.samples} samples over {fmt_seconds(telemetry.duration_s)}"
    if telemetry.interval_s:
        text += f" every {fmt_seconds(telemetry.interval_s)}"
    peaks = []
    for metric, label, unit in (("power_w", "peak power", "W"), ("temperature_gpu_c", "max temperature", "°C")):
        rows = [
            (s, s.max) for s in telemetry.stats or [] if s.metric == metric and s.key != "host" and s.max is not None
        ]
        if rows:
            top, peak = max(rows, key=lambda item: item[1])
            peaks.append(f"{label} {peak:.0f} {unit} ({top.subject})")
    energies = [e.energy_j for e in telemetry.energy or [] if e.energy_j is not None]
    if energies:
        peaks.append(f"GPU energy {fmt_quantity(sum(energies), 'J')}")
    throttled = [t for t in telemetry.throttling or [] if t.of_samples]
    if throttled:
        most = max(throttled, key=lambda t: float(t.samples or 0) / float(t.of_samples or 1))
        share = 100 * float(most.samples or 0) / float(most.of_samples or 1)
        more = f" (+{len(throttled) - 1} more)" if len(throttled) > 1 else ""
        peaks.append(f"{most.subject} clocks held back by {most.reason} {fmt_percent(share)} of the time{more}")
    if telemetry.alerts:
        worst = telemetry.alerts[0]  # worst first
        count = len(telemetry.alerts)
        peaks.append(f"{count} alert{'s' if count != 1 else ''} (worst: {worst.level} {worst.kind}, {worst.subject})")
    if simulated_log(telemetry):
        peaks.append("all simulated (scripted GPUs), not measured on hardware")
    if telemetry.gpu_unavailable:
        peaks.append(f"no GPU telemetry ({telemetry.gpu_unavailable})")
    return text + (": " + ", ".join(peaks) if peaks else "") + "."


def _straggler_text(straggler: Straggler) -> str:
    """``"node-b/r2 cuda:0 bf16 626 TFLOP/s, 20% below the median 781 TFLOP/s"``."""
    where = f"{straggler.host or '?'}" + (f"/r{straggler.rank}" if straggler.rank is not None else "")
    unit = str(straggler.unit or "")
    text = f"{where} {straggler.device} {straggler.name} {fmt_quantity(straggler.value, unit)}"
    text += f", {below_text(straggler.below_median_percent)}"
    if straggler.median is not None:
        text += f" {fmt_quantity(straggler.median, unit)}"
    return text
