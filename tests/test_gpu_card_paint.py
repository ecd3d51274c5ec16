"""The dense GPU card repaints its content rows from cached border pieces (DenseGpuCard.render_lines):
the strips must be Textual's own, before and after values change, and the borders, the title and
a lost GPU's style still go through Textual."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from textual.geometry import Region
from textual.widget import Widget
from tui_samples import make_many_gpu_app, run_async, shown, tui_env  # noqa: F401

from gpuscope.tui.widgets.gpu_card import DenseGpuCard


def _textual_rows(card: DenseGpuCard, crop: Region) -> list:
    card._styles_cache.set_dirty(Region(0, crop.y, card.outer_size.width, crop.height))
    return Widget.render_lines(card, crop)


@run_async
async def test_dense_card_rows_are_textuals_own(tui_env: Path) -> None:
    app = make_many_gpu_app(8, persist_settings=False)
    async with shown(app, (160, 48)) as pilot:
        cards = list(app.screen.query(DenseGpuCard))
        assert len(cards) == 8
        card = cards[0]
        width, height = card.outer_size
        content = Region(0, 1, width, height - 2)
        fast = card.render_lines(content)
        assert card._frame is not None and card._frame[1] is not None  # the fast path is on
        assert fast == _textual_rows(card, content)
        assert "util" in fast[0].text
        # new values: only the changed rows repaint, and they still match Textual's rendering
        sample = app.latest_sample
        assert sample is not None
        gpu = replace(sample.gpus[0], utilization_percent=3.0, power_w=123.0, temperature_gpu_c=41.0)
        card.show(gpu, app.history)
        fast = card.render_lines(content)
        assert fast == _textual_rows(card, content)
        assert any("123" in strip.text for strip in fast)
        # part of a row (a crop from the compositor) is the same piece of Textual's row
        part = Region(3, 2, width - 10, 1)
        assert card.render_lines(part) == _textual_rows(card, part)
        # a lost GPU changes the border style: the pieces are made again and still match
        card.show(replace(gpu, state="lost"), app.history)
        await pilot.pause()
        assert card._frame is None or card._frame[1] is None or card._frame[0][0] == card.outer_size
        fast = card.render_lines(content)
        assert fast == _textual_rows(card, content)
        # the border rows (title) go through Textual
        top = card.render_lines(Region(0, 0, width, 1))
        assert "GPU 0" in top[0].text and "LOST" in top[0].text
        # another theme: new colours, and the rows still match Textual's
        before = card.render_lines(content)
        app.theme = "gpuscope-light"
        await pilot.pause()
        after = card.render_lines(content)
        assert after == _textual_rows(card, content)
        assert after != before
