"""Issue 27.2 on the TUI's roofline screen: the profile summary carries the coverage, and a group
whose FLOPs are unknown is listed with its time, bound `unknown`, never memory-bound."""

from __future__ import annotations

import json
from pathlib import Path

from results_files import results_json
from test_profile_coverage import _with_unknown_group
from textual.widgets import DataTable
from tui_samples import fixed_cpu_info, make_app, run_async, tui_env, wait_for_sample  # noqa: F401


@run_async
async def test_unknown_group_row_and_coverage_in_the_summary(tui_env: Path, tmp_path: Path) -> None:  # noqa: F811
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(_with_unknown_group()), encoding="utf-8")
    app = make_app(gpus=False, persist_settings=False, probe_results=[results_json(path)])
    app.local_cpu_info = fixed_cpu_info()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for_sample(pilot, pilot.app)
        await pilot.press("2")
        await pilot.pause(0.3)
        table = app.screen.query_one("#roof-points", DataTable)
        rows = [[str(cell) for cell in table.get_row_at(n)] for n in range(table.row_count)]
        fused = next(row for row in rows if row[0].startswith("_fused_thing"))
        assert fused[1] == "unknown" and fused[2] == "-"
        assert fused[6].startswith("FLOPs unknown: 1.1 ms, no verdict")
        summary = str(app.screen.query_one("#roof-summary").render())
        assert "profile 'encoder layer fwd' (coverage 99.0%)" in summary
        (tmp_path / "screen.svg").write_text(app.export_screenshot(), encoding="utf-8")
