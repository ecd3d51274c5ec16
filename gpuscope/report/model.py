"""The report data model: results files plus an optional telemetry log, reduced to one JSON-ready
document (``"schema": "gpuscope.report"``, version 1) from which every format is rendered.

The document holds everything the renderers draw (so ``report.json`` re-renders the same HTML
byte for byte) and, under ``results``, the input results documents themselves. It never holds
the time it was generated: ``created`` is the newest ``created`` of its inputs.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

import msgspec

from gpuscope.report.io import REPORT_SCHEMA, REPORT_SCHEMA_VERSION
from gpuscope.report.roofview import datasheet_value, device_name, device_type, roofline_view
from gpuscope.roofline.model import is_above_datasheet
from gpuscope.roofline.stragglers import below_median_percent, ceiling_median, is_straggler, straggler_margin
from gpuscope.schema.core import encode_json
from gpuscope.schema.core import finite_or_none as _num

__all__ = [
    "build_report",
    "LOW_PERCENT_OF_SPEC",
    "measurement_span",
    "ceiling_spread_percent",
    "workload_spread_percent",
    "placement_of",
]

#: A measured ceiling below this percent of its datasheet value is flagged, per ceiling kind.
#: Healthy machines reach about 80% of dense tensor-core peak (bf16 GEMM on H100/H200), 87-92% of
#: HBM bandwidth and 55-85% of PCIe each way (ANCHORS section 5), so lower is worth a look.
LOW_PERCENT_OF_SPEC: dict[str, float] = {"compute": 70.0, "memory": 80.0, "transfer": 60.0, "collective": 60.0}

_SYSTEM_FIELDS = (
    "cpu_model",
    "logical_cores",
    "physical_cores",
    "os",
    "python",
    "torch",
    "cuda",
    "driver",
    "blas",
    "numpy",
)
_SPAN_KEYS = (
    ("start", "end"),
    ("started", "ended"),
    ("start_time", "end_time"),
    ("start_s", "end_s"),
    ("started_at", "ended_at"),
    ("t_start", "t_end"),
    ("wall_start", "wall_end"),
    ("timestamp_start", "timestamp_end"),
)


def measurement_span(measurement: dict[str, Any]) -> tuple[float | None, float | None]:
    """Wall-clock start and end (epoch seconds) of a measurement, or ``(None, None)``: its own
    start/end fields, else the timestamps of its telemetry before and after."""
    for start_key, end_key in _SPAN_KEYS:
        start, end = _num(measurement.get(start_key)), _num(measurement.get(end_key))
        if start is not None and end is not None and end >= start:
            return start, end
    before, after = measurement.get("telemetry_before"), measurement.get("telemetry_after")
    if isinstance(before, dict) and isinstance(after, dict):
        start, end = _num(before.get("timestamp")), _num(after.get("timestamp"))
        if start is not None and end is not None and end >= start:
            return start, end
    return None, None


def ceiling_spread_percent(measurement: dict[str, Any] | None) -> tuple[float | None, int | None]:
    """How far the typical timed sample was from the best one, in percent of the best rate
    (``median_time / best_time - 1``), and the number of samples. ``(None, n)`` with < 2 samples."""
    if not measurement:
        return None, None
    samples = [value for value in (measurement.get("samples_s") or []) if _num(value) is not None and value > 0]
    if len(samples) < 2:
        return None, len(samples) or None
    best = min(samples)
    return (statistics.median(samples) / best - 1.0) * 100.0, len(samples)


def workload_spread_percent(workload: dict[str, Any]) -> float | None:
    """Half the p10-p90 range of a workload's time, in percent of its median time."""
    time_s, p10, p90 = _num(workload.get("time_s")), _num(workload.get("time_p10_s")), _num(workload.get("time_p90_s"))
    if not time_s or p10 is None or p90 is None or p90 < p10:
        return None
    return (p90 - p10) / 2.0 / time_s * 100.0


