"""The probes screen's choices (issue 15): the suite list starts on a suite, cuda devices are
offered only when torch can use CUDA (checked without importing torch), results can be saved
elsewhere, and a replay offers no live runs."""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import Button, Input, Select, Static
from tui_samples import make_app, run_async, samples, tui_env, wait_for_sample  # noqa: F401

from gpuscope.tui import torch_check
from gpuscope.tui.screens.probes import ProbesScreen
from gpuscope.tui.widgets.save_dialog import SaveDialog


@run_async
async def test_suites_are_listed_at_once_and_cuda_needs_a_cuda_torch(tui_env: Path, monkeypatch) -> None:
    monkeypatch.setattr(torch_check, "cuda_unavailable_reason", lambda: "torch 2.13.0+cpu is built without CUDA")
    app = make_app(persist_settings=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.press("3")
        await pilot.pause(0.2)
        screen = app.screen
        assert isinstance(screen, ProbesScreen)
        suite = screen.query_one("#probe-suite", Select)
        assert isinstance(suite.value, str) and suite.value.endswith(".toml")  # a suite is picked, no "no suites found"
        device = screen.query_one("#probe-device", Select)
        assert [value for _, value in device._options if value != Select.BLANK] == ["cpu"]
        status = str(screen.query_one("#probe-status", Static).render())
        assert "Only cpu: " in status and "without CUDA" in status


@run_async
async def test_cuda_devices_are_offered_with_a_cuda_torch(tui_env: Path, monkeypatch) -> None:
    monkeypatch.setattr(torch_check, "cuda_unavailable_reason", lambda: None)
    app = make_app(persist_settings=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.press("3")
        await pilot.pause(0.2)
        device = app.screen.query_one("#probe-device", Select)
        assert [value for _, value in device._options if value != Select.BLANK] == ["cpu", "cuda:0", "cuda:1"]


def test_torch_check_reads_the_version_file_without_importing_torch(tmp_path: Path, monkeypatch) -> None:
    import importlib.util
    import sys

    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (package / "version.py").write_text("__version__ = '2.5.0+cpu'\ncuda: Optional[str] = None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    importlib.invalidate_caches()
    torch_check.cuda_unavailable_reason.cache_clear()
    try:
        assert torch_check.cuda_unavailable_reason() == "torch 2.5.0+cpu is built without CUDA"
        (package / "version.py").write_text("__version__ = '2.5.0'\ncuda: Optional[str] = '12.4'\n")
        torch_check.cuda_unavailable_reason.cache_clear()
        assert torch_check.cuda_unavailable_reason() is None
        assert "torch" not in sys.modules
    finally:
        torch_check.cuda_unavailable_reason.cache_clear()


@run_async
async def test_save_as_writes_the_results_where_asked(tui_env: Path, tmp_path: Path) -> None:
    from gpuscope.probing.session import ProbeSession
    from gpuscope.results import empty_results
    from gpuscope.schema.results import SuiteRef

    app = make_app(persist_settings=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.press("3")
        await pilot.pause(0.2)
        screen = app.screen
        session = ProbeSession("quick.toml", "cpu", tmp_path / "tmp.json", started_s=0.0)
        session.results = empty_results(suite=SuiteRef(name="quick", path="quick.toml"))
        screen.session = session
        screen._set_running(False)
        assert not screen.query_one("#probe-save", Button).disabled
        screen.action_save_as()
        await pilot.pause(0.2)
        assert isinstance(app.screen, SaveDialog)
        target = tmp_path / "kept" / "my-results.json"
        target.parent.mkdir()
        app.screen.query_one(Input).value = str(target)
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert json.loads(target.read_text())["suite"]["name"] == "quick"
        assert any("Results saved" in n.message for n in app._notifications)
        # A finished run saves the child's file as it wrote it (undeclared fields kept).
        session.written = b'{"schema": "gpuscope.results", "schema_version": 1, "note": "as written"}\n'
        screen.action_save_as()
        await pilot.pause(0.2)
        copy = tmp_path / "kept" / "copy.json"
        app.screen.query_one(Input).value = str(copy)
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert copy.read_bytes() == session.written


@run_async
async def test_a_replay_offers_no_live_runs(tui_env: Path) -> None:
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.sources import ReplayCursor

    app = GpuscopeApp(replay=ReplayCursor(samples(10)), persist_settings=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.press("3")
        await pilot.pause(0.2)
        screen = app.screen
        assert screen.query_one("#probe-run", Button).disabled
        assert "only on live hardware" in str(screen.query_one("#probe-status", Static).render())
