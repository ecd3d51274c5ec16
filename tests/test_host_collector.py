"""HostCollector against a fake /sys/class/infiniband tree, a fake clock and patched psutil reads."""

from __future__ import annotations

from collections import namedtuple
from pathlib import Path

import psutil
import pytest

from gpuscope.telemetry.host import HostCollector, parse_ib_rate_gbit_per_s
from gpuscope.telemetry.values import Reason, Unavailable, is_available


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def make_port(
    root: Path,
    device: str = "mlx5_0",
    port: int = 1,
    *,
    rx_words: int = 0,
    tx_words: int = 0,
    state: str = "4: ACTIVE",
    rate: str = "400 Gb/sec (4X NDR)",
    link_layer: str | None = "InfiniBand",
) -> Path:
    port_dir = root / "class" / "infiniband" / device / "ports" / str(port)
    (port_dir / "counters").mkdir(parents=True, exist_ok=True)
    (port_dir / "state").write_text(state + "\n")
    (port_dir / "rate").write_text(rate + "\n")
    if link_layer is not None:
        (port_dir / "link_layer").write_text(link_layer + "\n")
    set_words(port_dir, rx_words, tx_words)
    return port_dir


def set_words(port_dir: Path, rx_words: int, tx_words: int) -> None:
    (port_dir / "counters" / "port_rcv_data").write_text(f"{rx_words}\n")
    (port_dir / "counters" / "port_xmit_data").write_text(f"{tx_words}\n")


def test_infiniband_rates_are_four_bytes_per_counted_word(tmp_path: Path) -> None:
    port = make_port(tmp_path, rx_words=1_000, tx_words=5_000)
    clock = FakeClock()
    collector = HostCollector(sysfs_root=tmp_path, clock=clock)

    first = collector.sample().infiniband_ports
    assert len(first) == 1
    assert first[0].rx_bytes_per_s == Unavailable(Reason.WARMING_UP, "a rate needs two samples")
    assert first[0].tx_bytes_per_s.reason is Reason.WARMING_UP

    set_words(port, rx_words=1_000 + 250_000_000, tx_words=5_000 + 125_000_000)
    clock.now += 2.0
    second = collector.sample().infiniband_ports[0]
    assert second.rx_bytes_per_s == 250_000_000 * 4 / 2.0 == 500_000_000.0
    assert second.tx_bytes_per_s == 250_000_000.0
    assert (second.device, second.port, second.state, second.link_layer) == ("mlx5_0", 1, "ACTIVE", "InfiniBand")
    assert second.rate_gbit_per_s == 400.0


def test_roce_port_and_several_devices(tmp_path: Path) -> None:
    make_port(tmp_path, "mlx5_1", 1, link_layer="Ethernet", rate="100 Gb/sec (2X HDR)", state="1: DOWN")
    make_port(tmp_path, "mlx5_0", 2)
    make_port(tmp_path, "mlx5_0", 1, link_layer=None)  # old kernels have no link_layer file: InfiniBand
    ports = HostCollector(sysfs_root=tmp_path, clock=FakeClock()).sample().infiniband_ports
    assert [(p.device, p.port) for p in ports] == [("mlx5_0", 1), ("mlx5_0", 2), ("mlx5_1", 1)]
    assert ports[0].link_layer == "InfiniBand"
    assert ports[2].link_layer == "Ethernet"
    assert ports[2].state == "DOWN"
    assert ports[2].rate_gbit_per_s == 100.0


def test_infiniband_counter_reset_and_saturation(tmp_path: Path) -> None:
    port = make_port(tmp_path, rx_words=10_000, tx_words=10_000)
    clock = FakeClock()
    collector = HostCollector(sysfs_root=tmp_path, clock=clock)
    collector.sample()
    set_words(port, rx_words=5, tx_words=20_000)  # rx reset (perfquery -R), tx moved on
    clock.now += 1.0
    sample = collector.sample().infiniband_ports[0]
    assert isinstance(sample.rx_bytes_per_s, Unavailable) and sample.rx_bytes_per_s.reason is Reason.WARMING_UP
    assert "backwards" in sample.rx_bytes_per_s.detail
    assert sample.tx_bytes_per_s == 40_000.0
    # the rate resumes from the reset value
    set_words(port, rx_words=105, tx_words=2**32 - 1)
    clock.now += 1.0
    sample = collector.sample().infiniband_ports[0]
    assert sample.rx_bytes_per_s == 400.0
    assert isinstance(sample.tx_bytes_per_s, Unavailable) and "saturated" in sample.tx_bytes_per_s.detail


