"""The roofline screen: the chart (roofs of every device, probe and workload points, live GPU
positions) and a table of points; moving through the table highlights a point on the chart."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical
from textual.widgets import DataTable, Static

from gpuscope.profiling.view import PHASE_NOTE_PREFIX, compiled_text, coverage_text
from gpuscope.roofline.columns import fit_columns
from gpuscope.roofline.layout import layout_roofline
from gpuscope.roofline.model import Placement, Roof, RooflineModel
from gpuscope.roofline.paint_text import MIN_CHART_WIDTH, compact_legend_lines, render_roofline
from gpuscope.roofline.units import format_intensity, format_si
from gpuscope.telemetry.records import Sample
from gpuscope.tui.roofline_data import LIVE_LABEL, build_screen_model, live_placements
from gpuscope.tui.screens.base import GpuscopeScreen
from gpuscope.tui.themes import ChartPalette
from gpuscope.tui.widgets.chart import PlotextView

__all__ = ["RooflineScreen", "WIDE_MIN_WIDTH", "STRAGGLER_MARK"]

#: At this width and above the table sits right of the chart, else below it.
WIDE_MIN_WIDTH = 150

#: A pane that would leave the chart fewer rows than this beside the full legend gets the compact
#: legend (the devices on as few lines as fit; the notes are in `gpuscope roofline`).
COMPACT_CHART_ROWS = 20

#: Prefixes the device cell of a row on a straggler rank (multi-rank results).
STRAGGLER_MARK = "▼"

#: Bound and efficiency come right after the name, so they show without scrolling at 120 columns.
_COLUMNS = (
    ("name", "point"),
    ("bound", "bound"),
    ("eff", "eff."),
    ("device", "device"),
    ("intensity", "FLOP/B"),
    ("flops", "FLOP/s"),
    ("note", "note"),
)
#: Longest point name shown in the table (the full name is in `gpuscope roofline`'s table).
_NAME_CELLS = 24
#: The point table's columns in the order they are left out when the pane is narrow (the first
#: first), by the one column rule (gpuscope.roofline.columns) after the name and the note have
#: shrunk: a number is shown whole or not at all. Point, bound and eff. always stay.
POINT_DROP_ORDER = ("device", "note", "flops", "intensity")
_KEYS = [key for key, _ in _COLUMNS]


class PointTable(DataTable[Text]):
    """The point table: fitted to its width again whenever that changes (the screen's
    ``_refit_table``), so it drops columns instead of scrolling numbers out of sight."""

    def on_resize(self) -> None:
        screen = self.screen
        if isinstance(screen, RooflineScreen):
            self.call_after_refresh(screen._refit_table)


def _below(roof: Roof) -> str:
    """``"bf16 -20% vs median"``: a straggler roof and how far below the median it is."""
    below = roof.below_median_percent
    return roof.name if below is None else f"{roof.name} -{below:.0f}% vs median"


class RooflineScreen(GpuscopeScreen):
    MODE = "roofline"
    DEFAULT_HINT = "↑↓: select a point to highlight it · l: live positions on/off · 3: run probes"
    BINDINGS = [Binding("l", "toggle_live", "Live")]

    def compose_body(self) -> ComposeResult:
        with Container(id="roof-main"):
            yield PlotextView(self._draw_chart, id="roof-chart")
            with Vertical(id="roof-side"):
                yield Static("", id="roof-summary", markup=False)
                yield PointTable(id="roof-points", cursor_type="row", zebra_stripes=True)

    def __init__(self, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._model: RooflineModel | None = None
        self._model_key: tuple[object, ...] = ()
        self._live: list[Placement] = []
        self._live_reasons: list[str] = []
        self._live_key: tuple[object, ...] = ()
        self._highlight: int | None = None
        self.show_live = True
        self._rows_key: tuple[object, ...] = ()
        self._palette: ChartPalette | None = None

    def on_mount(self) -> None:
        self.add_columns("#roof-points", _COLUMNS)

    def on_resize(self) -> None:
        self.set_class(self.size.width >= WIDE_MIN_WIDTH, "-wide")
        self.set_class(self.size.height < 30, "-short")

    def _refit_table(self) -> None:
        """Fit the point table to its pane again (after a resize has laid it out)."""
        if self._model is not None:
            self._refresh_table()

    def _fit(
        self, table: DataTable[Text], rows: list[tuple[str, ...]]
    ) -> tuple[tuple[int, ...], list[tuple[str, ...]]]:
        """The columns of ``rows`` that fit the table's width and the rows cut to them: each cell
        takes its text plus 2 cells of padding, the row labels theirs."""
        labels = len(str(max(1, len(rows)))) + 2
        inside = table.scrollable_content_region.width  # without the scrollbar
        room = inside - labels - 2 if inside > 0 else None  # 2: what Textual adds beside the labels
        headers = [title for _, title in _COLUMNS]
        fitted = fit_columns(
            headers, rows, None if room is None else room - 2, gap=2, shrink=[0, len(_COLUMNS) - 1],
            drop_order=[_KEYS.index(key) for key in POINT_DROP_ORDER], shrink_min=12, max_cells={0: _NAME_CELLS},
        )  # fmt: skip
        return fitted.kept, [tuple(row) for row in fitted.rows]

    # --- data --------------------------------------------------------------------------------

    def show_sample(self, sample: Sample) -> None:
        app = self.gpuscope
        key = (app.results_version, tuple((g.index, g.name) for g in sample.gpus), sample.host.hostname)
        changed = False
        if key != self._model_key or self._model is None:
            self._model_key = key
            try:
                results = [loaded.results for loaded in app.probe_results]
                self._model = build_screen_model(results, sample, local_cpu=app.local_cpu_info)
            except Exception as exc:  # noqa: BLE001 - a bad document must not take the UI down
                self._model = None
                self.query_one("#roof-summary", Static).update(f"Cannot build the roofline: {exc}", layout=False)
                return
            changed = True
        live, self._live_reasons = live_placements(self._model, sample) if self.show_live else ([], [])
        live_key = (
            tuple(
                (p.point.name, f"{p.point.flop_per_s or 0:.3g}", f"{p.intensity_flop_per_byte or 0:.3g}") for p in live
            ),
            tuple(self._live_reasons),
        )
        if live_key != self._live_key:
            self._live, self._live_key = live, live_key
            changed = True
        if app.chart_palette is not self._palette:  # the theme changed while this screen was hidden
            self._palette = app.chart_palette
            changed = True
        if changed:
            self._refresh_table()
            self.query_one(PlotextView).redraw()

    def palette_changed(self) -> None:
        self.query_one(PlotextView).redraw()

    def action_toggle_live(self) -> None:
        self.show_live = not self.show_live
        self._live_key = ("changed",)
        if self.gpuscope.latest_sample is not None:
            self.show_sample(self.gpuscope.latest_sample)
        self.notify(f"Live positions {'shown' if self.show_live else 'hidden'}", timeout=2)

    # --- table -------------------------------------------------------------------------------

    def _straggler_roofs(self, model: RooflineModel, placement: Placement) -> list[Roof]:
        """The straggler roofs of a point's device (rank), when the point is not a live one."""
        if placement in self._live or placement.point.estimated:
            return []
        device = model.device(placement.point.key)
        return device.stragglers if device is not None else []

    def _rows(self, model: RooflineModel) -> list[tuple[str, ...]]:
        rows: list[tuple[str, ...]] = []
        for placement in list(model.placements) + self._live:
            point = placement.point
            is_live = placement in self._live
            note = LIVE_LABEL if is_live or point.estimated else ""
            if placement.above_roof:
                note = "ABOVE ROOF: counting error"
            elif placement.bound == "unknown" and placement.note:
                note = placement.note
            stragglers = self._straggler_roofs(model, placement)
            if stragglers and not placement.above_roof:
                note = "straggler rank: " + ", ".join(_below(roof) for roof in stragglers)
            roof = placement.bounding_roof
            if roof is not None and not note:
                note = f"vs {roof.name}{' (datasheet)' if roof.source == 'datasheet' else ''}"
            bound = placement.bound
            if point.source == "profile" and point.note and not placement.above_roof:
                # a profile group (gpuscope.tui.roofline_data.with_profile_clouds): its time lost
                note = point.note if point.flops > 0 else f"{point.note} (no FLOPs: not drawn)"
                if point.flops <= 0 and point.bytes > 0:
                    bound = "memory"  # moves bytes, computes nothing
            device_label = model.device_label(point.key)
            name = point.name  # _fit cuts it to the column (at most _NAME_CELLS)
            if stragglers:  # the mark stays when a narrow pane leaves the device column out
                name = f"{STRAGGLER_MARK} {name}"
            rows.append(
                (
                    name,
                    bound,
                    "-" if placement.efficiency is None else f"{placement.efficiency * 100:.0f}%",
                    f"{STRAGGLER_MARK} {device_label}" if stragglers else device_label,
                    format_intensity(placement.intensity_flop_per_byte),
                    format_si(point.flop_per_s),
                    note,
                )
            )
        for reason in self._live_reasons:
            device, _, why = reason.partition(" live: ")
            rows.append((f"{device} now", "-", "-", device, "n/a", "n/a", why))
        return rows

    def _refresh_table(self) -> None:
        table = self.query_one("#roof-points", DataTable)
        model = self._model
        kept, rows = self._fit(table, self._rows(model) if model is not None else [])
        key = (kept, tuple(rows))
        summary = self._summary()
        self.query_one("#roof-summary", Static).update(summary, layout=False)
        if key == self._rows_key:
            return
        self._rows_key = key
        cursor = table.cursor_row
        table.clear(columns=True)  # the columns again: each as wide as its (fitted) cells now
        self.add_columns("#roof-points", [_COLUMNS[i] for i in kept])
        placements = model.placements if model is not None else []
        warning = getattr(self.app.current_theme, "warning", None) or "yellow"
        for number, row in enumerate(rows):
            style = "italic" if number >= len(placements) else ""  # live rows
            if model is not None and number < len(placements) and self._straggler_roofs(model, placements[number]):
                style = f"bold {warning}"  # a straggler rank's point: the theme's warning colour
            # The row label is the number the chart shows for a point whose full label has no room.
            table.add_row(
                *(Text(cell, style=style) for cell in row), key=str(number), label=Text(str(number + 1), style=style)
            )
        if rows:
            table.move_cursor(row=min(max(0, cursor), len(rows) - 1), animate=False)

    def _summary(self) -> str:
        model = self._model
        if model is None:
            return ""
        devices = len(model.devices)
        measured = sum(1 for device in model.devices for roof in device.roofs if roof.source == "measured")
        text = (
            f"{devices} device{'s' if devices != 1 else ''} · "
            f"{measured} measured roof{'s' if measured != 1 else ''} · "
            f"{len(model.placements)} point{'s' if len(model.placements) != 1 else ''}"
        )
        if self._live:
            text += f" · {len(self._live)} live (est.)"
        noted = [point for point in model.points if point.source == "profile" and point.note]
        phases = sum(1 for point in noted if point.note.startswith(PHASE_NOTE_PREFIX))
        groups = len(noted) - phases
        if groups:
            names = ", ".join(
                repr(w.name)
                + (f" ({coverage_text(w.profile)})" if coverage_text(w.profile) else "")
                + (f" ({compiled_text(w.profile)})" if compiled_text(w.profile) else "")
                for doc, _ in self.gpuscope.probe_results
                for w in doc.workloads
                if w.source == "profile" and isinstance(w.profile, dict)
            )
            then = ", then prefill and decode" if phases else ""  # a generate() call's two phases
            plural = "s" if groups != 1 else ""
            text += f" · profile {names}: {groups} group{plural} by time lost{then} (point n = row n)"
        if not measured:
            text += " · datasheet roofs only: run probes (3)"
        stragglers = model.stragglers
        if stragglers:
            listed = ", ".join(f"{model.device_label(device.key)} {_below(roof)}" for device, roof in stragglers[:3])
            text += (
                f" · {STRAGGLER_MARK} {len(stragglers)} straggler{'s' if len(stragglers) != 1 else ''}: {listed}"
                + (", ..." if len(stragglers) > 3 else "")
            )
        return text

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id != "roof-points":
            return
        index = event.cursor_row
        highlight = index if self._model is not None and 0 <= index < len(self._model.placements) else None
        if highlight != self._highlight:
            self._highlight = highlight
            self.query_one(PlotextView).redraw()

    # --- chart -------------------------------------------------------------------------------

    def _draw_chart(self, width: int, height: int) -> str:
        model = self._model
        if model is None or not model.devices:
            return "No devices yet: waiting for the first sample, or pass --probes results.json"

        palette = self.gpuscope.chart_palette.roofline_palette()
        if width < MIN_CHART_WIDTH:
            return f"The roofline needs {MIN_CHART_WIDTH} columns; this pane has {width}. Widen the terminal."
        # The same layout as `gpuscope roofline` and the HTML report (gpuscope.roofline.layout);
        # the legend under the chart takes what the chart leaves of the pane's height.

        layout = layout_roofline(model)
        legend_rows = len(model.devices) + 2 + len(layout.notes)
        compact = height - legend_rows < COMPACT_CHART_ROWS  # a short pane: the chart before the legend
        if compact:  # the devices' lines and one for the roofs left unlabelled
            legend_rows = len(compact_legend_lines(layout, width)) + 1
        return render_roofline(
            model,
            width,
            max(12, height - legend_rows),
            palette=palette,
            highlight=self._highlight,
            extra_placements=self._live,
            compact_legend=compact,
        )
