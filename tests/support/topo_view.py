"""Topologies read from the fake NVML's scripted nodes (hgx8, pcie4) and the made-up sysfs tree,
twice (fake seconds apart, so error counters rise), and a TUI app whose source returns them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuscope.telemetry.records import Sample
from gpuscope.telemetry.topology import Topology
from gpuscope.telemetry.topology_read import read_topology
from gpuscope.testing._fake_nvml_topology import TOPOLOGIES
from gpuscope.testing.fake_nvml import FakeClock, FakeNvml, install_fake_nvml
from gpuscope.tui.sources import ScriptedSource
from support.sysfs import make_sysfs

__all__ = ["read_twice", "TopologySource", "make_topology_app", "HOSTILE_NIC"]

#: A NIC name with an escape sequence, Rich markup and HTML in it.
HOSTILE_NIC = "eth\x1b[31m[bold red]X[/]<img src=x onerror=alert(1)>"


def read_twice(node: str, sysfs: Path, *, busy: bool = True, apart_s: float = 2.0) -> list[Topology]:
    """Two reads of ``node`` (``hgx8`` or ``pcie4``) ``apart_s`` fake seconds apart."""
    if not (sysfs / "devices").exists():
        make_sysfs(sysfs)
    clock = FakeClock()
    gpus = TOPOLOGIES[node]()
    fake = FakeNvml.with_gpus(gpus, clock=clock)
    for index in range(len(gpus)):
        fake.set_load(index, gpu_util_percent=80.0 if busy else 0.0)
    with install_fake_nvml(fake):
        first = read_topology(sysfs)
        clock.advance(apart_s)
        second = read_topology(sysfs)
    return [first, second]


def make_topology_app(node: str, sysfs: Path, *, hostile: bool = False, samples: int = 3):  # type: ignore[no-untyped-def]
    """A GpuscopeApp on ``samples`` fake-NVML samples of ``node``'s GPUs whose source returns the
    two reads of :func:`read_twice` (then the second again), read every 0.05 s on a fixed clock
    (10 s per read)."""
    from tui_samples import fake_nvml_samples, host_processes

    from gpuscope.tui.app import GpuscopeApp

    reads = read_twice(node, sysfs)
    if hostile:
        for read in reads:
            read.nics[0].name = HOSTILE_NIC
    series = fake_nvml_samples(samples, gpus=TOPOLOGIES[node]())
    for sample in series:
        for gpu in sample.gpus:
            gpu.power_w = 300.0  # under every model's cap: only link alerts on the alert line
    source = TopologySource(series[-1:], reads, label="fake NVML", processes=host_processes())
    app = GpuscopeApp(source, interval_s=3600.0, persist_settings=False)
    app.history.extend(series[:-1])
    app.topology_feed.period_s = app.topology_feed.idle_period_s = 0.05
    ticks = iter(range(10**6))
    app.topology_feed.clock = lambda: 10.0 * next(ticks)
    return app


class TopologySource(ScriptedSource):
    """A ScriptedSource whose topology reads are scripted too (the last one repeats)."""

    def __init__(self, samples: list[Sample], reads: list[Topology], **kwargs: Any) -> None:
        super().__init__(samples, **kwargs)
        self.reads = list(reads)
        self.count = 0

    def topology(self) -> Topology:
        read = self.reads[min(self.count, len(self.reads) - 1)]
        self.count += 1
        return read