def test_infiniband_missing_counters_and_bad_rate(tmp_path: Path) -> None:
    port = make_port(tmp_path, rate="garbage")
    (port / "counters" / "port_rcv_data").unlink()
    sample = HostCollector(sysfs_root=tmp_path, clock=FakeClock()).sample().infiniband_ports[0]
    assert isinstance(sample.rx_bytes_per_s, Unavailable) and sample.rx_bytes_per_s.reason is Reason.NOT_SUPPORTED
    assert isinstance(sample.rate_gbit_per_s, Unavailable) and sample.rate_gbit_per_s.reason is Reason.ERROR


def test_no_infiniband_tree_means_no_ports(tmp_path: Path) -> None:
    assert HostCollector(sysfs_root=tmp_path, clock=FakeClock()).sample().infiniband_ports == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [("100 Gb/sec (4X EDR)", 100.0), ("2.5 Gb/sec (1X SDR)", 2.5), ("400 Gb/sec (4X NDR)", 400.0), ("n/a", None)],
)
def test_parse_ib_rate(text: str, expected: float | None) -> None:
    assert parse_ib_rate_gbit_per_s(text) == expected


Io = namedtuple("Io", "bytes_sent bytes_recv packets_sent packets_recv errin errout dropin dropout")
Stats = namedtuple("Stats", "isup duplex speed mtu flags")


def test_nic_rates_resets_and_new_interfaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counters = {"lo": Io(100, 100, 0, 0, 0, 0, 0, 0), "eth0": Io(1_000, 2_000, 0, 0, 0, 0, 0, 0)}
    monkeypatch.setattr(psutil, "net_io_counters", lambda pernic=True, nowrap=True: dict(counters))
    monkeypatch.setattr(
        psutil,
        "net_if_stats",
        lambda: {
            "lo": Stats(True, 0, 0, 65536, "up,loopback,running"),
            "eth0": Stats(True, 2, 25000, 1500, "up,running"),
        },
    )
    clock = FakeClock()
    collector = HostCollector(sysfs_root=tmp_path, clock=clock)
    first = {nic.name: nic for nic in collector.sample().nics}
    assert first["eth0"].rx_bytes_per_s.reason is Reason.WARMING_UP
    assert first["lo"].is_loopback and not first["eth0"].is_loopback
    assert first["eth0"].speed_mbit_per_s == 25000.0
    assert isinstance(first["lo"].speed_mbit_per_s, Unavailable)  # psutil says 0: unknown, not zero

    counters["eth0"] = Io(1_500, 3_000, 0, 0, 0, 0, 0, 0)
    counters["ib0"] = Io(7, 7, 0, 0, 0, 0, 0, 0)
    clock.now += 0.5
    second = {nic.name: nic for nic in collector.sample().nics}
    assert second["eth0"].tx_bytes_per_s == 1_000.0
    assert second["eth0"].rx_bytes_per_s == 2_000.0
    assert second["ib0"].rx_bytes_per_s.reason is Reason.WARMING_UP  # appeared: no previous read
    assert second["ib0"].is_up.reason is Reason.NOT_SUPPORTED  # not in the (cached) link stats

    counters["eth0"] = Io(10, 4_000, 0, 0, 0, 0, 0, 0)  # tx counter reset
    clock.now += 1.0
    third = {nic.name: nic for nic in collector.sample().nics}
    assert isinstance(third["eth0"].tx_bytes_per_s, Unavailable)
    assert third["eth0"].rx_bytes_per_s == 1_000.0


CpuTimes = namedtuple("CpuTimes", "user nice system idle iowait irq softirq steal guest guest_nice")


