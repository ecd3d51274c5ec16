"""Linux /proc files read every tick, and their parsers: what psutil would give, for less.

:class:`ProcFile` keeps a kernel pseudo-file open and reads it again from offset 0. Each parser
mirrors how psutil reads the same file and returns None where the file is laid out otherwise,
so the caller (:class:`~gpuscope.telemetry.host.HostCollector`) falls back to psutil there.
"""

from __future__ import annotations

import itertools
import operator
import os
import re
import weakref
from pathlib import Path

import psutil

__all__ = [
    "ProcFile",
    "cpu_times_from_stat",
    "cpuinfo_mhz",
    "meminfo_fields",
    "memory_from_meminfo",
    "netdev_bytes",
    "swap_from_meminfo",
]

#: Kernel pseudo-files (generated on each read, never replaced) stay open between reads.
_PSEUDO_FILE_ROOTS = ("/proc/", "/sys/")
_READ_CHUNK_BYTES = 1 << 16


class ProcFile:
    """A small kernel file read whole once a tick. A /proc or /sys file stays open and is read
    again from offset 0 (``pread``: two system calls instead of the nine of open, fstat, ioctl,
    lseek, read and close); any other file (tests' fake trees) is opened afresh each read, as a
    replaced file must be seen. A failed read closes the file: the next read opens it again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._keep = str(path).startswith(_PSEUDO_FILE_ROOTS)
        self._fd: int | None = None
        self._closer: weakref.finalize[..., ProcFile] | None = None

    def read(self) -> bytes:
        """The file's bytes now. Raises OSError."""
        fd = self._fd
        if fd is None:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            if self._keep:
                self._fd = fd
                self._closer = weakref.finalize(self, os.close, fd)  # closed with the collector
        try:
            data = os.pread(fd, _READ_CHUNK_BYTES, 0)
            if data:  # a seq_file answers a page or so per read: read on until the end
                chunks = [data]
                offset = len(data)
                while more := os.pread(fd, _READ_CHUNK_BYTES, offset):
                    chunks.append(more)
                    offset += len(more)
                data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        except OSError:
            self.close()
            raise
        finally:
            if not self._keep:
                os.close(fd)
        return data

    def close(self) -> None:
        """Close the file if it is open (the next read opens it again)."""
        closer, self._closer, self._fd = self._closer, None, None
        if closer is not None:
            closer()


# --- /proc/stat --------------------------------------------------------------------------------

#: /proc/stat's time unit (USER_HZ), as psutil reads it: CPU times are in these ticks.
_CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: The columns psutil.cpu_times reads from a /proc/stat "cpu" line: user, nice, system, idle,
#: iowait, irq, softirq (always), then steal, guest and guest_nice where the kernel has them.
_STAT_MIN_COLUMNS = 7
#: The all-CPU line and the per-CPU lines after it, at the start of /proc/stat.
_STAT_CPU_LINES = re.compile(rb"cpu [^\n]*\n(?:cpu[0-9][^\n]*\n)*")
_SUB, _DIVIDE = operator.sub, operator.truediv


def cpu_times_from_stat(data: bytes) -> list[tuple[float, float]] | None:
    """(busy, total) seconds of each CPU from /proc/stat's bytes, with the columns
    psutil.cpu_times gives (those the all-CPU line has, up to guest_nice); None where the file
    is laid out otherwise (a CPU line of another width, or one after other lines, or a number
    that is not whole: psutil's float() may take it). Sums are taken in clock ticks, then
    divided (psutil divides each column: the seconds may differ from its in the last bit)."""
    block = _STAT_CPU_LINES.match(data)  # the all-CPU line, then one line per CPU
    first = data.find(b"\n")
    if block is None or data.find(b"\ncpu", block.end() - 1) >= 0:
        return None
    width = len(data[:first].split())  # psutil reads as many columns as this line has
    words = data[first + 1 : block.end()].split()
    cpus = data.count(b"\n", first + 1, block.end())
    if (
        width - 1 < _STAT_MIN_COLUMNS
        or len(words) != width * cpus
        or not all(map(bytes.startswith, words[::width], itertools.repeat(b"cpu")))  # each as wide
    ):
        return None
    # user nice system idle iowait irq softirq [steal]: a CPU's total (guest and guest_nice
    # are counted in user and nice already), a column at a time
    try:
        columns = [list(map(int, words[column::width])) for column in range(1, min(width, 9))]
    except ValueError:
        return None
    totals = list(map(sum, zip(*columns)))
    busy = map(_SUB, map(_SUB, totals, columns[3]), columns[4])  # less idle and iowait
    ticks = itertools.repeat(_CLOCK_TICKS_PER_S)
    return list(zip(map(_DIVIDE, busy, ticks), map(_DIVIDE, totals, ticks)))


