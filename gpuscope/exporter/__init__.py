"""Prometheus exporter: every telemetry field as a ``gpuscope_*`` metric (no Textual, no torch).

Use :func:`start_exporter` to serve on ``HOST:PORT`` (127.0.0.1 unless told otherwise; elsewhere
with a ``--web-config`` for TLS and basic auth, or ``insecure``), then
call ``handle.update(sample)`` after each sample and ``handle.close()`` at the end.
Metric names and labels: :mod:`gpuscope.exporter.metrics` and ``docs/prometheus.md``.
"""

from __future__ import annotations

from gpuscope.exporter.server import (
    DEFAULT_LISTEN,
    ExporterHandle,
    SampleCollector,
    parse_listen,
    start_exporter,
    start_exporter_for,
)

__all__ = [
    "DEFAULT_LISTEN",
    "ExporterHandle",
    "SampleCollector",
    "parse_listen",
    "start_exporter",
    "start_exporter_for",
]
