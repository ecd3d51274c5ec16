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
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from gpuscope.commands.options import add_value, path_option
from gpuscope.textsafe import write_styled

if TYPE_CHECKING:
    from gpuscope.schema.results import Measurement, Results

__all__ = ["configure", "run"]

#: How long the main thread waits for the probe thread to stop after Ctrl-C, seconds.
_STOP_WAIT_S = 0.8


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``gpuscope probe`` (imports nothing heavy)."""
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument(
        "--suite",
        default="quick",
        help="a shipped suite (quick, full, transformer) or a suite TOML path (default quick)",
    )
    parser.add_argument(
        "--output",
        "-o",
        default="results.json",
        metavar="PATH",
        type=path_option,
        help="results JSON to write (default results.json)",
    )
    add_value(
        parser,
        "--memory-fraction",
        0.5,
        "F",
        "never allocate more than this fraction of free device memory (default 0.5)",
    )
    parser.add_argument("--no-telemetry", action="store_true", help="do not record telemetry around measurements")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    parser.add_argument(
        "--distributed",
        action="store_true",
        help="run under torchrun: every rank probes its device, rank 0 writes one file (docs/cluster.md)",
    )
    add_value(
        parser,
        "--straggler-margin",
        0.10,
        "F",
        "with --distributed: flag ranks more than F below the median ceiling (default 0.10)",
    )
    add_value(
        parser,
        "--rank-timeout",
        900.0,
        "S",
        "with --distributed: how long rank 0 waits for the other ranks (default 900)",
    )
    parser.add_argument(
        "--report",
        metavar="PATH",
        type=path_option,
        help="also write a snapshot report of the results (.html, .md or .json; see `gpuscope report`)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --output file (by default a probe refuses to overwrite another run)",
    )


class _Writer:
    """Writes the results file atomically; after ``close`` later writes are ignored."""

    def __init__(self, path: Path) -> None:
        from gpuscope.fileio import OutputLock, is_stdout

        self.path = path
        self._lock = threading.Lock()
        self._closed = False
        self.error: str | None = None
        self._stdout = is_stdout(path)  # `-o -`: only the final document, on standard output
        self._file_lock = None if self._stdout else OutputLock(path)  # a second probe on the file refuses
        if self._file_lock is not None:
            self._file_lock.acquire()

    def write(self, data: Results | None, final: bool = False) -> None:
        from gpuscope.fileio import write_json_atomic

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
            from gpuscope.textsafe import safe_text

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
            from gpuscope.textsafe import safe_text

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


def _format_value(value: float, unit: str) -> str:
    if unit == "FLOP/s":
        return f"{value / 1e12:,.2f} TFLOP/s" if value >= 1e12 else f"{value / 1e9:,.1f} GFLOP/s"
    return f"{value / 1e9:,.1f} GB/s"


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
    from gpuscope.schema.results import RunSummary

    summary = results.summary or RunSummary()
    print(
        f"{len(results.workloads)} workload(s); measurements ok {summary.ok}, "
        f"failed {summary.failed}, skipped {summary.skipped}; results in {path}",
        file=stream,
    )


def _refuse_overwrite(output: Path, force: bool) -> None:
    """A probe never silently replaces another run's file (or any other file): exit 2 unless --force."""
    from gpuscope.errors import UsageError
    from gpuscope.fileio import is_stdout
    from gpuscope.schema.kinds import existing_output

    existing = None if force or is_stdout(output) else existing_output(output)
    if existing is not None:
        raise UsageError(f"{output} already exists ({existing[1]}); use --force to replace it, or -o another path")


def run(args: argparse.Namespace) -> int:
    """Run the suite; see the module docstring for exit codes."""
    from gpuscope.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, GpuscopeError, UsageError
    from gpuscope.paths import check_output_path

    if not 0.0 < args.memory_fraction <= 1.0:
        raise UsageError(f"--memory-fraction {args.memory_fraction:g}: expected a number in (0, 1]")
    if getattr(args, "distributed", False):
        from gpuscope.probing.distributed import run_distributed

        return run_distributed(args)
    output = Path(args.output)
    check_output_path(output, inputs=[args.suite])
    _refuse_overwrite(output, getattr(args, "force", False))
    if args.report:
        from gpuscope.report.io import format_for

        format_for(args.report, hint="")  # an unknown report format fails before the probes run

    from gpuscope.probing.environment import resolve_device
    from gpuscope.probing.runner import ProbeRunner
    from gpuscope.probing.suite import load_suite

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
    from gpuscope.probing.runner import exit_at_once, wait_interruptible

    def on_interrupt() -> None:
        progress.finish()
        print("gpuscope: interrupted; stopping the probes and keeping the results so far", file=sys.stderr, flush=True)

    # Ctrl-C sets the cancel event (never a KeyboardInterrupt inside join: see probing/runner.py)
    interrupted, stopped = wait_interruptible(thread, cancel, on_interrupt)
    if interrupted:
        import msgspec

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
        from gpuscope.report import write_report

        print(f"gpuscope: wrote report {write_report(args.report, [output])}", file=sys.stderr)
    if results.partial:
        return EXIT_INTERRUPTED
    return EXIT_FAILURE if results.summary is not None and results.summary.failed else EXIT_OK
