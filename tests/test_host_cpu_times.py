"""CPU times read from /proc/stat by the host collector itself, with psutil.cpu_times's numbers
for the same file, and psutil's call where the file is missing or laid out otherwise."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psutil
import pytest

from gpuscope.telemetry.host import HostCollector
from gpuscope.telemetry.values import Reason, Unavailable

TICKS = os.sysconf("SC_CLK_TCK")


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


def _busy_total_from_psutil() -> list[tuple[float, float]]:
    """(busy, total) per CPU as the collector computed them from psutil.cpu_times before."""
    current = []
    for t in psutil.cpu_times(percpu=True):
        total = sum(t)
        total -= getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
        current.append((total - t.idle - getattr(t, "iowait", 0.0), total))
    return current


_ROWS = [
    [4910645, 98672, 461428, 5497597, 47046, 0, 16421, 48308, 313, 7],
    [1709491, 32175, 168528, 3586368, 9013, 3, 6589, 25524, 0, 0],
    [3201154, 66496, 292900, 1911229, 38032, 1, 9832, 22784, 91, 17],
]


@pytest.mark.skipif(len(psutil.cpu_times()) != 10, reason="psutil's column count comes from this kernel")
def test_cpu_times_are_psutils_for_the_same_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stat = _stat(tmp_path / "stat", _ROWS)
    monkeypatch.setattr(psutil, "PROCFS_PATH", str(tmp_path))
    collector = HostCollector(sysfs_root=tmp_path, clock=FakeClock(), stat=stat)
    mine, psutils = collector._cpu_times(), _busy_total_from_psutil()
    assert len(mine) == len(psutils) == 3
    for (busy, total), (expected_busy, expected_total) in zip(mine, psutils):
        # psutil divides each column, then sums: the same seconds but for the last bit
        assert busy == pytest.approx(expected_busy, rel=1e-14)
        assert total == pytest.approx(expected_total, rel=1e-14)
    assert len(collector.sample().cores) == 3


def test_utilization_comes_from_the_stat_file(tmp_path: Path) -> None:
    clock = FakeClock()
    rows = [[1000, 0, 0, 9000, 0, 0, 0, 0, 0, 0], [5000, 0, 0, 5000, 0, 0, 0, 0, 0, 0]]
    stat = _stat(tmp_path / "stat", rows)
    collector = HostCollector(sysfs_root=tmp_path, clock=clock, stat=stat)
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
    collector.close()


def test_older_kernels_columns(tmp_path: Path) -> None:
    """A kernel with seven columns (no steal, guest, guest_nice), as psutil reads it."""
    stat = _stat(tmp_path / "stat", [[100, 0, 0, 300, 100, 0, 0]], columns=7)
    times = HostCollector(sysfs_root=tmp_path, clock=FakeClock(), stat=stat)._cpu_times()
    assert times == [(100 / TICKS, 500 / TICKS)]


@pytest.mark.parametrize(
    "text",
    [
        None,  # no file
        "intr 1 2 3\ncpu0 1 2 3 4 5 6 7\n",  # no all-CPU line first
        "cpu  1 2 3 4 5\ncpu0 1 2 3 4 5\n",  # fewer columns than psutil reads
        "cpu  1 2 3 4 5 6 7 8\ncpu0 1 2 3 4 5 6 7\n",  # a CPU line shorter than the first
        "cpu  1 2 3 4 5 6 7 8\ncpu0 1 2 3 4 5 6 7 8 9 10\ncpu1 1 2 3 4 5 6\n",  # lines of other widths
        "cpu  1 2 3 4 5 6 7 8\nintr 1 2\ncpu0 1 2 3 4 5 6 7 8\n",  # a CPU line after other lines
        "cpu  1 2 3 4 5 6 7 8\ncpu0 1 2 3 4 5 6 7.5 8\n",  # not whole numbers
    ],
)
def test_psutil_answers_where_the_file_is_missing_or_laid_out_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str | None
) -> None:
    stat = tmp_path / "stat"
    if text is not None:
        stat.write_text(text)
    calls: list[bool] = []
    real = psutil.cpu_times()

    def cpu_times(percpu: bool = False) -> list[Any]:
        calls.append(percpu)
        return [real]

    monkeypatch.setattr(psutil, "cpu_times", cpu_times)
    collector = HostCollector(sysfs_root=tmp_path, clock=FakeClock(), stat=stat)
    assert len(collector.sample().cores) == 1
    assert calls == [True]
