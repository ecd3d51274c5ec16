"""Disk I/O rates from /proc/diskstats and host processes from /proc (real code, fake files
where the kernel's would vary; the process scan and signals run against this machine)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuscope.telemetry.host import HostCollector
from gpuscope.telemetry.hostprocs import HostProcess, ProcessScanner, may_signal, send_signal, top_by_cpu
from gpuscope.telemetry.values import Reason, Unavailable


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _diskstats(path: Path, read_sectors: int, write_sectors: int) -> None:
    lines = [
        f" 252       0 vda 100 0 {read_sectors} 50 200 0 {write_sectors} 80 0 0 0 0 0 0 0",
        f" 252       1 vda1 100 0 {read_sectors} 50 200 0 {write_sectors} 80 0 0 0 0 0 0 0",  # a partition: not counted
        " 7       0 loop0 9 0 999999 0 9 0 999999 0 0 0 0 0 0 0 0",  # a loop device: not counted
    ]
    path.write_text("\n".join(lines) + "\n")


def test_disk_rates_count_whole_disks_in_512_byte_sectors(tmp_path: Path) -> None:
    for name in ("vda", "loop0"):
        (tmp_path / "block" / name).mkdir(parents=True)
    stats = tmp_path / "diskstats"
    _diskstats(stats, 1000, 2000)
    clock = FakeClock()
    collector = HostCollector(sysfs_root=tmp_path, clock=clock, diskstats=stats)
    first = collector.sample()
    assert (
        isinstance(first.disk_read_bytes_per_s, Unavailable) and first.disk_read_bytes_per_s.reason == Reason.WARMING_UP
    )
    _diskstats(stats, 1000 + 2048, 2000 + 4096)
    clock.now += 2.0
    second = collector.sample()
    assert second.disk_read_bytes_per_s == pytest.approx(2048 * 512 / 2.0)
    assert second.disk_write_bytes_per_s == pytest.approx(4096 * 512 / 2.0)


def test_disk_rates_unavailable_without_the_file(tmp_path: Path) -> None:
    collector = HostCollector(sysfs_root=tmp_path, clock=FakeClock(), diskstats=tmp_path / "missing")
    sample = collector.sample()
    assert isinstance(sample.disk_read_bytes_per_s, Unavailable) and "unreadable" in sample.disk_read_bytes_per_s.detail


def test_scan_sees_this_process_with_command_rss_and_cpu_on_second_scan() -> None:
    scanner = ProcessScanner()
    if scanner.available() is not None:
        pytest.skip("no /proc here")
    first = {p.pid: p for p in scanner.scan()}
    me = first[os.getpid()]
    assert isinstance(me.cpu_percent, Unavailable)  # a rate needs two scans
    assert "pytest" in me.command or "python" in me.command
    assert me.rss_bytes > 1_000_000 and me.elapsed_s > 0 and me.ppid == os.getppid()
    sum(i * i for i in range(200_000))  # some CPU time between the scans
    time.sleep(0.05)
    second = {p.pid: p for p in scanner.scan()}
    assert isinstance(second[os.getpid()].cpu_percent, float) and second[os.getpid()].cpu_percent > 0
    assert top_by_cpu(second.values(), 3)[0].cpu_percent >= second[os.getpid()].cpu_percent or len(second) < 3


def test_scans_from_two_threads_do_not_interleave() -> None:
    """The TUI's sampling thread and an on-demand scan share one scanner: a second scan waits
    until the first has stored its counters (CPU % is computed against the previous scan)."""
    import threading

    inside, release = threading.Event(), threading.Event()
    calls: list[str] = []

    def clock() -> float:
        calls.append(threading.current_thread().name)
        if len(calls) == 1:
            inside.set()
            release.wait(10)
        return float(len(calls))

    scanner = ProcessScanner(clock=clock)
    if scanner.available() is not None:
        pytest.skip("no /proc here")
    first = threading.Thread(target=scanner.scan, name="first")
    second = threading.Thread(target=scanner.scan, name="second")
    first.start()
    assert inside.wait(10)
    second.start()
    second.join(0.3)  # it would have read the clock by now if it were not waiting for the first
    held = list(calls)
    release.set()
    first.join(10)
    second.join(10)
    assert held == ["first"]
    assert calls[0] == "first" and calls[-1] == "second"


def _proc(pid: int, uid: int, user: str = "someone") -> HostProcess:
    return HostProcess(pid, 1, uid, user, "x", "x", "S", 0.0, 0, 1.0, 1)


def test_only_processes_the_user_may_signal_are_offered() -> None:
    assert may_signal(_proc(4242, 1001, "alice"), euid=1001) is None
    assert "only root or bob" in (may_signal(_proc(4242, 1002, "bob"), euid=1001) or "")
    assert may_signal(_proc(4242, 1002, "bob"), euid=0) is None  # root may
    assert "itself" in (may_signal(_proc(os.getpid(), os.geteuid()), euid=os.geteuid()) or "")
    assert "pid 1" in (may_signal(_proc(1, 0, "root"), euid=0) or "")


def test_send_signal_reaches_the_process_and_checks_it_is_the_same_one() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        for _ in range(100):
            found = {p.pid: p for p in ProcessScanner().scan()}.get(child.pid)
            if found is not None:
                break
            time.sleep(0.02)
        assert found is not None
        stale = HostProcess(**{**{f: getattr(found, f) for f in found.__slots__}, "start_ticks": found.start_ticks + 1})
        assert "another process" in (send_signal(stale, signal.SIGTERM) or "")
        assert child.poll() is None  # nothing was sent to the look-alike
        assert send_signal(found, signal.SIGTERM) is None
        assert child.wait(timeout=10) == -signal.SIGTERM
        assert "exited" in (send_signal(found, signal.SIGTERM) or "")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
