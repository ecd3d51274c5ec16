"""Point labels of the terminal roofline, placed on the built chart text so that none overlaps
another label, a point marker or the axes frame.

Each point is tried with its full label right, left, above and below its marker; when none of
those places is free, it gets a short numbered tag (``"3"``: the point's 1-based position in
``model.placements`` followed by the extra, live placements; the ``#`` column of the points
table). The highlighted point is placed first and always shows its full label. The pass is
deterministic: same model, same size, same text.

Works on plotext's output cell by cell (ANSI colour codes kept), so the placement is exact
whatever width plotext gives the y tick labels. No Textual import here.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

__all__ = ["LabelMark", "PlacedLabel", "point_tag", "place_labels"]

_SGR = re.compile(r"\x1b\[[0-9;]*m")
_RESET = "\x1b[0m"


def point_tag(index: int, dram: bool = False) -> str:
    """The short tag of point ``index`` (0-based over placements then extra placements):
    ``"3"`` for index 2; ``"3d"`` for its DRAM-bytes twin."""
    return f"{index + 1}{'d' if dram else ''}"


@dataclass(frozen=True)
class LabelMark:
    """One marker to label: data coordinates (FLOP/byte, FLOP/s), its full label, its tag,
    the ANSI prefix that colours its label ('' for none), and whether it is highlighted."""

    x: float
    y: float
    label: str
    tag: str
    index: int
    style: str = ""
    highlighted: bool = False


@dataclass(frozen=True)
class PlacedLabel:
    """Where a mark's text went: ``text`` is the full label or the tag (``full`` says which);
    ``row``/``column`` the first cell (0-based in the chart text); ``None`` if not placed."""

    mark: LabelMark
    text: str
    full: bool
    row: int | None
    column: int | None


def _cells(line: str) -> list[list[str]]:
    """``[style, char]`` per visible character of an ANSI-coloured line."""
    cells: list[list[str]] = []
    style = ""
    position = 0
    for match in _SGR.finditer(line):
        for char in line[position : match.start()]:
            cells.append([style, char])
        code = match.group(0)
        style = "" if code == _RESET else style + code
        position = match.end()
    for char in line[position:]:
        cells.append([style, char])
    return cells


def _join(cells: list[list[str]]) -> str:
    out: list[str] = []
    current = ""
    for style, char in cells:
        if style != current:
            if current:
                out.append(_RESET)
            out.append(style)
            current = style
        out.append(char)
    if current:
        out.append(_RESET)
    return "".join(out)


def _plot_area(grid: list[list[list[str]]]) -> tuple[int, int, int, int] | None:
    """``(top, bottom, left, right)`` inner cell bounds of plotext's frame, or None."""
    for row, cells in enumerate(grid):
        chars = "".join(char for _, char in cells)
        if "┌" in chars and "┐" in chars:
            left, right = chars.index("┌"), chars.rindex("┐")
            for bottom in range(row + 1, len(grid)):
                below = "".join(char for _, char in grid[bottom])
                if len(below) > left and below[left] == "└":
                    if bottom - row >= 3 and right - left >= 3:
                        return row + 1, bottom - 1, left + 1, right - 1
                    return None
    return None


def _cell_of(value: float, lo: float, hi: float, bins: int) -> int:
    """plotext's mapping of a (log) value onto ``bins`` cells."""
    return math.floor(round(0.5 + (bins - 1) * (value - lo) / (hi - lo), 8))


def place_labels(
    text: str,
    marks: Sequence[LabelMark],
    log_x: tuple[float, float],
    log_y: tuple[float, float],
) -> tuple[str, list[PlacedLabel]]:
    """Write the labels of ``marks`` into plotext's built ``text`` (log10 axis limits
    ``log_x``, ``log_y``); return the new text and where each label went, in ``marks`` order."""
    lines = text.split("\n")
    grid = [_cells(line) for line in lines]
    area = _plot_area(grid)
    if area is None or not marks:
        return text, [PlacedLabel(mark, mark.label, True, None, None) for mark in marks]
    top, bottom, left, right = area
    width, height = right - left + 1, bottom - top + 1
    positions: dict[int, tuple[int, int]] = {}
    taken: set[tuple[int, int]] = set()  # cells no label may cover (markers and labels)
    for number, mark in enumerate(marks):
        column = left + _cell_of(math.log10(mark.x), log_x[0], log_x[1], width)
        row = bottom - _cell_of(math.log10(mark.y), log_y[0], log_y[1], height)
        if top <= row <= bottom and left <= column <= right:
            positions[number] = (row, column)
            taken.add((row, column))
    padded: set[tuple[int, int]] = set()  # label cells plus one blank column either side

    def fits(row: int, start: int, length: int) -> bool:
        if row < top or row > bottom or start < left or start + length - 1 > right:
            return False
        return all((row, c) not in taken and (row, c) not in padded for c in range(start, start + length))

    def claim(row: int, start: int, length: int) -> None:
        for c in range(start, start + length):
            taken.add((row, c))
        padded.update({(row, start - 1), (row, start + length)})

    def candidates(row: int, column: int, length: int, near: bool) -> list[tuple[int, int]]:
        gap = 1 if near else 2
        spots = [(row, column + gap), (row, column - gap - length + 1)]
        for dr in (-1, 1):
            spots += [(row + dr, column - length // 2), (row + dr, column), (row + dr, column - length + 1)]
        if near:  # tags may move a little further away
            for distance in (2, 3):
                for dr in (-distance, distance):
                    spots += [(row + dr, column), (row + dr, column - length + 1)]
                spots += [(row, column + distance + 1), (row, column - distance - length)]
                for dr in (-1, 1):
                    spots += [(row + dr, column + distance), (row + dr, column - distance - length + 1)]
        return spots

    order = sorted(range(len(marks)), key=lambda n: (not marks[n].highlighted, n))
    placed: dict[int, PlacedLabel] = {}
    for number in order:
        mark = marks[number]
        if number not in positions:
            placed[number] = PlacedLabel(mark, mark.label, True, None, None)
            continue
        row, column = positions[number]
        label = mark.label if len(mark.label) <= width else mark.label[: width - 1] + "…"
        spot = next((s for s in candidates(row, column, len(label), False) if fits(s[0], s[1], len(label))), None)
        text_shown, full = label, True
        if spot is None and mark.highlighted:
            # The highlight always shows its full label: right of the marker, or left, clamped.
            start = column + 2 if column + 2 + len(label) - 1 <= right else max(left, column - 1 - len(label))
            spot = (row, min(start, right - len(label) + 1))
        if spot is None:
            text_shown, full = mark.tag, False
            spot = next((s for s in candidates(row, column, len(mark.tag), True) if fits(s[0], s[1], len(mark.tag))), None)
        if spot is None:
            placed[number] = PlacedLabel(mark, text_shown, full, None, None)
            continue
        claim(spot[0], spot[1], len(text_shown))
        for offset, char in enumerate(text_shown):
            cell = grid[spot[0]][spot[1] + offset]
            cell[0] = cell[0] + mark.style if mark.style else cell[0]
            cell[1] = char
        placed[number] = PlacedLabel(mark, text_shown, full, spot[0], spot[1])
    for number, (row, column) in positions.items():  # labels never hide a marker
        taken.discard((row, column))
    return "\n".join(_join(cells) for cells in grid), [placed[n] for n in range(len(marks))]
