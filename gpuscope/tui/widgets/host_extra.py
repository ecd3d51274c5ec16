"""Dashboard panels for disk I/O and the host's busiest processes."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical

from gpuscope.schema.core import finite_or_none
from gpuscope.telemetry.hostprocs import HostProcess, top_by_cpu
from gpuscope.telemetry.records import HostSample
from gpuscope.telemetry.values import Unavailable
from gpuscope.tui.format import NA, fmt_rate, reason_text
from gpuscope.tui.widgets.lines import LineWidget, Run, set_title

__all__ = ["DiskLine", "DiskPanel", "ProcessLines", "TopProcessesPanel", "fmt_elapsed", "fmt_rss"]


def fmt_elapsed(seconds: float) -> str:
    """``59s``, ``12:03`` (min:s), ``3:12h`` (h:min), ``4d03h``: as top's TIME column, compact
    (``n/a`` when not a finite number, a negative one as 0, ``1.2e+07d`` past 99,999 days)."""
    number = finite_or_none(seconds)
    if number is None:
        return NA
    if number >= 100_000 * 86400:
        return f"{number / 86400:.2g}d"
    seconds = max(0, int(number))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}:{seconds % 60:02d}"
    if seconds < 86400:
        return f"{seconds // 3600}:{seconds % 3600 // 60:02d}h"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def fmt_rss(value: float) -> str:
    """Resident memory in binary units: ``812M``, ``3.4G`` (``n/a`` when not a finite number)."""
    number = finite_or_none(value)
    if number is None:
        return NA
    value, magnitude = number, abs(number)  # (a negative size is shown as such, not as a huge one)
    if magnitude >= 2**40 * 1000:
        return f"{value / 2**30:.2g}G"
    if magnitude >= 2**30:
        return f"{value / 2**30:.1f}G"
    if magnitude >= 2**20:
        return f"{value / 2**20:.0f}M"
    return f"{value / 2**10:.0f}K"


class DiskLine(LineWidget):
    """The line inside :class:`DiskPanel` (a plain line widget: a change repaints this line
    only, not the panel's border)."""

    DEFAULT_CSS = """
    DiskLine { height: 1; width: 1fr; }
    DiskLine > .disk--label { color: $text-muted; }
    DiskLine > .disk--na { color: $text-disabled; text-style: italic; }
    """
    COMPONENT_CLASSES = {"disk--label", "disk--na"}

    def __init__(self) -> None:
        super().__init__()
        #: What is shown for reading and writing: the rate's text, or why there is none.
        self.values: tuple[str | Unavailable | None, ...] = (None, None)

    def build_lines(self, width: int, height: int) -> list[list[Run]]:
        runs: list[Run] = []
        for label, value in zip(("read ", "  write "), self.values):
            runs.append((label, self.component_style("disk--label")))
            if isinstance(value, str):
                runs.append((f"{value:>10}", None))
            else:
                runs.append((f"{NA:>10}", self.component_style("disk--na")))
        return [runs]


class DiskPanel(Vertical):
    """Read and write rates summed over the physical disks (one bordered line)."""

    DEFAULT_CSS = """
    DiskPanel { height: 3; border: round $secondary; border-title-style: bold; padding: 0 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Disk I/O"
        self._line = DiskLine()

    def compose(self) -> ComposeResult:
        yield self._line

    def show(self, host: HostSample) -> None:
        raw = (getattr(host, "disk_read_bytes_per_s", None), getattr(host, "disk_write_bytes_per_s", None))
        # compare what is shown, not the raw rates (they differ every sample, their text seldom)
        values = tuple(fmt_rate(v) if isinstance(v, (int, float)) else v for v in raw)
        line = self._line
        if values != line.values:
            line.values = values
            reasons = [
                f"{label}: {reason_text(v)}"
                for label, v in zip(("read", "write"), values)
                if isinstance(v, Unavailable)
            ]
            tooltip = "\n".join(reasons) or None
            if tooltip != self.tooltip:
                self.tooltip = tooltip
            line.invalidate()


#: (key, title, width or 0 for the rest, right-aligned)
PROCESS_COLUMNS = (
    ("pid", "PID", 7, True),
    ("user", "USER", 9, False),
    ("cpu", "CPU%", 6, True),
    ("rss", "RSS", 6, True),
    ("time", "TIME", 7, True),
    ("command", "COMMAND", 0, False),
)


class ProcessLines(LineWidget):
    """The header and process lines inside :class:`TopProcessesPanel`."""

    DEFAULT_CSS = """
    ProcessLines { height: 1fr; width: 1fr; }
    ProcessLines > .proc--header { color: $text-muted; text-style: bold; }
    ProcessLines > .proc--na { color: $text-disabled; text-style: italic; }
    """
    COMPONENT_CLASSES = {"proc--header", "proc--na"}

    def __init__(self) -> None:
        super().__init__()
        self.rows: tuple[tuple[str, ...], ...] = ()
        self.message = "not scanned yet"

    def build_lines(self, width: int, height: int) -> list[list[Run]]:
        header: list[str] = []
        for _, title, size, right in PROCESS_COLUMNS:
            header.append((title.rjust(size) if right else title.ljust(size)) if size else title)
        lines: list[list[Run]] = [[(" ".join(header), self.component_style("proc--header"))]]
        if self.message:
            return lines + [[(self.message, self.component_style("proc--na"))]]
        for row in self.rows[: max(0, height - 1)]:
            cells = []
            for (_, _, size, right), value in zip(PROCESS_COLUMNS, row):
                cells.append((value.rjust(size) if right else value.ljust(size)) if size else value)
            lines.append([(" ".join(cells), None)])
        return lines


class TopProcessesPanel(Vertical):
    """The host's busiest processes by CPU % (refreshed every few seconds while shown): a
    header and one line per process, as many as the height allows, in a bordered panel."""

    DEFAULT_CSS = """
    TopProcessesPanel { height: 7; border: round $secondary; border-title-style: bold; padding: 0 1; }
    """
    #: Rows the panel never goes below (border, header, three processes).
    MIN_ROWS = 6

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Top processes"
        self._shown_from: list[HostProcess] | Unavailable | None = None
        self._lines = ProcessLines()

    def compose(self) -> ComposeResult:
        yield self._lines

    def on_resize(self) -> None:
        self._shown_from = None  # as many processes as the new height holds, at the next sample

    def show(self, processes: list[HostProcess] | Unavailable) -> None:
        """Show ``processes`` (a list of HostProcess, or why there are none); a list already
        shown is not looked at again (the scan runs every few seconds, the UI every second)."""
        if processes is self._shown_from:
            return
        self._shown_from = processes
        limit = max(1, self.size.height - 1)
        count = "" if isinstance(processes, Unavailable) else f" · {len(processes)} total · by CPU% · 4: all processes"
        set_title(self, f"Top processes{count}")
        if isinstance(processes, Unavailable):
            rows: tuple[tuple[str, ...], ...] = ()
            message = reason_text(processes)
        else:
            rows = tuple(
                (
                    str(p.pid),
                    p.user[:8],
                    f"{p.cpu_percent:.0f}" if isinstance(p.cpu_percent, float) else NA,
                    fmt_rss(p.rss_bytes),
                    fmt_elapsed(p.elapsed_s),
                    p.command,
                )
                for p in top_by_cpu(processes, limit)
            )
            message = "" if rows else "no processes"
        lines = self._lines
        if rows != lines.rows or message != lines.message:
            lines.rows, lines.message = rows, message
            lines.invalidate()
