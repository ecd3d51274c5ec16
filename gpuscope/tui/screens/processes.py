"""Processes: every process using a GPU with what the host knows of it (CPU %, resident memory,
elapsed time, full command line), as nvitop shows them; optionally every host process. Sort by
any column, filter, show as a tree, and send SIGTERM/SIGKILL/SIGINT after a confirmation (only
to processes this user may signal)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Input, Static

from gpuscope.telemetry.hostprocs import HostProcess, may_signal, send_signal
from gpuscope.telemetry.records import GpuSample, Sample
from gpuscope.telemetry.values import Metric, Unavailable
from gpuscope.textsafe import safe_text
from gpuscope.tui.format import NA, fmt_mib, reason_text
from gpuscope.tui.screens.base import GpuscopeScreen
from gpuscope.tui.widgets.host_extra import fmt_elapsed, fmt_rss
from gpuscope.tui.widgets.signal_dialog import SignalDialog

__all__ = ["ProcessesScreen", "ProcessRow", "process_rows", "tree_order", "COLUMNS"]

#: (key, title, right-aligned)
COLUMNS = (
    ("gpu", "GPU", True),
    ("pid", "PID", True),
    ("user", "USER", False),
    ("memory", "GPU MEM", True),
    ("sm", "SM%", True),
    ("cpu", "CPU%", True),
    ("rss", "RSS", True),
    ("elapsed", "TIME", True),
    ("kind", "T", False),
    ("command", "COMMAND", False),
)
#: Columns whose natural order is largest first.
_DESCENDING = {"memory", "sm", "cpu", "rss", "elapsed"}


@dataclass(frozen=True)
class ProcessRow:
    gpu: str  # "0", "0/1" (MIG), "" for a host process on no GPU
    pid: int
    user: Metric[str]
    name: Metric[str]
    memory: Metric[int] | None  # GPU memory, bytes (None: a host process)
    sm: Metric[float] | None
    kind: str  # compute, graphics, host
    cpu: Metric[float] | None = None  # host CPU % (None: no host data)
    rss: int | None = None  # host resident memory, bytes
    elapsed: float | None = None  # seconds since the process started
    command: str = ""
    ppid: int | None = None
    host: HostProcess | None = None

    @property
    def key(self) -> str:
        return f"{self.gpu}:{self.pid}:{self.kind}"

    def sort_value(self, column: str) -> tuple[int, str | float]:
        value = getattr(self, column)
        if isinstance(value, Unavailable) or value is None or value == "":
            return (0, 0)  # unavailable sorts below every real value
        if isinstance(value, str):
            return (1, value.lower())
        return (1, value)


def _gpu_label(gpu: GpuSample) -> str:
    return str(gpu.index) if gpu.mig_parent_index is None else f"{gpu.mig_parent_index}/{gpu.mig_gpu_instance_id}"


def process_rows(
    sample: Sample, host: list[HostProcess] | Unavailable | None = None, include_host: bool = False
) -> tuple[list[ProcessRow], list[str]]:
    """The processes of every GPU joined with ``host`` (a list of :class:`HostProcess`, or an
    Unavailable), plus every other host process when ``include_host``; and, per GPU whose list is
    unavailable, why."""
    by_pid: dict[int, HostProcess] = {p.pid: p for p in host} if isinstance(host, list) else {}
    rows: list[ProcessRow] = []
    problems: list[str] = []
    on_gpu: set[int] = set()
    listed: set[tuple[str, int, str]] = set()
    for gpu in sample.gpus:
        label = _gpu_label(gpu)
        if isinstance(gpu.processes, Unavailable):
            problems.append(f"GPU {label}: {reason_text(gpu.processes)}")
            continue
        for proc in gpu.processes:
            if (label, proc.pid, proc.kind) in listed:
                continue  # listed twice (a log may say so): one row per process, GPU and kind
            listed.add((label, proc.pid, proc.kind))
            on_gpu.add(proc.pid)
            h = by_pid.get(proc.pid)
            name = proc.name
            command = h.command if h else (name if isinstance(name, str) else NA)
            user = proc.user if not isinstance(proc.user, Unavailable) or h is None else h.user
            rows.append(
                ProcessRow(
                    label,
                    proc.pid,
                    user,
                    name,
                    proc.gpu_memory_bytes,
                    proc.sm_percent,
                    proc.kind,
                    cpu=h.cpu_percent if h else None,
                    rss=h.rss_bytes if h else None,
                    elapsed=h.elapsed_s if h else None,
                    command=command,
                    ppid=h.ppid if h else None,
                    host=h,
                )
            )
    if include_host:
        for h in by_pid.values():
            if h.pid not in on_gpu:
                rows.append(
                    ProcessRow(
                        "",
                        h.pid,
                        h.user,
                        h.name,
                        None,
                        None,
                        "host",
                        cpu=h.cpu_percent,
                        rss=h.rss_bytes,
                        elapsed=h.elapsed_s,
                        command=h.command,
                        ppid=h.ppid,
                        host=h,
                    )
                )
    return rows, problems


def tree_order(
    rows: list[ProcessRow], key: Callable[[ProcessRow], tuple[int, str | float]], reverse: bool
) -> list[tuple[ProcessRow, str]]:
    """``rows`` as a process tree: each row after its parent (when the parent is listed), siblings
    sorted by ``key``; with the prefix to draw before the command (``├─ ``, ``│  └─ ``...)."""
    pids = {row.pid for row in rows}
    children: dict[int | None, list[ProcessRow]] = {}
    for row in rows:
        parent = row.ppid if row.ppid in pids and row.ppid != row.pid else None
        children.setdefault(parent, []).append(row)
    for siblings in children.values():
        siblings.sort(key=key, reverse=reverse)
    out: list[tuple[ProcessRow, str]] = []
    seen: set[str] = set()

    def walk(parent: int | None, indent: str) -> None:
        siblings = children.get(parent, [])
        for position, row in enumerate(siblings):
            if row.key in seen:
                continue
            seen.add(row.key)
            last = position == len(siblings) - 1
            prefix = "" if parent is None else indent + ("└─ " if last else "├─ ")
            out.append((row, prefix))
            if row.kind == "host" or not any(r.pid == row.pid and r.key != row.key for r in rows):
                walk(row.pid, "" if parent is None else indent + ("   " if last else "│  "))

    walk(None, "")
    for row in rows:  # a cycle in ppid links (should not happen): still list every row
        if row.key not in seen:
            out.append((row, ""))
    return out


def _cell(row: ProcessRow, column: str, prefix: str = "") -> Text:
    value = getattr(row, column)
    if column == "gpu" and value == "":
        return Text("-", style="dim")
    if value is None:
        return Text("-" if row.kind == "host" and column in ("memory", "sm") else NA, style="dim italic")
    if isinstance(value, Unavailable):
        return Text(NA, style="dim italic")
    if column == "memory":
        return Text(fmt_mib(value))
    if column in ("sm", "cpu"):
        return Text(f"{value:.0f}")
    if column == "rss":
        return Text(fmt_rss(value))
    if column == "elapsed":
        return Text(fmt_elapsed(value))
    if column == "kind":
        return Text({"compute": "C", "graphics": "G", "host": "-"}.get(str(value), str(value)[:1].upper()))
    # names escaped before Rich sees them (it would drop a BEL or CR silently; the app's
    # line filter escapes the rest, gpuscope.tui.safe_lines)
    if column == "command":
        return Text(prefix + safe_text(value), no_wrap=True, overflow="ellipsis")
    return Text(safe_text(value))


class ProcessesScreen(GpuscopeScreen):
    MODE = "processes"
    DEFAULT_HINT = (
        "o/i: sort column/invert · /: filter · t: tree · a: all host processes · k: signal · click a header to sort"
    )
    BINDINGS = [
        Binding("o", "sort_next", "Sort"),
        Binding("i", "invert", "Invert"),
        Binding("slash", "filter", "Filter"),
        Binding("t", "toggle_tree", "Tree"),
        Binding("a", "toggle_host", "All"),
        Binding("k", "signal", "Signal"),
        Binding("escape", "clear_filter", "Clear", show=False),
    ]

    #: Sends a signal; returns None or why it was not sent (tests replace it).
    signal_sender: Callable[[HostProcess, int], str | None] = staticmethod(send_signal)
    #: This user's effective uid (tests replace it).
    effective_uid: Callable[[], int] = staticmethod(os.geteuid)

    def compose_body(self) -> ComposeResult:
        yield Static("", id="proc-status", markup=False)
        table: DataTable[Text] = DataTable(id="processes", cursor_type="row", zebra_stripes=True)
        yield table
        yield Input(placeholder="filter: pid, user or command text (enter to keep, escape to clear)", id="proc-filter")

    def __init__(self, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.sort_column = "memory"
        self.sort_reverse = True
        self.tree_view = False
        self.include_host = False
        self.filter_text = ""
        self._rows: list[ProcessRow] = []
        self._visible: list[ProcessRow] = []
        self._shown: list[tuple[str, ...]] = []
        self._problems: list[str] = []

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for key, title, right in COLUMNS:
            table.add_column(Text(title, justify="right" if right else "left"), key=key)
        self.query_one("#proc-filter", Input).display = False

    #: the app reads GPU process lists every second only while a screen that lists them shows
    shows_gpu_processes = True

    def wants_host_processes(self) -> float | None:
        return 0.0  # every poll while this screen shows

    def on_screen_resume(self) -> None:
        if self.gpuscope.replay is None and isinstance(self.gpuscope.host_processes, Unavailable):
            self.gpuscope.refresh_host_processes()

    def processes_changed(self) -> None:
        if self.gpuscope.latest_sample is not None:
            self.show_sample(self.gpuscope.latest_sample)

    def show_sample(self, sample: Sample) -> None:
        host = self.gpuscope.host_processes
        self._rows, self._problems = process_rows(sample, host, self.include_host)
        self._redraw()
        parts = []
        if not sample.gpus:
            parts.append(
                "No GPU processes: "
                + (reason_text(sample.gpu_unavailable) if sample.gpu_unavailable else "no NVIDIA GPUs")
            )
        else:
            on_gpu = sum(1 for r in self._rows if r.kind != "host")
            parts.append(f"{on_gpu} processes on {len(sample.gpus)} GPUs")
        if self.include_host:
            parts.append(f"{sum(1 for r in self._rows if r.kind == 'host')} host processes")
        parts.append(f"sorted by {self._title(self.sort_column)} {'↓' if self.sort_reverse else '↑'}")
        if self.tree_view:
            parts.append("tree")
        if self.filter_text:
            parts.append(f"filter {self.filter_text!r}: {len(self._visible)} shown")
        if isinstance(host, Unavailable):
            parts.append(f"host details n/a ({reason_text(host)})")
        if self._problems:
            parts.append("process list unavailable for " + "; ".join(self._problems))
        self.query_one("#proc-status", Static).update(" · ".join(parts), layout=False)

    @staticmethod
    def _title(column: str) -> str:
        return next(title for key, title, _ in COLUMNS if key == column)

    def _matches(self, row: ProcessRow) -> bool:
        if not self.filter_text:
            return True
        needle = self.filter_text.lower()
        haystack = f"{row.pid} {row.user} {row.command} {row.name}".lower()
        return needle in haystack

    def _redraw(self) -> None:
        rows = [r for r in self._rows if self._matches(r)]
        key = lambda r: (r.sort_value(self.sort_column), r.pid)  # noqa: E731
        if self.tree_view:
            ordered = tree_order(rows, key, self.sort_reverse)
        else:
            ordered = [(r, "") for r in sorted(rows, key=key, reverse=self.sort_reverse)]
        self._visible = [row for row, _ in ordered]
        shown = [(prefix,) + tuple(str(getattr(r, k)) for k, _, _ in COLUMNS) for r, prefix in ordered]
        if shown == self._shown:
            return
        self._shown = shown
        table = self.query_one(DataTable)
        selected = None
        if table.row_count and 0 <= table.cursor_row < table.row_count:
            selected = table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value
        table.clear()
        for row, prefix in ordered:
            cells = []
            for column, _, right in COLUMNS:
                cell = _cell(row, column, prefix)
                cell.justify = "right" if right else "left"
                cells.append(cell)
            table.add_row(*cells, key=row.key)
        if selected is not None:
            keys = [r.key for r in self._visible]
            if selected in keys:
                table.move_cursor(row=keys.index(selected), animate=False)

    # --- sorting, filtering, tree ------------------------------------------------------------

    def action_sort_next(self) -> None:
        keys = [key for key, _, _ in COLUMNS]
        self.sort_column = keys[(keys.index(self.sort_column) + 1) % len(keys)]
        self.sort_reverse = self.sort_column in _DESCENDING
        self._resort()

    def action_invert(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self._resort()

    def action_toggle_tree(self) -> None:
        self.tree_view = not self.tree_view
        self._resort()

    def action_toggle_host(self) -> None:
        self.include_host = not self.include_host
        if self.include_host and isinstance(self.gpuscope.host_processes, Unavailable) and self.gpuscope.replay is None:
            self.gpuscope.refresh_host_processes()
        self._resort()

    def action_filter(self) -> None:
        box = self.query_one("#proc-filter", Input)
        box.display = True
        box.value = self.filter_text
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#proc-filter", Input)
        self.filter_text = ""
        box.value = ""
        box.display = False
        self.query_one(DataTable).focus()
        self._resort()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "proc-filter":
            self.filter_text = event.value.strip()
            self._resort()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "proc-filter":
            event.input.display = bool(self.filter_text)
            self.query_one(DataTable).focus()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        column = str(event.column_key.value)
        if column == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column = column
            self.sort_reverse = column in _DESCENDING
        self._resort()

    def _resort(self) -> None:
        self._shown = []
        if self.gpuscope.latest_sample is not None:
            self.show_sample(self.gpuscope.latest_sample)

    # --- signals -----------------------------------------------------------------------------

    def selected_row(self) -> ProcessRow | None:
        table = self.query_one(DataTable)
        if not table.row_count or not 0 <= table.cursor_row < len(self._visible):
            return None
        return self._visible[table.cursor_row]

    def action_signal(self) -> None:
        row = self.selected_row()
        if row is None:
            self.notify("No process selected", severity="warning", timeout=3)
            return
        if row.host is None:
            self.notify(
                f"pid {row.pid}: not visible on this host (another container or a replay); not offered",
                severity="warning",
                timeout=4,
                markup=False,
            )
            return
        why_not = may_signal(row.host, euid=type(self).effective_uid(), own_pids=(os.getpid(), os.getppid()))
        if why_not:
            self.notify(f"pid {row.pid}: {why_not}", severity="warning", timeout=4, markup=False)
            return
        process = row.host

        def chosen(signum: int | None) -> None:
            if signum is None:
                return
            problem = type(self).signal_sender(process, signum)
            if problem:
                self.notify(problem, severity="error", timeout=5, markup=False)
            else:
                import signal as _signal

                self.notify(f"{_signal.Signals(signum).name} sent to pid {process.pid}", timeout=3, markup=False)
                self.gpuscope.refresh_host_processes()

        self.app.push_screen(SignalDialog(process), chosen)
