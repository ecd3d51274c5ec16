"""The row-cropped compositor: on a partial update it renders only the widgets that can show in
the updated rows and columns, where Textual's renders every widget whose clip meets the dirty area
(inside the dashboard's scrolling body: every panel and container, every frame). The picture is
the same; tests/test_tui_textual_compat.py checks it against Textual's own compositor.

It relies on Textual's private ``textual._compositor`` (Textual 8.x): ``Compositor._get_renders``,
``_regions_to_spans``, ``render_partial_update``, its ``_dirty_regions``, and the ``visible_widgets``
and ``cuts`` properties; ``ChopsUpdate`` (``chops``, ``spans``, ``chop_ends``) for the terminal text.
When any is missing, :func:`row_cropped_compositor` returns Textual's own ``Compositor``. Textual's
other internals are used in :mod:`gpuscope.tui.textual_compat`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["row_cropped_compositor"]


def row_cropped_compositor() -> Any:
    """A compositor that, on a partial update, renders only the widgets that can show in the
    updated area. Textual's ``Compositor._get_renders`` hands every widget whose *clip* overlaps
    the dirty area to ``render_lines`` with its whole region: inside a scrolling body (the
    dashboard) that is every panel and container, every frame, though only the updated spans
    are painted. Here each band of adjacent updated rows is rendered on its own, and a widget is
    skipped when it lies outside the band's columns or when the widgets above it (rendered
    first, the first render of a cut wins) already cover its part of the band: the containers
    under the panels. The picture is the same. Falls back to Textual's own compositor when the
    internals it relies on (``_get_renders``, ``visible_widgets``) are missing."""
    from textual import _compositor
    from textual._compositor import Compositor
    from textual.geometry import Region

    ChopsUpdate: Any = getattr(_compositor, "ChopsUpdate", None)  # a private Textual class, or None
    needed = ("_get_renders", "_regions_to_spans", "render_partial_update")
    if (
        ChopsUpdate is None
        or not all(callable(getattr(Compositor, name, None)) for name in needed)
        or not isinstance(getattr(Compositor, "visible_widgets", None), property)
        or not isinstance(getattr(Compositor, "cuts", None), property)
    ):
        return Compositor()

    from rich.control import Control

    #: (x, y) -> the cursor move there (rich makes a Control and its Segment for each move).
    moves: dict[tuple[int, int], str] = {}

    class Update(ChopsUpdate):  # type: ignore[misc]  # a private Textual class (typed Any here)
        def render_segments(self, console: Any) -> str:
            """``ChopsUpdate.render_segments`` (the same text) with each cursor move made once."""
            sequences: list[str] = []
            append = sequences.append
            chops, chop_ends = self.chops, self.chop_ends
            last_y = self.spans[-1][0]
            for y, x1, x2 in self.spans:
                for end, (x, strip) in zip(chop_ends[y], chops[y].items()):
                    if strip is None or x > x2 or end <= x1:
                        continue
                    if not (x2 > x >= x1 and end <= x2):
                        strip = strip.crop(0, min(end, x2) - x)
                    move = moves.get((x, y))
                    if move is None:
                        move = moves[x, y] = Control.move_to(x, y).segment.text
                    append(move)
                    append(strip.render(console))
                if y != last_y:
                    append("\n")
            return "".join(sequences)

    class RowCroppedCompositor(Compositor):
        def render_partial_update(self) -> Any:
            """Render each band of adjacent updated rows on its own (the clock on the first row
            and a chart further down are two small bands, not every row between them), cropped
            to the columns its spans touch."""
            update_regions = self._dirty_regions.copy()
            self._dirty_regions.clear()
            if not update_regions:
                return None
            spans = list(self._regions_to_spans(update_regions))
            extent: dict[int, tuple[int, int]] = {}
            for y, x1, x2 in spans:
                known = extent.get(y)
                if known is None:
                    extent[y] = (x1, x2)
                else:
                    extent[y] = (known[0] if known[0] < x1 else x1, known[1] if known[1] > x2 else x2)
            rows = sorted(extent)
            screen = self.size.region
            dirty = [
                (r.x, r.y, r.right, r.bottom)
                for r in (region.intersection(screen) for region in update_regions)
                if r.width and r.height
            ]
            cuts = self.cuts
            chops: list[Any] = [None] * len(cuts)  # ChopsUpdate reads only the rows of the spans
            start = 0
            for index, y in enumerate(rows):
                if index + 1 < len(rows) and rows[index + 1] == y + 1:
                    continue
                first = rows[start]
                left = min(extent[row][0] for row in rows[start : index + 1])
                right = max(extent[row][1] for row in rows[start : index + 1])
                band = [box for box in dirty if box[1] >= first and box[3] <= y + 1]
                self._render_band(Region(left, first, right - left, y + 1 - first), cuts, chops, band)
                start = index + 1
            ends = getattr(self, "_gpuscope_ends", None)
            if ends is None or ends[0] is not cuts:  # the cuts change with the arrangement only
                ends = self._gpuscope_ends = (cuts, [cut_set[1:] for cut_set in cuts])
            return Update(chops, spans, ends[1])

        def _render_band(
            self, crop: Region, cuts: list[list[int]], chops: list[Any], dirty: list[tuple[int, int, int, int]]
        ) -> None:
            """Fill ``chops`` for the rows of ``crop`` (``Compositor._render_chops`` for those
            rows only: it makes a dict for every row of the screen, per band)."""
            for y in range(crop.y, crop.bottom):
                chops[y] = dict.fromkeys(cuts[y][:-1])
            # (row, first column, last column) -> the cuts there, and them relative to the first
            spans: dict[tuple[int, int, int], tuple[list[int], list[int]]]
            known = getattr(self, "_gpuscope_cuts", None)
            if known is None or known[0] is not cuts:  # the cuts change with the arrangement only
                spans = {}
                self._gpuscope_cuts = (cuts, spans)
            else:
                spans = known[1]
            for region, clip, strips in self._get_renders(crop, dirty):
                render_region = region.intersection(clip)
                render_x = render_region.x
                first_cut, last_cut = render_region.column_span
                for y, strip in zip(render_region.line_range, strips):
                    line = chops[y]
                    span = spans.get((y, first_cut, last_cut))
                    if span is None:
                        final = [cut for cut in cuts[y] if last_cut >= cut >= first_cut]
                        span = spans[y, first_cut, last_cut] = (final, [cut - render_x for cut in final[1:]])
                    final_cuts, relative = span
                    if len(relative) == 1 and relative[0] == strip.cell_length:
                        # one piece, the strip itself: what divide() returns, but divide() also
                        # caches [self] in the strip, a cycle that only the garbage collector
                        # frees (a Strip, its seven caches and its segments, per line per frame)
                        pieces: Any = (strip,)
                    else:
                        pieces = strip.divide(relative)
                    for cut, piece in zip(final_cuts, pieces):  # front to back: the first render of a cut wins
                        if line.get(cut) is None:
                            line[cut] = piece

        def _visible_boxes(self) -> tuple[list[tuple[Any, Region, Region, int, int, int, int]], list[list[int]]]:
            """(widget, region, clip, x1, y1, x2, y2 of the part that shows) front to back, and
            for each screen row the indexes of those that show on it, made once per arrangement
            (``visible_widgets`` is a new dict after each)."""
            visible = self.visible_widgets
            boxes = getattr(self, "_gpuscope_boxes", None)
            if boxes is None or boxes[0] is not visible:
                shown = []
                for widget, (region, clip) in visible.items():
                    x, y, width, height = region.intersection(clip)
                    if width and height:
                        shown.append((widget, region, clip, x, y, x + width, y + height))
                by_row: list[list[int]] = [[] for _ in range(max((box[6] for box in shown), default=0))]
                for index, box in enumerate(shown):
                    for row in range(max(0, box[4]), box[6]):
                        by_row[row].append(index)
                boxes = self._gpuscope_boxes = (visible, (shown, by_row))
            return boxes[1]

        def _get_renders(self, crop: Region | None = None, dirty: list[tuple[int, int, int, int]] | None = None) -> Any:
            """Front to back, the widgets that show part of the updated areas ``dirty`` (x1, y1,
            x2, y2; default: all of ``crop``) inside ``crop``. A widget in front that covers an
            updated area takes it: the widgets behind it (the containers under a GPU card) are
            not rendered for it, and the walk stops when every updated area is taken."""
            if not crop:
                yield from super()._get_renders(crop)
                return
            top, bottom, left, right = crop.y, crop.bottom, crop.x, crop.right
            pending = [(left, top, right, bottom)] if dirty is None else list(dirty)
            painted: list[tuple[int, int, int, int]] = []  # (x1, y1, x2, y2) of what shows already
            shown_boxes, by_row = self._visible_boxes()
            rows = by_row[max(0, top) : bottom]  # the widgets showing on the band's rows, in order
            order = rows[0] if len(rows) == 1 else sorted(set().union(*rows))
            for index in order:
                widget, region, clip, x, shown_y1, x2, shown_y2 = shown_boxes[index]
                if not pending:
                    return
                if x2 <= left or x >= right:
                    continue  # beside the band
                y = shown_y1 if shown_y1 > top else top
                y2 = shown_y2 if shown_y2 < bottom else bottom
                shown = (max(x, left), y, min(x2, right), y2)
                if _covered(shown, painted):
                    continue
                painted.append((x, y, x2, y2))
                if not any(dx1 < x2 and dx2 > x and dy1 < y2 and dy2 > y for dx1, dy1, dx2, dy2 in pending):
                    continue  # nothing updated shows here: its area keeps what the terminal has
                pending = [
                    box for box in pending if not (box[0] >= x and box[1] >= y and box[2] <= x2 and box[3] <= y2)
                ]
                clip_top = max(clip.y, top)
                rows_clip = Region(clip.x, clip_top, clip.width, min(clip.bottom, bottom) - clip_top)
                yield (region, rows_clip, widget.render_lines(Region(x - region.x, y - region.y, x2 - x, y2 - y)))

    return RowCroppedCompositor()


def _covered(box: tuple[int, int, int, int], painted: list[tuple[int, int, int, int]]) -> bool:
    """True when the rectangles in ``painted`` (x1, y1, x2, y2) cover all of ``box``."""
    x1, y1, x2, y2 = box
    if any(rx1 <= x1 and ry1 <= y1 and rx2 >= x2 and ry2 >= y2 for rx1, ry1, rx2, ry2 in painted):
        return True  # the common case: one widget above covers it all
    over = [rect for rect in painted if rect[0] < x2 and rect[2] > x1 and rect[1] < y2 and rect[3] > y1]
    if not over:
        return False
    edges = sorted({y1, y2, *(r[1] for r in over if y1 < r[1] < y2), *(r[3] for r in over if y1 < r[3] < y2)})
    for low, high in zip(edges, edges[1:]):  # rows low..high-1 meet the same rectangles
        reach = x1
        for rx1, _, rx2, _ in sorted(r for r in over if r[1] <= low and r[3] >= high):
            if rx1 > reach:
                break
            reach = max(reach, rx2)
            if reach >= x2:
                break
        if reach < x2:
            return False
    return True
