"""The "save snapshot report" action: hands what the app has seen (probe results and the recent
samples) to :func:`gpuscope.report.write_report`, in a thread worker (matplotlib is slow)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuscope.tui import config

if TYPE_CHECKING:
    from gpuscope.tui.app import GpuscopeApp

__all__ = ["save_report", "report_inputs"]


def report_inputs(app: "GpuscopeApp") -> list[dict[str, Any]]:
    """The results documents to report: the loaded and measured ones, or, with none, an empty
    results document naming this machine's devices (the report then shows the telemetry)."""
    if app.probe_results:
        return list(app.probe_results)
    from gpuscope.results import new_results
    from gpuscope.tui.roofline_data import live_document

    document = new_results(system={"hostname": app.latest_sample.host.hostname} if app.latest_sample else {})
    live = live_document(app.latest_sample)
    if live is not None:
        document["devices"] = live["devices"]
    return [document]


def save_report(app: "GpuscopeApp") -> None:
    """Write an HTML report into :func:`config.screenshots_dir`, or say why not (notification)."""
    try:
        from gpuscope.report import write_report
    except ImportError:
        app.notify("Reports not available in this build (gpuscope.report is missing)", severity="warning")
        return
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
