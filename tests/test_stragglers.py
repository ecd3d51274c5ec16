"""Multi-rank results (``gpuscope probe --distributed``): stragglers highlighted in the roofline
(chart, tables, CLI, --json), the reports (HTML, Markdown, JSON), ``gpuscope compare`` and the
TUI roofline screen; ranks that are not stragglers carry no mark."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.cluster import STRAGGLER_RANK, multi_rank_results
from support.reports import HOSTILE
from support.roofline import h200_results, typed
from tui_samples import make_app, run_async, tui_env, wait_for_sample  # noqa: F401 - tui_env is a fixture

from gpuscope.cli import main
from gpuscope.report import make_report, render_report
from gpuscope.report.compare import STRAGGLER_MARK, compare_results, render_compare_markdown, render_compare_text
from gpuscope.report.io import validate_report
from gpuscope.report.tables import report_tables
from gpuscope.roofline.layout import layout_roofline
from gpuscope.roofline.loading import build_model
from gpuscope.roofline.model_json import model_to_json
from gpuscope.roofline.tables import devices_lines, roofs_table, stragglers_lines

SLOW = "node-b/r2:cuda:0"  # rank 2 is local rank 0 on node-b


@pytest.fixture
def merged_path(tmp_path: Path) -> Path:
    path = tmp_path / "merged.json"
    path.write_text(json.dumps(multi_rank_results()), encoding="utf-8")
    return path


def _model(document: dict[str, Any]) -> Any:
    return build_model(typed([("merged.json", document)]), local_cpu=None)


# --- roofline ------------------------------------------------------------------------------------


def test_model_marks_only_the_slow_roof_of_the_straggler_rank() -> None:
    model = _model(multi_rank_results())
    assert [(device.key.host, device.key.rank) for device in model.devices] == [
        ("node-a", 0),
        ("node-a", 1),
        ("node-b", 2),
        ("node-b", 3),
    ]
    assert [device.straggler for device in model.devices] == [False, False, True, False]
    ((device, roof),) = model.stragglers
    assert (device.key.rank, roof.kind, roof.name) == (STRAGGLER_RANK, "compute", "bf16")
    assert roof.below_median_percent == pytest.approx(19.76, abs=0.01)
    # rank 3's DRAM is 4% low: compared (median known) but within the margin
    rank3 = model.devices[3]
    dram = next(r for r in rank3.roofs if r.name == "dram.triad")
    assert dram.straggler is False and dram.median_value is not None
    assert model.straggler_margin == pytest.approx(0.10)


def test_chart_legend_flags_only_the_straggler_rank() -> None:
    layout = layout_roofline(_model(multi_rank_results()))
    flagged = [entry for entry in layout.legend if entry.flags]
    assert [entry.label for entry in flagged] == [SLOW]
    assert any("straggler: bf16 -20% vs median" in flag for flag in flagged[0].flags)


def test_straggler_transfer_roof_is_in_the_bandwidth_table() -> None:
    from gpuscope.roofline.tables import bandwidth_table

    document = multi_rank_results()
    for ceiling in list(document["ceilings"]):
        ceiling["straggler"] = False
        if ceiling["name"] == "h2d.pinned":
            document["ceilings"].append(
                {
                    **ceiling,
                    "name": "h2d.pageable",
                    "value": 20e9,
                    "measurement_id": None,
                    "straggler": ceiling["rank"] == STRAGGLER_RANK,
                }
            )
    rows = [line for line in bandwidth_table(_model(document)) if "H2D pageable" in line]
    assert len(rows) == 4 and sum("STRAGGLER" in row for row in rows) == 1
    assert any(row.startswith(SLOW) and "STRAGGLER" in row for row in rows)


def test_roofline_cli_text_has_a_stragglers_section(merged_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["roofline", "--probes", str(merged_path), "--no-color", "--width", "120", "--height", "20"]) == 0
    out = capsys.readouterr().out
    section = out.split(
        "Stragglers (1: ceilings more than 10% below the median of the same ceiling across ranks):\n", 1
    )[1]
    header, row = section.splitlines()[:2]
    assert header.split() == [
        "host",
        "rank",
        "device",
        "hardware",
        "kind",
        "ceiling",
        "value",
        "median",
        "below",
        "median",
    ]
    assert row.split()[:3] == ["node-b", "2", "cuda:0"] and "bf16" in row and row.endswith("19.8%")
    assert "626 TFLOP/s" in row and "781 TFLOP/s" in row
    notes = [line for line in out.splitlines() if "straggler: " in line]  # the chart's notes
    assert notes == [f"{SLOW}: straggler: bf16 -20% vs median"]
    flagged = [line for line in out.splitlines() if "STRAGGLER -20%" in line]
    assert len(flagged) == 1 and flagged[0].startswith(SLOW) and " bf16 " in flagged[0]
    device_lines = [line for line in out.splitlines() if re.match(r"node-[ab]/r\d:cuda:\d: gpu", line)]
    assert [("STRAGGLER" in line) for line in device_lines] == [False, False, True, False]


def test_roofline_json_carries_the_stragglers(merged_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["roofline", "--probes", str(merged_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["straggler_margin"] == pytest.approx(0.10)
    (item,) = data["stragglers"]
    assert (item["host"], item["rank"], item["device"], item["kind"], item["ceiling"]) == (
        "node-b",
        2,
        "cuda:0",
        "compute",
        "bf16",
    )
    assert item["below_median_percent"] == pytest.approx(19.76, abs=0.01) and item["median_value"] == pytest.approx(
        780.78e12
    )
    assert [device["straggler"] for device in data["devices"]] == [False, False, True, False]
    flagged = [(d["rank"], r["name"]) for d in data["devices"] for r in d["roofs"] if r["straggler"]]
    assert flagged == [(2, "bf16")]


def test_single_host_roofline_has_no_straggler_output() -> None:
    model = _model(h200_results())
    assert model.stragglers == [] and stragglers_lines(model) == []
    assert "flag" not in roofs_table(model)[0] and not any("STRAGGLER" in line for line in devices_lines(model))
    assert model_to_json(model)["stragglers"] == []


# --- reports -------------------------------------------------------------------------------------


def test_report_has_stragglers_table_summary_and_flagged_ceiling() -> None:
    report = make_report([{**multi_rank_results(), "_label": "merged.json"}])
    (item,) = report["stragglers"]
    assert (item["host"], item["rank"], item["device"], item["name"]) == ("node-b", 2, "cuda:0", "bf16")
    assert item["median"] == pytest.approx(780.78e12) and item["below_median_percent"] == pytest.approx(19.76, abs=0.01)
    assert any(
        line.startswith("1 straggler ceiling on 1 rank (more than 10% below the median")
        and "node-b/r2 cuda:0 bf16" in line
        for line in report["summary"]
    )
    tables = report_tables(validate_report(report, "report"))
    assert tables[0].id == "stragglers" and tables[0].flags == ["straggler"]
    ceilings = next(t for t in tables if t.id == "ceilings")
    flagged = [row for row in ceilings.rows if "STRAGGLER" in row[-1]]
    assert (
        len(flagged) == 1
        and flagged[0][0] == "node-b r2"
        and flagged[0][4] == "bf16"
        and flagged[0][-1].endswith("STRAGGLER -20%")
    )
    rank3 = [row for row in ceilings.rows if row[0] == "node-b r3"]
    assert rank3 and not any("STRAGGLER" in row[-1] for row in rank3)

    html = render_report(report, "html")
    assert '<a href="#stragglers">Stragglers</a>' in html
    assert html.index('<section id="stragglers">') < html.index('<section id="system">')
    assert html.count('<tr class="straggler">') == 1  # the stragglers table (the ceiling row is also LOW: class "low")
    assert "LOW · STRAGGLER -20%" in html
    markdown = render_report(report, "md")
    assert markdown.index("## Stragglers") < markdown.index("## System")
    assert (
        "| node-b | 2 | cuda:0 | NVIDIA H100 80GB HBM3 | compute | bf16 | 626 TFLOP/s | 781 TFLOP/s | **20%** |"
        in markdown
    )
    assert "**LOW · STRAGGLER -20%**" in markdown
    # the JSON report carries it, and re-renders to the same HTML
    again = json.loads(render_report(report, "json"))
    assert again["stragglers"] == report["stragglers"] and render_report(again, "html") == html


def test_report_stragglers_stay_escaped_and_redacted() -> None:
    report = make_report([{**multi_rank_results(hosts=("node-a", HOSTILE)), "_label": "merged.json"}])
    assert report["stragglers"][0]["host"] == HOSTILE
    html = render_report(report, "html")
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    markdown = render_report(report, "md")
    assert "<script>" not in markdown and "&lt;script&gt;" in markdown
    redacted = make_report(
        [{**multi_rank_results(hosts=("alpha-node", "bravo-node")), "_label": "merged.json"}], redact=True
    )
    assert redacted["stragglers"][0]["host"].startswith("host-")
    assert "bravo-node" not in json.dumps(redacted)


def test_single_host_report_has_no_stragglers() -> None:
    from support.reports import make_results

    report = make_report([make_results()])
    assert report["stragglers"] == [] and not any("straggler" in line for line in report["summary"])
    assert [t.id for t in report_tables(validate_report(report, "report"))][0] == "system"
    html = render_report(report, "html")
    assert 'id="stragglers"' not in html and "STRAGGLER" not in html


# --- compare -------------------------------------------------------------------------------------


def test_compare_flags_the_straggler_rank(merged_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = compare_results(typed([("merged.json", multi_rank_results())]))
    assert [(run["rank"], run["straggler"]) for run in result["runs"]] == [
        (0, False),
        (1, False),
        (2, True),
        (3, False),
    ]
    (item,) = result["stragglers"]
    assert (item["host"], item["rank"], item["name"]) == ("node-b", 2, "bf16") and item[
        "run"
    ] == "merged.json node-b/r2"
    bf16 = next(row for row in result["ceilings"] if row["device"] == "cuda:0" and row["name"] == "bf16")
    assert bf16["values"]["merged.json node-b/r2"].get("straggler") is True
    assert "straggler" not in bf16["values"]["merged.json node-a/r0"]
    text = render_compare_text(result)
    header = next(line for line in text.splitlines() if line.startswith("device  kind"))
    assert header.count(STRAGGLER_MARK) == 1 and f"node-b/r2 {STRAGGLER_MARK}" in header
    row = next(line for line in text.splitlines() if line.startswith("cuda:0  compute   bf16"))
    assert row.count(STRAGGLER_MARK) == 1 and f"626 TFLOP/s ▼20% {STRAGGLER_MARK}" in row
    assert "merged.json node-b/r2 cuda:0 bf16 626 TFLOP/s, 20% below the median 781 TFLOP/s" in text
    markdown = render_compare_markdown(result)
    assert "**Stragglers" in markdown and "merged.json node-b/r2 cuda:0 bf16 626 TFLOP/s" in markdown
    # the CLI, as JSON
    assert main(["compare", str(merged_path), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["rank"] for s in data["stragglers"]] == [2]


def test_compare_without_stragglers_has_no_mark() -> None:
    from support.reports import make_results

    result = compare_results(typed([("a", make_results(hostname="node-a")), ("b", make_results(hostname="node-b"))]))
    assert result["stragglers"] == [] and not any(run["straggler"] for run in result["runs"])
    assert STRAGGLER_MARK not in render_compare_text(result) and "Stragglers" not in render_compare_markdown(result)


# --- TUI -----------------------------------------------------------------------------------------


@run_async
async def test_tui_roofline_flags_straggler_rows(tui_env: Path) -> None:
    from textual.widgets import DataTable, Static

    from gpuscope.tui.screens.roofline import STRAGGLER_MARK as MARK

    app = make_app(probe_results=[multi_rank_results()])
    async with app.run_test(size=(150, 45)) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.press("2")
        await pilot.pause(0.3)
        table = app.screen.query_one("#roof-points", DataTable)
        # the columns that fit the pane (gpuscope.tui.screens.roofline.POINT_DROP_ORDER): by key
        keys = [str(column.key.value) for column in table.columns.values()]
        rows = [dict(zip(keys, table.get_row_at(i))) for i in range(table.row_count)]
        warning = app.current_theme.warning
        slow = [row for row in rows if str(row["name"]).startswith(MARK)]
        # the rank's workload and its two GEMM probe measurements
        assert len(slow) == 3, [str(row["name"]) for row in rows]
        for row in slow:
            assert "device" not in row or str(row["device"]) == f"{MARK} {SLOW}"
            assert "note" not in row or str(row["note"]).startswith("straggler rank: bf16 -20% vs median")
            assert warning and warning.lower() in str(row["name"].style).lower()
        others = [row for row in rows if not str(row["name"]).startswith(MARK)]
        assert "device" not in row or any(str(row["device"]) == "node-b/r3:cuda:1" for row in others)
        for row in others:
            assert "straggler" not in str(row.get("note", "")) and (
                not warning or warning.lower() not in str(row["name"].style).lower()
            )
        summary = str(app.screen.query_one("#roof-summary", Static).render())
        assert f"{MARK} 1 straggler: {SLOW} bf16 -20% vs median" in summary
