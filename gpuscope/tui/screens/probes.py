"""The probes screen: pick a suite and a device, run it in a child process, watch progress,
cancel. Each measurement lands in the table with what the device did meanwhile (DRAM GB/s,
clock, power, from the UI's own telemetry) and on the roofline screen as a point."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, DataTable, Label, ProgressBar, Select, Static
from textual.worker import get_current_worker

from gpuscope.telemetry.records import Sample
from gpuscope.tui.format import NA, fmt_rate
from gpuscope.tui.history import gpu_key
from gpuscope.tui.probe_job import ProbeEvent, ProbeJob
from gpuscope.tui.screens.base import GpuscopeScreen

__all__ = ["ProbesScreen", "discover_suites"]

_COLUMNS = (
    ("name", "measurement"),
    ("device", "device"),
    ("result", "result"),
    ("dram", "DRAM"),
    ("clock", "clock · CPU"),
    ("power", "power"),
    ("status", "status"),
)


def discover_suites(extra: list[Path] | None = None) -> list[Path]:
    """Shipped suites (``probes/*.toml``), then any extra suite files, without duplicates."""
    from gpuscope.resources import suites_dir

    found: list[Path] = []
    try:
        found = sorted(suites_dir().glob("*.toml"))
    except OSError:
        pass
    for path in extra or []:
        if path not in found:
            found.append(path)
    return found


def table_rows(screen: "ProbesScreen") -> int:
    return screen.query_one("#probe-table", DataTable).row_count


def _during_text(dram: Any, clock: Any, power: Any) -> tuple[str, str, str]:
    number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
    return (
        fmt_rate(dram) if number(dram) else NA,
        f"{clock:.0f} MHz" if number(clock) else NA,
        f"{power:.0f} W" if number(power) else NA,
    )


def _fmt_result(measurement: dict[str, Any]) -> str:
    from gpuscope.tui.format import fmt_flops

    parts = []
    flop_per_s = measurement.get("flop_per_s")
    bytes_per_s = measurement.get("bytes_per_s")
    if isinstance(flop_per_s, (int, float)) and flop_per_s > 0:
        parts.append(fmt_flops(flop_per_s))
    if isinstance(bytes_per_s, (int, float)) and bytes_per_s > 0:
        parts.append(fmt_rate(bytes_per_s))
    return " · ".join(parts) or "-"


class ProbesScreen(GpuscopeScreen):
    MODE = "probes"
    DEFAULT_HINT = "enter on Run starts · escape cancels a run · points appear on the roofline (2) as they land"
    BINDINGS = [
        Binding("ctrl+r", "run", "Run"),
        Binding("escape", "cancel", "Cancel"),
    ]

    def compose_body(self) -> ComposeResult:
        with Vertical(id="probe-controls"):
            with Horizontal(id="probe-pickers"):
                yield Label("Suite", classes="probe-label")
                yield Select([], id="probe-suite", allow_blank=True, prompt="no suites found")
                yield Label("Device", classes="probe-label")
                yield Select([("cpu", "cpu")], id="probe-device", value="cpu", allow_blank=False)
                yield Button("Run", id="probe-run", variant="primary")
                yield Button("Cancel", id="probe-cancel", variant="error", disabled=True)
            yield ProgressBar(id="probe-progress", total=1, show_eta=False)
            yield Static("Idle. Pick a suite and a device, then Run.", id="probe-status", markup=False)
            yield Static("", id="probe-live", markup=False)
        yield DataTable(id="probe-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one("#probe-table", DataTable)
        for key, title in _COLUMNS:
            table.add_column(title, key=key)
        self.job: ProbeJob | None = None
        self._run_index: int | None = None
        self._document: dict[str, Any] | None = None
        self._started_s = 0.0
        self._measure_start_s = 0.0
        self._devices: tuple[str, ...] = ("cpu",)
        self._pending: list[tuple[str, dict[str, Any], str, float, float]] = []
        self._load_suites()

    def _load_suites(self) -> None:
        suites = discover_suites(list(self.gpuscope.extra_suites))
        select = self.query_one("#probe-suite", Select)
        select.set_options([(path.stem, str(path)) for path in suites])
        if suites:
            preferred = next((p for p in suites if p.stem == "quick"), suites[0])
            if self.gpuscope.extra_suites:
                preferred = self.gpuscope.extra_suites[0]
            select.value = str(preferred)

    # --- telemetry ---------------------------------------------------------------------------

    def show_sample(self, sample: Sample) -> None:
        devices = ("cpu", *(f"cuda:{g.index}" for g in sample.gpus if g.mig_parent_index is None))
        if devices != self._devices:
            self._devices = devices
            select = self.query_one("#probe-device", Select)
            current = select.value
            select.set_options([(d, d) for d in devices])
            select.value = current if current in devices else "cpu"
        self.query_one("#probe-live", Static).update(self._live_line(sample), layout=False)
        self._update_pending()

    def _live_line(self, sample: Sample) -> str:
        device = self.query_one("#probe-device", Select).value
        if device == "cpu" or not isinstance(device, str):
            host = sample.host
            cpu = host.cpu_utilization_percent
            return f"Now on cpu: {NA if not isinstance(cpu, (int, float)) else f'{cpu:.0f}%'} busy · memory {host.memory_used_bytes / 1e9:.1f} GB used"
        index = int(device.split(":")[1])
        gpu = next((g for g in sample.gpus if g.index == index and g.mig_parent_index is None), None)
        if gpu is None:
            return f"Now on {device}: not in the latest sample"
        dram = gpu.dram_bandwidth_bytes_per_s
        clock = gpu.sm_clock_mhz
        power = gpu.power_w
        return (
            f"Now on {device}: DRAM {NA if not isinstance(dram, (int, float)) else fmt_rate(dram)} · "
            f"SM clock {NA if not isinstance(clock, (int, float)) else f'{clock:.0f} MHz'} · "
            f"power {NA if not isinstance(power, (int, float)) else f'{power:.0f} W'}"
        )

    def _update_pending(self) -> None:
        """Fill in the "during" columns once the UI's telemetry covers each measurement's window
        (a sample after a short measurement arrives up to one interval later)."""
        if not self._pending:
            return
        table = self.query_one("#probe-table", DataTable)
        latest = self.gpuscope.latest_sample.timestamp if self.gpuscope.latest_sample else 0.0
        keep = []
        for row_key, measurement, device, start_s, end_s in self._pending:
            values = self._during(measurement, device, start_s, end_s)
            for column, value in zip(("dram", "clock", "power"), values):
                table.update_cell(row_key, column, value)
            during = measurement.get("telemetry_during")
            final = (isinstance(during, dict) and during.get("available")) or latest >= end_s + self.gpuscope.interval_s
            if not final:
                keep.append((row_key, measurement, device, start_s, end_s))
        self._pending = keep

    def _during(self, measurement: dict[str, Any], device: str, start_s: float, end_s: float) -> tuple[str, str, str]:
        """DRAM B/s, clock and power while the measurement ran: the probe's own telemetry (GPU,
        sampled every 0.15 s) when it has it, else the mean of the UI's samples in that window
        (the next sample after a short measurement counts too)."""
        during = measurement.get("telemetry_during")
        if isinstance(during, dict) and during.get("available"):
            dram, clock, power = (during.get(f"{key}_mean") for key in ("dram_bandwidth_bytes_per_s", "sm_clock_mhz", "power_w"))
            if any(isinstance(v, (int, float)) for v in (dram, clock, power)):
                return _during_text(dram, clock, power)
        history = self.gpuscope.history
        end_s = end_s + self.gpuscope.interval_s
        if device == "cpu":
            cpu = history.mean_between(("host", "cpu"), start_s, end_s)
            return ("-", "-" if cpu is None else f"CPU {cpu:.0f}%", "-")
        sample = self.gpuscope.latest_sample
        index = int(device.split(":")[1]) if ":" in device and device.split(":")[1].isdigit() else 0
        gpu = next((g for g in (sample.gpus if sample else []) if g.index == index and g.mig_parent_index is None), None)
        if gpu is None:
            return (NA, NA, NA)
        key = gpu_key(gpu)
        return _during_text(
            history.mean_between(("gpu", key, "dram_bandwidth_bytes_per_s"), start_s, end_s),
            history.mean_between(("gpu", key, "sm_clock_mhz"), start_s, end_s),
            history.mean_between(("gpu", key, "power_w"), start_s, end_s),
        )

    # --- running -----------------------------------------------------------------------------

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "probe-run":
            self.action_run()
        elif event.button.id == "probe-cancel":
            self.action_cancel()

    def action_run(self) -> None:
        if self.job is not None:
            self.notify("A probe run is already going; cancel it first (escape)", severity="warning")
            return
        suite = self.query_one("#probe-suite", Select).value
        device = self.query_one("#probe-device", Select).value
        if not isinstance(suite, str):
            self.notify("No suite selected", severity="warning")
            return
        output = Path(tempfile.mkdtemp(prefix="gpuscope-probe-")) / "results.json"
        self.job = ProbeJob(suite, str(device), output)
        self._document = None
        self._run_index = None
        self._started_s = time.time()
        self._measure_start_s = self._started_s
        self.query_one("#probe-table", DataTable).clear()
        self._pending = []
        progress = self.query_one("#probe-progress", ProgressBar)
        progress.update(total=1, progress=0)
        self._set_running(True)
        self._status(f"Starting {Path(suite).stem} on {device} (child process; torch loads there)…")
        self._run_job(self.job)

    def action_cancel(self) -> None:
        if self.job is None:
            return
        self.job.cancel()
        self._status("Cancelling… keeping the measurements so far")

    def _set_running(self, running: bool) -> None:
        self.query_one("#probe-run", Button).disabled = running
        self.query_one("#probe-cancel", Button).disabled = not running
        self.query_one("#probe-suite", Select).disabled = running
        self.query_one("#probe-device", Select).disabled = running

    def _status(self, text: str) -> None:
        self.query_one("#probe-status", Static).update(text, layout=False)

    @work(thread=True, group="probe", exclusive=True, exit_on_error=False)
    def _run_job(self, job: ProbeJob) -> None:
        worker = get_current_worker()

        def post(event: ProbeEvent) -> None:
            if worker.is_cancelled or not self.app.is_running:
                job.kill()  # the app is leaving: do not wait on its event loop
                return
            self.app.call_from_thread(self._on_event, job, event)

        try:
            job.start()
        except OSError as exc:
            post(ProbeEvent("failed", {"message": f"cannot start the probe process: {exc}"}))
            post(ProbeEvent("exited", {"returncode": -1, "stderr": ""}))
            return
        for event in job.events():
            post(event)

    def _on_event(self, job: ProbeJob, event: ProbeEvent) -> None:
        if job is not self.job:
            return
        data = event.data
        progress = self.query_one("#probe-progress", ProgressBar)
        if event.kind == "started":
            total = data.get("total")
            progress.update(total=max(1, int(total)) if isinstance(total, int) else 1, progress=0)
            self._status(f"Running {data.get('suite', Path(job.suite).stem)} on {job.device}: {total} measurements")
        elif event.kind == "progress":
            done, total = data.get("done"), data.get("total")
            if isinstance(total, int) and total > 0:
                progress.update(total=total, progress=done if isinstance(done, int) else progress.progress)
            name = data.get("name", "")
            if data.get("phase") == "start":
                self._measure_start_s = event.wall_s
            self._status(f"{done}/{total} {name} · {time.time() - self._started_s:.0f} s")
        elif event.kind == "measurement":
            measurement = data.get("measurement") if isinstance(data.get("measurement"), dict) else data
            self._add_measurement(job, measurement, event.wall_s, data.get("ceilings"), data.get("workloads"))
            self._measure_start_s = event.wall_s
        elif event.kind == "finished":
            self._finish(job, data)
        elif event.kind == "failed":
            self.notify(f"Probe run failed: {data.get('message')}", severity="error", markup=False)
            self._status(f"Failed: {data.get('message')}")
        elif event.kind == "exited":
            if self.job is job:
                code = data.get("returncode")
                if code not in (0, None) and self._document is None:
                    tail = str(data.get("stderr", "")).strip().splitlines()[-1:] or [""]
                    self._status(f"The probe process exited with code {code}. {tail[0]}")
                self.job = None
                self._set_running(False)

    def _add_measurement(
        self, job: ProbeJob, measurement: dict[str, Any], wall_s: float, ceilings: Any = None, workloads: Any = None
    ) -> None:
        from gpuscope.results import new_results

        device = str(measurement.get("device", job.device))
        dram, clock, power = self._during(measurement, device, self._measure_start_s, wall_s)
        row_key = f"row{table_rows(self)}"
        status = str(measurement.get("status", "ok"))
        table = self.query_one("#probe-table", DataTable)
        name = str(measurement.get("name") or measurement.get("id") or "?")
        table.add_row(
            name,
            device,
            _fmt_result(measurement),
            dram,
            clock,
            power,
            Text(status, style="bold red" if status not in ("ok", "passed") else ""),
            key=row_key,
        )
        self._pending.append((row_key, measurement, device, self._measure_start_s, wall_s))
        self._update_pending()
        table.move_cursor(row=table.row_count - 1, animate=False)
        if self._document is None:
            self._document = new_results(suite={"name": Path(job.suite).stem, "path": job.suite})
            self._document["partial"] = True
            self._document["partial_reason"] = "running"
        self._document["measurements"].append(measurement)
        if isinstance(ceilings, list):
            self._document["ceilings"] = [c for c in ceilings if isinstance(c, dict)]
        if isinstance(workloads, list):
            self._document["workloads"] = [w for w in workloads if isinstance(w, dict)]
        self._run_index = self.gpuscope.set_results(self._run_index, self._document)

    def _finish(self, job: ProbeJob, data: dict[str, Any]) -> None:
        from gpuscope.errors import GpuscopeError
        from gpuscope.results import load_results

        path = data.get("output") or str(job.output)
        try:
            document = load_results(path)
        except GpuscopeError as exc:
            self.notify(f"Could not read the probe results: {exc}", severity="error", markup=False)
            return
        self._document = document
        self._run_index = self.gpuscope.set_results(self._run_index, document)
        partial = " (partial: cancelled)" if document.get("partial") else ""
        ceilings = len(document.get("ceilings", []))
        self._status(f"Done{partial}: {len(document.get('measurements', []))} measurements, {ceilings} ceilings · saved {path}")
        progress = self.query_one("#probe-progress", ProgressBar)
        if not document.get("partial") and progress.total:
            progress.update(progress=progress.total)

    def on_unmount(self) -> None:
        if self.job is not None:
            self.job.kill()
