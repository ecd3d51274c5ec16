"""The probe child process the TUI starts: ``python -m gpuscope.tui.probe_child --suite S
--device D --output OUT.json``. Runs :class:`gpuscope.probing.ProbeRunner` and reports on stdout
as JSON lines (protocol in :mod:`gpuscope.tui.probe_job`). SIGINT stops the run within about a
second; the measurements so far are still written to OUT (``partial`` true). No Textual here.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any

__all__ = ["main"]


def _say(event: str, **data: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **data}, default=str, allow_nan=False) + "\n")
    sys.stdout.flush()


def _finite(value: Any) -> Any:
    import math

    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpuscope.tui.probe_child")
    parser.add_argument("--suite", required=True)
    parser.add_argument("--device", required=True)
    parser.add_argument("--output", required=True)
    args = parser.parse_args(argv)

    cancel = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: cancel.set())
    signal.signal(signal.SIGTERM, lambda *_: cancel.set())

    from gpuscope.errors import GpuscopeError
    from gpuscope.results import write_json_atomic

    try:
        from gpuscope.probing import ProbeRunner, load_suite

        suite = load_suite(args.suite)
        runner_box: dict[str, Any] = {}

        def on_progress(done: int, total: int, label: str) -> None:
            _say("progress", done=done, total=total, name=label, phase="start" if done < total else "end")

        def on_measurement(record: dict[str, Any]) -> None:
            snapshot = runner_box["runner"].snapshot()
            _say(
                "measurement",
                measurement=_finite(record),
                ceilings=_finite(snapshot.get("ceilings", [])),
                workloads=_finite(snapshot.get("workloads", [])),
            )

        runner = ProbeRunner(
            suite,
            args.device,
            on_progress=on_progress,
            on_measurement=on_measurement,
            on_message=lambda message: _say("log", line=message),
        )
        runner_box["runner"] = runner
        _say("started", total=len(runner.steps), suite=suite.name, device=args.device)
        results = runner.run(cancel)
        write_json_atomic(args.output, results)
        _say("finished", output=args.output, partial=bool(results.get("partial")))
        return 0
    except GpuscopeError as exc:
        _say("failed", message=str(exc))
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - reported to the UI as one line
        _say("failed", message=f"{type(exc).__name__}: {exc}")
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
