"""The Textual internals gpuscope uses (gpuscope/tui/textual_compat.py, gpuscope/tui/row_compositor.py):
these tests fail when a Textual release renames or removes one; the fallbacks are Textual's own ways
(plain switch_mode, refresh, Strip, Compositor)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from textual.app import App
from textual.content import Content
from textual.geometry import Region
from tui_samples import make_app, make_many_gpu_app, run_async, sample, shown, tui_env  # noqa: F401

from gpuscope.tui import row_compositor, textual_compat


def test_textual_still_has_the_internals_we_use() -> None:
    assert textual_compat.FAST_SWITCH, "Textual changed: update gpuscope/tui/textual_compat.py"
    assert isinstance(App._PSEUDO_CLASSES, dict) and all(callable(test) for test in App._PSEUDO_CLASSES.values())
    assert list(inspect.signature(App.delay_update).parameters) == ["self", "delay"]
    app = App()
    assert isinstance(app._screen_stacks, dict)
    assert isinstance(app._css_update_count, int)
    assert textual_compat.style_state(app) is not None
    assert textual_compat.mode_is_mounted(app, "nothing") is False
    from textual._compositor import ChopsUpdate
    from textual.widget import Widget

    widget = Widget()  # what repaint() marks dirty
    assert isinstance(widget._dirty_regions, set) and isinstance(widget._repaint_regions, set)
    assert callable(widget._styles_cache.set_dirty)
    assert list(inspect.signature(ChopsUpdate).parameters) == ["chops", "spans", "chop_ends"]
    from textual._compositor import Compositor

    assert isinstance(Compositor.visible_widgets, property)  # what repaint() hands the screen
    for name in ("_get_renders", "_regions_to_spans", "render_partial_update"):  # the row-cropped compositor's
        assert callable(getattr(Compositor, name)), name
    assert isinstance(Compositor.cuts, property)
    assert list(inspect.signature(Compositor._get_renders).parameters) == ["self", "crop"]
    assert type(row_compositor.row_cropped_compositor()) is not Compositor, (
        "Textual's compositor changed: update gpuscope/tui/row_compositor.py"
    )
    from textual.strip import Strip

    assert textual_compat.LightStrip is not Strip, "Textual's Strip changed: update _STRIP_CACHES"


def test_a_light_strip_behaves_as_a_strip() -> None:
    """``LightStrip`` (caches made on first use) gives what ``Strip`` gives, and its caches, once
    made, are the ones Strip makes."""
    from rich.segment import Segment
    from rich.style import Style
    from textual.strip import Strip

    def segments() -> list[Segment]:
        return [Segment("│ ", Style(color="blue")), Segment("util  81%", Style(bold=True)), Segment("  ·▁▂█ ", None)]

    light, strip = textual_compat.LightStrip(segments(), 18), Strip(segments(), 18)
    assert isinstance(light, Strip) and light == strip and light.cell_length == strip.cell_length == 18
    assert light.text == strip.text and light.link_ids == strip.link_ids
    assert [list(piece) for piece in light.divide([2, 9, 18])] == [list(piece) for piece in strip.divide([2, 9, 18])]
    assert list(light.crop(1, 12)) == list(strip.crop(1, 12)) and light.crop(1, 12) is light.crop(1, 12)
    assert list(light.apply_style(Style(italic=True))) == list(strip.apply_style(Style(italic=True)))
    assert list(light.adjust_cell_length(24)) == list(strip.adjust_cell_length(24))
    assert list(light.crop_extend(3, 30, None)) == list(strip.crop_extend(3, 30, None))
    assert list(light.apply_offsets(1, 2)) == list(strip.apply_offsets(1, 2))
    assert list(Strip.join([light, strip])) == list(Strip.join([strip, strip]))
    app = App()
    assert light.render(app.console) == strip.render(app.console)
    for name, size in textual_compat._STRIP_CACHES.items():
        cache, theirs = getattr(light, name), getattr(strip, name)
        assert type(cache) is type(theirs) and cache._maxsize == theirs._maxsize == size
    with pytest.raises(AttributeError):
        light.not_a_slot  # noqa: B018 - only the caches are made on demand


class _Bare:
    """An app object of a Textual without those internals."""


def test_without_the_internals_the_switch_is_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    assert textual_compat.mode_is_mounted(_Bare(), "dashboard") is False
    assert textual_compat.style_state(_Bare()) is None
    monkeypatch.setattr(textual_compat, "FAST_SWITCH", False)
    app: Any = App()
    app._screen_stacks["dashboard"] = []
    assert textual_compat.mode_is_mounted(app, "dashboard") is False
    assert textual_compat.style_state(app) is None


def test_without_the_internals_the_compositor_is_textuals(monkeypatch: pytest.MonkeyPatch) -> None:
    from textual import _compositor

    monkeypatch.delattr(_compositor, "ChopsUpdate")
    assert type(row_compositor.row_cropped_compositor()) is _compositor.Compositor


def test_row_cropped_compositor_paints_what_textual_paints(tui_env) -> None:  # noqa: ANN001, F811 - fixture
    """The dashboard's partial updates (clock on the first row, panels further down) give the
    same strips on every updated row as Textual's own compositor, rendering fewer widgets."""
    from textual._compositor import Compositor

    from gpuscope.tui.widgets.chart_row import ChartRow
    from gpuscope.tui.widgets.topbar import TopBar

    @run_async
    async def check() -> None:
        app = make_app(persist_settings=False)
        async with shown(app, (120, 40)) as pilot:
            screen = app.screen
            compositor = screen._compositor
            assert type(compositor) is not Compositor, "the dashboard should use the row-cropped compositor"
            for step in (1, 2):
                app._deliver(sample(step))  # new clock, rates and charts
                await pilot.pause()
                widgets = [screen.query_one(TopBar), screen.query(ChartRow).first(), screen.query_one("#hint")]
                regions = {widget.region.intersection(screen.region) for widget in widgets}
                assert all(region.area for region in regions)
                compositor._dirty_regions.update(regions)
                ours = compositor.render_partial_update()
                compositor._dirty_regions.update(regions)
                own = compositor._get_renders
                compositor._get_renders = lambda crop=None: Compositor._get_renders(compositor, crop)
                try:
                    theirs = Compositor.render_partial_update(compositor)
                finally:
                    compositor._get_renders = own
                assert ours is not None and theirs is not None
                assert ours.spans == theirs.spans and len({y for y, _, _ in ours.spans}) > 2
                for y, start, end in ours.spans:
                    for cut, strip in theirs.chops[y].items():
                        if strip is not None and start <= cut < end:
                            assert list(ours.chops[y][cut]) == list(strip), f"row {y} cut {cut}"
                top = screen.query_one(TopBar).region
                assert len(list(compositor._get_renders(top))) < len(list(Compositor._get_renders(compositor, top)))

    check()


