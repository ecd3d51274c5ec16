"""``gpuscope compare``: side by side, with differences beyond the measured spread flagged."""

from __future__ import annotations

import json

import pytest
from support.reports import HOSTILE, make_results, write_results
from support.roofline import typed

from gpuscope.cli import main
from gpuscope.errors import EXIT_BAD_INPUT, EXIT_USAGE
from gpuscope.report.compare import compare_results, render_compare_markdown, render_compare_text


def test_slow_gpu_flagged_against_the_others():
    a = make_results(hostname="node-a", gpus=4, hbm_bytes_per_s=[3.0e12, 3.01e12, 2.99e12, 2.67e12])
    b = make_results(hostname="node-b", gpus=4, hbm_bytes_per_s=[3.0e12, 3.02e12, 2.98e12, 3.0e12])
    result = compare_results(typed([("a.json", a), ("b.json", b)]))
    assert [run["label"] for run in result["runs"]] == ["a.json", "b.json"]
    texts = [flag["text"] for flag in result["flags"]]
    assert len(texts) == 1, texts
    assert texts[0].startswith("a.json cuda:3 HBM (dram.triad) 11% below the others")
    row = next(r for r in result["ceilings"] if r["device"] == "cuda:3" and r["name"] == "dram.triad")
    assert row["values"]["a.json"]["flagged"] is True and row["values"]["b.json"]["flagged"] is False
    text = render_compare_text(result)
    assert "▼11%" in text and "a.json cuda:3 HBM (dram.triad) 11% below the others" in text


def test_differences_within_the_spread_are_not_flagged():
    # a 3% difference with samples spread by 4% each: noise
    a = make_results(gpus=1, hbm_bytes_per_s=[3.0e12], spread=0.02)
    b = make_results(gpus=1, hbm_bytes_per_s=[2.91e12], spread=0.02)
    assert compare_results(typed([("a", a), ("b", b)]))["flags"] == []
    # the same 3% with tight samples (0.2% spread) is beyond the noise
    a = make_results(gpus=1, hbm_bytes_per_s=[3.0e12], spread=0.001)
    b = make_results(gpus=1, hbm_bytes_per_s=[2.91e12], spread=0.001)
    flags = compare_results(typed([("a", a), ("b", b)]))["flags"]
    assert [flag["run"] for flag in flags] == ["b"]  # one difference, listed once (issue 28)
    assert "b cuda:0 HBM (dram.triad) 3% below a (spread ±2.0%)" in [flag["text"] for flag in flags]


def test_workload_slower_is_flagged():
    a = make_results(gpus=1)
    b = make_results(gpus=1)
    for workload in b["workloads"]:
        if workload["name"].startswith("gemm"):
            for key in ("time_s", "time_p10_s", "time_p90_s"):
                workload[key] *= 1.25
    flags = compare_results(typed([("a", a), ("b", b)]))["flags"]
    texts = [flag["text"] for flag in flags if flag["table"] == "workloads"]
    assert any(text.startswith("b cuda:0 workload 'gemm 8192 bf16' 20% slower than a") for text in texts), texts


def test_multi_rank_results_compare_per_host_and_rank():
    doc = make_results(hostname="node-1", gpus=1, rank=0)
    other = make_results(hostname="node-2", gpus=1, rank=1, hbm_bytes_per_s=[2.4e12])
    doc["devices"] += other["devices"]
    doc["ceilings"] += other["ceilings"]
    for item in other["measurements"]:
        item["id"] = "r1-" + item["id"]
    for ceiling in other["ceilings"]:
        ceiling["measurement_id"] = "r1-" + ceiling["measurement_id"]
    doc["measurements"] += other["measurements"]
    result = compare_results(typed([("multi.json", doc)]))
    assert [run["label"] for run in result["runs"]] == ["multi.json node-1/r0", "multi.json node-2/r1"]
    assert any(
        flag["text"].startswith("multi.json node-2/r1 cuda:0 HBM (dram.triad) 20% below multi.json node-1/r0")
        for flag in result["flags"]
    )


