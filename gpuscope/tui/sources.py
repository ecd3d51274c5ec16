"""Where the dashboard's samples come from: the live collector, the demo (fake NVML with two
GPUs), a fixed script (tests), or a recorded log (replay). No Textual import.

``TelemetrySource.sample()`` blocks (NVML, psutil): the app calls it only from a thread worker,
one call at a time.
"""

from __future__ import annotations

import abc
import bisect
from collections.abc import Iterable, Sequence
from pathlib import Path

from gpuscope.telemetry.collector import TelemetryCollector
from gpuscope.telemetry.hostprocs import HostProcess, ProcessScanner
from gpuscope.telemetry.logfile import read_log
from gpuscope.telemetry.records import Sample
from gpuscope.telemetry.topology import Topology
from gpuscope.telemetry.topology_read import read_topology
from gpuscope.telemetry.values import Reason, Unavailable

__all__ = [
    "TelemetrySource",
    "LiveSource",
    "ScriptedSource",
    "ReplayCursor",
    "load_replay",
    "MAX_REPLAY_SAMPLES",
]

#: A replay keeps at most this many samples in memory (about 10 KB each with two GPUs); a longer
#: log is thinned evenly (a day at 1 s is 86,400 samples).
MAX_REPLAY_SAMPLES = 20_000


class TelemetrySource(abc.ABC):
    """A blocking source of :class:`Sample` records."""

    #: Shown in the top bar: "live", "demo (fake NVML, 2 GPUs)", ...
    label: str = "live"

    def open(self) -> None:  # noqa: B027 - optional hook
        """Prepare (load NVML, ...). Called once, from a worker thread."""

    @abc.abstractmethod
    def sample(self) -> Sample:
        """One sample now. Blocking. Raises on a failure the app should back off from."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources. Called once at exit, from a worker thread or the main thread."""

    def host_processes(self) -> list[HostProcess] | Unavailable:
        """Every host process now (blocking, a /proc scan), or why there are none."""
        return Unavailable(Reason.NOT_APPLICABLE, "this source has no host processes")

    def set_gpu_processes_shown(self, shown: bool) -> None:  # noqa: B027 - optional hook
        """Whether the screen on show lists GPU processes (a live source reads them less often
        when not). Called from the UI thread."""

    def topology(self) -> Topology | Unavailable:
        """How the node is wired (blocking: NVML and sysfs), or why not known. Called from a
        thread worker (gpuscope.tui.screens.topology_feed), one call at a time."""
        return Unavailable(Reason.NOT_APPLICABLE, "this source has no topology")


class _ScansHost:
    """Mixin: host processes from this machine's /proc."""

    _scanner: ProcessScanner | None = None

    def host_processes(self) -> list[HostProcess] | Unavailable:
        if self._scanner is None:
            self._scanner = ProcessScanner()
        missing = self._scanner.available()
        return missing if missing is not None else self._scanner.scan()


class LiveSource(_ScansHost, TelemetrySource):
    """The real collector (:class:`gpuscope.telemetry.collector.TelemetryCollector`)."""

    def __init__(self, nvml: bool = True, label: str = "live") -> None:
        self.nvml = nvml
        from gpuscope.telemetry.simulated import simulation_note

        #: GPUSCOPE_FAKE_NVML / GPUSCOPE_FAKE_AMDSMI (tests, benchmarks) make the GPUs fake: say so everywhere.
        self.simulated = simulation_note() is not None and nvml
        self.label = "live (simulated GPUs)" if self.simulated and label == "live" else label
        self._collector: TelemetryCollector | None = None
        self._gpu_processes_shown = True

    def open(self) -> None:
        # the TUI shows NVLink totals only: per-link rates (36 GPM metrics per H200) are not read
        collector = TelemetryCollector(nvml=self.nvml, nvlink_per_link=False)
        collector.set_gpu_processes_shown(self._gpu_processes_shown)
        collector.open()
        self._collector = collector

    def set_gpu_processes_shown(self, shown: bool) -> None:
        self._gpu_processes_shown = shown
        collector = self._collector
        if collector is not None:
            collector.set_gpu_processes_shown(shown)

    #: The sysfs root the topology's NUMA nodes and NICs are read under (``topo --sysfs``).
    sysfs_root = "/sys"

    def topology(self) -> Topology | Unavailable:
        from gpuscope.telemetry.simulated import simulation_note

        simulated = (simulation_note() or self.label) if self.simulated else None
        return read_topology(self.sysfs_root, simulated=simulated, nvml=self.nvml)

    def sample(self) -> Sample:
        if self._collector is None:
            self.open()
        assert self._collector is not None
        return self._collector.sample()

    def close(self) -> None:
        collector, self._collector = self._collector, None
        if collector is not None:
            try:
                collector.close()
            except Exception:  # noqa: BLE001 - closing at exit must not raise
                pass


