"""Processes using GPUs: pid, user, name, GPU memory, SM %; sortable by any column."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from gpuscope.telemetry.records import Sample
from gpuscope.telemetry.values import Unavailable
from gpuscope.tui.format import NA, fmt_bytes, reason_text
from gpuscope.tui.screens.base import GpuscopeScreen

__all__ = ["ProcessesScreen", "ProcessRow", "process_rows", "COLUMNS"]

#: (key, title, right-aligned)
COLUMNS = (
    ("gpu", "GPU", True),
    ("pid", "PID", True),
    ("user", "User", False),
    ("name", "Name", False),
    ("memory", "GPU mem", True),
    ("sm", "SM %", True),
    ("kind", "Type", False),
)


@dataclass(frozen=True)
class ProcessRow:
    gpu: str
    pid: int
    user: Any
    name: Any
    memory: Any
    sm: Any
    kind: str

    @property
    def key(self) -> str:
        return f"{self.gpu}:{self.pid}:{self.kind}"

    def sort_value(self, column: str) -> tuple:
        value = getattr(self, column)
        if isinstance(value, Unavailable):
            return (0, 0)  # unavailable sorts below every real value
        if isinstance(value, str):
            return (1, value.lower())
        return (1, value)


def process_rows(sample: Sample) -> tuple[list[ProcessRow], list[str]]:
    """The processes of every GPU and, per GPU whose list is unavailable, why."""
    rows: list[ProcessRow] = []
    problems: list[str] = []
    for gpu in sample.gpus:
        label = str(gpu.index) if gpu.mig_parent_index is None else f"{gpu.mig_parent_index}/{gpu.mig_gpu_instance_id}"
        if isinstance(gpu.processes, Unavailable):
            problems.append(f"GPU {label}: {reason_text(gpu.processes)}")
            continue
        for proc in gpu.processes:
            rows.append(ProcessRow(label, proc.pid, proc.user, proc.name, proc.gpu_memory_bytes, proc.sm_percent, proc.kind))
    return rows, problems


def _cell(value: Any, column: str) -> Text:
    if isinstance(value, Unavailable):
        return Text(NA, style="dim italic")
    if column == "memory":
        return Text(fmt_bytes(value))
    if column == "sm":
        return Text(f"{value:.0f}")
    return Text(str(value))


class ProcessesScreen(GpuscopeScreen):
    MODE = "processes"
    DEFAULT_HINT = "o: sort by next column · i: invert order · click a header to sort"
    BINDINGS = [
        Binding("o", "sort_next", "Sort col"),
        Binding("i", "invert", "Invert"),
    ]

    def compose_body(self) -> ComposeResult:
        yield Static("", id="proc-status", markup=False)
        table: DataTable = DataTable(id="processes", cursor_type="row", zebra_stripes=True)
        yield table

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for key, title, right in COLUMNS:
            table.add_column(Text(title, justify="right" if right else "left"), key=key)
        self.sort_column = "memory"
        self.sort_reverse = True
        self._rows: list[ProcessRow] = []
        self._shown: list[tuple] = []
        self._problems: list[str] = []

    def show_sample(self, sample: Sample) -> None:
        self._rows, self._problems = process_rows(sample)
        self._redraw()
        if not sample.gpus:
            status = "No GPU processes to show: " + (reason_text(sample.gpu_unavailable) if sample.gpu_unavailable else "no NVIDIA GPUs")
        else:
            status = f"{len(self._rows)} processes on {len(sample.gpus)} GPUs · sorted by {self._title(self.sort_column)} {'↓' if self.sort_reverse else '↑'}"
            if self._problems:
                status += " · process list unavailable for " + "; ".join(self._problems)
        self.query_one("#proc-status", Static).update(status, layout=False)

    @staticmethod
    def _title(column: str) -> str:
        return next(title for key, title, _ in COLUMNS if key == column)

    def _redraw(self) -> None:
        rows = sorted(self._rows, key=lambda r: (r.sort_value(self.sort_column), r.pid), reverse=self.sort_reverse)
        shown = [tuple(str(getattr(r, key)) for key, _, _ in COLUMNS) for r in rows]
        if shown == self._shown:
            return
        self._shown = shown
        table = self.query_one(DataTable)
        selected = None
        if table.row_count and 0 <= table.cursor_row < table.row_count:
            selected = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value
        table.clear()
        for row in rows:
            cells = []
            for key, _, right in COLUMNS:
                cell = _cell(getattr(row, key), key)
                cell.justify = "right" if right else "left"
                cells.append(cell)
            table.add_row(*cells, key=row.key)
        if selected is not None:
            keys = [r.key for r in rows]
            if selected in keys:
                table.move_cursor(row=keys.index(selected), animate=False)

    def action_sort_next(self) -> None:
        keys = [key for key, _, _ in COLUMNS]
        self.sort_column = keys[(keys.index(self.sort_column) + 1) % len(keys)]
        self._resort()

    def action_invert(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self._resort()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        column = str(event.column_key.value)
        if column == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column = column
            self.sort_reverse = column in ("memory", "sm")
        self._resort()

    def _resort(self) -> None:
        self._shown = []
        self._redraw()
        if self.gpuscope.latest_sample is not None:
            self.show_sample(self.gpuscope.latest_sample)
