"""Issue 27.2: an op whose FLOPs are unknown is `unknown`, listed with its time, never memory-bound;
every profile reports its coverage (the share of op time with a known FLOP count or genuine data
movement) in the summary, the JSON, the report and the TUI's rows. Hand-made groups, no torch."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from support.profiles import profile_results

from gpuscope.profiling.attribution import OpGroup
from gpuscope.profiling.record import DATA_MOVEMENT_OPS, is_data_movement
from gpuscope.profiling.render import coverage_line, summary_lines, top_table
from gpuscope.profiling.result import ProfileResult
from gpuscope.profiling.stored import StoredProfile, read_profile
from gpuscope.profiling.verdict import judge_group, judge_groups
from gpuscope.profiling.view import coverage_text, profile_points
from gpuscope.roofline.model import MEASURED, DeviceKey, DeviceRoofs, Roof

KEY = DeviceKey(host="h", rank=None, device="cpu")
ROOFS = DeviceRoofs(
    KEY,
    "cpu",
    "test cpu",
    roofs=[Roof(KEY, "compute", "fp32", 100e9, "FLOP/s", MEASURED), Roof(KEY, "memory", "dram", 20e9, "B/s", MEASURED)],
)


def _group(
    op: str, flops: int, nbytes: int, time_s: float, *, no_formula: bool = False, counted: bool = True
) -> OpGroup:
    return OpGroup(op, ((64, 64),), "fp32", 1, time_s, flops, 0, nbytes, counted, no_formula, ["net.block"])


def _result(groups: list[OpGroup], step_s: float = 0.1) -> ProfileResult:
    return ProfileResult(
        name="step", device="cpu", device_name=None, host="h", steps=1, warmup=1, step_times_s=[step_s],
        groups=groups, verdicts=judge_groups(groups, ROOFS, step_s, KEY), modules=[], traced_s=step_s,
        flop_counter_total=sum(g.flops for g in groups), counter_flops=sum(g.flops for g in groups),
        pointwise_flops=0, bytes_total=sum(g.bytes for g in groups), unmatched_ops=0,
        uncounted_ops={g.op: 1 for g in groups if g.no_formula}, roofs="roofs: test", energy=None,
        dram_bytes_measured=0.0, time_basis="CPU time", device_key=KEY, device_roofs=ROOFS,
    )  # fmt: skip


MM = _group("aten::mm", 2_000_000_000, 10_000_000, 0.04)
COPY = _group("aten::copy_", 0, 40_000_000, 0.004)
FUSED = _group("aten::_transformer_encoder_layer_fwd", 0, 30_000_000, 0.05, no_formula=True)
UNSEEN = _group("aten::mystery", 0, 0, 0.006, counted=False)


def test_an_op_without_a_flop_formula_is_unknown_never_memory() -> None:
    verdict = judge_group(FUSED, ROOFS, 0.1, KEY)
    assert verdict.bound == "unknown"
    assert verdict.time_lost_s is None and verdict.step_speedup is None and verdict.efficiency is None
    assert "no FLOP formula" in verdict.note and "_transformer_encoder_layer_fwd" in verdict.note
    # genuine data movement (zero FLOPs by definition) stays judged against the DRAM roof
    copy = judge_group(COPY, ROOFS, 0.1, KEY)
    assert copy.bound == "memory" and copy.time_at_roof_s == pytest.approx(40e6 / 20e9)


def test_coverage_is_the_share_of_op_time_with_known_flops_or_data_movement() -> None:
    result = _result([MM, COPY, FUSED, UNSEEN])
    ops_s = 0.04 + 0.004 + 0.05 + 0.006
    assert result.unknown_s == pytest.approx(0.056)  # the fused layer and the op the counter never saw
    assert result.coverage == pytest.approx((0.04 + 0.004) / ops_s)
    assert result.in_ops_share == pytest.approx(ops_s / 0.1)
    assert _result([MM, COPY]).coverage == 1.0
    assert _result([]).coverage is None
    assert not FUSED.flops_known and not UNSEEN.flops_known and COPY.flops_known and MM.flops_known


def test_data_movement_is_one_list_of_ops_with_zero_flops_by_definition() -> None:
    for op in ("copy_", "cat", "view", "index", "index_select", "_to_copy", "fill_", "empty", "where"):
        assert op in DATA_MOVEMENT_OPS and is_data_movement(op), op
    for op in ("_transformer_encoder_layer_fwd", "_native_multi_head_attention", "layer_norm", "mm", "relu"):
        assert not is_data_movement(op), op
    assert is_data_movement("anything", is_view=True)


def test_summary_states_coverage_and_lists_unknown_ops_with_their_time() -> None:
    result = _result([MM, COPY, FUSED])
    lines = summary_lines(result)
    assert coverage_line(result) in lines
    assert coverage_line(result) == "  coverage  46.8% of op time has known FLOPs or moves data; 50 ms FLOPs unknown"
    text = " ".join(" ".join(lines).split())
    assert "unknown no FLOP count, no verdict: _transformer_encoder_layer_fwd fp32 64x64 50 ms" in text
    table = top_table(result)
    fused_row = next(line for line in table if "_transformer_enc" in line)
    assert " ? " in fused_row and " mem " not in fused_row  # no verdict, its time listed
    assert all(len(line) <= 80 for line in lines + table)


def test_profile_json_carries_coverage_and_reads_back(tmp_path: Path) -> None:
    result = _result([MM, COPY, FUSED])
    detail = result.profile_json()
    assert detail["coverage"] == pytest.approx(result.coverage)
    assert detail["unknown_s"] == pytest.approx(0.05)
    assert "copies" in detail["data_movement_rule"]
    assert "incomplete" not in {key for key, value in detail.items() if value is not None}
    fused = next(group for group in detail["groups"] if group["op"] == "aten::_transformer_encoder_layer_fwd")
    assert fused["bound"] == "unknown" and fused["no_formula"] is True and fused["time_s"] == 0.05
    stored = read_profile(json.loads(json.dumps(detail)))
    assert stored is not None and coverage_text(stored) == f"coverage {result.coverage * 100:.1f}%"
    # a no-formula group is neither drawn nor taken for data movement on the TUI's chart
    points = profile_points(stored, KEY)
    index = [group.op for group in stored.groups].index("aten::_transformer_encoder_layer_fwd")
    assert points[index].flops == 0 and points[index].bytes == 0


def test_a_real_op_without_a_formula_is_unknown_with_its_time_and_lowers_coverage(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from gpuscope.profiling.api import profile
    from gpuscope.profiling.record import count_step

    x = torch.randn(64, 64)

    def step() -> None:
        torch.cummax(torch.mm(x, x), dim=0)  # cummax: arithmetic (comparisons), no FLOP formula

    assert any(r.no_formula for r in count_step(step).records if r.name == "aten::cummax")
    roofs = tmp_path / "probe.json"
    roofs.write_text(json.dumps(_roofs_document()))
    result = profile(step, device="cpu", steps=1, roofs=[roofs], powercap_root=tmp_path / "none")
    cummax = next(v for v in result.verdicts if v.group.op == "aten::cummax")
    assert cummax.bound == "unknown" and cummax.group.time_s > 0 and cummax.time_lost_s is None
    assert result.unknown_s == pytest.approx(cummax.group.time_s)
    assert result.coverage is not None and result.coverage < 1.0
    assert any("cummax" in line for line in summary_lines(result) if line.startswith("  unknown"))


def _roofs_document() -> dict[str, object]:
    import socket

    return {
        "schema": "gpuscope.results",
        "schema_version": 1,
        "system": {"hostname": socket.gethostname()},
        "devices": [{"device": "cpu", "type": "cpu"}],
        "ceilings": [
            {"device": "cpu", "kind": "compute", "name": "fp32", "value": 50e9, "unit": "FLOP/s"},
            {"device": "cpu", "kind": "memory", "name": "dram.triad", "value": 10e9, "unit": "B/s"},
        ],
    }


def test_old_profile_objects_read_without_coverage() -> None:
    old = profile_results()["workloads"][0]["profile"]
    stored = msgspec.convert(old, StoredProfile)
    assert stored.coverage is None and coverage_text(stored) == "" and coverage_text(old) == ""


def _with_unknown_group() -> dict:
    """The hand-made profile with its copy_ row turned into an op no formula knows, and the
    coverage and whole-step fields a profile now writes."""
    document = profile_results()
    profile = document["workloads"][0]["profile"]
    fused = next(group for group in profile["groups"] if group["op"] == "aten::copy_")
    fused.update(op="aten::_fused_thing", label="_fused_thing fp32 2048x512", no_formula=True, bound="unknown",
                 roof=None, roof_source=None, time_at_roof_s=None, time_lost_s=None, efficiency=None,
                 step_speedup=None, note="no FLOP formula for aten::_fused_thing")  # fmt: skip
    profile.update(coverage=1 - 0.0011 / profile["ops_s"], unknown_s=0.0011, step_bound="compute",
                   step_efficiency=0.62, step_roof="fp32", step_intensity_flop_per_byte=71.0)  # fmt: skip
    return document


def test_report_states_the_step_verdict_coverage_and_unknown_ops(tmp_path: Path) -> None:
    from gpuscope.report import write_report
    from gpuscope.report.profile_section import profile_markdown_lines, profile_section_html
    from gpuscope.results import to_results
    from gpuscope.schema.report import EmbeddedResults

    document = _with_unknown_group()
    embedded = [EmbeddedResults(label="r", document=to_results(document, "r"))]
    html = profile_section_html(embedded)
    assert html is not None
    assert "Whole step: compute-bound at 71 FLOP/byte, 62% of the fp32 roof" in html
    assert "Coverage 99.0% of op time has a known FLOP count or is data movement" in html
    assert "FLOPs unknown (no verdict): _fused_thing fp32 2048x512 1.1 ms" in html
    document["workloads"][0]["profile"].update(incomplete=True, steps=1, steps_requested=3)
    partial = profile_section_html([EmbeddedResults(label="r", document=to_results(document, "r"))])
    assert partial is not None and "INCOMPLETE: 1 of 3 profiled steps ran" in partial
    markdown = "\n".join(profile_markdown_lines(embedded, str))
    assert "Coverage 99.0%" in markdown and "Whole step: compute-bound" in markdown
    old = profile_section_html([EmbeddedResults(label="r", document=to_results(profile_results(), "r"))])
    assert old is not None and "Coverage not recorded" in old and "Whole step: no verdict" in old
    path = tmp_path / "results.json"
    path.write_text(json.dumps(document))
    write_report(tmp_path / "report.html", [path])
    assert "Whole step: compute-bound" in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_tui_rows_show_unknown_groups_with_their_time_never_memory() -> None:
    from tui_samples import fixed_cpu_info

    from gpuscope.results import to_results
    from gpuscope.tui.roofline_data import build_screen_model

    document = _with_unknown_group()
    model = build_screen_model([to_results(document, "profile.json")], None, local_cpu=fixed_cpu_info())
    fused = next(p for p in model.placements if p.point.name.startswith("_fused_thing"))
    assert fused.point.note == "FLOPs unknown: 1.1 ms, no verdict"
    assert fused.point.flops == 0 and fused.point.bytes == 0 and fused.bound == "unknown"
    assert coverage_text(document["workloads"][0]["profile"]) == "coverage 99.0%"  # the screen's summary