def placement_of(doc: dict[str, Any]) -> Any:
    """A function giving the (host, rank) of a ceiling, workload or measurement: its own fields,
    else those of its device in ``devices`` (when the device appears there once), else the
    file's ``system.hostname`` (the rule :mod:`gpuscope.roofline.loading` uses)."""
    default_host = (doc.get("system") or {}).get("hostname")
    default_host = default_host if isinstance(default_host, str) and default_host else None
    seen: dict[Any, set[tuple[Any, Any]]] = {}
    for entry in doc.get("devices") or []:
        host = entry.get("host") if isinstance(entry.get("host"), str) and entry.get("host") else default_host
        rank = (
            entry.get("rank")
            if isinstance(entry.get("rank"), int) and not isinstance(entry.get("rank"), bool)
            else None
        )
        seen.setdefault(entry.get("device"), set()).add((host, rank))
    unique = {device: next(iter(places)) for device, places in seen.items() if len(places) == 1}

    def place(item: dict[str, Any]) -> tuple[Any, Any]:
        host, rank = unique.get(item.get("device"), (default_host, None))
        if isinstance(item.get("host"), str) and item.get("host"):
            host = item["host"]
        if isinstance(item.get("rank"), int) and not isinstance(item.get("rank"), bool):
            rank = item["rank"]
        return host, rank

    return place


