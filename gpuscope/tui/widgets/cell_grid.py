"""A grid of labelled metrics drawn as one widget (one widget per GPU card instead of twenty:
the dashboard's redraw cost is per widget). Unavailable metrics read "n/a"; the mouse shows the
reason as a tooltip, and ``tab`` walks through the n/a cells, explaining each in the hint line."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message

from gpuscope.telemetry.values import Unavailable
from gpuscope.tui.format import NA, reason_text
from gpuscope.tui.widgets.lines import LineWidget, Run

__all__ = ["CellGrid", "CellState", "CellValue", "Geometry"]


#: What a cell is given: its text, or why it has none (None: no reading).
CellValue = str | Unavailable


class Geometry(NamedTuple):
    """How a :class:`CellGrid` lays out its cells at a width."""

    columns: int
    cell_width: int
    #: The narrowest gap between two columns.
    gap: int
    #: The gap after each column but the last.
    gaps: tuple[int, ...]
    #: Where each column starts.
    starts: tuple[int, ...]


class CellState(NamedTuple):
    """What one cell shows: the value text, or n/a with ``reason`` (a named tuple: one is made
    for each value that changes, every sample)."""

    label: str
    value_text: str = NA
    reason: str | None = "not read yet"


class CellGrid(LineWidget):
    """Cells of ``label value`` in as many columns as fit (``cell_width`` each, ``gap`` apart),
    filled row by row. Redraws only when a cell's text changes."""

    DEFAULT_CSS = """
    CellGrid { height: auto; width: 1fr; }
    CellGrid > .cells--label { color: $text-muted; }
    CellGrid > .cells--na { color: $text-disabled; text-style: italic; }
    CellGrid > .cells--cursor { background: $accent 40%; }
    """
    COMPONENT_CLASSES = {"cells--label", "cells--na", "cells--cursor"}
    BINDINGS = [
        Binding("tab", "next_na", "next n/a", show=False),
        Binding("shift+tab", "previous_na", "previous n/a", show=False),
    ]

    class Explained(Message):
        """The n/a cell under the keyboard cursor changed: ``text`` is its reason ("" on leave)."""

        def __init__(self, grid: CellGrid, text: str) -> None:
            super().__init__()
            self.grid = grid
            self.text = text

    def __init__(
        self, labels: Sequence[tuple[str, str]], *, cell_width: int = 24, gap: int = 2, id: str | None = None
    ) -> None:
        super().__init__(id=id)
        self.keys = [key for key, _ in labels]
        self._cells = {key: CellState(label) for key, label in labels}
        self.label_width = max((len(label) for _, label in labels), default=0)
        #: Each cell's label as drawn: padded to the widest label, then a space.
        self._label_texts = {key: label.ljust(self.label_width) + " " for key, label in labels}
        self.cell_width = cell_width
        self.gap = gap
        self._geometries: dict[int, Geometry] = {}
        self._cursor: int | None = None  # index into self.keys while focused
        self._hover: str | None = None
        self.can_focus = True
        #: The runs of each row (by its first cell's index) and the cells they show, for one geometry.
        self._built_for: tuple[object, ...] = ()
        self._built: dict[int, tuple[tuple[CellState, ...], list[Run]]] = {}

    # --- data ------------------------------------------------------------------------------

    def cell(self, key: str) -> CellState:
        return self._cells[key]

    def set_values(self, values: Mapping[str, CellValue | None]) -> None:
        """``key -> text or Unavailable`` (None: no reading); redraws when anything changed."""
        changed = False
        cells = self._cells
        for key, value in values.items():
            old = cells[key]
            if isinstance(value, str):  # the common case: a value, often the one shown already
                if old.reason is None and old.value_text == value:
                    continue
                new = CellState(old.label, value, None)
            elif value is None:
                new = CellState(old.label, NA, "no reading")
            else:
                new = CellState(old.label, NA, reason_text(value))
            if new != old:
                cells[key] = new
                changed = True
        if changed:
            self.can_focus = any(cell.reason for cell in cells.values())
            if self._hover is not None:
                self._set_tooltip(self._hover)
            if self._cursor is not None and cells[self.keys[self._cursor]].reason is None:
                self._move(+1, wrap=True)
            self.invalidate()

    # --- layout ----------------------------------------------------------------------------

    def columns(self, width: int) -> int:
        return max(1, min(len(self.keys), (width + self.gap) // (self.cell_width + self.gap)))

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, math.ceil(len(self.keys) / self.columns(width)))

    def _geometry(self, width: int) -> Geometry:
        """Columns, cell width and the gaps after each column at ``width``: the last column ends
        one cell short of the edge (a space before a card's border); where that space needs it,
        the gaps shrink, the first ones staying widest."""
        geometry = self._geometries.get(width)
        if geometry is None:
            geometry = self._geometries[width] = self._work_out_geometry(width)
        return geometry

    def _work_out_geometry(self, width: int) -> Geometry:
        columns = self.columns(width)
        usable, gap = width - 1, self.gap
        gaps = [gap] * (columns - 1)
        if columns > 1 and columns * self.cell_width + gap * (columns - 1) > usable:
            room = max(columns - 1, usable - columns * self.cell_width)
            wide, narrow = room % (columns - 1), room // (columns - 1)
            gaps = [narrow + 1] * wide + [narrow] * (columns - 1 - wide)
        cell_width = max(1, (usable - sum(gaps)) // columns)
        starts = [0]
        for column_gap in gaps:
            starts.append(starts[-1] + cell_width + column_gap)
        return Geometry(columns, cell_width, min(gaps, default=gap), tuple(gaps), tuple(starts))

    def build_lines(self, width: int, height: int) -> list[list[Run]]:
        columns, cell_width, _, gaps, _ = self._geometry(width)
        label_style = self.component_style("cells--label")
        na_style = self.component_style("cells--na")
        cursor_style = self.component_style("cells--cursor")
        cursor_key = self.keys[self._cursor] if self._cursor is not None and self.has_focus else None
        built_for = (columns, cell_width, gaps, cursor_key, label_style, na_style, cursor_style)
        if self._built_for != built_for:  # a row whose cells did not change keeps its runs
            self._built_for, self._built = built_for, {}
        built = self._built
        cell_of, label_texts, last = self._cells.__getitem__, self._label_texts, columns - 1
        lines: list[list[Run]] = []
        for start in range(0, len(self.keys), columns):
            keys = self.keys[start : start + columns]
            cells = tuple(map(cell_of, keys))
            row = built.get(start)
            if row is not None and row[0] == cells:
                lines.append(row[1])
                continue
            runs: list[Run] = []
            for position, key in enumerate(keys):
                cell = cells[position]
                label = label_texts[key]
                value = cell.value_text
                room = cell_width - len(label)
                if len(value) > room:
                    value = value[: max(0, room - 1)] + "…"
                if key == cursor_key:
                    runs += ((label, cursor_style), (value, cursor_style))
                else:
                    runs += ((label, label_style), (value, na_style if cell.reason else None))
                if position < last:
                    runs.append((" " * (cell_width - len(label) - len(value) + gaps[position]), None))
            built[start] = (cells, runs)
            lines.append(runs)
        return lines

    def key_at(self, x: int, y: int) -> str | None:
        """The cell key at content offset (x, y), or None."""
        geometry = self._geometry(self.size.width)
        column = next((c for c, start in enumerate(geometry.starts) if start <= x < start + geometry.cell_width), None)
        if column is None:
            return None
        index = y * geometry.columns + column
        return self.keys[index] if 0 <= index < len(self.keys) else None

    # --- mouse and keyboard ----------------------------------------------------------------

    def _set_tooltip(self, key: str | None) -> None:
        cell = self._cells.get(key) if key else None
        self.tooltip = f"{cell.label}: {cell.reason}" if cell is not None and cell.reason else None

    def on_mouse_move(self, event: events.MouseMove) -> None:
        key = self.key_at(event.x, event.y)
        if key != self._hover:
            self._hover = key
            self._set_tooltip(key)

    def on_leave(self) -> None:
        self._hover = None
        self.tooltip = None

    def _na_indexes(self) -> list[int]:
        return [index for index, key in enumerate(self.keys) if self._cells[key].reason]

    def _explain(self) -> None:
        if self._cursor is None:
            self.post_message(self.Explained(self, ""))
            return
        cell = self._cells[self.keys[self._cursor]]
        self.post_message(self.Explained(self, f"{cell.label}: {cell.reason}" if cell.reason else ""))

    def _move(self, step: int, wrap: bool = False) -> bool:
        """Move the cursor to the next (step +1) or previous n/a cell; False at the end."""
        indexes = self._na_indexes()
        if not indexes:
            self._cursor = None
            return False
        if self._cursor is None:
            self._cursor = indexes[0] if step > 0 else indexes[-1]
        else:
            later = [i for i in indexes if (i > self._cursor if step > 0 else i < self._cursor)]
            if not later:
                if not wrap:
                    return False
                later = indexes if step > 0 else indexes[::-1]
            self._cursor = later[0] if step > 0 else later[-1]
        self._explain()
        self.invalidate()
        return True

    def on_focus(self, event: events.Focus) -> None:
        indexes = self._na_indexes()
        if not indexes:
            self._cursor = None
        elif self._cursor is None or self._cursor not in indexes:
            self._cursor = indexes[0]
        self._explain()
        self.invalidate()

    def on_blur(self) -> None:
        self._cursor = None
        self.post_message(self.Explained(self, ""))
        self.invalidate()

    def action_next_na(self) -> None:
        if not self._move(+1):
            self.screen.focus_next()

    def action_previous_na(self) -> None:
        if not self._move(-1):
            self.screen.focus_previous()

    def on_click(self, event: events.Click) -> None:
        key = self.key_at(event.x, event.y)
        if key is not None and self._cells[key].reason:
            self._cursor = self.keys.index(key)
            self._explain()
            self.invalidate()
