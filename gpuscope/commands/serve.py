"""``gpuscope serve``: sample telemetry and expose it to Prometheus at HOST:PORT/metrics.

The same exporter runs inside ``gpuscope log --prometheus HOST:PORT``. Binds 127.0.0.1 unless a
host is given; off loopback it needs ``--web-config FILE`` (TLS, basic auth) or ``--insecure``.
Metric names, ``--process-labels`` levels and the web configuration: ``docs/prometheus.md``.
"""

from __future__ import annotations

import argparse
import sys

from gpuscope.exporter import start_exporter_for
from gpuscope.telemetry.collector import TelemetryCollector
from gpuscope.telemetry.sampler import Sampler, check_duration, check_interval, stopped_by_signals

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    interval_s = check_interval(args.interval)
    duration_s = check_duration(args.duration)
    handle = start_exporter_for(args.listen, args)
    collector = TelemetryCollector(nvml=not args.no_gpu, processes=not args.no_processes)
    try:
        missing = collector.open()
        print(
            f"gpuscope: serving Prometheus metrics on {handle.announce} every {interval_s:g} s (Ctrl-C to stop)",
            file=sys.stderr,
            flush=True,
        )
        if missing is not None and not args.no_gpu:
            print(f"gpuscope: no GPU metrics: {missing.to_json()}", file=sys.stderr, flush=True)
        sampler = Sampler(collector.sample, interval_s, on_sample=handle.update, history=None, duration_s=duration_s)
        with stopped_by_signals(sampler):
            sampler.run_in_thread()
    finally:
        handle.close()
        collector.close()
    return 0
