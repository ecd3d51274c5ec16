"""``gpuscope profile module:function`` end to end on the CPU (small shapes), and its bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from results_files import results_json

from gpuscope.cli import main

SMALL = json.dumps({"kwargs": {"d_model": 32, "heads": 2, "seq": 8, "batch": 2, "device": "cpu"}})
TARGET = "gpuscope.profiling.examples:transformer_train_step"


def test_profile_prints_table_and_chart_and_appends(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "results.json"
    code = main(
        [
            "profile",
            TARGET,
            "--args-json",
            SMALL,
            "--device",
            "cpu",
            "--steps",
            "1",
            "--warmup",
            "0",
            "--output",
            str(output),
            "--name",
            "tiny layer",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    lines = captured.out.splitlines()
    assert lines[0].startswith("tiny layer on cpu")
    assert any(line.startswith(" #  op dtype shapes") for line in lines)
    assert any("energy" in line for line in lines)
    assert any(line.startswith("  coverage  ") and "% of op time" in line for line in lines)  # issue 27.2
    assert any(line.startswith("  verdict   ") for line in lines)
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    document = results_json(output)
    (workload,) = document["workloads"]
    assert 0 < workload["profile"]["coverage"] <= 1
    assert workload["name"] == "tiny layer" and workload["source"] == "profile"
    assert workload["profile"]["groups"] and workload["profile"]["modules"]
    assert workload["flops"] == workload["profile"]["flop_counter_flops"] + workload["profile"]["pointwise_flops"]
    # A second run appends to the same file and uses nothing else from it.
    assert (
        main(
            [
                "profile",
                TARGET,
                "--args-json",
                SMALL,
                "--device",
                "cpu",
                "--steps",
                "1",
                "--warmup",
                "0",
                "--output",
                str(output),
                "--json",
            ]
        )
        == 0
    )
    printed = json.loads(capsys.readouterr().out)
    assert printed["source"] == "profile"
    assert len(results_json(output)["workloads"]) == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["profile", TARGET, "--steps", "0"], "--steps 0"),
        (["profile", "no_such_module_xyz:step"], "cannot import"),
        (["profile", TARGET, "--roofs", "/no/such/file.json"], "no such file"),
        (["profile", TARGET, "--args-json", "[1,"], "not valid JSON"),
    ],
)
def test_bad_input_is_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert code != 0
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