def build_report(
    inputs: list[tuple[str, dict[str, Any]]],
    telemetry: dict[str, Any] | None = None,
    warnings: Iterable[str] = (),
    low_percent_of_spec: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The report document of ``inputs`` (label, validated results document) and an optional
    telemetry section (:func:`gpuscope.report.telemetry.summarize_samples`)."""
    from gpuscope import __version__

    warnings = list(warnings)
    thresholds = dict(LOW_PERCENT_OF_SPEC if low_percent_of_spec is None else low_percent_of_spec)
    roofline = roofline_view(inputs)
    if roofline.get("note"):
        warnings.append(str(roofline["note"]))
    warnings.extend(str(w) for w in roofline.get("warnings") or [])
    datasheet = roofline.get("datasheet") or []
    systems: list[dict[str, Any]] = []
    ceilings: list[dict[str, Any]] = []
    measurements: list[dict[str, Any]] = []
    sources: list[dict[str, Any]] = []
    margins: list[float] = []
    for label, doc in inputs:
        system = doc.get("system") or {}
        devices = doc.get("devices") or []
        by_id = {m.get("id"): m for m in doc.get("measurements") or [] if m.get("id") is not None}
        place = placement_of(doc)
        sources.append(
            {
                "kind": "results",
                "label": label,
                "created": _num(doc.get("created")),
                "gpuscope_version": doc.get("gpuscope_version"),
                "suite": (doc.get("suite") or {}).get("name") if isinstance(doc.get("suite"), dict) else None,
                "partial": bool(doc.get("partial")),
                "partial_reason": doc.get("partial_reason"),
            }
        )
        if doc.get("partial"):
            warnings.append(f"{label}: results are partial ({doc.get('partial_reason') or 'no reason given'})")
        margin = straggler_margin(doc)
        if margin is not None and margin not in margins:
            margins.append(margin)
        systems.extend(_systems(label, system, devices))
        for ceiling in doc.get("ceilings") or []:
            device = str(ceiling.get("device"))
            host, rank = place(ceiling)
            measurement = by_id.get(ceiling.get("measurement_id"))
            spread, count = ceiling_spread_percent(measurement)
            spec = datasheet_value({**ceiling, "device": device, "host": host, "rank": rank}, datasheet)
            value = _num(ceiling.get("value"))
            percent = (value / spec * 100.0) if (value is not None and spec) else None
            median = ceiling_median(ceiling)
            ceilings.append(
                {
                    "source": label,
                    "host": host,
                    "rank": rank,
                    "device": device,
                    "device_type": device_type(device, devices),
                    "device_name": device_name(device, devices, system, host),
                    "kind": ceiling.get("kind"),
                    "name": ceiling.get("name"),
                    "value": value,
                    "unit": ceiling.get("unit"),
                    "datasheet_value": spec,
                    "percent_of_spec": percent,
                    "low": percent is not None and percent < thresholds.get(str(ceiling.get("kind")), 0.0),
                    "n": count,
                    "statistic": (measurement or {}).get("statistic") or ceiling.get("statistic"),
                    "spread_percent": spread,
                    "straggler": is_straggler(ceiling),
                    "median_value": median,
                    "below_median_percent": below_median_percent(value, median),
                }
            )
        for measurement in doc.get("measurements") or []:
            start, end = measurement_span(measurement)
            host, rank = place(measurement)
            measurements.append(
                {
                    "source": label,
                    "id": measurement.get("id"),
                    "name": measurement.get("name"),
                    "kind": measurement.get("kind"),
                    "device": measurement.get("device"),
                    "host": host,
                    "rank": rank,
                    "status": measurement.get("status"),
                    "start": start,
                    "end": end,
                    "flop_per_s": _num(measurement.get("flop_per_s")),
                    "bytes_per_s": _num(measurement.get("bytes_per_s")),
                    "time_s": _num(measurement.get("time_s")),
                    "statistic": measurement.get("statistic"),
                    "n": len(measurement.get("samples_s") or []) or None,
                    "error": measurement.get("error"),
                }
            )
    workloads = _workloads(inputs, roofline)
    if telemetry is not None:
        sources.append(
            {
                "kind": "log",
                "label": telemetry.get("source"),
                "created": telemetry.get("start"),
                "samples": telemetry.get("samples"),
            }
        )
    created_values = [s["created"] for s in sources if s["kind"] == "results" and s["created"] is not None]
    hosts = _unique(s.get("host") for s in systems)
    simulated = next(
        (str(doc["system"]["simulated"]) for _, doc in inputs if (doc.get("system") or {}).get("simulated")), None
    )
    report: dict[str, Any] = {
        "schema": REPORT_SCHEMA,
        "schema_version": REPORT_SCHEMA_VERSION,
        "gpuscope_version": __version__,
        "title": (f"SIMULATED DATA ({simulated}), not real hardware: " if simulated else "")
        + "gpuscope report"
        + (f": {', '.join(h for h in hosts if h)}" if any(hosts) else ""),
        "created": max(created_values) if created_values else (telemetry or {}).get("start"),
        "redacted": False,
        "low_percent_of_spec": thresholds,
        "sources": sources,
        "systems": systems,
        "ceilings": ceilings,
        "workloads": workloads,
        "measurements": measurements,
        "straggler_margin": margins[0] if len(margins) == 1 else None,
        "stragglers": stragglers_of(ceilings),
        "roofline": roofline,
        "telemetry": telemetry,
        "warnings": warnings,
        "summary": [],
        "results": [{"label": label, "document": doc} for label, doc in inputs],
    }
    report["summary"] = summary_lines(report)
    # Through JSON once, so a report rendered now and one rendered from report.json see the same data.
    decoded: dict[str, Any] = msgspec.json.decode(encode_json(report))  # plain JSON: NaN and inf become null
    return decoded


def stragglers_of(ceilings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The report's ``stragglers``: every ceiling a multi-rank probe run flagged (more than its
    margin below the median of the same ceiling across ranks), slowest first."""
    keys = ("source", "host", "rank", "device", "device_name", "kind", "name", "value", "unit")
    rows = [
        {
            **{key: c.get(key) for key in keys},
            "median": c.get("median_value"),
            "below_median_percent": c.get("below_median_percent"),
        }
        for c in ceilings
        if c.get("straggler")
    ]
    return sorted(
        rows,
        key=lambda r: (
            -(r["below_median_percent"] or 0.0),
            str(r["host"]),
            r["rank"] if isinstance(r["rank"], int) else -1,
        ),
    )


def _systems(label: str, system: dict[str, Any], devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per host of a results file (multi-node results have devices on several hosts)."""
    main_host = system.get("hostname")
    hosts = _unique([main_host] + [d.get("host") for d in devices if d.get("host")])
    out = []
    for host in hosts:
        gpus = [
            {
                key: d.get(key)
                for key in ("device", "name", "rank", "memory_total_bytes", "uuid", "pci_bus_id")
                if d.get(key) is not None
            }
            for d in devices
            if device_type(d.get("device"), [d]) == "gpu" and (d.get("host") in (None, host) or len(hosts) == 1)
        ]
        entry: dict[str, Any] = {"source": label, "host": host}
        if host == main_host or len(hosts) == 1:
            entry.update({key: system.get(key) for key in _SYSTEM_FIELDS})
        entry["gpus"] = gpus
        out.append(entry)
    return out


def _workloads(inputs: list[tuple[str, dict[str, Any]]], roofline: dict[str, Any]) -> list[dict[str, Any]]:
    points = {
        (p.get("source"), p.get("name"), p.get("device"), p.get("host"), p.get("rank")): p
        for p in roofline.get("points") or []
    }
    rows = []
    for label, doc in inputs:
        place = placement_of(doc)
        for workload in doc.get("workloads") or []:
            host, rank = place(workload)
            point = points.get((label, workload.get("name"), workload.get("device"), host, rank)) or {}
            time_s = _num(workload.get("time_s"))
            moved = _num(workload.get("bytes"))
            rows.append(
                {
                    "source": label,
                    "host": host,
                    "rank": rank,
                    "name": workload.get("name"),
                    "device": workload.get("device"),
                    "device_type": device_type(workload.get("device"), doc.get("devices")),
                    "flops": _num(workload.get("flops")),
                    "bytes": moved,
                    "bytes_rule": workload.get("bytes_rule"),
                    "time_s": time_s,
                    "n": workload.get("n"),
                    "spread_percent": workload_spread_percent(workload),
                    "intensity_flop_per_byte": _num(
                        point.get("intensity_flop_per_byte", workload.get("intensity_flop_per_byte"))
                    ),
                    "flop_per_s": _num(point.get("flop_per_s", workload.get("flop_per_s"))),
                    "bytes_per_s": (moved / time_s) if (moved is not None and time_s) else None,
                    "bound": point.get("bound"),
                    "roof": point.get("roof"),
                    "attainable_flop_per_s": _num(point.get("attainable_flop_per_s")),
                    "efficiency_percent": _num(point.get("efficiency_percent")),
                    "above_roof": bool(point.get("above_roof")),
                }
            )
    return rows


def _unique(values: Iterable[Any]) -> list[Any]:
    seen: list[Any] = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def threshold_text(report: dict[str, Any]) -> str:
    """``"flagged below 70% compute, 80% memory, 60% transfer"``."""
    thresholds = report.get("low_percent_of_spec") or {}
    if not isinstance(thresholds, dict):
        return ""
    parts = [f"{value:g}% {kind}" for kind, value in thresholds.items() if kind != "collective"]
    return "flagged below " + ", ".join(parts)


def summary_lines(report: dict[str, Any]) -> list[str]:
    """A few sentences for the top of a report and for pasting into an issue tracker."""
    from gpuscope.report.fmt import clean_text, fmt_percent, fmt_quantity, fmt_seconds

    lines = []
    for system in report["systems"]:
        gpus = system.get("gpus") or []
        names = _unique(g.get("name") for g in gpus)
        gpu_text = ", ".join(f"{sum(1 for g in gpus if g.get('name') == n)}× {n}" for n in names if n) or "no GPU"
        parts = [f"{system.get('host') or 'unknown host'}: {system.get('cpu_model') or 'CPU unknown'}"]
        if system.get("logical_cores"):
            parts.append(f"{system['logical_cores']} logical cores")
        parts.append(gpu_text)
        versions = [f"{key} {system[key]}" for key in ("driver", "cuda", "torch") if system.get(key)]
        lines.append(", ".join(parts) + (f" ({', '.join(versions)})" if versions else "") + ".")
    stragglers = report.get("stragglers") or []
    if stragglers:
        margin = report.get("straggler_margin")
        rule = f"more than {margin * 100:.0f}% below" if isinstance(margin, (int, float)) else "below"
        ranks = _unique((s.get("host"), s.get("rank")) for s in stragglers)
        listed = "; ".join(_straggler_text(s) for s in stragglers[:5]) + ("; ..." if len(stragglers) > 5 else "")
        lines.append(
            f"{len(stragglers)} straggler ceiling{'s' if len(stragglers) != 1 else ''} "
            f"on {len(ranks)} rank{'s' if len(ranks) != 1 else ''} "
            f"({rule} the median of the same ceiling across ranks): {listed}."
        )
    ceilings = report["ceilings"]
    rated = [c for c in ceilings if c.get("percent_of_spec") is not None]
    low = [c for c in rated if c.get("low")]
    above = [c for c in rated if is_above_datasheet(c["percent_of_spec"])]
    if above:
        listed = "; ".join(f"{c['device']} {c['name']} {fmt_percent(c['percent_of_spec'])} of spec" for c in above[:5])
        lines.append(
            f"{len(above)} of {len(rated)} ceilings are above their datasheet value: "
            f"the datasheet entry or the measurement is wrong: {listed}."
        )
    if low:
        worst = sorted(low, key=lambda c: c["percent_of_spec"])[:5]
        listed = "; ".join(f"{c['device']} {c['name']} {fmt_percent(c['percent_of_spec'])} of spec" for c in worst)
        lines.append(
            f"{len(low)} of {len(rated)} ceilings are low against the datasheet ({threshold_text(report)}): {listed}."
        )
    elif rated and not above:
        lines.append(
            f"All {len(rated)} ceilings with a datasheet value are within the expected range of it "
            f"({threshold_text(report)})."
        )
    elif ceilings and not rated:
        lines.append(f"{len(ceilings)} ceilings measured; none has a datasheet value to compare with.")
    elif not ceilings:
        lines.append("No ceilings measured.")
    failed = [m for m in report["measurements"] if m.get("status") not in (None, "ok", "passed", "success", "skipped")]
    skipped = [m for m in report["measurements"] if m.get("status") == "skipped"]
    if skipped:
        lines.append(
            f"{len(skipped)} measurement{'s' if len(skipped) != 1 else ''} skipped: "
            + ", ".join(f"{m.get('name')} ({clean_text(m.get('error'), 80)})" for m in skipped[:3])
            + ("." if len(skipped) <= 3 else ", ...")
        )
    if failed:
        lines.append(
            f"{len(failed)} measurement{'s' if len(failed) != 1 else ''} did not succeed: "
            + ", ".join(f"{m.get('name')} ({m.get('status')})" for m in failed[:5])
            + "."
        )
    workloads = report["workloads"]
    if workloads:
        bounds = [w.get("bound") for w in workloads if w.get("bound")]
        text = f"{len(workloads)} workloads"
        if bounds:
            counts = {b: bounds.count(b) for b in _unique(bounds)}
            text += " (" + ", ".join(f"{n} {b}-bound" for b, n in counts.items()) + ")"
        rated_w = [w for w in workloads if w.get("efficiency_percent") is not None]
        if rated_w:
            worst_w = min(rated_w, key=lambda w: w["efficiency_percent"])
            text += f"; lowest efficiency {worst_w['name']} at {fmt_percent(worst_w['efficiency_percent'])} of its roof"
        above = [w for w in workloads if w.get("above_roof")]
        if above:
            text += f"; {len(above)} above their roof (a counting error)"
        lines.append(text + ".")
    telemetry = report.get("telemetry")
    if telemetry:
        text = f"Telemetry: {telemetry['samples']} samples over {fmt_seconds(telemetry['duration_s'])}"
        if telemetry.get("interval_s"):
            text += f" every {fmt_seconds(telemetry['interval_s'])}"
        peaks = []
        for metric, label, unit in (("power_w", "peak power", "W"), ("temperature_gpu_c", "max temperature", "°C")):
            rows = [s for s in telemetry["stats"] if s["metric"] == metric and s["key"] != "host"]
            if rows:
                top = max(rows, key=lambda s: s["max"])
                peaks.append(f"{label} {top['max']:.0f} {unit} ({top['subject']})")
        energies = [e["energy_j"] for e in telemetry["energy"] if e.get("energy_j") is not None]
        if energies:
            peaks.append(f"GPU energy {fmt_quantity(sum(energies), 'J')}")
        if telemetry.get("gpu_unavailable"):
            peaks.append(f"no GPU telemetry ({telemetry['gpu_unavailable']})")
        lines.append(text + (": " + ", ".join(peaks) if peaks else "") + ".")
    return lines


def _straggler_text(straggler: dict[str, Any]) -> str:
    """``"node-b/r2 cuda:0 bf16 626 TFLOP/s, 20% below the median 781 TFLOP/s"``."""
    from gpuscope.report.fmt import fmt_quantity
    from gpuscope.roofline.stragglers import below_text

    where = f"{straggler.get('host') or '?'}" + (f"/r{straggler['rank']}" if straggler.get("rank") is not None else "")
    unit = str(straggler.get("unit") or "")
    text = f"{where} {straggler.get('device')} {straggler.get('name')} {fmt_quantity(straggler.get('value'), unit)}"
    text += f", {below_text(straggler.get('below_median_percent'))}"
    if straggler.get("median") is not None:
        text += f" {fmt_quantity(straggler.get('median'), unit)}"
    return text
