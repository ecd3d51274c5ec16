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

An output name ending ``.zst`` or ``.gz`` (``run.jsonl.zst``, ``run.csv.gz``) writes indexed
compressed frames, each at most 5 s after its first record. ``--rotate-size``/``--rotate-every``
write a set of files named after ``--output`` (``--keep N`` removes the oldest); see
docs/telemetry-schema.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from gpuscope.errors import UsageError
from gpuscope.exporter import start_exporter_for
from gpuscope.telemetry.collector import TelemetryCollector
from gpuscope.telemetry.logfile import LogWriter, open_log_writer
from gpuscope.telemetry.logpaths import split_log_name
from gpuscope.telemetry.logprogress import LogProgress
from gpuscope.telemetry.logrotate import RotatingLogWriter, parse_age_s, parse_size_bytes
from gpuscope.telemetry.records import Sample
from gpuscope.telemetry.sampler import Sampler, check_duration, check_interval, stopped_by_signals
from gpuscope.telemetry.simulated import simulation_note
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
        exporter = start_exporter_for(args.prometheus, args)  # a port in use fails before the log file is opened
        _say(f"serving Prometheus metrics on {exporter.announce}")
    try:
        existing = (
            "append" if getattr(args, "append", False) else "replace" if getattr(args, "force", False) else "refuse"
        )
        fmt = _format_of(args.output, getattr(args, "format", None))
        writer: LogWriter | RotatingLogWriter
        rotation = _rotation(args)
        if rotation is not None:
            writer = RotatingLogWriter(args.output, fmt, interval_s=interval_s, on_warning=_warn, **rotation)
        else:
            writer = open_log_writer(
                args.output, fmt, on_warning=_warn, existing=existing, interval_s=interval_s
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
    if rotation is not None:  # the files are the base name with a time in it
        stem, suffix = split_log_name(args.output)
        target = f"{stem}.<UTC time>{suffix}"
    with stopped_by_signals(sampler):  # `| head` (BrokenPipeError) is a clean exit in cli.main
        try:
            why_no_gpu = collector.open()
            if why_no_gpu is not None and not args.no_gpu:
                _warn(f"no GPU telemetry, logging the host only: {why_no_gpu.to_json()}")
            simulated = simulation_note() if why_no_gpu is None and not args.no_gpu else None
            if simulated:  # as `snapshot` says it
                _say(safe_text(f"SIMULATED GPUs ({simulated}), not real hardware"))
            if sampler.stopping:  # a signal came while NVML was starting
                return 0
            progress.start(target, fmt, interval_s, duration_s)
            sampler.run_in_thread()
        finally:
            collector.close()
            writer.close()
            if exporter is not None:
                exporter.close()
            if progress.samples:
                _say(progress.summary(target, writer.records_written, writer.failure))
    return 0


def _format_of(output: str | None, asked: str | None) -> str:
    """``--format``, else the format the output name says (``run.csv.gz``: csv), else jsonl; a
    name that says the other format is a usage error."""
    suffix = split_log_name(output or "")[1]
    named = "csv" if suffix.startswith(".csv") else "jsonl" if suffix.startswith(".jsonl") else None
    if asked is not None and named is not None and asked != named:
        raise UsageError(f"--format {asked} but --output {output} names a {named} file; make them agree")
    return asked or named or "jsonl"


def _rotation(args: argparse.Namespace) -> dict[str, Any] | None:
    """The rotation options as :class:`RotatingLogWriter` takes them; None without rotation."""
    size, every = getattr(args, "rotate_size", None), getattr(args, "rotate_every", None)
    keep = getattr(args, "keep", None)
    if size is None and every is None:
        if keep is not None:
            raise UsageError("--keep needs --rotate-size or --rotate-every")
        return None
    if args.output in (None, "-"):
        raise UsageError("--rotate-size and --rotate-every need --output FILE (a base name for the rotated files)")
    if getattr(args, "append", False):
        raise UsageError("--append does not apply with rotation (each rotated file is new)")
    if keep is not None and keep < 1:
        raise UsageError(f"--keep {keep}: at least 1")
    return {
        "size_bytes": parse_size_bytes(size) if size is not None else None,
        "every_s": parse_age_s(every) if every is not None else None,
        "keep": keep,
    }


def _tee(first: Callable[[Sample], object], second: Callable[[Sample], object]) -> Callable[[Sample], None]:
    """One on_sample callback that hands each sample to ``first`` (the exporter), then ``second``."""

    def both(sample: Sample) -> None:
        first(sample)
        second(sample)

    return both
