"""A telemetry-only report: ``gpuscope report --log run.jsonl`` without a results file.

The report is the usual document (``sources`` holds only the log, ``ceilings``, ``workloads`` and
``measurements`` are empty, ``roofline`` has nothing drawn); what changes is what it shows: a
title naming the log's hosts, a summary of the telemetry alone, and no System, Roofline,
Ceilings or Workloads section (there was no probe run to fill them). Per GPU and host it keeps
the telemetry chart, mean/p50/p95/max per metric, energy, clock throttling, alerts, unavailable
metrics and processes.
A rotated or compressed log set is read as one log (:func:`gpuscope.report.telemetry.read_samples`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import msgspec

from gpuscope.schema.report import Report

__all__ = ["TELEMETRY_TABLES", "is_telemetry_only", "telemetry_only_report", "telemetry_only_tables"]

#: The tables a telemetry-only report shows (the ids of :func:`gpuscope.report.tables.report_tables`).
TELEMETRY_TABLES = ("telemetry", "energy", "throttling", "alerts", "unavailable", "processes")

T = TypeVar("T")


def is_telemetry_only(report: Report) -> bool:
    """True when ``report`` was made from a telemetry log alone (no results file)."""
    sources = report.sources or []
    return report.telemetry is not None and not any(source.kind == "results" for source in sources)


def telemetry_only_tables(report: Report, tables: Sequence[T]) -> list[T]:
    """``tables`` less the probe tables when ``report`` is telemetry-only (``tables`` have an ``id``)."""
    if not is_telemetry_only(report):
        return list(tables)
    return [table for table in tables if getattr(table, "id", None) in TELEMETRY_TABLES]


def telemetry_only_report(report: Report) -> Report:
    """``report`` with the title and summary of a telemetry-only report (unchanged otherwise)."""
    if not is_telemetry_only(report) or report.telemetry is None:
        return report
    hosts = [str(host) for host in report.telemetry.hostnames or [] if host]
    title = "gpuscope telemetry report" + (f": {', '.join(hosts)}" if hosts else "")
    simulated = str(report.title or "").partition("gpuscope report")[0]  # "SIMULATED DATA (...): " kept
    summary = [line for line in report.summary or [] if line != "No ceilings measured."]
    summary.insert(0, "Telemetry only: no probe results file was given, so there is no roofline or ceiling.")
    return msgspec.structs.replace(report, title=simulated + title, summary=summary)