# --- /proc/meminfo -----------------------------------------------------------------------------

#: One "Name:   value" line of /proc/meminfo (the value in kB for the fields used here).
_MEMINFO_LINE = re.compile(rb"^([^:\s]+):[ \t]*([0-9]+)", re.MULTILINE)
#: The fields psutil.virtual_memory() warns about when missing: where one is, psutil answers.
_MEMINFO_NEEDED = (b"MemTotal", b"MemFree", b"MemAvailable", b"Buffers", b"Cached", b"Shmem", b"Active", b"Inactive")
#: psutil releases whose Linux virtual_memory() computes "used" as total - available (7.2 and
#: newer 7.x; before 7.2 it was total - free - buffers - cached): only these are read here.
_PSUTIL_USED_IS_TOTAL_MINUS_AVAILABLE = (7, 2) <= tuple(psutil.version_info[:2]) < (8, 0)


def meminfo_fields(data: bytes) -> dict[bytes, bytes]:
    """/proc/meminfo's bytes as field name -> its number (kB for the fields used here)."""
    return dict(_MEMINFO_LINE.findall(data))


def memory_from_meminfo(fields: dict[bytes, bytes]) -> tuple[int, int, int] | None:
    """(total, used, available) bytes as psutil 7.2's virtual_memory() computes them, for a file
    that has every field it reads and a MemAvailable; None otherwise (psutil estimates
    MemAvailable where the kernel has none or says 0), or where this psutil computes "used"
    another way."""
    if not _PSUTIL_USED_IS_TOTAL_MINUS_AVAILABLE or not all(name in fields for name in _MEMINFO_NEEDED):
        return None
    total, free, available = (int(fields[name]) * 1024 for name in _MEMINFO_NEEDED[:3])
    if not available:
        return None
    if available > total:  # in a container: psutil (and free) take MemFree
        available = free
    return total, total - available, available


def swap_from_meminfo(fields: dict[bytes, bytes]) -> tuple[int, int] | None:
    """(total, used) swap bytes from /proc/meminfo's SwapTotal and SwapFree; None without them."""
    total_kb, free_kb = fields.get(b"SwapTotal"), fields.get(b"SwapFree")
    if total_kb is None or free_kb is None:
        return None
    total = int(total_kb) * 1024
    return total, total - int(free_kb) * 1024


# --- /proc/cpuinfo -----------------------------------------------------------------------------

#: A "cpu MHz" line of /proc/cpuinfo, searched in the text after a newline (psutil takes any
#: line starting "cpu mhz" in any case: where this finds fewer than one per CPU, psutil reads
#: them). The literal start keeps the search fast (``^`` with MULTILINE, or ``(?:\A|\n)``, is
#: ten to forty times slower).
_CPU_MHZ = re.compile(rb"\ncpu MHz[^:\n]*:[ \t]*([0-9]+(?:\.[0-9]*)?)")


def cpuinfo_mhz(data: bytes) -> list[bytes]:
    """The "cpu MHz" values of /proc/cpuinfo's bytes, as text, one per CPU that has one."""
    return _CPU_MHZ.findall(b"\n" + data)


# --- /proc/net/dev -----------------------------------------------------------------------------


def netdev_bytes(data: bytes) -> dict[str, tuple[int, int]] | None:
    """(received, sent) bytes per interface from /proc/net/dev's bytes, as
    psutil.net_io_counters reads them (raw counters); None where a line is laid out otherwise."""
    counters: dict[str, tuple[int, int]] = {}
    for line in data.splitlines()[2:]:  # two header lines
        name, colon, rest = line.rpartition(b":")
        fields = rest.split()
        if not colon or len(fields) < 9:
            return None
        try:
            counters[os.fsdecode(name.strip())] = (int(fields[0]), int(fields[8]))
        except ValueError:
            return None
    return counters
