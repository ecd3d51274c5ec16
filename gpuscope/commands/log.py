"""``gpuscope log``: headless telemetry, one record per line (JSON lines or CSV).

SIGINT and SIGTERM end the run after the record in progress, with exit code 0. Sampling and
writing run on the sampler thread; the main thread only waits and handles signals, so a signal
can never cut a record in half. Never imports Textual or torch.

``-o FILE`` refuses a file that already holds data unless ``--append`` (continue it, dropping
a killed run's cut last line) or ``--force`` (replace it); a second logger on the same file
refuses in one line with exit 4 (the file is locked while a run writes it).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import Any

__all__ = ["configure", "run"]

#: A second SIGINT/SIGTERM this long after the first ends the process without waiting, seconds.
_FORCE_AFTER_S = 2.0


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``gpuscope log`` (imports nothing heavy)."""
    parser.add_argument(
        "--interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="seconds between records (default 1, minimum 0.1)",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop after this many seconds (default: until interrupted)",
    )
    parser.add_argument(
        "--output", "-o", default=None, metavar="PATH",
        help="file to write (default or -: standard output); an existing file needs --append or --force",
    )  # fmt: skip
    existing = parser.add_mutually_exclusive_group()
    existing.add_argument(
        "--append",
        action="store_true",
        help="continue an existing --output file (a killed run's cut last line is dropped)",
    )
    existing.add_argument("--force", action="store_true", help="replace an existing --output file")
    parser.add_argument("--format", choices=("jsonl", "csv"), default="jsonl", help="jsonl (default) or csv")
    parser.add_argument("--no-processes", action="store_true", help="do not list the processes on each GPU")
    parser.add_argument(
        "--no-gpm", action="store_true", help="do not read GPM metrics (DRAM bandwidth, SM/tensor activity)"
    )
    parser.add_argument("--no-gpu", action="store_true", help="host only: do not load NVML")
    parser.add_argument(
        "--prometheus",
        default=None,
        metavar="HOST:PORT",
        help="also serve each sample to Prometheus at HOST:PORT/metrics (see docs/prometheus.md)",
    )


def _warn(message: str) -> None:
    from gpuscope.textsafe import safe_text

    print(f"gpuscope: warning: {safe_text(message)}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Log until the duration ends or SIGINT/SIGTERM arrives; 0 on a clean stop."""
    from gpuscope.errors import EXIT_INTERRUPTED
    from gpuscope.telemetry.sampler import check_duration, check_interval

    interval_s = check_interval(args.interval)
    duration_s = check_duration(args.duration)

    from gpuscope.telemetry.collector import TelemetryCollector
    from gpuscope.telemetry.logfile import open_log_writer
    from gpuscope.telemetry.sampler import Sampler

    exporter = None
    if getattr(args, "prometheus", None):
        from gpuscope.exporter import start_exporter

        exporter = start_exporter(args.prometheus)  # a port in use fails before the log file is opened
        print(f"gpuscope: serving Prometheus metrics on {exporter.url}", file=sys.stderr, flush=True)
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
    from gpuscope.telemetry.logprogress import LogProgress

    progress = LogProgress(lambda line: print(f"gpuscope: {line}", file=sys.stderr, flush=True))
    on_sample = writer.write if exporter is None else _tee(exporter.update, writer.write)
    on_sample = _tee(progress.observe, on_sample)  # alerts are in the record written
    collector = TelemetryCollector(nvml=not args.no_gpu, gpm=not args.no_gpm, processes=not args.no_processes)
    sampler: Sampler[Any] = Sampler(
        collector.sample, interval_s, on_sample=on_sample, history=None, duration_s=duration_s
    )

    first_signal_at: list[float] = []

    def _stop(signum: int, frame: object) -> None:
        # Only sets an Event: the record in progress is finished, then the loop ends. A second
        # signal a while later means the sampler is stuck (a hung driver call): leave at once.
        now = time.monotonic()
        if first_signal_at and now - first_signal_at[0] >= _FORCE_AFTER_S:
            print("gpuscope: sampler stuck; exiting without waiting for it", file=sys.stderr, flush=True)
            os._exit(EXIT_INTERRUPTED)
        if not first_signal_at:
            first_signal_at.append(now)
        sampler.stop()

    previous_handlers = {signum: signal.signal(signum, _stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        why_no_gpu = collector.open()
        if why_no_gpu is not None and not args.no_gpu:
            _warn(f"no GPU telemetry, logging the host only: {why_no_gpu.to_json()}")
        if sampler.stopping:  # a signal came while NVML was starting
            return 0
        target = args.output if args.output not in (None, "-") else "stdout"
        progress.start(target, args.format, interval_s, duration_s)
        sampler.start()
        while not sampler.join(timeout_s=0.5):
            pass
    except BrokenPipeError:
        _silence_stdout()
        return 0
    finally:
        sampler.stop()
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)
        collector.close()
        writer.close()
        if exporter is not None:
            exporter.close()
        if progress.samples:
            _say_safely(progress.summary(args.output if args.output not in (None, "-") else "stdout"))
    return 0


def _say_safely(line: str) -> None:
    try:
        print(f"gpuscope: {line}", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr closed: the summary is not worth an error
        pass


def _tee(first: Any, second: Any) -> Any:
    """One on_sample callback that hands each sample to ``first`` (the exporter), then ``second``."""

    def both(sample: Any) -> None:
        first(sample)
        second(sample)

    return both


def _silence_stdout() -> None:
    """The reader of our stdout left (``| head``): point fd 1 at /dev/null so the interpreter's
    final flush does not print a BrokenPipeError."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
