"""Issue 28 (narrow screens): the TUI's roofline screen at 80x24 and 160x50 with a dozen workloads
on a CPU, an H200 (measured) and an A100 (datasheet). The point table shows whole columns only (no
horizontal scrolling, every FLOP/s and FLOP/B cell the value as `format_si`/`format_intensity`
prints it), dropping columns in the stated order; the chart keeps its labels on their lines."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.roofline import fleet_results
from textual.widgets import DataTable
from tui_samples import fixed_cpu_info, make_fake_nvml_app, run_async, tui_env, wait_for_sample  # noqa: F401

from gpuscope.roofline.units import format_intensity, format_si
from gpuscope.tui.screens.roofline import POINT_DROP_ORDER, RooflineScreen

SIZES = [(80, 24), (160, 50)]


def _app():
    app = make_fake_nvml_app(persist_settings=False, probe_results=[fleet_results()])
    app.local_cpu_info = fixed_cpu_info()
    return app


async def _on_roofline(pilot) -> RooflineScreen:
    await wait_for_sample(pilot, pilot.app)
    await pilot.press("2")
    screen = pilot.app.screen
    assert isinstance(screen, RooflineScreen)
    table = screen.query_one("#roof-points", DataTable)
    for _ in range(100):  # until the table has its rows and was fitted to its laid-out width
        await pilot.pause()
        if table.row_count and table.size.width and screen._rows_key and table.virtual_size.width:
            break
    await pilot.pause()
    return screen


def _dump(app, name: str) -> None:
    """The screen as SVG for a look (GPUSCOPE_NARROW_SVG=folder)."""
    folder = os.environ.get("GPUSCOPE_NARROW_SVG")
    if folder:
        Path(folder, name).write_text(app.export_screenshot(), encoding="utf-8")


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@run_async
async def test_point_table_drops_columns_never_cuts_numbers(tui_env: Path, size: tuple[int, int]) -> None:
    app = _app()
    async with app.run_test(size=size) as pilot:
        screen = await _on_roofline(pilot)
        _dump(app, f"roofline-{size[0]}x{size[1]}.svg")
        table = screen.query_one("#roof-points", DataTable)
        # everything fits: no column runs past the pane's edge (that is where numbers were cut)
        assert table.virtual_size.width <= table.scrollable_content_region.width, (
            table.virtual_size.width,
            table.scrollable_content_region.width,
        )
        titles = [str(column.label) for column in table.columns.values()]
        assert titles[:3] == ["point", "bound", "eff."]
        # the columns left out are the first ones of the stated order
        keys = [str(column.key.value) for column in table.columns.values()]
        dropped = [key for key in ("device", "intensity", "flops", "note") if key not in keys]
        assert dropped == [key for key in POINT_DROP_ORDER if key in dropped]
        assert list(POINT_DROP_ORDER[: len(dropped)]) == sorted(dropped, key=POINT_DROP_ORDER.index)
        model = screen._model
        assert model is not None
        rows = [[str(cell) for cell in table.get_row_at(n)] for n in range(table.row_count)]
        for placement, row in zip(model.placements, rows):
            cells = dict(zip(keys, row))
            if "flops" in cells:
                assert cells["flops"] == format_si(placement.point.flop_per_s)
            if "intensity" in cells:
                assert cells["intensity"] == format_intensity(placement.intensity_flop_per_byte)
            assert cells["eff"] == ("-" if placement.efficiency is None else f"{placement.efficiency * 100:.0f}%")
        if size[0] >= 160:  # the wide layout has room for both numbers
            assert "flops" in keys and "intensity" in keys


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_roofline_screen_snapshot(tui_env: Path, snap_compare, size: tuple[int, int]) -> None:
    """The picture: at 80x24 the compact legend and a y axis without whole-decade margins, every
    roof label on its line, datasheet envelopes dotted; at 160x50 the table beside the chart."""

    async def run_before(pilot) -> None:
        await _on_roofline(pilot)

    assert snap_compare(_app(), terminal_size=size, run_before=run_before)
