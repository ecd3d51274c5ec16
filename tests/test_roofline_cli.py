"""``gpuscope roofline``: chart and tables from one or several results files; bad files end
with one line naming the file and the problem, and exit code 3."""

from __future__ import annotations

import json

import pytest
from support.roofline import cpu_results, h200_results, write_results

from gpuscope.cli import main
from gpuscope.errors import EXIT_BAD_INPUT, EXIT_USAGE


@pytest.fixture
def good(tmp_path):
    return write_results(tmp_path / "gpu.json", h200_results("node-a"))


@pytest.fixture
def other(tmp_path):
    return write_results(tmp_path / "cpu.json", cpu_results("node-b"))


def _bad_files(tmp_path):
    valid = json.dumps(h200_results())
    files = {
        "truncated": valid[: len(valid) // 2],
        "not_json": "this is not JSON at all\n",
        "empty": "",
        "wrong_version": json.dumps({**h200_results(), "schema_version": 99}),
        "wrong_schema": json.dumps({"schema": "something.else", "schema_version": 1}),
        "bad_ceiling": json.dumps(
            {
                **h200_results(),
                "ceilings": [{"device": "cpu", "kind": "compute", "name": "fp32", "value": -1, "unit": "FLOP/s"}],
            }
        ),
    }
    paths = {}
    for name, text in files.items():
        path = tmp_path / f"{name}.json"
        path.write_text(text, encoding="utf-8")
        paths[name] = path
    paths["binary"] = tmp_path / "binary.json"
    paths["binary"].write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    paths["missing"] = tmp_path / "missing.json"
    return paths


@pytest.mark.parametrize(
    "kind", ["truncated", "not_json", "empty", "wrong_version", "wrong_schema", "bad_ceiling", "binary", "missing"]
)
def test_bad_results_file_is_one_line_and_exit_3(tmp_path, capsys, good, kind):
    path = _bad_files(tmp_path)[kind]
    code = main(["roofline", "--probes", str(good), "--probes", str(path)])
    captured = capsys.readouterr()
    assert code == EXIT_BAD_INPUT
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("gpuscope: error: ")
    assert str(path) in lines[0]
    assert "Traceback" not in captured.err


def test_wrong_version_names_the_version(tmp_path, capsys):
    path = _bad_files(tmp_path)["wrong_version"]
    main(["roofline", "--probes", str(path)])
    assert "schema_version 99" in capsys.readouterr().err


def test_prints_chart_and_tables(capsys, good):
    code = main(["roofline", "--probes", str(good), "--width", "100", "--height", "24", "--no-color"])
    out = capsys.readouterr().out
    assert code == 0
    assert "\x1b" not in out
    assert "arithmetic intensity (FLOP/byte)" in out
    assert "Workloads" in out and "Roofs:" in out
    assert "cuda:0: gpu · NVIDIA H200 · datasheet: H200 SXM" in out
    table = out.split("Workloads", 1)[1]
    softmax_row = next(
        line for line in table.splitlines() if line.lstrip(" 0123456789").startswith("softmax")
    )  # after the # column
    assert "memory" in softmax_row and "%" in softmax_row
    matmul_row = next(line for line in table.splitlines() if line.lstrip(" 0123456789").startswith("matmul 8192 bf16"))
    assert "compute" in matmul_row
    assert max(len(line) for line in out.splitlines()) <= 100


def test_several_files_combine(capsys, good, other):
    code = main(["roofline", "--probes", str(good), str(other), "--width", "160", "--no-color"])
    out = capsys.readouterr().out
    assert code == 0
    assert "node-a:cuda:0" in out and "node-b:cpu" in out
    assert "stencil" in out and "matmul 8192 bf16" in out


def test_json_model(capsys, good, other):
    code = main(["roofline", "--probes", str(good), "--probes", str(other), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["schema"] == "gpuscope.roofline"
    assert len(data["points"]) == 4
    assert {device["label"] for device in data["devices"]} >= {"node-a:cuda:0", "node-b:cpu"}


def test_no_datasheet_flag(capsys, good):
    main(["roofline", "--probes", str(good), "--json", "--no-datasheet"])
    data = json.loads(capsys.readouterr().out)
    assert all(roof["source"] == "measured" for device in data["devices"] for roof in device["roofs"])


@pytest.mark.parametrize("argv", [["--width", "40"], ["--height", "5"]])
def test_too_small_is_a_usage_error(capsys, good, argv):
    code = main(["roofline", "--probes", str(good), *argv])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert len(err.strip().splitlines()) == 1


def test_probes_is_required(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["roofline"])
    assert exit_info.value.code == EXIT_USAGE
