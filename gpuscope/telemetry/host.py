"""Host telemetry: CPU per core, load, memory, NICs, InfiniBand/RoCE ports and disk I/O.

Rates (CPU utilization, bytes/s) are differences between two reads over monotonic time,
so the first sample carries ``Unavailable(WARMING_UP)`` for them, never a fake zero.
CPU times, clocks, memory, swap and NIC counters come from psutil as it is (its own /proc
parsers); no per-process scans (those are in :mod:`gpuscope.telemetry.hostprocs`). Disk I/O is
one read of ``/proc/diskstats`` (physical disks only, which psutil does not tell apart).
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psutil

from gpuscope.telemetry.cpuinfo import cpu_info
from gpuscope.telemetry.records import CpuCoreSample, HostSample, InfinibandPortSample, NicSample
from gpuscope.telemetry.values import Metric, Reason, Unavailable

__all__ = ["HostCollector", "IB_COUNTER_BYTES_PER_UNIT", "parse_ib_rate_gbit_per_s"]

#: port_xmit_data / port_rcv_data count 4-byte words (octets divided by 4).
IB_COUNTER_BYTES_PER_UNIT = 4
#: The value at which the old 32-bit InfiniBand data counters stop (they saturate, not wrap).
_IB_SATURATED_32 = 2**32 - 1
#: How often NIC link state and speed (one ioctl per NIC) and the IB port list are re-read, seconds.
_SLOW_REFRESH_S = 5.0
#: CPU clocks are re-read at most this often (one file per CPU on big hosts), seconds.
_FREQUENCY_REFRESH_S = 1.0

#: /proc/diskstats counts 512-byte sectors whatever the device's sector size.
_SECTOR_BYTES = 512
#: Block devices that are not physical disks (or would count the same I/O twice).
_VIRTUAL_DISK_PREFIXES = ("loop", "ram", "zram", "dm-", "md", "sr", "fd", "nbd")

_WARMING = Unavailable(Reason.WARMING_UP, "a rate needs two samples")
_RESET = Unavailable(Reason.WARMING_UP, "counter went backwards (reset or wrap); the rate resumes next sample")
_NO_FREQUENCY = Unavailable(Reason.NOT_SUPPORTED, "the OS reports no CPU frequency (no cpufreq, no 'cpu MHz')")
# reasons that recur every tick, made once (a frozen dataclass costs more to build than to reuse)
_NO_CPU_TIME = Unavailable(Reason.WARMING_UP, "no CPU time elapsed since the previous sample")
_NO_LINK_STATE = Unavailable(Reason.NOT_SUPPORTED, "no link state for this interface")
_NO_LINK_SPEED = Unavailable(Reason.NOT_SUPPORTED, "the driver reports no link speed")


def parse_ib_rate_gbit_per_s(text: str) -> float | None:
    """``"100 Gb/sec (4X EDR)"`` -> 100.0; None when the text has no leading number."""
    match = re.match(r"\s*([0-9]+(?:\.[0-9]+)?)\s*Gb/sec", text)
    return float(match.group(1)) if match else None


def _read_text(path: Path) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


class _NicStats(Protocol):
    """What is read of one ``psutil.net_if_stats()`` entry (``flags``: psutil 5.9.3 and newer)."""

    @property
    def isup(self) -> bool: ...

    @property
    def speed(self) -> int: ...


@dataclass(slots=True)
class _Counter:
    """The previous read of one cumulative counter pair (rx, tx) and when it was taken."""

    rx: int
    tx: int
    at_s: float


def _rate(previous: _Counter | None, rx: int, tx: int, now_s: float) -> tuple[Metric[float], Metric[float]]:
    """(rx, tx) units per second between ``previous`` and now, or the reason there is none."""
    if previous is None:
        return _WARMING, _WARMING
    elapsed = now_s - previous.at_s
    if elapsed <= 0:
        return _WARMING, _WARMING
    rx_rate: Metric[float] = (rx - previous.rx) / elapsed if rx >= previous.rx else _RESET
    tx_rate: Metric[float] = (tx - previous.tx) / elapsed if tx >= previous.tx else _RESET
    return rx_rate, tx_rate


class HostCollector:
    """Samples the host. Not thread-safe: one caller at a time (``TelemetryCollector`` locks).

    ``sysfs_root`` (default ``/sys``) is where ``class/infiniband`` and ``block`` are looked up
    and ``diskstats`` is the disk counters file, so tests can build a fake tree (psutil's files
    follow ``psutil.PROCFS_PATH``); ``clock`` is the monotonic clock used for rates, in seconds.
    """

    def __init__(
        self,
        sysfs_root: str | os.PathLike[str] = "/sys",
        clock: Callable[[], float] = time.monotonic,
        diskstats: str | os.PathLike[str] = "/proc/diskstats",
    ) -> None:
        self._infiniband_root = Path(sysfs_root) / "class" / "infiniband"
        self._clock = clock
        self._hostname = socket.gethostname()
        self._cpu_model = cpu_info().model
        physical = psutil.cpu_count(logical=False)
        self._physical_cores: Metric[int] = (
            physical if physical else Unavailable(Reason.NOT_SUPPORTED, "the OS does not report physical cores")
        )
        self._cpu_prev: list[tuple[float, float]] | None = None  # (busy_s, total_s) per core
        self._nic_prev: dict[str, _Counter] = {}
        self._ib_prev: dict[tuple[str, int], _Counter] = {}
        self._nic_stats: dict[str, _NicStats] = {}
        self._links: dict[str, tuple[Metric[bool], Metric[float], bool]] = {}  # name -> _link(name)
        self._ib_ports: list[tuple[str, int, Path]] = []
        self._ib_link_layer: dict[tuple[str, int], str] = {}
        self._slow_refreshed_at_s: float | None = None
        self._diskstats_path = Path(diskstats)
        self._block_root = Path(sysfs_root) / "block"
        self._disks: set[str] = set()
        self._disk_prev: _Counter | None = None
        self._frequencies_mhz: list[Metric[float]] = []
        self._frequencies_read_at_s: float | None = None
        self._last_memory: tuple[int, int, int] | None = None

    # --- public ------------------------------------------------------------------------------

    def sample(self) -> HostSample:
        """One reading of the host; rates cover the time since the previous call."""
        now_s = self._clock()
        if self._slow_refreshed_at_s is None or now_s - self._slow_refreshed_at_s >= _SLOW_REFRESH_S:
            self._refresh_slow()
            self._slow_refreshed_at_s = now_s
        cores, total_percent = self._cpu(now_s)
        load = self._load_average()
        memory = self._memory()
        swap_total, swap_used = self._swap()
        disk = self._disk(now_s)
        return HostSample(
            hostname=self._hostname,
            cpu_model=self._cpu_model,
            logical_cores=len(cores),
            physical_cores=self._physical_cores,
            cpu_utilization_percent=total_percent,
            cores=cores,
            load_average_1m=load[0],
            load_average_5m=load[1],
            load_average_15m=load[2],
            memory_total_bytes=memory[0],
            memory_used_bytes=memory[1],
            memory_available_bytes=memory[2],
            swap_total_bytes=swap_total,
            swap_used_bytes=swap_used,
            nics=self._nics(now_s),
            infiniband_ports=self._infiniband(now_s),
            disk_read_bytes_per_s=disk[0],
            disk_write_bytes_per_s=disk[1],
        )

    # --- CPU ---------------------------------------------------------------------------------

    def _cpu(self, now_s: float) -> tuple[list[CpuCoreSample], Metric[float]]:
        try:
            current = self._cpu_times()
        except OSError as exc:  # /proc/stat unreadable (e.g. out of file descriptors): unavailable, not a crash
            missing = Unavailable(Reason.ERROR, f"cannot read CPU times: {exc.strerror or exc}")
            return [
                CpuCoreSample(core=i, utilization_percent=missing, frequency_mhz=missing)
                for i in range(len(self._cpu_prev or []))
            ], missing
        previous = self._cpu_prev
        self._cpu_prev = current
        if previous is not None and len(previous) != len(current):
            previous = None  # CPU hotplug: start over
        stale = self._frequencies_read_at_s is None or now_s - self._frequencies_read_at_s >= _FREQUENCY_REFRESH_S
        if stale or len(self._frequencies_mhz) != len(current):
            self._frequencies_mhz = self._frequencies(len(current))
            self._frequencies_read_at_s = now_s
        frequencies = self._frequencies_mhz
        cores: list[CpuCoreSample] = []
        busy_sum = total_sum = 0.0
        for index, (busy, total) in enumerate(current):
            utilization: Metric[float] = _WARMING
            if previous is not None:
                d_busy, d_total = busy - previous[index][0], total - previous[index][1]
                if d_total > 0:
                    # Linux's per-CPU iowait can step backwards, so busy may dip by a tick: clamp.
                    d_busy = min(d_total, max(0.0, d_busy))
                    utilization = 100.0 * d_busy / d_total
                    busy_sum += d_busy
                    total_sum += d_total
                elif d_total < 0:
                    utilization = _RESET
                else:
                    utilization = _NO_CPU_TIME
            cores.append(CpuCoreSample(core=index, utilization_percent=utilization, frequency_mhz=frequencies[index]))
        total_percent: Metric[float] = _WARMING
        if previous is not None:
            total_percent = min(100.0, 100.0 * busy_sum / total_sum) if total_sum > 0 else _NO_CPU_TIME
        return cores, total_percent

    @staticmethod
    def _cpu_times() -> list[tuple[float, float]]:
        """(busy, total) seconds of each CPU from psutil.cpu_times. Raises OSError."""
        current: list[tuple[float, float]] = []
        for t in psutil.cpu_times(percpu=True):
            total = sum(t)
            # guest time is already counted in user/nice on Linux; idle and iowait are not busy.
            total -= getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
            busy = total - t.idle - getattr(t, "iowait", 0.0)
            current.append((busy, total))
        return current

    @staticmethod
    def _frequencies(count: int) -> list[Metric[float]]:
        """Each CPU's clock in MHz from psutil.cpu_freq (one package-wide reading: for every CPU)."""
        try:
            readings = psutil.cpu_freq(percpu=True) or []
        except (OSError, NotImplementedError, AttributeError):
            readings = []
        out: list[Metric[float]] = []
        for index in range(count):
            if index < len(readings) and readings[index].current and readings[index].current > 0:
                out.append(float(readings[index].current))
            elif len(readings) == 1 and readings[0].current:
                out.append(float(readings[0].current))  # one package-wide reading
            else:
                out.append(_NO_FREQUENCY)
        return out

    @staticmethod
    def _load_average() -> tuple[Metric[float], Metric[float], Metric[float]]:
        try:
            one, five, fifteen = os.getloadavg()
        except (OSError, AttributeError):
            missing = Unavailable(Reason.NOT_SUPPORTED, "the OS reports no load average")
            return missing, missing, missing
        return one, five, fifteen

    def _memory(self) -> tuple[Metric[int], Metric[int], Metric[int]]:
        """(total, used, available) bytes from psutil.virtual_memory; its file unreadable (e.g.
        out of file descriptors): the last reading, or unavailable with the reason when there
        is none yet."""
        try:
            memory = psutil.virtual_memory()
        except OSError as exc:
            missing = Unavailable(Reason.ERROR, f"cannot read {psutil.PROCFS_PATH}/meminfo: {exc.strerror or exc}")
            return self._last_memory or (missing, missing, missing)
        self._last_memory = (int(memory.total), int(memory.used), int(memory.available))
        return self._last_memory

    @staticmethod
    def _swap() -> tuple[Metric[int], Metric[int]]:
        """(total, used) swap bytes from psutil.swap_memory."""
        try:
            swap = psutil.swap_memory()
        except (OSError, RuntimeError) as exc:
            missing = Unavailable(Reason.ERROR, f"swap unreadable: {exc}")
            return missing, missing
        return int(swap.total), int(swap.used)

    # --- disks -------------------------------------------------------------------------------

    def _disk(self, now_s: float) -> tuple[Metric[float], Metric[float]]:
        """(read, write) bytes/s summed over the physical disks since the previous call."""
        try:
            text = self._diskstats_path.read_text(encoding="ascii", errors="replace")
        except OSError as exc:
            why = f"{self._diskstats_path} unreadable ({exc.strerror or exc})"
            missing = Unavailable(Reason.NOT_SUPPORTED, why)
            return missing, missing
        read_sectors = write_sectors = 0
        for line in text.splitlines():
            fields = line.split()
            if len(fields) >= 10 and fields[2] in self._disks:
                try:
                    read_sectors += int(fields[5])
                    write_sectors += int(fields[9])
                except ValueError:
                    continue
        previous, self._disk_prev = self._disk_prev, _Counter(read_sectors, write_sectors, now_s)
        if not self._disks:
            missing = Unavailable(Reason.NOT_APPLICABLE, f"no physical disks under {self._block_root}")
            return missing, missing
        read_rate, write_rate = _rate(previous, read_sectors, write_sectors, now_s)
        return (
            read_rate * _SECTOR_BYTES if isinstance(read_rate, float) else read_rate,
            write_rate * _SECTOR_BYTES if isinstance(write_rate, float) else write_rate,
        )

    def _refresh_disks(self) -> None:
        try:
            names = os.listdir(self._block_root)
        except OSError:
            names = []
        self._disks = {name for name in names if not name.startswith(_VIRTUAL_DISK_PREFIXES)}

    # --- network -----------------------------------------------------------------------------

    def _refresh_slow(self) -> None:
        """Re-read what changes rarely: NIC link state and speed, the InfiniBand port list, the disks."""
        self._refresh_disks()
        try:
            self._nic_stats = dict(psutil.net_if_stats())
        except (OSError, UnicodeError):  # UnicodeError: psutil cannot pass on a NIC name that is not UTF-8
            self._nic_stats = {}
        self._links = {}
        ports: list[tuple[str, int, Path]] = []
        try:
            devices = sorted(os.listdir(self._infiniband_root))
        except OSError:
            devices = []
        for device in devices:
            ports_dir = self._infiniband_root / device / "ports"
            try:
                numbers = sorted(int(name) for name in os.listdir(ports_dir) if name.isdigit())
            except OSError:
                continue
            for number in numbers:
                ports.append((device, number, ports_dir / str(number)))
        self._ib_ports = ports

    @staticmethod
    def _nic_bytes() -> dict[str, tuple[int, int]]:
        """(received, sent) bytes per interface from psutil.net_io_counters (raw counters)."""
        try:
            return {
                name: (io.bytes_recv, io.bytes_sent)
                for name, io in psutil.net_io_counters(pernic=True, nowrap=False).items()
            }
        except OSError:
            return {}

    def _nics(self, now_s: float) -> list[NicSample]:
        nics: list[NicSample] = []
        seen: dict[str, _Counter] = {}
        for name, (received, sent) in self._nic_bytes().items():
            rx_rate, tx_rate = _rate(self._nic_prev.get(name), received, sent, now_s)
            seen[name] = _Counter(received, sent, now_s)
            link = self._links.get(name)
            if link is None:
                link = self._links[name] = self._link(name)
            is_up, speed, is_loopback = link
            nics.append(
                NicSample(
                    name=name,
                    rx_bytes_per_s=rx_rate,
                    tx_bytes_per_s=tx_rate,
                    is_up=is_up,
                    speed_mbit_per_s=speed,
                    is_loopback=is_loopback,
                )
            )
        self._nic_prev = seen
        return nics

    def _link(self, name: str) -> tuple[Metric[bool], Metric[float], bool]:
        """(is up, speed in Mbit/s, is loopback) of NIC ``name`` from the last link-state read
        (kept in ``_links`` until the next one: it is the same every tick in between)."""
        stats = self._nic_stats.get(name)
        is_up: Metric[bool]
        speed: Metric[float]
        if stats is None:
            is_up = speed = _NO_LINK_STATE
        else:
            is_up = bool(stats.isup)
            speed_value = stats.speed or 0
            speed = float(speed_value) if speed_value > 0 else _NO_LINK_SPEED
        flags = str(getattr(stats, "flags", "") or "")
        return is_up, speed, name == "lo" or "loopback" in flags.split(",")

    def _infiniband(self, now_s: float) -> list[InfinibandPortSample]:
        out: list[InfinibandPortSample] = []
        seen: dict[tuple[str, int], _Counter] = {}
        for device, number, port_dir in self._ib_ports:
            key = (device, number)
            link_layer = self._ib_link_layer.get(key)
            if link_layer is None:
                link_layer = _read_text(port_dir / "link_layer") or "InfiniBand"  # absent on old kernels: IB
                self._ib_link_layer[key] = link_layer
            state_text = _read_text(port_dir / "state")
            state = (
                state_text.partition(":")[2].strip() if state_text and ":" in state_text else (state_text or "unknown")
            )
            rate_text = _read_text(port_dir / "rate")
            rate: Metric[float]
            parsed_rate = parse_ib_rate_gbit_per_s(rate_text) if rate_text else None
            if parsed_rate is None:
                rate = Unavailable(Reason.NOT_SUPPORTED if rate_text is None else Reason.ERROR, f"rate: {rate_text!r}")
            else:
                rate = parsed_rate
            rx_rate, tx_rate = self._ib_rates(key, port_dir, now_s, seen)
            out.append(
                InfinibandPortSample(
                    device=device,
                    port=number,
                    link_layer=link_layer,
                    state=state,
                    rate_gbit_per_s=rate,
                    rx_bytes_per_s=rx_rate,
                    tx_bytes_per_s=tx_rate,
                )
            )
        self._ib_prev = seen
        return out

    def _ib_rates(
        self, key: tuple[str, int], port_dir: Path, now_s: float, seen: dict[tuple[str, int], _Counter]
    ) -> tuple[Metric[float], Metric[float]]:
        counters = port_dir / "counters"
        rx_text = _read_text(counters / "port_rcv_data")
        tx_text = _read_text(counters / "port_xmit_data")
        if rx_text is None or tx_text is None:
            reason = (
                Reason.NO_PERMISSION
                if (counters.is_dir() and not os.access(counters, os.R_OK))
                else Reason.NOT_SUPPORTED
            )
            missing = Unavailable(reason, f"no readable port_rcv_data/port_xmit_data under {counters}")
            return missing, missing
        try:
            rx_words, tx_words = int(rx_text), int(tx_text)
        except ValueError:
            bad = Unavailable(Reason.ERROR, f"unparsable counters under {counters}")
            return bad, bad
        seen[key] = _Counter(rx_words, tx_words, now_s)
        rx_rate, tx_rate = _rate(self._ib_prev.get(key), rx_words, tx_words, now_s)
        saturated = Unavailable(
            Reason.ERROR, "32-bit data counter saturated at 2^32-1 (clear it with `perfquery -x -R`)"
        )
        if rx_words == _IB_SATURATED_32:
            rx_rate = saturated
        if tx_words == _IB_SATURATED_32:
            tx_rate = saturated
        scale = IB_COUNTER_BYTES_PER_UNIT
        return (
            rx_rate * scale if isinstance(rx_rate, float) else rx_rate,
            tx_rate * scale if isinstance(tx_rate, float) else tx_rate,
        )
