"""``gpuscope probe``: measure ceilings and workloads with a suite and write a results file.

The probes run on a worker thread; the main thread shows progress and handles Ctrl-C: the first
one sets the cancel event, the results so far are written (``partial: true``) and the command
exits 130 within about a second. The results file is rewritten atomically after every
measurement, so even a crash leaves the measurements so far. Never imports Textual; torch is
imported only once probes run (or to check a ``cuda`` device).

Exit codes: 0 all measurements ok or skipped; 1 a measurement failed (validation or error);
2 bad option; 3 bad suite file; 4 device not available; 130 interrupted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

import msgspec

from gpuscope.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, GpuscopeError, UsageError
from gpuscope.extras import require_probes
from gpuscope.fileio import OutputLock, is_stdout, write_json_atomic
from gpuscope.paths import check_output_path
from gpuscope.probing.distributed import DistributedOptions, Launch, run_distributed
from gpuscope.probing.environment import resolve_device
from gpuscope.probing.runner import ProbeRunner, exit_at_once, wait_interruptible
from gpuscope.probing.suite import load_suite
from gpuscope.report import write_report
from gpuscope.report.io import format_for
from gpuscope.schema.kinds import existing_output
from gpuscope.schema.results import Ceiling, Measurement, Results, RunSummary
from gpuscope.textsafe import safe_text, write_styled

__all__ = ["run"]

#: How long the main thread waits for the probe thread to stop after Ctrl-C, seconds.
_STOP_WAIT_S = 0.8


class _Writer:
    """Writes the results file atomically; after ``close`` later writes are ignored."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._closed = False
        self.error: str | None = None
        self._stdout = is_stdout(path)  # `-o -`: only the final document, on standard output
        self._file_lock = None if self._stdout else OutputLock(path)  # a second probe on the file refuses
        if self._file_lock is not None:
            self._file_lock.acquire()

    def write(self, data: Results | None, final: bool = False) -> None:
        with self._lock:
            if self._closed or data is None or (self._stdout and not final):
                return
            try:
                write_json_atomic(self.path, data)
            except OSError as exc:
                self.error = f"{self.path}: cannot write results ({exc.strerror or exc})"
            if final:
                self._closed = True
                if self._file_lock is not None:
                    self._file_lock.release()


class _Progress:
    """A bar on a terminal, plain lines otherwise."""

    def __init__(self, stream: TextIO, quiet: bool) -> None:
        self.stream = stream
        self.quiet = quiet
        self.tty = stream.isatty()
        self.started = time.monotonic()
        self.done = 0
        self.total = 0
        self.label = ""
        self._lock = threading.Lock()

    def progress(self, done: int, total: int, label: str) -> None:
        with self._lock:
            label = safe_text(label)  # a suite's model name reaches the terminal escaped
            self.done, self.total, self.label = done, total, label
            if self.quiet:
                return
            if self.tty:
                self._bar()
            elif label != "done":
                print(f"[{done + 1}/{total}] {label}", file=self.stream, flush=True)

    def measurement(self, measurement: Measurement) -> None:
        with self._lock:
            if self.quiet:
                return

            line = f"  {safe_text(measurement.name or '?')}: {safe_text(_describe(measurement))}"
            if self.tty:
                write_styled(self.stream, "\r\033[K" + line + "\n")
                self._bar()
            else:
                print(line, file=self.stream, flush=True)

    def message(self, text: str) -> None:
        with self._lock:
            if self.tty:
                write_styled(self.stream, "\r\033[K")
            print(f"gpuscope: warning: {text}", file=self.stream, flush=True)

    def _bar(self) -> None:
        width = 28
        filled = int(width * self.done / self.total) if self.total else 0
        elapsed = time.monotonic() - self.started
        text = (
            f"\r\033[K[{'#' * filled}{'.' * (width - filled)}] "
            f"{self.done}/{self.total} {elapsed:5.0f}s {self.label[:60]}"
        )
        write_styled(self.stream, text)
        self.stream.flush()

    def finish(self) -> None:
        if self.tty and not self.quiet:
            write_styled(self.stream, "\r\033[K")
            self.stream.flush()


def _describe(m: Measurement) -> str:
    if m.status != "ok":
        return f"{m.status}: {m.error}"
    parts = []
    if m.flop_per_s:
        parts.append(f"{m.flop_per_s / 1e9:,.1f} GFLOP/s")
    if m.busbw_bytes_per_s:
        parts.append(f"busbw {m.busbw_bytes_per_s / 1e9:,.2f} GB/s")
    elif m.bytes_per_s and not m.flop_per_s:
        parts.append(f"{m.bytes_per_s / 1e9:,.1f} GB/s")
    parts.append(f"{m.statistic} of {m.n}")
    if m.implementation:
        parts.append(m.implementation)
    return ", ".join(parts)


