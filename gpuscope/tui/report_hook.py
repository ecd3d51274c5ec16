"""The "save snapshot report" action: hands what the app has seen (probe results and the recent
samples) to :func:`gpuscope.report.write_report`, in a thread worker (matplotlib is slow)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from gpuscope.results import empty_results
from gpuscope.schema.core import JsonObject, decode_tree
from gpuscope.tui import config
from gpuscope.tui.roofline_data import live_document

if TYPE_CHECKING:
    from gpuscope.schema.results import Results
    from gpuscope.tui.app import GpuscopeApp

__all__ = ["save_report", "report_inputs"]


def _installed_version(package: str) -> str | None:
    """A package's installed version without importing it (torch stays out of the UI process)."""
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def system_of(app: GpuscopeApp) -> JsonObject:
    """The ``system`` object for a report from the TUI: host, CPU, OS, Python, torch, driver;
    ``simulated`` names the fake source when the data is not from real hardware."""
    import platform

    sample = app.latest_sample
    system: JsonObject = {
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch": _installed_version("torch"),
    }
    if sample is not None:
        host = sample.host
        system.update(hostname=host.hostname, cpu_model=host.cpu_model, logical_cores=host.logical_cores)
        if isinstance(host.physical_cores, int):
            system["physical_cores"] = host.physical_cores
        if isinstance(sample.driver_version, str):
            system["driver"] = sample.driver_version
        if isinstance(sample.cuda_driver_version, str):
            system["cuda"] = sample.cuda_driver_version
    if app.simulated:
        system["simulated"] = f"{app.source_label}: simulated GPUs"
    return system


def report_inputs(app: GpuscopeApp) -> list[JsonObject]:
    """The results documents to report: the loaded and measured ones as written (their typed
    views where nothing was written), or, with none, an empty results document naming this
    machine's devices (the report then shows the telemetry). A report of simulated data (demo,
    fake NVML) says so in its title."""
    if app.probe_results:
        documents = [_as_written(typed, written) for typed, written in app.probe_results]
        if app.simulated and documents:
            written_system = documents[0].get("system")
            system = written_system if isinstance(written_system, dict) else {}
            documents[0]["system"] = {**system, "simulated": system_of(app)["simulated"]}
        return documents
    import msgspec

    document: JsonObject = msgspec.to_builtins(empty_results())
    document["system"] = system_of(app)  # with "simulated", which System does not declare
    live = live_document(app.latest_sample)
    if live is not None:
        document["devices"] = msgspec.to_builtins(live.devices)
    return [document]


def _as_written(typed: Results, written: bytes | JsonObject | None) -> JsonObject:
    """A results document as written (undeclared fields and explicit nulls kept, which the
    report's energy and profile sections read), from its bytes, its dict, or its typed view."""
    if isinstance(written, bytes):
        return dict(decode_tree(written, "results"))
    if written is not None:
        return dict(written)
    import msgspec

    return dict(msgspec.to_builtins(typed))


def save_report(app: GpuscopeApp) -> None:
    """Write an HTML report into :func:`config.screenshots_dir`, or say why not (a notification)."""
    from gpuscope.report import write_report

    folder = config.screenshots_dir()
    path = folder / f"gpuscope-report-{time.strftime('%Y%m%d-%H%M%S')}.html"
    documents = report_inputs(app)
    samples = app.history_samples()
    app.notify(f"Writing report {path.name}…", timeout=2, markup=False)

    def work() -> None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            written = write_report(path, documents, samples=samples)
        except Exception as exc:  # noqa: BLE001 - any failure is one line in the UI
            app.call_from_thread(app.notify, f"Report failed: {exc}", severity="error", markup=False)
            return
        app.call_from_thread(app.notify, f"Report saved: {Path(written)}", markup=False)

    app.run_worker(work, thread=True, group="report", name="report", exit_on_error=False)
