"""Run a probe suite in a child process and read its progress as JSON lines (no Textual).

Why a child process: the probe harness runs Python loops and torch kernels that may hold the
GIL for long stretches; in a child they cannot stall the UI, Ctrl-C style cancellation is a
signal, a crash cannot take the UI down, and torch is never imported into the UI process.

Protocol: the child (``python -m gpuscope.tui.probe_child``) prints one JSON object per line on
stdout, decoded into the typed events of :mod:`gpuscope.schema.events` (``Started``,
``Progress``, ``MeasurementDone``, ``Finished``, ``Failed``; other stdout lines become ``Log``);
the reader adds ``Exited`` when the child ends. :meth:`ProbeJob.cancel` sends SIGINT: the child
stops within about a second and still writes the measurements so far, marked partial.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from gpuscope.paths import child_env
from gpuscope.schema.events import Exited, ProbeEvent, decode_event

__all__ = ["ProbeEvent", "ProbeJob", "kill_all"]

#: Children still running (so the app can stop them all when it quits).
_ACTIVE: set[ProbeJob] = set()


def kill_all() -> None:
    """Kill every probe child still running (called when the app exits)."""
    for job in list(_ACTIVE):
        job.kill()


class ProbeJob:
    """One suite on one device in a child process. ``events()`` blocks: call it from a worker
    thread. ``cancel()`` and ``kill()`` may be called from any thread."""

    def __init__(self, suite: str | Path, device: str, output: str | Path) -> None:
        self.suite = str(suite)
        self.device = device
        self.output = Path(output)
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        """Start the child (in its own process group, so a terminal Ctrl-C does not reach it)."""
        env = child_env(PYTHONUNBUFFERED="1")
        arguments = ["--suite", self.suite, "--device", self.device, "--output", str(self.output)]
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "gpuscope.tui.probe_child", *arguments],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            env=env,
            start_new_session=True,
        )
        _ACTIVE.add(self)

    def events(self) -> Iterator[ProbeEvent]:
        """The child's events until it exits; the last one is :class:`Exited` (returncode, stderr tail)."""
        process = self.process
        assert process is not None and process.stdout is not None
        for line in process.stdout:
            line = line.strip()
            if line:
                yield decode_event(line, time.time())
        returncode = process.wait()
        _ACTIVE.discard(self)
        stderr = process.stderr.read() if process.stderr is not None else ""
        yield Exited(returncode=returncode, stderr=stderr[-2000:], wall_s=time.time())

    def cancel(self) -> None:
        """Ask the child to stop (SIGINT); it keeps what it measured. Escalates if it ignores it."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        try:
            process.send_signal(signal.SIGINT)
        except OSError:
            return
        threading.Thread(target=self._escalate, args=(process,), daemon=True, name="probe-cancel").start()

    @staticmethod
    def _escalate(process: subprocess.Popen[str]) -> None:
        for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            try:
                process.wait(timeout=wait_s)
                return
            except subprocess.TimeoutExpired:
                try:
                    process.send_signal(sig)
                except OSError:
                    return

    def kill(self) -> None:
        """Stop the child now (the app is quitting)."""
        process = self.process
        if process is not None and process.poll() is None:
            try:
                process.kill()
            except OSError:
                pass