def test_a_new_panel_title_repaints_only_the_title_row(tui_env) -> None:  # noqa: ANN001, F811 - fixture
    from gpuscope.tui.widgets.host_extra import TopProcessesPanel
    from gpuscope.tui.widgets.lines import set_title

    @run_async
    async def check() -> None:
        app = make_app(persist_settings=False)
        async with shown(app, (120, 40)) as pilot:
            panel = app.screen.query_one(TopProcessesPanel)
            assert isinstance(panel._border_title, Content), "Textual changed: update set_border_title"
            panel._repaint_regions.clear()
            set_title(panel, "Top processes · 12 total")
            assert panel.border_title == "Top processes · 12 total"
            width = panel.outer_size.width
            assert [(r.x, r.y, r.width, r.height) for r in panel._repaint_regions] == [(0, 0, width, 1)]
            await pilot.pause()
            assert "Top processes · 12 total" in panel.render_lines(Region(0, 0, width, 1))[0].text

    check()


def test_a_sample_is_one_frame_that_skips_the_containers_under_the_cards(tui_env) -> None:  # noqa: ANN001, F811 - fixture
    """With eight GPU cards, each new sample is painted in one compositor pass, and the grid under
    the cards (whose gaps did not change) is not rendered for it."""
    from dataclasses import replace

    from textual.containers import Grid

    from gpuscope.tui.widgets.gpu_card import DenseGpuCard

    @run_async
    async def check() -> None:
        app = make_many_gpu_app(persist_settings=False)
        async with shown(app, (160, 48)) as pilot:
            screen = app.screen
            assert len(screen.query(DenseGpuCard)) == 8
            frames: list[object] = []
            compositor = screen._compositor
            render_update = compositor.render_update
            compositor.render_update = lambda *a, **k: frames.append(render_update(*a, **k)) or frames[-1]
            grid = screen.query_one("#gpus", Grid)
            grid_renders: list[Region] = []
            grid_render_lines = grid.render_lines
            grid.render_lines = lambda crop: grid_renders.append(crop) or grid_render_lines(crop)
            base = app.latest_sample
            assert base is not None
            for step in (1, 2, 3):
                gpus = [replace(gpu, power_w=100.0 + 10 * step + index) for index, gpu in enumerate(base.gpus)]
                app._deliver(replace(base, timestamp=base.timestamp + step, gpus=gpus))
                await pilot.pause(0.1)
            assert len(frames) == 3 and all(frame is not None for frame in frames)
            assert grid_renders == []

    check()


def test_repaint_remembers_the_screen_while_the_widget_is_mounted(tui_env) -> None:  # noqa: ANN001, F811 - fixture
    """``repaint`` finds the widget's screen once; a widget hidden or removed since is not handed
    to the screen (Textual's ``refresh`` takes it, as before)."""
    from gpuscope.tui.widgets.gpu_card import DenseGpuCard

    @run_async
    async def check() -> None:
        app = make_many_gpu_app(persist_settings=False)
        async with shown(app, (160, 48)) as pilot:
            screen = app.screen
            first, second = list(screen.query(DenseGpuCard))[:2]
            screen._dirty_widgets.clear()
            textual_compat.repaint(first)
            assert first in screen._dirty_widgets
            assert first.__dict__["_gpuscope_repaint"] == (screen, screen._dirty_widgets, screen._compositor)
            await pilot.pause()
            first.display = False
            textual_compat.repaint(first)
            assert first not in screen._dirty_widgets and first._repaint_required  # refresh()'s way
            textual_compat.repaint(second)
            await second.remove()
            screen._dirty_widgets.clear()
            textual_compat.repaint(second)
            assert second not in screen._dirty_widgets

    check()
