"""``gpuscope log``: headless telemetry, one record per line (JSON lines or CSV).

SIGINT and SIGTERM end the run after the record in progress, with exit code 0. Sampling and
writing run on the sampler thread; the main thread only waits and handles signals, so a signal
can never cut a record in half. Never imports Textual or torch.

``-o FILE`` refuses a file that already holds data unless ``--append`` (continue a gpuscope log,
dropping a killed run's cut last line; any other file is left untouched) or ``--force`` (replace
it); a second writer of the same file refuses in one line with exit 4 (the file itself is locked
while a run writes it). A FIFO, pipe or character device is written as a stream, like ``-o -``
(``--append``/``--force`` change nothing there). Messages go to stderr; when it is closed or full
they are lost, never the records.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from gpuscope.exporter import start_exporter
from gpuscope.telemetry.collector import TelemetryCollector
from gpuscope.telemetry.logfile import open_log_writer
from gpuscope.telemetry.logprogress import LogProgress
from gpuscope.telemetry.records import Sample
from gpuscope.telemetry.sampler import Sampler, check_duration, check_interval, stopped_by_signals
from gpuscope.textsafe import safe_text

__all__ = ["run"]


def _say(line: str) -> None:
    """One ``gpuscope: <line>`` on stderr; a closed, full or failing stderr loses the line, never
    the records (the logger goes on)."""
    try:
        print(f"gpuscope: {line}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _warn(message: str) -> None:
    _say(f"warning: {safe_text(message)}")


def run(args: argparse.Namespace) -> int:
    """Log until the duration ends or SIGINT/SIGTERM arrives; 0 on a clean stop."""

    interval_s = check_interval(args.interval)
    duration_s = check_duration(args.duration)

    exporter = None
    if getattr(args, "prometheus", None):
        exporter = start_exporter(args.prometheus)  # a port in use fails before the log file is opened
        _say(f"serving Prometheus metrics on {exporter.url}")
    try:
        existing = (
            "append" if getattr(args, "append", False) else "replace" if getattr(args, "force", False) else "refuse"
        )
        writer = open_log_writer(
            args.output, args.format, on_warning=_warn, existing=existing
        )  # fails before sampling starts
    except BaseException:
        if exporter is not None:
            exporter.close()
        raise

    progress = LogProgress(_say)
    on_sample = writer.write if exporter is None else _tee(exporter.update, writer.write)
    on_sample = _tee(progress.observe, on_sample)  # alerts are in the record written
    collector = TelemetryCollector(nvml=not args.no_gpu, gpm=not args.no_gpm, processes=not args.no_processes)
    sampler: Sampler[Sample] = Sampler(
        collector.sample, interval_s, on_sample=on_sample, history=None, duration_s=duration_s
    )

    target = args.output if args.output not in (None, "-") else "stdout"
    with stopped_by_signals(sampler):  # `| head` (BrokenPipeError) is a clean exit in cli.main
        try:
            why_no_gpu = collector.open()
            if why_no_gpu is not None and not args.no_gpu:
                _warn(f"no GPU telemetry, logging the host only: {why_no_gpu.to_json()}")
            if sampler.stopping:  # a signal came while NVML was starting
                return 0
            progress.start(target, args.format, interval_s, duration_s)
            sampler.run_in_thread()
        finally:
            collector.close()
            writer.close()
            if exporter is not None:
                exporter.close()
            if progress.samples:
                _say(progress.summary(target, writer.records_written, writer.failure))
    return 0


def _tee(first: Callable[[Sample], object], second: Callable[[Sample], object]) -> Callable[[Sample], None]:
    """One on_sample callback that hands each sample to ``first`` (the exporter), then ``second``."""

    def both(sample: Sample) -> None:
        first(sample)
        second(sample)

    return both
