"""Host processes: CPU %, resident memory, elapsed time, user and command line per process,
read from ``/proc`` (Linux), plus sending a signal to one of them safely. No Textual.

Cost: one ``stat()`` and one read of ``/proc/<pid>/stat`` per process per scan (about 10 µs
each); command lines are read once per process and cached. The TUI scans only while a screen
that shows processes is up. CPU % is the share of one core since the previous scan (above 100
for a multi-threaded process, as top shows it); the first scan reads ``warming_up``.
"""

from __future__ import annotations

import os
import pwd
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from gpuscope.telemetry.values import Metric, Reason, Unavailable

__all__ = ["HostProcess", "ProcessScanner", "SIGNALS", "may_signal", "send_signal", "top_by_cpu"]

#: The signals the TUI offers, in menu order.
SIGNALS = (("SIGTERM", signal.SIGTERM), ("SIGKILL", signal.SIGKILL), ("SIGINT", signal.SIGINT))

_WARMING = Unavailable(Reason.WARMING_UP, "CPU % needs two scans")


@dataclass(frozen=True, slots=True)
class HostProcess:
    """One process as the host sees it."""

    pid: int
    ppid: int
    uid: int
    user: str
    name: str
    command: str  # the full command line ("[name]" for kernel threads)
    state: str  # R, S, D, Z, ...
    cpu_percent: Metric[float]
    rss_bytes: int
    elapsed_s: float
    start_ticks: int  # start time in clock ticks after boot: tells a reused pid apart


def _clock_ticks() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError, AttributeError):
        return 100


def _page_bytes() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 4096


