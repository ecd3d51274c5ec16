"""The probes screen: pick a suite and a device, run it in a child process, watch progress,
cancel. Each measurement lands in the table with what the device did meanwhile (DRAM GB/s,
clock, power, from the UI's own telemetry) and on the roofline screen as a point."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, DataTable, Label, ProgressBar, Select, Static
from textual.worker import get_current_worker

from gpuscope.extras import missing_probes_reason
from gpuscope.fileio import write_json_atomic, write_text_atomic
from gpuscope.probing.session import MeasurementRow, ProbeSession
from gpuscope.resources import suites_dir
from gpuscope.roofline.live import cuda_device_name
from gpuscope.roofline.sweep_chart import sweep_lines, sweeps_of
from gpuscope.schema.events import Exited, Failed, Finished, MeasurementDone, ProbeEvent, Progress, Started
from gpuscope.schema.results import Measurement, Results
from gpuscope.telemetry.nvml.mapping import match_cuda_device
from gpuscope.telemetry.records import GpuSample, Sample
from gpuscope.tui import torch_check
from gpuscope.tui.format import NA, fmt_flops, fmt_rate
from gpuscope.tui.history import gpu_key
from gpuscope.tui.probe_job import ProbeJob
from gpuscope.tui.screens.base import GpuscopeScreen
from gpuscope.tui.widgets.save_dialog import SaveDialog

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
    found: list[Path] = []
    try:
        found = sorted(suites_dir().glob("*.toml"))
    except OSError:
        pass
    for path in extra or []:
        if path not in found:
            found.append(path)
    return found


def _cuda_device_names(sample: Sample) -> list[str]:
    """``cuda:N`` of every GPU in ``sample`` that CUDA sees, numbered by the one NVML <-> CUDA
    mapping (``CUDA_VISIBLE_DEVICES``, then PCI order; never NVML's index), in CUDA order."""
    names = {cuda_device_name(gpu, sample.gpus) for gpu in sample.gpus}
    return sorted((name for name in names if name.startswith("cuda:")), key=lambda name: int(name.split(":")[1]))


def _gpu_of(sample: Sample | None, device: str) -> GpuSample | None:
    """The NVML sample of CUDA device ``device`` (``cuda:N``) by the one NVML <-> CUDA mapping
    (``CUDA_VISIBLE_DEVICES``, then PCI order; never NVML's index), or None."""
    name, _, number = device.partition(":")
    if sample is None or name != "cuda" or not number.isdigit():
        return None
    match = match_cuda_device(sample.gpus, int(number))
    return match.gpu if match is not None else None


def _during_text(dram: object, clock: object, power: object) -> tuple[str, str, str]:
    """DRAM B/s, clock and power as shown (``n/a`` for what is not a number)."""

    def number(value: object) -> float | None:
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    dram_bytes_per_s, clock_mhz, power_w = number(dram), number(clock), number(power)
    return (
        NA if dram_bytes_per_s is None else fmt_rate(dram_bytes_per_s),
        NA if clock_mhz is None else f"{clock_mhz:.0f} MHz",
        NA if power_w is None else f"{power_w:.0f} W",
    )


def _fmt_result(measurement: Measurement) -> str:
    parts = []
    if measurement.flop_per_s:
        parts.append(fmt_flops(measurement.flop_per_s))
    if measurement.bytes_per_s:
        parts.append(fmt_rate(measurement.bytes_per_s))
    return " · ".join(parts) or "-"


class ProbeEventMessage(Message):
    """A typed event of a probe child, posted from the reading thread (one subclass per kind)."""

    def __init__(self, job: ProbeJob, event: ProbeEvent) -> None:
        super().__init__()
        self.job = job
        self.event = event


class RunStarted(ProbeEventMessage):
    """The child planned the suite."""


class RunProgress(ProbeEventMessage):
    """A step starts or the last one ended."""


class MeasurementLanded(ProbeEventMessage):
    """A measurement is done (a table row, a roofline point)."""


class RunFinished(ProbeEventMessage):
    """The results file is written."""


class RunFailed(ProbeEventMessage):
    """The run failed (one line)."""


class ChildExited(ProbeEventMessage):
    """The child process ended."""


class ChildLog(ProbeEventMessage):
    """A line the child printed."""


_MESSAGES: dict[type, type[ProbeEventMessage]] = {
    Started: RunStarted,
    Progress: RunProgress,
    MeasurementDone: MeasurementLanded,
    Finished: RunFinished,
    Failed: RunFailed,
    Exited: ChildExited,
}


class ProbesScreen(GpuscopeScreen):
    MODE = "probes"
    DEFAULT_HINT = "enter on Run starts · escape cancels a run · points appear on the roofline (2) as they land"
    BINDINGS = [Binding("ctrl+r", "run", "Run"), Binding("escape", "cancel", "Cancel")]

    def compose_body(self) -> ComposeResult:
        with Vertical(id="probe-controls"):
            with Horizontal(id="probe-pickers"):
                yield Label("Suite", classes="probe-label")
                suites = discover_suites(list(self.gpuscope.extra_suites))
                # the first extra suite given, else the shipped "quick", else the first found
                preferred = self.gpuscope.extra_suites[:1] or [p for p in suites if p.stem == "quick"] or suites[:1]
                yield Select(
                    [(path.stem, str(path)) for path in suites],
                    id="probe-suite",
                    allow_blank=True,
                    prompt="pick a suite" if suites else "no suites found",
                    value=str(preferred[0]) if preferred else Select.BLANK,
                )
                yield Label("Device", classes="probe-label")
                yield Select([("cpu", "cpu")], id="probe-device", value="cpu", allow_blank=False)
                yield Button("Run", id="probe-run", variant="primary")
                yield Button("Cancel", id="probe-cancel", variant="error", disabled=True)
                yield Button("Save as…", id="probe-save", disabled=True)
            yield ProgressBar(id="probe-progress", total=1, show_eta=False)
            yield Static("Idle. Pick a suite and a device, then Run.", id="probe-status", markup=False)
            yield Static("", id="probe-live", markup=False)
        yield DataTable(id="probe-table", cursor_type="row", zebra_stripes=True)
        sweep = Static("", id="probe-sweep", markup=False)  # a finished run's working-set sweeps
        sweep.display = False
        yield sweep

    def __init__(self, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.job: ProbeJob | None = None
        self.session: ProbeSession | None = None
        self._run_index: int | None = None
        self._devices: tuple[str, ...] = ("cpu",)
        self._pending: list[tuple[str, MeasurementRow]] = []
        #: The line saying why only the CPU is offered is shown once.
        self._said_no_cuda = False

    def on_mount(self) -> None:
        self.add_columns("#probe-table", _COLUMNS)
        if self.gpuscope.replay is not None:  # a replay shows a recording: nothing runs live
            for control in ("#probe-run", "#probe-suite", "#probe-device"):
                self.query_one(control).disabled = True
            self._status("Replaying a log: probes run only on live hardware (start gpuscope without replay to probe).")
        elif (missing := missing_probes_reason()) is not None:  # the light install: say so before a run fails
            self.query_one("#probe-run").disabled = True
            self._status(f"Probes need torch: {missing}.")

    # --- telemetry ---------------------------------------------------------------------------

    def show_sample(self, sample: Sample) -> None:
        gpus = _cuda_device_names(sample)
        no_cuda = torch_check.cuda_unavailable_reason() if gpus and self.gpuscope.replay is None else None
        if no_cuda and not self._said_no_cuda:
            self._said_no_cuda = True
            if self.job is None:
                self._status(f"Only cpu: {no_cuda} (a CUDA build of torch probes the GPUs).")
        devices = ("cpu", *(() if no_cuda else gpus))
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
            busy = NA if not isinstance(cpu, (int, float)) else f"{cpu:.0f}%"
            mem = host.memory_used_bytes
            used = NA if not isinstance(mem, int) else f"{mem / 1e9:.1f} GB"
            return f"Now on cpu: {busy} busy · memory {used} used"
        gpu = _gpu_of(sample, device)
        if gpu is None:
            return f"Now on {device}: not in the latest sample"
        dram, clock, power = _during_text(gpu.dram_bandwidth_bytes_per_s, gpu.sm_clock_mhz, gpu.power_w)
        return f"Now on {device}: DRAM {dram} · SM clock {clock} · power {power}"

    def _update_pending(self) -> None:
        """Fill in the "during" columns once the UI's telemetry covers each measurement's window
        (a sample after a short measurement arrives up to one interval later)."""
        if not self._pending:
            return
        table = self.query_one("#probe-table", DataTable)
        latest = self.gpuscope.latest_sample.timestamp if self.gpuscope.latest_sample else 0.0
        keep = []
        for row_key, row in self._pending:
            values = self._during(row.measurement, row.device, row.start_s, row.end_s)
            for column, value in zip(("dram", "clock", "power"), values, strict=False):
                table.update_cell(row_key, column, value)
            during = row.measurement.telemetry_during
            final = (
                isinstance(during, dict) and during.get("available")
            ) or latest >= row.end_s + self.gpuscope.interval_s
            if not final:
                keep.append((row_key, row))
        self._pending = keep

    def _during(self, measurement: Measurement, device: str, start_s: float, end_s: float) -> tuple[str, str, str]:
        """DRAM B/s, clock and power while the measurement ran: the probe's own telemetry (GPU,
        sampled every 0.15 s) when it has it, else the mean of the UI's samples in that window
        (the next sample after a short measurement counts too)."""
        during = measurement.telemetry_during
        if isinstance(during, dict) and during.get("available"):
            dram, clock, power = (
                during.get(f"{key}_mean") for key in ("dram_bandwidth_bytes_per_s", "sm_clock_mhz", "power_w")
            )
            if any(isinstance(v, (int, float)) for v in (dram, clock, power)):
                return _during_text(dram, clock, power)
        history = self.gpuscope.history
        end_s = end_s + self.gpuscope.interval_s
        if device == "cpu":
            cpu = history.mean_between(("host", "cpu"), start_s, end_s)
            return ("-", "-" if cpu is None else f"CPU {cpu:.0f}%", "-")
        gpu = _gpu_of(self.gpuscope.latest_sample, device)
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
        elif event.button.id == "probe-save":
            self.action_save_as()

    def action_save_as(self) -> None:
        """Ask for a path and write the results of the last run there."""
        session = self.session
        if session is None or session.results is None:
            self.notify("No results to save yet: run a suite first", severity="warning")
            return
        written, results = session.written, session.results
        default = Path.cwd() / f"gpuscope-results-{time.strftime('%Y%m%d-%H%M%S')}.json"

        def chosen(path: str | None) -> None:
            if not path:
                return

            target = Path(path).expanduser()
            try:
                if written is not None:  # the child's file as it wrote it
                    write_text_atomic(target, written.decode("utf-8"))
                else:
                    write_json_atomic(target, results)
            except Exception as exc:  # noqa: BLE001 - any failure is one line in the UI
                self.notify(f"Could not save {target}: {exc}", severity="error", markup=False)
                return
            self.notify(f"Results saved: {target}", markup=False)

        self.app.push_screen(SaveDialog(str(default), "Save the probe results as"), chosen)

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
        self.session = ProbeSession(suite, str(device), output, started_s=time.time())
        self._run_index = None
        self.query_one("#probe-table", DataTable).clear()
        self._pending = []
        self.query_one("#probe-progress", ProgressBar).update(total=1, progress=0)
        self._set_running(True)
        self._status(self.session.status)
        self._run_job(self.job)

    def action_cancel(self) -> None:
        if self.job is None:
            return
        self.job.cancel()
        self._status("Cancelling… keeping the measurements so far")

    def _set_running(self, running: bool) -> None:
        self.query_one("#probe-save", Button).disabled = running or self.session is None or self.session.results is None
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
            self.post_message(_MESSAGES.get(type(event), ChildLog)(job, event))

        try:
            job.start()
        except OSError as exc:
            post(Failed(message=f"cannot start the probe process: {exc}", wall_s=time.time()))
            post(Exited(returncode=-1, wall_s=time.time()))
            return
        for event in job.events():
            post(event)

    def _apply(self, message: ProbeEventMessage) -> MeasurementRow | None:
        """Fold the event into the session and show its status; None for an older run's event."""
        if message.job is not self.job or self.session is None:
            message.stop()
            return None
        row = self.session.apply(message.event)
        self._status(self.session.status)
        return row

    def _show_progress(self) -> None:
        if self.session is not None:
            self.query_one("#probe-progress", ProgressBar).update(total=self.session.total, progress=self.session.done)

    @on(RunStarted)
    @on(RunProgress)
    def _on_progress(self, message: ProbeEventMessage) -> None:
        self._apply(message)
        self._show_progress()

    @on(MeasurementLanded)
    def _on_measurement(self, message: MeasurementLanded) -> None:
        row = self._apply(message)
        if row is None or self.session is None:
            return
        dram, clock, power = self._during(row.measurement, row.device, row.start_s, row.end_s)
        table = self.query_one("#probe-table", DataTable)
        row_key = f"row{table.row_count}"
        table.add_row(
            row.name,
            row.device,
            _fmt_result(row.measurement),
            dram,
            clock,
            power,
            Text(row.status, style="bold red" if row.status not in ("ok", "passed") else ""),
            key=row_key,
        )
        self._pending.append((row_key, row))
        self._update_pending()
        table.move_cursor(row=table.row_count - 1, animate=False)
        if self.session.results is not None:
            self._run_index = self.gpuscope.set_results(self._run_index, self.session.results)

    @on(RunFinished)
    def _on_finished(self, message: RunFinished) -> None:
        self._apply(message)
        session = self.session
        if session is None:
            return
        if not session.finished or session.results is None:
            self.notify(session.status, severity="error", markup=False)
            return
        self._run_index = self.gpuscope.set_results(self._run_index, session.results, session.written)
        self._show_progress()
        self.show_sweeps(session.results)

    def show_sweeps(self, results: Results) -> None:
        """Draw ``results``' working-set sweeps under the table (hidden when it has none)."""
        sweeps = sweeps_of(results)
        panel = self.query_one("#probe-sweep", Static)
        if sweeps:
            panel.update("\n".join(sweep_lines(sweeps, max(60, self.size.width - 2), 12)))
        panel.display = bool(sweeps)

    @on(RunFailed)
    def _on_failed(self, message: RunFailed) -> None:
        if self._apply(message) is None and self.session is not None and message.job is self.job:
            self.notify(f"Probe run failed: {self.session.error}", severity="error", markup=False)

    @on(ChildExited)
    def _on_exited(self, message: ChildExited) -> None:
        if message.job is not self.job:
            return
        self._apply(message)
        self.job = None
        self._set_running(False)

    @on(ChildLog)
    def _on_log(self, message: ChildLog) -> None:
        self._apply(message)

    def on_unmount(self) -> None:
        if self.job is not None:
            self.job.kill()
