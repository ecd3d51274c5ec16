"""The probes screen draws a finished run's working-set sweeps under its table."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from textual.widgets import Static
from tui_samples import make_app, run_async, tui_env, wait_for_sample  # noqa: F401

from gpuscope.results import empty_results
from gpuscope.schema.results import Results
from gpuscope.tui.screens.probes import ProbesScreen
from tests.test_probe_sweep import _sweep_file

pytestmark = pytest.mark.slow


@run_async
async def test_the_probes_screen_shows_the_sweep_of_a_finished_run(tui_env: Path, tmp_path: Path) -> None:
    document = msgspec.json.decode(_sweep_file(tmp_path, (400, 200, 100, 30)).read_bytes(), type=Results)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.press("3")
        screen = app.screen
        assert isinstance(screen, ProbesScreen)
        panel = screen.query_one("#probe-sweep", Static)
        assert panel.display is False  # nothing until a run with sweeps finishes
        screen.show_sweeps(document)
        await pilot.pause()
        text = str(panel.render())
        assert panel.display is True and "Working-set sweep, cpu" in text and "copy   l1" in text
        screen.show_sweeps(empty_results(device="cpu"))
        assert panel.display is False
