"""The probe child process the TUI starts: ``python -m gpuscope.tui.probe_child --suite S
--device D --output OUT.json``. Runs :class:`gpuscope.probing.ProbeRunner` and reports on stdout
as JSON lines (protocol in :mod:`gpuscope.tui.probe_job`). SIGINT stops the run within about a
second; the measurements so far are still written to OUT (``partial`` true). No Textual here.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from gpuscope.errors import GpuscopeError
from gpuscope.fileio import write_json_atomic
from gpuscope.probing.runner import ProbeRunner
from gpuscope.probing.suite import load_suite
from gpuscope.schema.events import Failed, Finished, Log, MeasurementDone, ProbeEvent, Progress, Started, encode_event
from gpuscope.schema.results import Measurement

__all__ = ["main"]


def _say(event: ProbeEvent) -> None:
    sys.stdout.buffer.write(encode_event(event))
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpuscope.tui.probe_child")
    parser.add_argument("--suite", required=True)
    parser.add_argument("--device", required=True)
    parser.add_argument("--output", required=True)
    args = parser.parse_args(argv)

    cancel = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: cancel.set())
    signal.signal(signal.SIGTERM, lambda *_: cancel.set())

    try:
        suite = load_suite(args.suite)

        def on_progress(done: int, total: int, label: str) -> None:
            _say(Progress(done=done, total=total, name=label, phase="start" if done < total else "end"))

        def on_measurement(measurement: Measurement) -> None:
            snapshot = runner.snapshot()
            if snapshot is None:
                _say(MeasurementDone(measurement=measurement))
            else:
                _say(MeasurementDone(measurement=measurement, ceilings=snapshot.ceilings, workloads=snapshot.workloads))

        runner = ProbeRunner(
            suite,
            args.device,
            on_progress=on_progress,
            on_measurement=on_measurement,
            on_message=lambda message: _say(Log(line=message)),
        )
        _say(Started(total=len(runner.steps), suite=suite.name, device=args.device))
        results = runner.run(cancel)
        write_json_atomic(args.output, results)
        _say(Finished(output=args.output, partial=bool(results.partial)))
        return 0
    except GpuscopeError as exc:
        _say(Failed(message=str(exc)))
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - reported to the UI as one line
        _say(Failed(message=f"{type(exc).__name__}: {exc}"))
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
