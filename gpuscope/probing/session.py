"""A probe run seen from outside (the TUI's probes screen): typed events in, state out. No Textual.

:class:`ProbeSession` consumes the child's events (:mod:`gpuscope.schema.events`) and keeps what a
view shows: the progress, a one-line status, the measurement rows and the results so far (``results``:
the run in progress, partial, built from the events; then the child's file read back, with its bytes
in ``written``). The screen only draws it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from gpuscope.errors import GpuscopeError
from gpuscope.results import empty_results, read_results_file
from gpuscope.schema.events import Exited, Failed, Finished, Log, MeasurementDone, ProbeEvent, Progress, Started
from gpuscope.schema.results import Measurement, Results, SuiteRef

__all__ = ["ProbeSession", "MeasurementRow"]


@dataclass(frozen=True)
class MeasurementRow:
    """One landed measurement and the wall-clock window it ran in (epoch seconds)."""

    measurement: Measurement
    device: str
    start_s: float
    end_s: float

    @property
    def name(self) -> str:
        return str(self.measurement.name or self.measurement.id or "?")

    @property
    def status(self) -> str:
        return self.measurement.status or "ok"


@dataclass
class ProbeSession:
    """One suite on one device. ``apply(event)`` updates the state and returns what changed
    (the new :class:`MeasurementRow` for a measurement, else None)."""

    suite: str
    device: str
    output: Path
    started_s: float = field(default_factory=time.time)
    total: int = 1
    done: int = 0
    status: str = ""
    results: Results | None = None
    written: bytes | None = None
    rows: list[MeasurementRow] = field(default_factory=list)
    error: str | None = None
    finished: bool = False
    exited: bool = False
    measure_start_s: float = 0.0
    #: ``time.monotonic()`` at the start, for the elapsed time shown (the wall clock may step)
    started_monotonic_s: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.measure_start_s = self.started_s
        self.status = f"Starting {Path(self.suite).stem} on {self.device} (child process; torch loads there)…"

    def apply(self, event: ProbeEvent) -> MeasurementRow | None:
        """Fold ``event`` into the session."""
        if isinstance(event, Started):
            self.total, self.done = max(1, event.total), 0
            self.status = f"Running {event.suite or Path(self.suite).stem} on {self.device}: {event.total} measurements"
        elif isinstance(event, Progress):
            if event.total > 0:
                self.total, self.done = event.total, event.done
            if event.phase == "start":
                self.measure_start_s = event.wall_s
            elapsed_s = time.monotonic() - self.started_monotonic_s
            self.status = f"{event.done}/{event.total} {event.name} · {elapsed_s:.0f} s"
        elif isinstance(event, MeasurementDone):
            return self._add(event)
        elif isinstance(event, Finished):
            self._finish(event)
        elif isinstance(event, Failed):
            self.error = event.message
            self.status = f"Failed: {event.message}"
        elif isinstance(event, Exited):
            self.exited = True
            if event.returncode not in (0,) and not self.finished and self.error is None:
                tail = event.stderr.strip().splitlines()[-1:] or [""]
                self.status = f"The probe process exited with code {event.returncode}. {tail[0]}"
        elif isinstance(event, Log):
            pass
        return None

    def _add(self, event: MeasurementDone) -> MeasurementRow:
        measurement = event.measurement
        row = MeasurementRow(measurement, measurement.device or self.device, self.measure_start_s, event.wall_s)
        self.rows.append(row)
        self.measure_start_s = event.wall_s
        if self.results is None:
            suite = SuiteRef(name=Path(self.suite).stem, path=self.suite)
            self.results = empty_results(suite=suite, partial=True, partial_reason="in progress")
        self.results = msgspec.structs.replace(
            self.results,
            measurements=[*self.results.measurements, measurement],
            ceilings=list(event.ceilings),
            workloads=list(event.workloads),
        )
        return row

    def _finish(self, event: Finished) -> None:
        path = event.output or str(self.output)
        try:
            results, written = read_results_file(path, reader="the probes screen")
        except GpuscopeError as exc:
            self.error = f"Could not read the probe results: {exc}"
            self.status = self.error
            return
        self.finished = True
        self.results, self.written = results, written
        self.done = self.total if not results.partial else self.done
        partial = " (partial: cancelled)" if results.partial else ""
        self.status = (
            f"Done{partial}: {len(results.measurements)} measurements, {len(results.ceilings)} ceilings · saved {path}"
        )
