"""Label placement of the roofline layout in a grid of character cells: terminal columns, or
the text cells of the SVG, for the layout of :mod:`gpuscope.roofline.layout`.

:func:`place_labels` puts the point tags, roof labels and ridge labels where they cover no line,
no point, no ridge mark and no other label; :func:`legibility` counts what a placement still
gets wrong (``benchmarks/bench_chart_legibility.py`` reports it). No Textual import.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from gpuscope.roofline.shapes import RidgeMark, RoofLabel, RooflineLayout, Segment
from gpuscope.roofline.units import format_intensity

__all__ = ["CellText", "CellPlacement", "cell_of", "raster_segment", "place_labels", "legibility"]


@dataclass(frozen=True)
class CellText:
    """A label placed in the cell grid: first cell ``(row, column)``, 0-based from the top left
    of the plot area. ``kind``: ``"point"``, ``"roof"`` or ``"ridge"``; ``owner`` the index
    into the layout's points, labels or ridges."""

    row: int
    column: int
    text: str
    kind: str
    owner: int
    angle_deg: float = 0.0  # a slanted label (along a slope, SVG only): its on-screen angle
    footprint: tuple[tuple[int, int], ...] = ()  # the cells a slanted label covers

    @property
    def cells(self) -> tuple[tuple[int, int], ...]:
        """Every cell the label covers."""
        return self.footprint or tuple((self.row, self.column + offset) for offset in range(len(self.text)))


@dataclass
class CellPlacement:
    """Where labels went in a ``columns`` x ``rows`` grid, and which cells the lines, points and
    ridge marks cover (``lines``, ``marks``)."""

    columns: int
    rows: int
    texts: list[CellText] = field(default_factory=list)
    dropped: list[tuple[str, int]] = field(default_factory=list)  # (kind, owner) with no free place
    lines: set[tuple[int, int]] = field(default_factory=set)
    marks: dict[tuple[int, int], tuple[str, int]] = field(default_factory=dict)
    on_own_line: set[tuple[int, int]] = field(default_factory=set)  # flat roof labels written over their line


def cell_of(
    layout: RooflineLayout, x: float, y: float, columns: int, rows: int, dots: int | None = None
) -> tuple[int, int]:
    """``(row, column)`` of data point (x, y) in a ``columns`` x ``rows`` plot area (may lie
    outside). ``dots``: the cell holds ``dots`` x ``dots`` dots and the point goes to the cell
    of its nearest dot, as plotext draws a line with such a marker (2: half blocks)."""
    (x0, x1), (y0, y1) = layout.x_range, layout.y_range
    fx = (math.log10(x) - x0) / (x1 - x0)
    fy = (math.log10(y) - y0) / (y1 - y0)
    if dots:
        column = int(math.floor(fx * (dots * columns - 1) + 0.5)) // dots
        row = (rows - 1) - int(math.floor(fy * (dots * rows - 1) + 0.5)) // dots
        return row, column
    column = int(math.floor(fx * (columns - 1) + 0.5))
    row = (rows - 1) - int(math.floor(fy * (rows - 1) + 0.5))
    return row, column


def raster_segment(layout: RooflineLayout, segment: Segment, columns: int, rows: int) -> set[tuple[int, int]]:
    """The cells a segment passes through (inside the grid)."""
    r0, c0 = cell_of(layout, segment.x0, segment.y0, columns, rows)
    r1, c1 = cell_of(layout, segment.x1, segment.y1, columns, rows)
    steps = max(1, 4 * max(abs(r1 - r0), abs(c1 - c0)))
    cells = set()
    (x0, x1), (y0, y1) = layout.x_range, layout.y_range
    lx0, lx1 = math.log10(segment.x0), math.log10(segment.x1)
    ly0, ly1 = math.log10(segment.y0), math.log10(segment.y1)
    for step in range(steps + 1):
        t = step / steps
        fx = (lx0 + t * (lx1 - lx0) - x0) / (x1 - x0)
        fy = (ly0 + t * (ly1 - ly0) - y0) / (y1 - y0)
        column = int(math.floor(fx * (columns - 1) + 0.5))
        row = (rows - 1) - int(math.floor(fy * (rows - 1) + 0.5))
        if 0 <= row < rows and 0 <= column < columns:
            cells.add((row, column))
    return cells