def test_cpu_utilization_from_differenced_times(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    times = [CpuTimes(10, 0, 0, 90, 0, 0, 0, 0, 0, 0), CpuTimes(50, 0, 0, 50, 0, 0, 0, 0, 0, 0)]
    monkeypatch.setattr(psutil, "cpu_times", lambda percpu=True: list(times))
    monkeypatch.setattr(psutil, "cpu_freq", lambda percpu=True: [])
    collector = HostCollector(sysfs_root=tmp_path, clock=FakeClock())
    first = collector.sample()
    assert first.logical_cores == 2
    assert all(core.utilization_percent.reason is Reason.WARMING_UP for core in first.cores)
    assert first.cpu_utilization_percent.reason is Reason.WARMING_UP
    assert all(core.frequency_mhz.reason is Reason.NOT_SUPPORTED for core in first.cores)

    # core 0: 10 busy of 10 s; core 1: 5 busy (3 user + 2 iowait is idle) of 10 s
    times[0] = CpuTimes(20, 0, 0, 90, 0, 0, 0, 0, 0, 0)
    times[1] = CpuTimes(53, 0, 2, 53, 2, 0, 0, 0, 0, 0)
    second = collector.sample()
    assert second.cores[0].utilization_percent == 100.0
    assert second.cores[1].utilization_percent == pytest.approx(50.0)
    assert second.cpu_utilization_percent == pytest.approx(75.0)


def test_real_host_sample_is_consistent() -> None:
    collector = HostCollector()
    first = collector.sample()
    second = collector.sample()
    assert second.logical_cores == len(second.cores) >= 1
    assert second.memory_total_bytes >= second.memory_used_bytes > 0
    assert first.cpu_utilization_percent.reason is Reason.WARMING_UP
    for core in second.cores:
        value = core.utilization_percent
        assert not is_available(value) or 0.0 <= value <= 100.0
    assert any(nic.is_loopback for nic in second.nics) or not second.nics


Freq = namedtuple("Freq", "current min max")


def test_cpu_frequency_is_reread_at_most_once_a_second(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[int] = []

    def cpu_freq(percpu: bool = True) -> list[Freq]:
        reads.append(1)
        return [Freq(1000.0 + len(reads), 0.0, 0.0)] * psutil.cpu_count()

    monkeypatch.setattr(psutil, "cpu_freq", cpu_freq)
    clock = FakeClock()
    collector = HostCollector(sysfs_root=tmp_path, clock=clock)
    assert collector.sample().cores[0].frequency_mhz == 1001.0
    for _ in range(5):
        clock.now += 0.1
        assert collector.sample().cores[0].frequency_mhz == 1001.0  # cheap ticks reuse the last read
    clock.now += 0.5
    assert collector.sample().cores[0].frequency_mhz == 1002.0
    assert len(reads) == 2


def test_unreadable_meminfo_on_the_first_reading_is_unavailable_not_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No readable memory file before any reading: host memory says why it is missing, never 0;
    after one reading, the last reading."""
    monkeypatch.setattr(psutil, "PROCFS_PATH", str(tmp_path))
    collector = HostCollector(sysfs_root=tmp_path, clock=FakeClock())
    first = collector.sample()
    for value in (first.memory_total_bytes, first.memory_used_bytes, first.memory_available_bytes):
        assert isinstance(value, Unavailable) and value.reason is Reason.ERROR
        assert value.detail == f"cannot read {tmp_path}/meminfo: No such file or directory"
    (tmp_path / "meminfo").write_text(_MEMINFO.format(available=9000000, swap_total=2000000))
    (tmp_path / "zoneinfo").write_text("")
    (tmp_path / "vmstat").write_text("pswpin 0\npswpout 0\n")
    second = collector.sample()
    assert second.memory_total_bytes == 16000000 * 1024
    (tmp_path / "meminfo").unlink()
    assert collector.sample().memory_total_bytes == second.memory_total_bytes  # then the last reading


_MEMINFO = (
    "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:    {available} kB\n"
    "Buffers:          200000 kB\nCached:          3000000 kB\nSwapCached:            0 kB\n"
    "Active:          4000000 kB\nInactive:        2000000 kB\nActive(anon):    1000000 kB\n"
    "Shmem:            100000 kB\nSReclaimable:     300000 kB\nSwapTotal:       {swap_total} kB\n"
    "SwapFree:         1500000 kB\nHugePages_Total:       0\nHugepagesize:       2048 kB\n"
)
