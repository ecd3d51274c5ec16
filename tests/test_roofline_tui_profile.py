"""Issue 14 item 3: the TUI's roofline screen shows a profile as a cloud of points, the table
beside it listing group, bound, efficiency and time lost; point n on the chart is row n."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from results_files import results_json
from support.profiles import PROFILE_NAME, profile_results
from textual.widgets import DataTable
from tui_samples import fixed_cpu_info, make_app, run_async, tui_env, wait_for_sample  # noqa: F401

from gpuscope.profiling.stored import StoredProfile, profiled_workloads
from gpuscope.profiling.view import profile_rows
from gpuscope.results import to_results
from gpuscope.tui.roofline_data import build_screen_model
from gpuscope.tui.screens.roofline import RooflineScreen


def _file(tmp_path: Path, document: dict) -> dict:
    """The document as the TUI gets it from --probes: written, then read back and checked."""
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return results_json(path)


def _profile(document: dict) -> StoredProfile:
    """The one profile of a results document."""
    (profiled,) = profiled_workloads(to_results(document, "profile.json"))
    return profiled.profile


def _table(app) -> list[list[str]]:
    table = app.screen.query_one("#roof-points", DataTable)
    return [[str(cell) for cell in table.get_row_at(number)] for number in range(table.row_count)]


async def _roofline(pilot) -> None:
    await wait_for_sample(pilot, pilot.app)
    await pilot.press("2")
    await pilot.pause(0.3)


def test_profile_workload_becomes_its_groups_points_in_table_order(tmp_path: Path) -> None:
    document = _file(tmp_path, profile_results())
    workload = _profile(document)
    model = build_screen_model([to_results(document, "profile.json")], None, local_cpu=fixed_cpu_info())
    names = [placement.point.name for placement in model.placements]
    assert PROFILE_NAME not in names  # the step's one point is replaced by the cloud
    assert names == [row[1] for row in profile_rows(workload)]
    drawn = [placement for placement in model.placements if placement.point.flop_per_s is not None]
    assert len(drawn) == 9  # copy_ has no FLOPs: listed, not drawn
    softmax = next(placement for placement in model.placements if placement.point.name.startswith("_softmax"))
    assert softmax.bound == "memory" and softmax.efficiency == pytest.approx(0.348, abs=0.001)


@run_async
async def test_roofline_screen_lists_the_profile_groups(tui_env: Path, tmp_path: Path) -> None:
    document = _file(tmp_path, profile_results())
    workload = _profile(document)
    expected = profile_rows(workload)
    app = make_app(gpus=False, persist_settings=False, probe_results=[document])
    app.local_cpu_info = fixed_cpu_info()
    async with app.run_test(size=(120, 40)) as pilot:
        await _roofline(pilot)
        screen = app.screen
        assert isinstance(screen, RooflineScreen)
        rows = _table(app)
        assert len(rows) == len(expected) == 10
        for row, (_number, group, _module, bound, _ms, eff, lost, gain) in zip(rows, expected, strict=True):
            head, _, tail = row[0].partition("…")  # the group, cut to the name column
            assert group.startswith(head) and group.endswith(tail)
            assert row[1] == {"cmp": "compute", "mem": "memory"}[bound]
            assert row[6].startswith(f"lost {lost} ms · step {gain} at roof")  # the time lost
            if "not drawn" not in row[6]:
                assert row[2] == eff  # the same efficiency as the profile's own verdict
        assert rows[8][2] == "-" and "no FLOPs: not drawn" in rows[8][6]  # copy_
        assert sum(1 for p in screen._model.placements if p.point.flop_per_s is not None) == 9
        assert f"profile '{PROFILE_NAME}': 10 groups by time lost (point n = row n)" in str(
            screen.query_one("#roof-summary").render()
        )


@pytest.mark.skipif(not __import__("importlib").util.find_spec("torch"), reason="needs torch")
@run_async
async def test_a_real_cpu_profile_on_the_roofline_screen(tui_env: Path, tmp_path: Path) -> None:
    import torch
    from results_files import new_document as new_results

    from gpuscope.profiling.api import profile

    results = tmp_path / "results.json"
    document = new_results(system={"hostname": socket.gethostname()})
    document["devices"] = [{"device": "cpu", "type": "cpu"}]
    document["ceilings"] = [
        {"device": "cpu", "kind": "compute", "name": "fp32", "value": 50e9, "unit": "FLOP/s"},
        {"device": "cpu", "kind": "memory", "name": "dram.triad", "value": 10e9, "unit": "B/s"},
    ]
    results.write_text(json.dumps(document))
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
    x = torch.randn(16, 32)
    profile(
        lambda: model(x).sum(),
        name="tiny mlp",
        steps=1,
        warmup=0,
        device="cpu",
        roofs=[results],
        results=results,
        powercap_root=tmp_path / "none",
    )
    loaded = results_json(results)
    workload = _profile(loaded)
    expected = profile_rows(workload)
    app = make_app(gpus=False, persist_settings=False, probe_results=[loaded])
    async with app.run_test(size=(120, 40)) as pilot:
        await _roofline(pilot)
        rows = _table(app)
        profile_rows_shown = [row for row in rows if row[6].startswith("lost ")]
        assert len(profile_rows_shown) == len(expected) > 0
        for row, expected_row in zip(profile_rows_shown, expected, strict=True):  # in the profile's order
            head, _, tail = row[0].partition("…")  # cut to the name column, start and maybe end kept
            assert expected_row[1].startswith(head) and expected_row[1].endswith(tail)
        groups = [p for p in app.screen._model.placements if p.point.source == "profile"]
        assert len(groups) == len(expected)


def test_profile_cloud_snapshot(tui_env: Path, snap_compare) -> None:
    app = make_app(gpus=False, persist_settings=False, probe_results=[profile_results()])
    app.local_cpu_info = fixed_cpu_info()
    assert snap_compare(app, terminal_size=(120, 40), run_before=_roofline)


@run_async
async def test_group_names_cut_alike_are_told_apart(tui_env: Path, tmp_path: Path) -> None:
    """At 120 columns the point column has 12 cells: the four GEMMs' names all start "addmm fp32 "
    and would all read "addmm fp32 …"; each keeps its last shape instead, and every cut name is the
    name's start, "…" and its end."""
    document = _file(tmp_path, profile_results())
    names = [row[1] for row in profile_rows(_profile(document))]
    app = make_app(gpus=False, persist_settings=False, probe_results=[document])
    app.local_cpu_info = fixed_cpu_info()
    async with app.run_test(size=(120, 40)) as pilot:
        await _roofline(pilot)
        shown = [row[0] for row in _table(app)]
    assert len(shown) == len(names) == 10
    assert any(cell != name for cell, name in zip(shown, names, strict=True))  # the pane does cut them
    assert len(set(shown)) == len(set(names))  # no two different names read alike
    for cell, name in zip(shown, names, strict=True):
        head, cut, tail = cell.partition("…")
        assert name.startswith(head) and name.endswith(tail) and (cut or cell == name)
    gemms = [(cell, name) for cell, name in zip(shown, names, strict=True) if name.startswith("addmm")]
    assert len(gemms) == 4 and all(cell.endswith("…" + name.split()[-1]) for cell, name in gemms)
