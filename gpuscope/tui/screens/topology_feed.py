"""The TUI's topology reads and link alerts.

The source's topology (:meth:`gpuscope.tui.sources.TelemetrySource.topology`: NVML and sysfs,
blocking) is read in a thread worker once the first sample arrived (the source is open then),
and again :attr:`TopologyFeed.period_s` after each read finished (never two at once). Each read
is judged against the one before by :func:`gpuscope.telemetry.topology_health.link_findings`, so
counters are judged rising only from the second read on, and a PCIe link below its maximum
generation only while its GPU is busy, exactly as that module states. A counter seen rising
stays an alert for :data:`RISING_HOLD_S` (one rise between two reads is easy to miss otherwise).
Findings become :class:`gpuscope.telemetry.alerts.Alert` entries (kind ``link``) on the alert line
of every screen.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from gpuscope.telemetry.alerts import LEVELS, Alert
from gpuscope.telemetry.topology import Topology
from gpuscope.telemetry.topology_health import LinkFinding, link_findings
from gpuscope.telemetry.values import Reason, Unavailable

if TYPE_CHECKING:
    from textual.timer import Timer

    from gpuscope.tui.app import GpuscopeApp

__all__ = [
    "TopologyFeed",
    "TopologyWatch",
    "link_alerts",
    "TOPOLOGY_PERIOD_S",
    "TOPOLOGY_IDLE_PERIOD_S",
    "RISING_HOLD_S",
    "LINK_LEVELS",
]

#: Seconds between the end of one topology read and the start of the next, while the topology
#: screen shows, and while another does (a read is about 8 NVML calls per NVLink link: ~1,200 on
#: an 8-GPU NVSwitch node; the link alerts still come, later).
TOPOLOGY_PERIOD_S = 10.0
TOPOLOGY_IDLE_PERIOD_S = 60.0
#: Seconds an error counter seen rising stays an alert.
RISING_HOLD_S = 300.0
#: Finding kind -> alert level: links down or errors rising are warnings, the rest careful.
LINK_LEVELS = {
    "pcie_width": "warning",
    "pcie_generation": "careful",
    "nvlink_down": "warning",
    "nvlink_errors": "warning",
    "pcie_replays": "warning",
    "ib_port": "warning",
    "numa_far": "careful",
}
_RISING = ("nvlink_errors", "pcie_replays")


def _gpu_of(subject: str) -> int | None:
    head = subject.split(" ")[0].split("-")[0]
    return int(head[3:]) if head.startswith("GPU") and head[3:].isdigit() else None


def link_alerts(findings: list[LinkFinding]) -> list[Alert]:
    """Each finding as an alert (kind ``link``), worst first."""
    alerts = [Alert(LINK_LEVELS.get(f.kind, "careful"), "link", _gpu_of(f.subject), "", f.line) for f in findings]
    alerts.sort(key=lambda a: -LEVELS.index(a.level))
    return alerts


class TopologyWatch:
    """Successive topology reads and what they show (no Textual, no clock of its own)."""

    def __init__(self) -> None:
        self.topology: Topology | None = None
        self.unavailable: Unavailable | None = Unavailable(Reason.WARMING_UP, "topology not read yet")
        self.findings: list[LinkFinding] = []
        self.reads = 0
        self._previous: tuple[Topology, float] | None = None
        self._rising: dict[str, tuple[LinkFinding, float]] = {}  # subject -> (finding, seen at)

    def update(self, read: Topology | Unavailable, now_s: float) -> list[LinkFinding]:
        """Take one read made at ``now_s`` (monotonic seconds); returns the findings now."""
        if isinstance(read, Unavailable):
            self.unavailable = read
            return self.findings
        self.reads += 1
        self.unavailable = None
        before = self._previous
        if before is None:
            found = link_findings(read)
        else:
            found = link_findings(before[0], read, window_s=max(0.0, now_s - before[1]))
        for finding in found:
            if finding.kind in _RISING:
                self._rising[finding.subject] = (finding, now_s)
        self._rising = {k: v for k, v in self._rising.items() if now_s - v[1] <= RISING_HOLD_S}
        current = [f for f in found if f.kind not in _RISING]
        current.extend(finding for finding, _ in self._rising.values())
        self.topology, self._previous, self.findings = read, (read, now_s), current
        return current


class TopologyFeed:
    """Reads the app's source's topology off the UI thread, keeps a :class:`TopologyWatch`, and
    merges link alerts into the app's alerts."""

    def __init__(self, app: GpuscopeApp, period_s: float = TOPOLOGY_PERIOD_S) -> None:
        self.app = app
        self.period_s = period_s
        self.idle_period_s = max(period_s, TOPOLOGY_IDLE_PERIOD_S)
        #: monotonic seconds, when each read arrived (tests give a fixed clock)
        self.clock: Callable[[], float] = time.monotonic
        self.watch = TopologyWatch()
        self.alerts: list[Alert] = []
        self._started = False
        self.read_at: float | None = None  # clock() when the last read arrived
        self._next: Timer | None = None  # the pending periodic read
        if app.source is None:
            self.watch.unavailable = Unavailable(
                Reason.NOT_APPLICABLE, "a replay has no topology (it is not in the log)"
            )

    @property
    def topology(self) -> Topology | None:
        return self.watch.topology

    def merge(self, alerts: list[Alert]) -> list[Alert]:
        """``alerts`` (thresholds) with the link alerts, worst first; starts reading on the first call."""
        if not self._started and self.app.source is not None:
            self._started = True
            self.read_now()
        if not self.alerts:
            return alerts
        merged = [*alerts, *self.alerts]
        merged.sort(key=lambda a: -a.rank)
        return merged

    def refresh_if_stale(self) -> None:
        """Read now when the last read is older than the shown period (the screen just opened:
        reads while it was hidden come only every idle period)."""
        if self._started and (self.read_at is None or self.clock() - self.read_at >= self.period_s):
            self.read_now()

    def read_now(self) -> None:
        """Read the topology in a thread worker (one at a time)."""
        source = self.app.source
        if source is None:
            return
        if self._next is not None:
            self._next.stop()  # this read starts the next period
            self._next = None

        def read() -> None:
            try:
                result: Topology | Unavailable = source.topology()
            except Exception as exc:  # noqa: BLE001 - a failed read is shown, never raised into the UI
                result = Unavailable(Reason.ERROR, f"topology not read: {type(exc).__name__}: {exc}")
            self.app.call_from_thread(self._arrived, result)

        self.app.run_worker(read, thread=True, group="topology", name="topology", exclusive=True, exit_on_error=False)

    def _arrived(self, result: Topology | Unavailable) -> None:
        self.read_at = self.clock()
        self.watch.update(result, self.read_at)
        previous, self.alerts = self.alerts, link_alerts(self.watch.findings)
        self.app.topology_changed(alerts_changed=self.alerts != previous)
        shown = self.app.screen_stack and self.app.current_mode == "topology"
        self._next = self.app.set_timer(self.period_s if shown else self.idle_period_s, self.read_now, name="topology")