def test_cli_formats_and_errors(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_results(a, make_results(gpus=2, hbm_bytes_per_s=[3.0e12, 3.0e12]))
    write_results(b, make_results(gpus=2, hbm_bytes_per_s=[3.0e12, 2.4e12], hostile=True))
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "Ceilings" in out and "b.json cuda:1 HBM (dram.triad) 20% below the others" in out
    assert main(["compare", str(a), str(b), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "gpuscope.compare" and data["flags"]
    assert main(["compare", str(a), str(b), "--format", "md"]) == 0
    markdown = capsys.readouterr().out
    assert "| device | kind | name | a.json | b.json |" in markdown
    assert "<script" not in markdown and "&lt;script&gt;" in markdown
    target = tmp_path / "cmp.md"
    assert main(["compare", str(a), str(b), "--format", "md", "-o", str(target)]) == 0
    assert target.read_text() == markdown
    single = tmp_path / "single.json"
    write_results(single, make_results(gpus=0))
    assert main(["compare", str(single)]) == EXIT_USAGE
    assert "nothing to compare" in capsys.readouterr().err
    assert main(["compare", str(a), str(tmp_path / "missing.json")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "missing.json: no such file" in err and "\n" not in err.strip()


def test_markdown_escapes_hostile_names():
    text = render_compare_markdown(compare_results(typed([("a", make_results(hostile=True)), ("b", make_results())])))
    assert HOSTILE not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


@pytest.mark.parametrize("count", [2, 3])
def test_report_json_is_accepted(tmp_path, capsys, count):
    from gpuscope.report import write_report

    paths = []
    for index in range(count):
        results = tmp_path / f"r{index}.json"
        write_results(results, make_results(gpus=1, hbm_bytes_per_s=[3.0e12 * (1 - 0.1 * index)]))
        report = tmp_path / f"report{index}.json"
        write_report(report, [results])
        paths.append(str(report))
    assert main(["compare", *paths, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["runs"]) == count and data["flags"]


def test_ceiling_above_its_datasheet_is_flagged_in_text_markdown_and_json(tmp_path, capsys):
    # H100 SXM HBM3 datasheet: 3.35 TB/s; 3.6 TB/s is 107% of it, 3.0 TB/s is 90%
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_results(a, make_results(gpus=2, hbm_bytes_per_s=[3.0e12, 3.6e12]))
    write_results(b, make_results(gpus=2, hbm_bytes_per_s=[3.0e12, 3.0e12]))
    wrong = "above datasheet: the datasheet entry or the measurement is wrong"
    assert main(["compare", str(a), str(b), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(item["run"], item["device"], item["name"]) for item in data["above_datasheet"]] == [
        ("a.json", "cuda:1", "dram.triad")
    ]
    assert data["above_datasheet"][0]["percent_of_spec"] == pytest.approx(3.6 / 3.35 * 100)
    assert wrong in data["above_datasheet"][0]["text"]
    row = next(r for r in data["ceilings"] if r["device"] == "cuda:1" and r["name"] == "dram.triad")
    assert row["values"]["a.json"]["above_datasheet"] is True and row["values"]["b.json"]["above_datasheet"] is False
    assert row["values"]["b.json"]["percent_of_spec"] == pytest.approx(3.0 / 3.35 * 100)
    assert not any(v["above_datasheet"] for r in data["ceilings"] if r is not row for v in r["values"].values())
    assert main(["compare", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    assert "3.60 TB/s ▲20% ABOVE DATASHEET" in text and text.count("ABOVE DATASHEET") == 2  # the cell and the heading
    assert f"a.json cuda:1 dram.triad 107% of datasheet: {wrong}" in text
    assert main(["compare", str(a), str(b), "--format", "md"]) == 0
    markdown = capsys.readouterr().out
    assert "| cuda:1 | memory | dram.triad | 3.60 TB/s ▲20% ABOVE DATASHEET | 3.00 TB/s |" in markdown
    assert f"- a.json cuda:1 dram.triad 107% of datasheet: {wrong}" in markdown


def test_ceiling_low_against_its_datasheet_is_marked_beside_above_datasheet():
    # 2.4 TB/s is 72% of the H100's 3.35 TB/s: below the report's 80% LOW threshold for memory
    result = compare_results(
        typed(
            [
                ("a", make_results(gpus=1, hbm_bytes_per_s=[2.4e12])),
                ("b", make_results(gpus=1, hbm_bytes_per_s=[3.6e12])),
            ]
        )
    )
    row = next(r for r in result["ceilings"] if r["name"] == "dram.triad" and r["device"] == "cuda:0")
    assert (row["values"]["a"]["low"], row["values"]["a"]["above_datasheet"]) == (True, False)
    assert (row["values"]["b"]["low"], row["values"]["b"]["above_datasheet"]) == (False, True)
    line = next(line for line in render_compare_text(result).splitlines() if "dram.triad" in line and "cuda:0" in line)
    assert " LOW" in line and "ABOVE DATASHEET" in line


def test_compare_and_report_label_embedded_results_alike(tmp_path, capsys):
    from gpuscope.report import make_report, write_report

    for name in ("a.json", "b.json"):
        write_results(tmp_path / name, make_results(gpus=1))
    write_report(tmp_path / "report.json", [tmp_path / "a.json", tmp_path / "b.json"])

    def compared(*names: str) -> list[str]:
        assert main(["compare", *(str(tmp_path / name) for name in names), "--format", "json"]) == 0
        return [run["label"] for run in json.loads(capsys.readouterr().out)["runs"]]

    def reported(*names: str) -> list[str]:
        return [entry["label"] for entry in make_report([tmp_path / name for name in names])["results"]]

    # a report's results go by their own names; all of them by the report's where one is taken twice
    for names, labels in [
        (("report.json", "b.json"), ["report.json[a.json]", "report.json[b.json]", "b.json"]),
        (("report.json",), ["a.json", "b.json"]),
    ]:
        assert compared(*names) == labels
        assert reported(*names) == labels