class ScriptedSource(TelemetrySource):
    """Returns prepared samples in order, then repeats the last one (tests, snapshots)."""

    def __init__(
        self, samples: Sequence[Sample], label: str = "scripted", processes: Sequence[HostProcess] | None = None
    ) -> None:
        if not samples:
            raise ValueError("ScriptedSource needs at least one sample")
        self._samples = list(samples)
        self._position = 0
        self.label = label
        self._processes = None if processes is None else list(processes)

    def host_processes(self) -> list[HostProcess] | Unavailable:
        if self._processes is None:
            return super().host_processes()
        return list(self._processes)

    def sample(self) -> Sample:
        sample = self._samples[min(self._position, len(self._samples) - 1)]
        self._position += 1
        return sample


def load_replay(path: str | Path, limit: int = MAX_REPLAY_SAMPLES) -> tuple[list[Sample], int]:
    """Read a ``gpuscope log`` file (JSONL or CSV). Returns the samples (oldest first) and the
    stride kept: 1 when every sample fits in ``limit``, else every ``stride``-th sample (the log
    is thinned evenly, so a day-long log still replays end to end). Raises
    :class:`gpuscope.errors.BadInputError` for a bad file."""
    samples: list[Sample] = []
    stride = 1
    for number, sample in enumerate(read_log(path)):
        if number % stride:
            continue
        samples.append(sample)
        if len(samples) > limit:
            samples = samples[::2]
            stride *= 2
    return samples, stride


class ReplayCursor:
    """Position, pause and speed over recorded samples (pure state; the app drives the timer)."""

    def __init__(self, samples: Iterable[Sample], speed: float = 1.0) -> None:
        self.samples = sorted(samples, key=lambda s: s.timestamp)
        if not self.samples:
            raise ValueError("a replay needs at least one sample")
        self.position = 0
        self.speed = speed
        self.paused = False
        self._times = [s.timestamp for s in self.samples]

    def __len__(self) -> int:
        return len(self.samples)

    @property
    def current(self) -> Sample:
        return self.samples[self.position]

    @property
    def at_end(self) -> bool:
        return self.position >= len(self.samples) - 1

    @property
    def start_s(self) -> float:
        return self._times[0]

    @property
    def end_s(self) -> float:
        return self._times[-1]

    @property
    def elapsed_s(self) -> float:
        """Seconds from the first sample to the current one (log time)."""
        return self._times[self.position] - self._times[0]

    def step(self, count: int = 1) -> Sample:
        """Move ``count`` samples (negative goes back), clamped to the log."""
        self.position = min(len(self.samples) - 1, max(0, self.position + count))
        return self.current

    def seek_s(self, offset_s: float) -> Sample:
        """Jump to the last sample at or before ``offset_s`` seconds after the first one."""
        target = self._times[0] + max(0.0, offset_s)
        self.position = max(0, bisect.bisect_right(self._times, target) - 1)
        return self.current

    def seek_fraction(self, fraction: float) -> Sample:
        """Jump to ``fraction`` (0..1) of the log's duration."""
        return self.seek_s(min(1.0, max(0.0, fraction)) * (self.end_s - self.start_s))

    def delay_to_next_s(self) -> float | None:
        """Wall seconds until the next sample at the current speed; None at the end or paused."""
        if self.paused or self.at_end:
            return None
        gap = self._times[self.position + 1] - self._times[self.position]
        return max(0.0, gap) / max(self.speed, 1e-6)

    def window(self, count: int) -> list[Sample]:
        """The last ``count`` samples up to and including the current one (to rebuild history)."""
        return self.samples[max(0, self.position - count + 1) : self.position + 1]