def _format_value(value: float, unit: str, gb_digits: int = 1) -> str:
    """A ceiling's value in TFLOP/s or GFLOP/s, or GB/s with ``gb_digits`` decimals."""
    if unit == "FLOP/s":
        return f"{value / 1e12:,.2f} TFLOP/s" if value >= 1e12 else f"{value / 1e9:,.1f} GFLOP/s"
    return f"{value / 1e9:,.{gb_digits}f} GB/s"


def print_summary(results: Results, path: Path, stream: TextIO) -> None:
    """Ceilings, workload count and the file, one line each."""
    for ceiling in results.ceilings:
        extra = ceiling.implementation or ceiling.blas or ""
        others = ceiling.libraries_flop_per_s or {}
        if len(others) > 1:
            rates = ", ".join(f"{lib} {_format_value(rate or 0.0, 'FLOP/s')}" for lib, rate in sorted(others.items()))
            extra = f"{ceiling.library} wins ({rates})"
        value = _format_value(ceiling.value, ceiling.unit)
        print(f"{ceiling.kind:<10} {ceiling.name:<18} {value:>18}  {extra}", file=stream)
    from gpuscope.probing.collective_table import interconnect_text  # issue 33: nccl-tests/nvbandwidth tables

    interconnect = interconnect_text(results.measurements, _columns(stream))
    if interconnect:
        print(interconnect, file=stream)

    summary = results.summary or RunSummary()
    print(
        f"{len(results.workloads)} workload(s); measurements ok {summary.ok}, "
        f"failed {summary.failed}, skipped {summary.skipped}; results in {path}",
        file=stream,
    )


def _columns(stream: TextIO) -> int | None:
    """The terminal's width when ``stream`` is one, else None (a file or pipe gets every column)."""
    import shutil

    return shutil.get_terminal_size().columns if stream.isatty() else None


def _refuse_overwrite(output: Path, force: bool) -> None:
    """A probe never silently replaces another run's file (or any other file): exit 2 unless --force."""

    existing = None if force or is_stdout(output) else existing_output(output)
    if existing is not None:
        raise UsageError(f"{output} already exists ({existing[1]}); use --force to replace it, or -o another path")


