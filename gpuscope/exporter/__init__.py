"""Prometheus exporter: every telemetry field as a ``gpuscope_*`` metric (no Textual, no torch).

Use :func:`start_exporter` to serve on ``HOST:PORT`` (127.0.0.1 unless told otherwise), then
call ``handle.update(sample)`` after each sample and ``handle.close()`` at the end.
Metric names and labels: :mod:`gpuscope.exporter.metrics` and ``docs/prometheus.md``.
"""

from __future__ import annotations

from gpuscope.exporter.server import DEFAULT_LISTEN, SampleCollector, parse_listen, start_exporter

__all__ = ["DEFAULT_LISTEN", "SampleCollector", "parse_listen", "start_exporter"]
