"""The one column-fitting rule of every terminal table (``gpuscope roofline``'s tables, the
profile tables, the TUI's point table): a table narrower than its text loses whole columns,
never part of a number.

:func:`fit_columns` decides, for a ``width`` in character cells:

1. text columns named ``shrink`` (workload names, notes) give up characters first, ending in
   "…", each down to ``shrink_min`` cells (or its header) before the next in ``shrink`` gives;
2. then columns are dropped in the table's stated ``drop_order`` (the least needed first),
   names shrinking again only as far as each drop leaves them room;
3. then the text columns shrink to 4 cells;
4. only then the other columns go from the right, the first column always kept.

A number is never cut: a column is shown whole or not at all. Text cut alike is told apart
(:func:`distinct_cuts`): two different names that would both read ``mm fp32 1x1…`` keep their
last words instead (``mm f…128x344``). No Textual import (the TUI uses it for its ``DataTable``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["FittedTable", "distinct_cuts", "fit_columns", "format_fitted", "ellipsize", "is_numeric_column"]

#: The narrowest a shrinking text column gets before the last resort (step 3).
_LAST_RESORT = 4


def ellipsize(text: str, cells: int) -> str:
    """``text`` in at most ``cells`` characters, its end replaced by "…" when cut."""
    if len(text) <= cells:
        return text
    return text[: max(0, cells - 1)] + "…" if cells > 0 else ""


#: The fewest characters a middle cut keeps of a text's start (the op or device it names).
_MIN_HEAD = 3


def _middle_cut(text: str, cells: int) -> str | None:
    """``text`` in ``cells`` characters as its start, "…" and its longest tail of whole words
    (starting after a space) that leaves :data:`_MIN_HEAD` characters of the start; None when no
    such tail fits."""
    room = cells - 1 - _MIN_HEAD
    tails = [text[i + 1 :] for i, char in enumerate(text) if char == " " and 0 < len(text) - i - 1 <= room]
    if not tails:
        return None
    tail = tails[0]  # the longest
    return text[: cells - 1 - len(tail)].rstrip() + "…" + tail


def distinct_cuts(values: Sequence[str], cells: int) -> list[str]:
    """Each value in at most ``cells`` characters (:func:`ellipsize`); where different values
    would be cut to the same text, those are cut in the middle instead (:func:`_middle_cut`: the
    start, "…", the last whole words; one with no such tail keeps the plain cut), provided that
    tells every one of them apart."""
    cuts = [ellipsize(value, cells) for value in values]
    alike: dict[str, set[str]] = {}
    for value, cut in zip(values, cuts, strict=True):
        alike.setdefault(cut, set()).add(value)
    for cut, originals in alike.items():
        if len(originals) < 2:
            continue
        # a value with no tail of whole words that fits keeps the plain cut
        middles = {value: _middle_cut(value, cells) or cut for value in originals}
        if len(set(middles.values())) == len(middles):
            for number, value in enumerate(values):
                if value in middles:
                    cuts[number] = middles[value]
    return cuts


def is_numeric_column(values: Sequence[str]) -> bool:
    """True when every value that is not a blank or "-" starts like a number (right-aligned)."""
    known = [value for value in values if value not in ("", "-")]
    return bool(known) and all(value[:1].isdigit() or value[:1] in "-.+" for value in known)


@dataclass(frozen=True)
class FittedTable:
    """The columns that fit: ``kept`` (indices into the original columns, in order), the
    ``widths`` of the kept columns and the kept ``headers`` and ``rows`` (text columns
    ellipsized to their width), ``dropped`` (indices of the columns left out)."""

    kept: tuple[int, ...]
    widths: tuple[int, ...]
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    dropped: tuple[int, ...]


def _natural(headers: Sequence[str], rows: Sequence[Sequence[str]], index: int) -> int:
    return max([len(headers[index]), *(len(row[index]) for row in rows)])


def _shrunk(natural: dict[int, int], floors: dict[int, int], over: int, order: Sequence[int]) -> dict[int, int] | None:
    """The widths after taking ``over`` cells from the shrinkable columns, each in ``order`` down
    to its floor before the next gives any; None when they cannot give that much."""
    widths = dict(natural)
    for index in order:
        if index in widths and over > 0:
            given = min(over, max(0, widths[index] - floors[index]))
            widths[index] -= given
            over -= given
    return None if over > 0 else widths


def fit_columns(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int | None,
    *,
    drop_order: Sequence[int] = (),
    shrink: Sequence[int] = (),
    shrink_min: int = 12,
    gap: int = 2,
    max_cells: Mapping[int, int] | None = None,
) -> FittedTable:
    """The columns of ``headers``/``rows`` that fit ``width`` cells with ``gap`` cells between
    columns, by the rule of this module (``width`` None: all of them, whole). ``drop_order``:
    column indices, the first dropped first; ``shrink``: indices of text columns that may be
    ellipsized, the first given up to its floor before the next; ``max_cells``: the most cells
    such a column takes (index: cells) however wide the table may be."""
    count = len(headers)
    caps = {i: max(cells, len(headers[i])) for i, cells in (max_cells or {}).items() if i in shrink}
    natural_all = {i: min(_natural(headers, rows, i), caps.get(i, 1 << 30)) for i in range(count)}
    kept = list(range(count))
    shrinkable = [i for i in shrink if i < count]

    def attempt(columns: list[int], floor: int) -> dict[int, int] | None:
        widths = {i: natural_all[i] for i in columns}
        total = sum(widths.values()) + gap * (len(columns) - 1)
        if width is None or total <= width:
            return widths
        names = {i: widths[i] for i in columns if i in shrinkable}
        floors = {i: min(widths[i], max(floor, len(headers[i]) if floor > _LAST_RESORT else floor)) for i in names}
        new = _shrunk(names, floors, total - width, shrinkable)
        if new is None:
            return None
        widths.update(new)
        return widths

    order = [i for i in drop_order if i < count] + [i for i in reversed(range(1, count)) if i not in drop_order]
    stated = [i for i in drop_order if i < count]
    result: dict[int, int] | None = None
    for floor, candidates in ((shrink_min, stated), (_LAST_RESORT, order)):
        result = attempt(kept, floor)
        for column in candidates:
            if result is not None:
                break
            if column in kept and len(kept) > 1:
                kept.remove(column)
            result = attempt(kept, floor)
        if result is not None:
            break
    if result is None:  # only the first column is left: it is a text column, cut to the width
        kept = kept[:1]
        result = {kept[0]: max(1, min(natural_all[kept[0]], width or natural_all[kept[0]]))}
    widths = tuple(result[i] for i in kept)
    fitted_headers = tuple(ellipsize(headers[i], result[i]) for i in kept)
    columns = [
        distinct_cuts([row[i] for row in rows], result[i])
        if i in shrinkable
        else [ellipsize(row[i], result[i]) for row in rows]
        for i in kept
    ]
    fitted_rows = tuple(tuple(column[number] for column in columns) for number in range(len(rows)))
    return FittedTable(
        tuple(kept), widths, fitted_headers, fitted_rows, tuple(i for i in range(count) if i not in kept)
    )


def format_fitted(table: FittedTable, gap: int = 2) -> list[str]:
    """The header line and one line per row: left-aligned text columns, numeric-looking columns
    right-aligned, ``gap`` spaces between columns, trailing spaces removed."""
    numeric = [is_numeric_column([row[i] for row in table.rows]) for i in range(len(table.kept))]
    lines = []
    for row in (table.headers, *table.rows):
        cells = [
            row[i].rjust(table.widths[i]) if numeric[i] else row[i].ljust(table.widths[i]) for i in range(len(row))
        ]
        lines.append((" " * gap).join(cells).rstrip())
    return lines
