"""CPU utilization from psutil.cpu_times, on a fake /proc/stat (``psutil.PROCFS_PATH``)."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from gpuscope.telemetry.host import HostCollector
from gpuscope.telemetry.values import Reason, Unavailable


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _stat(path: Path, rows: list[list[int]], columns: int = 10) -> Path:
    """A /proc/stat with one line per CPU (``rows``, in ticks) after the all-CPU line."""
    cpus = [f"cpu{index} " + " ".join(map(str, row[:columns])) for index, row in enumerate(rows)]
    total = [sum(row[column] for row in rows) for column in range(columns)]
    lines = ["cpu  " + " ".join(map(str, total)), *cpus, "intr 123 0 0 1", "ctxt 99", "btime 1", "softirq 1 2 3"]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_utilization_comes_from_the_stat_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(psutil, "PROCFS_PATH", str(tmp_path))
    clock = FakeClock()
    rows = [[1000, 0, 0, 9000, 0, 0, 0, 0, 0, 0], [5000, 0, 0, 5000, 0, 0, 0, 0, 0, 0]]
    stat = _stat(tmp_path / "stat", rows)
    collector = HostCollector(sysfs_root=tmp_path, clock=clock)
    first = collector.sample()
    assert first.logical_cores == 2
    assert first.cpu_utilization_percent == Unavailable(Reason.WARMING_UP, "a rate needs two samples")
    # core 0: all busy; core 1: 3 user + 2 system busy, 3 idle + 2 iowait not, and guest time
    # (counted in user already) not twice
    rows[0] = [2000, 0, 0, 9000, 0, 0, 0, 0, 0, 0]
    rows[1] = [5300, 0, 200, 5300, 200, 0, 0, 0, 100, 0]
    _stat(stat, rows)
    clock.now += 1.0
    second = collector.sample()
    assert second.cores[0].utilization_percent == 100.0
    assert second.cores[1].utilization_percent == pytest.approx(50.0)
    assert second.cpu_utilization_percent == pytest.approx(75.0)


def test_unreadable_stat_file_is_unavailable_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(psutil, "PROCFS_PATH", str(tmp_path))
    sample = HostCollector(sysfs_root=tmp_path, clock=FakeClock()).sample()
    assert sample.cores == []
    assert isinstance(sample.cpu_utilization_percent, Unavailable)
    assert sample.cpu_utilization_percent.reason is Reason.ERROR