def place_labels(
    layout: RooflineLayout,
    columns: int,
    rows: int,
    *,
    blocked: Iterable[tuple[int, int]] = (),
    line_cells: set[tuple[int, int]] | None = None,
    ridge_labels: bool = True,
    gap: int = 1,
    slanted_aspect: float | None = None,
    on_line: bool = False,
    dots_of: Callable[[Segment], int] | None = None,
    mark_dots: int | None = None,
) -> CellPlacement:
    """Place the point tags, roof labels and ridge labels of ``layout`` in a ``columns`` x
    ``rows`` grid (the plot area). No label covers a line cell, a point, a ridge mark, a cell in
    ``blocked`` (what the painter already drew there) or another label (``gap`` blank cells
    between labels on a row). Order: point tags (highlighted first), envelope labels, ridge
    labels of envelopes, then the thin roofs. ``line_cells`` replaces the layout's own
    rasterisation of the lines (a painter passes the cells it really drew). With
    ``slanted_aspect`` (cell height / cell width on screen) the labels of sloped roofs run along
    their line (a painter that can rotate text: the SVG), just above or below it. With
    ``on_line`` (a painter that passes the cells it drew as ``line_cells``: the terminal) each
    roof's label goes on its own line as Intel Advisor draws it: a flat roof's label is written
    over its line, on the row where the line was drawn, right-aligned and sliding left past
    other labels; a slope's label starts right after (or ends right before) the cells its line
    was drawn in on a row, walking up the line. ``dots_of``: the dots per cell row of the
    painter's marker for a segment (plotext: 2 for half blocks, 4 for braille), which decide the
    row a flat line lands on; ``mark_dots`` the same for point and ridge marks. Deterministic."""
    placement = CellPlacement(columns, rows)
    if line_cells is not None:
        placement.lines = set(line_cells)
    else:
        for segment in layout.segments:
            placement.lines |= raster_segment(layout, segment, columns, rows)

    def at(x: float, y: float) -> tuple[int, int]:
        """The cell of a point or ridge mark (where the painter puts it)."""
        return cell_of(layout, x, y, columns, rows, mark_dots)

    def ridge_cell(ridge: RidgeMark) -> tuple[int, int]:
        """A ridge mark's cell: on the row its flat line was drawn on (the painter's dots)."""
        if not on_line or dots_of is None:
            return cell_of(layout, ridge.x, ridge.y, columns, rows)
        flat = next((s for s in layout.segments if s.device == ridge.device and s.y0 == s.y1 == ridge.y), None)
        return cell_of(layout, ridge.x, ridge.y, columns, rows, dots_of(flat) if flat else mark_dots)

    for number, ridge in enumerate(layout.ridges):
        placement.marks[ridge_cell(ridge)] = ("ridge", number)
    for number, point in enumerate(layout.points):
        cell = at(point.x, point.y)
        placement.marks.setdefault(cell, ("point", number))
    taken: set[tuple[int, int]] = set(placement.lines) | set(placement.marks) | set(blocked)
    padded: set[tuple[int, int]] = set()
    # each label's segments by (roof, device), found once: a search per label was quadratic
    segments_of: dict[tuple[int, int], list[Segment]] = {}
    for segment in layout.segments:
        segments_of.setdefault((id(segment.roof), segment.device), []).append(segment)

    def fits(row: int, start: int, length: int) -> bool:
        if row < 0 or row >= rows or start < 0 or start + length > columns:
            return False
        return all((row, c) not in taken and (row, c) not in padded for c in range(start, start + length))

    labelled: set[tuple[int, int]] = set()  # the cells labels took
    # what the painter drew that is no line (with on_line the lines are the painter's cells)
    blocked_marks = set(blocked) - placement.lines

    def claim(row: int, start: int, length: int, text: str, kind: str, owner: int) -> None:
        for c in range(start, start + length):
            taken.add((row, c))
            labelled.add((row, c))
        for g in range(1, gap + 1):
            padded.update({(row, start - g), (row, start + length - 1 + g)})
        placement.texts.append(CellText(row, start, text, kind, owner))

    def try_spots(spots: Iterable[tuple[int, int]], text: str, kind: str, owner: int) -> bool:
        for row, start in spots:
            if fits(row, start, len(text)):
                claim(row, start, len(text), text, kind, owner)
                return True
        placement.dropped.append((kind, owner))
        return False

    order = sorted(range(len(layout.points)), key=lambda n: (not layout.points[n].highlighted, n))
    for number in order:
        point = layout.points[number]
        if not point.tag:  # a point of a fleet's grouped device is drawn untagged (the table lists it)
            continue
        row, column = at(point.x, point.y)
        if not (0 <= row < rows and 0 <= column < columns):
            placement.dropped.append(("point", number))
            continue
        text = point.tag
        length = len(text)
        spots = [
            (row, column + 1),
            (row, column - length),
            (row + 1, column + 1),
            (row - 1, column + 1),
            (row + 1, column - length),
            (row - 1, column - length),
        ]
        for distance in (2, 3):
            spots += [(row, column + distance), (row, column - length - distance + 1)]
            spots += [(row + dr, column + dc) for dr in (-distance, distance) for dc in (0, 1 - length)]
            spots += [(row + dr, column + distance) for dr in (-1, 1)] + [
                (row + dr, column - length - distance + 1) for dr in (-1, 1)
            ]
        try_spots(spots, text, "point", number)

    def drawn_cells(label: RoofLabel) -> dict[int, tuple[int, int]]:
        """Per grid row, the first and last column of the cells drawn for ``label``'s line: the
        painter's cells (``line_cells``) within a row of where the layout puts the line (plotext
        rounds a line to a neighbouring row)."""
        runs: dict[int, tuple[int, int]] = {}
        for segment in segments_of.get((id(label.roof), label.device), []):
            for row, column in sorted(raster_segment(layout, segment, columns, rows), key=lambda cell: cell[1]):
                drawn = next((row + dr for dr in (0, -1, 1) if (row + dr, column) in placement.lines), None)
                if drawn is None:
                    continue
                low, high = runs.get(drawn, (column, column))
                runs[drawn] = (min(low, column), max(high, column))
        return runs

    def on_line_spots(label: RoofLabel, text: str) -> list[tuple[int, int]]:
        """Spots on or touching ``label``'s drawn line (see ``on_line``)."""
        runs = drawn_cells(label)
        length = len(text)
        if not label.slope:  # the row the painter drew the line on, the label right-aligned on it
            flat = [seg for seg in segments_of.get((id(label.roof), label.device), []) if seg.y0 == seg.y1]
            if not flat:
                return []
            _, first = cell_of(layout, flat[0].x0, flat[0].y0, columns, rows)
            _, last = cell_of(layout, flat[-1].x1, flat[-1].y1, columns, rows)
            first, last = max(0, first), min(columns - 1, last)
            row, _ = cell_of(layout, label.x, label.y, columns, rows, dots_of(flat[0]) if dots_of else None)
            span = range(first, last + 1)
            row = next(
                (r for r in (row, row - 1, row + 1) if sum((r, c) in placement.lines for c in span) * 2 >= len(span)),
                row,
            )
            on = [(row, start) for start in range(last - length + 1, first - 1, -1)]
            beside = [(r, start) for start in range(last - length + 1, first - 1, -1) for r in (row - 1, row + 1)]
            return on + beside  # on the line; where marks leave no room, touching it above or below
        spots = []
        for row in sorted(runs, reverse=True):  # from the bottom (the line's start) upwards
            first, last = runs[row]
            spots += [(row, last + 1), (row, first - length)]
        return spots

    def fits_on_line(row: int, start: int, length: int) -> bool:
        """Like ``fits``, but a flat roof's label may cover line cells (its own line's)."""
        if row < 0 or row >= rows or start < 0 or start + length > columns:
            return False
        return all(
            (row, c) not in labelled and (row, c) not in padded and (row, c) not in placement.marks
            and (row, c) not in blocked_marks
            for c in range(start, start + length)
        )  # fmt: skip

    def roof_spots(label: RoofLabel, text: str) -> list[tuple[int, int]]:
        row, column = cell_of(layout, label.x, label.y, columns, rows)
        length = len(text)
        if not label.slope:  # a flat roof: above or below its own line, right-aligned, sliding left
            end = min(column, columns - 1)
            first = max(
                (
                    cell_of(layout, seg.x0, seg.y0, columns, rows)[1]
                    for seg in segments_of.get((id(label.roof), label.device), [])
                    if seg.y0 == seg.y1
                ),
                default=0,
            )
            spots = []
            for shift in range(0, max(1, columns - length), 2):
                start = end - length + 1 - shift
                if start < max(0, first):
                    break
                spots += [(row - 1, start), (row + 1, start)]
            return spots
        # a slope rising left to right, walking up along it from its start: the label ends just
        # above-left of a line cell (the line runs lower to its left) or starts just below-right
        # of one (the line runs higher to its right), so it hugs the line without touching it
        spots = []
        step = (layout.x_range[1] - layout.x_range[0]) / max(1, columns - 1)
        for offset in range(0, columns, 2):
            factor = 10 ** (offset * step)
            r, c = cell_of(layout, label.x * factor, label.y * factor, columns, rows)
            if not (0 <= r < rows and 0 <= c < columns):
                continue
            spots += [(r - 1, c - length), (r + 1, c + 1), (r, c - length - 1), (r - 1, c - length + 1)]
        return spots

    def slanted(label: RoofLabel, number: int) -> bool:
        """Place a slope label along its line; False when no place is free."""
        assert slanted_aspect is not None
        segment = next((s for s in segments_of.get((id(label.roof), label.device), []) if s.y0 != s.y1), None)
        if segment is None:
            return False
        r0, c0 = cell_of(layout, segment.x0, segment.y0, columns, rows)
        r1, c1 = cell_of(layout, segment.x1, segment.y1, columns, rows)
        if c1 <= c0:
            return False
        angle = math.atan2((r0 - r1) * slanted_aspect, c1 - c0)
        dx, dy = math.cos(angle), -math.sin(angle) / slanted_aspect  # per character, in columns and rows
        # a steep line covers several rows in one column: the text must clear all of them
        clearance_rows = 0.9 + abs(r1 - r0) / (c1 - c0) / 2
        for offset in range(1, max(2, c1 - c0)):
            column = c0 + offset
            row = r0 + (r1 - r0) * offset / (c1 - c0)
            for side in (-1.0, 1.0):
                start_row = row + side * clearance_rows
                cells = tuple(
                    (int(round(start_row + k * dy)), int(round(column + k * dx))) for k in range(len(label.text))
                )
                if all(
                    0 <= r < rows and 0 <= c < columns and (r, c) not in taken and (r, c) not in padded
                    for r, c in cells
                ):
                    for cell in cells:
                        taken.add(cell)
                    placement.texts.append(
                        CellText(int(round(start_row)), column, label.text, "roof", number, math.degrees(angle), cells)
                    )
                    return True
        return False

    def place_on_line(label: RoofLabel, number: int) -> None:
        length = len(label.text)
        spots = on_line_spots(label, label.text)
        on_row = spots[0][0] if spots and not label.slope else None
        for row, start in spots:
            over_line = row == on_row  # a flat roof's label over its own line
            if (fits_on_line if over_line else fits)(row, start, length):
                claim(row, start, length, label.text, "roof", number)
                if over_line:
                    placement.on_own_line.update((row, c) for c in range(start, start + length))
                return
        placement.dropped.append(("roof", number))

    labels = sorted(range(len(layout.labels)), key=lambda n: (layout.labels[n].priority, n))
    ridges = sorted(range(len(layout.ridges)), key=lambda n: (not layout.ridges[n].envelope, n))

    def place_ridge(number: int) -> None:
        ridge = layout.ridges[number]
        row, column = ridge_cell(ridge)
        if ridge.envelope:
            text, n = ridge.text, len(ridge.text)
            spots = [
                (row - 1, column - n // 2),
                (row - 1, column - n + 1),
                (row - 1, column),
                (row - 2, column - n // 2),
                (row + 1, column + 1),
                (row - 2, column - n + 1),
            ]
            if on_line:  # touching its mark: two rows up it reads as another ridge's label
                spots = [spot for spot in spots if spot[0] != row - 2] + [(row + 1, column - n), (row, column - n)]
        else:  # the other ridges are marked with their intensity only
            text = format_intensity(ridge.x)
            spots = [(row + 1, column - len(text) // 2), (row - 1, column + 1), (row + 1, column + 1)]
        try_spots(spots, text, "ridge", number)

    for envelope in (True, False):  # the envelope's labels and ridges first, then the others'
        for number in labels:
            label = layout.labels[number]
            if (label.style == "envelope") != envelope:
                continue
            if on_line:
                place_on_line(label, number)
            elif not (label.slope and slanted_aspect is not None and slanted(label, number)):
                try_spots(roof_spots(label, label.text), label.text, "roof", number)
        for number in ridges if ridge_labels else []:
            if layout.ridges[number].envelope == envelope:
                place_ridge(number)
    return placement


def legibility(placement: CellPlacement) -> dict[str, int]:
    """What a placed picture gets wrong: ``label_overlaps`` (pairs of labels sharing a cell),
    ``labels_over_lines`` (label cells on a line cell, but for a flat roof's label written on its
    own line), ``labels_over_points`` (label cells on a point or ridge mark), and ``dropped``
    labels (not an error: the tables carry them)."""
    cells: dict[tuple[int, int], int] = {}
    overlaps = over_lines = over_marks = 0
    for number, text in enumerate(placement.texts):
        for cell in text.cells:
            if cell in cells and cells[cell] != number:
                overlaps += 1
            cells[cell] = number
            if cell in placement.lines and cell not in placement.on_own_line:
                over_lines += 1
            if cell in placement.marks:
                over_marks += 1
    return {
        "label_overlaps": overlaps,
        "labels_over_lines": over_lines,
        "labels_over_points": over_marks,
        "dropped": len(placement.dropped),
    }