def run(args: argparse.Namespace) -> int:
    """Run the suite; see the module docstring for exit codes."""

    if not 0.0 < args.memory_fraction <= 1.0:
        raise UsageError(f"--memory-fraction {args.memory_fraction:g}: expected a number in (0, 1]")
    if getattr(args, "distributed", False):
        require_probes("probe")
        return _run_distributed(args)
    output = Path(args.output)
    check_output_path(output, inputs=[args.suite])
    _refuse_overwrite(output, getattr(args, "force", False))
    if args.report:
        format_for(args.report, hint="")  # an unknown report format fails before the probes run
    require_probes("probe")

    suite = load_suite(args.suite)
    device = resolve_device(args.device)
    writer = _Writer(output)
    progress = _Progress(sys.stderr, args.quiet)
    runner: ProbeRunner

    def on_measurement(measurement: Measurement) -> None:
        progress.measurement(measurement)
        writer.write(runner.snapshot())

    runner = ProbeRunner(
        suite,
        device,
        memory_fraction=args.memory_fraction,
        on_progress=progress.progress,
        on_measurement=on_measurement,
        on_message=progress.message,
        telemetry=not args.no_telemetry,
    )
    if not runner.steps:
        raise UsageError(f"suite {suite.name} has no probes for {device.name}")
    cancel = threading.Event()
    finished: list[Results] = []
    raised: list[BaseException] = []  # a GpuscopeError or a crash, raised again on the main thread

    def work() -> None:
        try:
            finished.append(runner.run(cancel))
        except BaseException as exc:  # noqa: BLE001 - reported on the main thread
            raised.append(exc)

    thread = threading.Thread(target=work, name="gpuscope-probe", daemon=True)
    thread.start()

    def on_interrupt() -> None:
        progress.finish()
        print("gpuscope: interrupted; stopping the probes and keeping the results so far", file=sys.stderr, flush=True)

    # Ctrl-C sets the cancel event (never a KeyboardInterrupt inside join: see probing/runner.py)
    interrupted, stopped = wait_interruptible(thread, cancel, on_interrupt)
    if interrupted:
        reason = "cancelled (Ctrl-C) before the suite finished"
        partial = finished[0] if finished else runner.partial_results(reason)
        writer.write(msgspec.structs.replace(partial, partial=True, partial_reason=reason), final=True)
        print(f"gpuscope: partial results in {output}", file=sys.stderr, flush=True)
        if not stopped:
            exit_at_once(EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED
    progress.finish()
    if raised:
        raise raised[0]
    results = finished[0]
    writer.write(results, final=True)
    if writer.error:
        raise GpuscopeError(writer.error)
    print_summary(results, output, sys.stderr if str(output) == "-" else sys.stdout)
    if args.report:
        print(f"gpuscope: wrote report {write_report(args.report, [output])}", file=sys.stderr)
    if results.partial:
        return EXIT_INTERRUPTED
    return EXIT_FAILURE if results.summary is not None and results.summary.failed else EXIT_OK


def _run_distributed(args: argparse.Namespace) -> int:
    """``probe --distributed`` on one rank of a torchrun job: rank 0 writes the file and prints."""

    launch = Launch.from_env()
    margin = float(args.straggler_margin)
    if not 0.0 <= margin < 1.0:
        raise UsageError(f"--straggler-margin {margin:g}: expected a fraction in [0, 1), e.g. 0.1 for 10%")
    rank_timeout_s = float(args.rank_timeout)
    if not rank_timeout_s > 0:
        raise UsageError(f"--rank-timeout {rank_timeout_s:g}: expected a positive number of seconds")
    output = Path(args.output)
    if launch.rank == 0:
        check_output_path(output, "on rank 0's host")
    options = DistributedOptions(
        suite=args.suite, device=args.device, memory_fraction=args.memory_fraction, telemetry=not args.no_telemetry,
        straggler_margin=margin, rank_timeout_s=rank_timeout_s,
    )  # fmt: skip

    def say(text: str) -> None:  # progress from rank 0 only (other ranks print errors only)
        if launch.rank == 0 and not args.quiet:
            print(f"[rank {launch.rank}/{launch.world_size}] {text}", file=sys.stderr, flush=True)

    outcome = run_distributed(launch, options, save=lambda results: write_json_atomic(output, results), say=say)
    if outcome.error is not None:
        print(f"gpuscope: error: {outcome.error}", file=sys.stderr, flush=True)
        return EXIT_FAILURE
    results = outcome.results
    if results is None:  # a rank other than 0: the file is rank 0's
        return EXIT_INTERRUPTED if outcome.interrupted else EXIT_OK
    print_rank_summary(results, output, sys.stdout)
    code = EXIT_FAILURE if results.summary is not None and results.summary.failed else EXIT_OK
    if outcome.interrupted:
        code = EXIT_INTERRUPTED
    elif results.partial:
        print(f"gpuscope: error: partial results in {output}: {results.partial_reason}", file=sys.stderr, flush=True)
        code = EXIT_FAILURE
    if args.report:
        print(f"gpuscope: wrote report {write_report(args.report, [output])}", file=sys.stderr)
    return code


def print_rank_summary(results: Results, path: Path, stream: TextIO) -> None:
    """A multi-rank run per ceiling name: median over ranks, slowest rank; then stragglers and
    missing ranks."""

    def rate(value: float | None, unit: str | None) -> str:
        return _format_value(value or 0.0, unit or "", gb_digits=2)

    by_name: dict[tuple[str, str, str], list[Ceiling]] = {}
    for ceiling in results.ceilings:
        by_name.setdefault((ceiling.kind, ceiling.name, ceiling.unit), []).append(ceiling)
    for (kind, name, unit), items in by_name.items():
        median = rate(statistics.median(c.value for c in items), unit)
        line = f"{kind:<10} {name:<24} median {median:>16} over {len(items)} rank(s)"
        if len(items) > 1:
            slowest = min(items, key=lambda c: c.value)
            line += f"; slowest {rate(slowest.value, unit)} on {slowest.host}/r{slowest.rank}"
        print(line, file=stream)
    from gpuscope.probing.collective_table import interconnect_text  # issue 33: nccl-tests' table per group

    interconnect = interconnect_text(results.measurements, _columns(stream))
    if interconnect:
        print(interconnect, file=stream)
    info = results.distributed
    if info is not None:
        print(f"{info.world_size} rank(s) on {info.nnodes} host(s); results in {path}", file=stream)
    for item in results.stragglers or []:
        print(
            f"straggler: {item.host}/r{item.rank} {item.device} {item.kind} {item.name} {rate(item.value, item.unit)} "
            f"is {item.below_median_percent or 0.0:.0f}% below the median {rate(item.median, item.unit)}",
            file=stream,
        )
    if results.partial:
        print(f"partial: {results.partial_reason}", file=stream)