class ProcessScanner:
    """Scans ``proc_root`` (default ``/proc``). Scans are serialised: the TUI's sampling thread
    and an on-demand scan may call at the same moment, and CPU % is computed against the previous scan."""

    def __init__(
        self, proc_root: str | os.PathLike[str] = "/proc", clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._root = Path(proc_root)
        self._clock = clock
        self._ticks = _clock_ticks()
        self._page = _page_bytes()
        self._previous: dict[int, tuple[int, int]] = {}  # pid -> (start ticks, cpu ticks)
        self._previous_at: float | None = None
        self._commands: dict[tuple[int, int], str] = {}
        self._users: dict[int, str] = {}
        self._lock = threading.Lock()

    def available(self) -> Unavailable | None:
        """Why processes cannot be read here, or None."""
        return (
            None
            if (self._root / "self" / "stat").exists()
            else Unavailable(Reason.NOT_SUPPORTED, f"no {self._root} (Linux only)")
        )

    def _user(self, uid: int) -> str:
        name = self._users.get(uid)
        if name is None:
            try:
                name = pwd.getpwuid(uid).pw_name
            except KeyError:
                name = str(uid)
            self._users[uid] = name
        return name

    def _uptime_s(self) -> float:
        try:
            return float((self._root / "uptime").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return 0.0

    def _command(self, pid: int, start: int, name: str) -> str:
        key = (pid, start)
        command = self._commands.get(key)
        if command is None:
            try:
                raw = (self._root / str(pid) / "cmdline").read_bytes()
            except OSError:
                raw = b""
            command = " ".join(raw.decode("utf-8", "replace").replace("\0", " ").split()) or f"[{name}]"
            self._commands[key] = command
        return command

    def scan(self) -> list[HostProcess]:
        """Every process now, in pid order (processes that exit mid-scan are skipped)."""
        with self._lock:
            return self._scan()

    def _scan(self) -> list[HostProcess]:
        now = self._clock()
        uptime = self._uptime_s()
        elapsed_wall = None if self._previous_at is None else now - self._previous_at
        seen: dict[int, tuple[int, int]] = {}
        out: list[HostProcess] = []
        root = str(self._root)
        try:
            entries = os.listdir(root)
        except OSError:
            return []
        for entry in entries:
            if not entry.isdigit():
                continue
            pid = int(entry)
            try:
                fd = os.open(f"{root}/{entry}/stat", os.O_RDONLY)
                try:
                    uid = os.fstat(fd).st_uid
                    raw = os.read(fd, 4096)
                finally:
                    os.close(fd)
            except OSError:
                continue
            parsed = _parse_stat(raw)
            if parsed is None:
                continue
            name, state, ppid, cpu_ticks, start, rss_pages = parsed
            seen[pid] = (start, cpu_ticks)
            cpu: Metric[float] = _WARMING
            before = self._previous.get(pid)
            if elapsed_wall and elapsed_wall > 0 and before is not None and before[0] == start:
                cpu = max(0.0, 100.0 * (cpu_ticks - before[1]) / self._ticks / elapsed_wall)
            elif elapsed_wall and elapsed_wall > 0:
                cpu = Unavailable(Reason.WARMING_UP, "process started since the previous scan")
            out.append(
                HostProcess(
                    pid=pid,
                    ppid=ppid,
                    uid=uid,
                    user=self._user(uid),
                    name=name,
                    command=self._command(pid, start, name),
                    state=state,
                    cpu_percent=cpu,
                    rss_bytes=rss_pages * self._page,
                    elapsed_s=max(0.0, uptime - start / self._ticks) if uptime else 0.0,
                    start_ticks=start,
                )
            )
        self._previous, self._previous_at = seen, now
        live = {(pid, start) for pid, (start, _) in seen.items()}
        if len(self._commands) > 2 * len(live) + 64:
            self._commands = {key: value for key, value in self._commands.items() if key in live}
        out.sort(key=lambda p: p.pid)
        return out


def _parse_stat(raw: bytes) -> tuple[str, str, int, int, int, int] | None:
    """(name, state, ppid, utime+stime ticks, start ticks, rss pages) from ``/proc/<pid>/stat``."""
    try:
        head, _, tail = raw.rpartition(b")")
        name = head.partition(b"(")[2].decode("utf-8", "replace")
        fields = tail.split()
        # fields[0] is the state (field 3 of proc(5)); utime is field 14 -> fields[11]
        return (
            name,
            fields[0].decode(),
            int(fields[1]),
            int(fields[11]) + int(fields[12]),
            int(fields[19]),
            int(fields[21]),
        )
    except (IndexError, ValueError):
        return None


def top_by_cpu(processes: Iterable[HostProcess], count: int) -> list[HostProcess]:
    """The ``count`` busiest processes (unknown CPU % last, then by resident memory)."""

    def key(p: HostProcess) -> tuple[float, int]:
        cpu = p.cpu_percent if isinstance(p.cpu_percent, float) else -1.0
        return (cpu, p.rss_bytes)

    return sorted(processes, key=key, reverse=True)[:count]


def may_signal(process: HostProcess, euid: int | None = None, own_pids: Iterable[int] = ()) -> str | None:
    """None when this user may signal ``process``; else why not (one line)."""
    euid = os.geteuid() if euid is None else euid
    if process.pid in set(own_pids) or process.pid == os.getpid():
        return "that is gpuscope itself (or its parent)"
    if process.pid <= 1:
        return "pid 1 (init) is not offered"
    if euid != 0 and process.uid != euid:
        return f"owned by {process.user}; only root or {process.user} may signal it"
    return None


def send_signal(process: HostProcess, signum: int, proc_root: str | os.PathLike[str] = "/proc") -> str | None:
    """Send ``signum`` to ``process`` if it is still the same process (same start time).
    Returns None on success, else why it was not sent (one line)."""
    try:
        raw = (Path(proc_root) / str(process.pid) / "stat").read_bytes()
    except OSError:
        return f"pid {process.pid} has already exited"
    parsed = _parse_stat(raw)
    if parsed is None or parsed[4] != process.start_ticks:
        return f"pid {process.pid} is now another process; nothing sent"
    try:
        os.kill(process.pid, signum)
    except ProcessLookupError:
        return f"pid {process.pid} has already exited"
    except PermissionError:
        return f"no permission to signal pid {process.pid}"
    return None
