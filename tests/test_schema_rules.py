"""The one rule set (issue 13; issue 16 class 1): valid JSON with wrong types inside is one line naming
the file and the JSON path, exit 3, for report, compare and roofline --json; a file of another kind
says what it is."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.reports import make_log_samples, make_results, write_log

from gpuscope.cli import main
from gpuscope.errors import BadInputError
from gpuscope.results import read_results
from gpuscope.schema.core import convert, encode_json, finite_or_none
from gpuscope.schema.results import Results, RunSummary


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        target = doc
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return change


CASES = [
    ("host-true", _set(("system", "hostname"), True), "got `bool` - at `$.system.hostname`"),
    ("host-list", _set(("system", "hostname"), ["a"]), "got `array` - at `$.system.hostname`"),
    ("device-entry-list", _set(("devices", 0), ["cuda:0"]), "got `array` - at `$.devices[0]`"),
    ("measurement-id-list", _set(("measurements", 0, "id"), ["m1"]), "got `array` - at `$.measurements[0].id`"),
    ("samples-bool", _set(("measurements", 0, "samples_s"), True), "got `bool` - at `$.measurements[0].samples_s`"),
    ("median-1e308", _set(("workloads", 0, "time_s"), 1e308), "at `$.workloads[0].time_s`"),
    ("denormal-time", _set(("workloads", 0, "time_s"), 5e-324), "field `time_s` must be 0 or at least"),
    ("ceiling-bool", _set(("ceilings", 0, "value"), False), "got `bool` - at `$.ceilings[0].value`"),
    ("rank-string", _set(("ceilings", 0, "rank"), "0"), "at `$.ceilings[0].rank`"),
    (
        "nested-500",
        _set(("measurements", 0, "parameters"), json.loads("[" * 500 + "]" * 500)),
        "at `$.measurements[0].parameters",
    ),
    ("undeclared-nested-500", _set(("extra",), json.loads("[" * 500 + "]" * 500)), "nested too deeply"),
]


@pytest.fixture()
def good(tmp_path: Path) -> Path:
    path = tmp_path / "good.json"
    path.write_text(json.dumps(make_results()))
    return path


@pytest.mark.parametrize("change, fragment", [pytest.param(c, f, id=i) for i, c, f in CASES])
@pytest.mark.parametrize("command", ["report", "compare", "roofline"])
def test_wrong_types_inside_are_one_line_exit_3(
    tmp_path: Path, good: Path, capsys: pytest.CaptureFixture[str], command: str, change: Any, fragment: str
) -> None:
    document = make_results()
    change(document)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(document))
    argv = {
        "report": ["report", "--probes", str(bad), "-o", str(tmp_path / "out.html")],
        "compare": ["compare", str(good), str(bad)],
        "roofline": ["roofline", "--probes", str(bad), "--json"],
    }[command]
    if command == "roofline" and fragment == "nested too deeply":  # typed only: the undeclared field is skipped
        assert main(argv) == 0
        return
    assert main(argv) == 3
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(bad) in err and fragment in err, err


def test_overflowing_literal_is_refused(tmp_path: Path) -> None:
    text = json.dumps(make_results()).replace('"value": 60000000000000.0', '"value": 1e400', 1)
    assert "1e400" in text
    path = tmp_path / "overflow.json"
    path.write_text(text)
    with pytest.raises(BadInputError, match=r"number out of range - at `\$.ceilings\[\d+\].value`"):
        read_results(path)


def test_typed_and_plain_json_views_agree(good: Path) -> None:
    typed, data = read_results(good), json.loads(good.read_bytes())
    assert [c.name for c in typed.ceilings] == [c["name"] for c in data["ceilings"]]
    assert typed.system.hostname == data["system"]["hostname"] == "node-a"
    assert convert(data, Results, "x") == typed


@pytest.mark.parametrize(
    "argv, message",
    [
        (["replay", "{results}"], "{results} is a probe results file; replay reads a `gpuscope log` telemetry log"),
        (
            ["roofline", "--probes", "{log}"],
            "{log} is a `gpuscope log` telemetry log; roofline reads a probe results file",
        ),
        (
            ["compare", "{results}", "{log}"],
            "{log} is a `gpuscope log` telemetry log; compare reads a probe results or report file",
        ),
        (
            ["report", "--probes", "{log}", "-o", "{out}"],
            "{log} is a `gpuscope log` telemetry log; report reads a probe results or report file",
        ),
    ],
    ids=["replay-results", "roofline-log", "compare-log", "report-log"],
)
def test_a_file_of_another_kind_says_what_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    names = {"results": str(tmp_path / "cpu.json"), "log": str(tmp_path / "run.jsonl"), "out": str(tmp_path / "r.html")}
    Path(names["results"]).write_text(json.dumps(make_results(), indent=2))
    write_log(Path(names["log"]), make_log_samples(count=3))
    assert main([part.format(**names) for part in argv]) == 3
    assert capsys.readouterr().err.strip() == "gpuscope: error: " + message.format(**names)


def test_compare_names_a_report_input_as_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "cpu.json"
    results.write_text(json.dumps(make_results()))
    assert main(["report", "--probes", str(results), "-o", str(tmp_path / "report.json")]) == 0
    capsys.readouterr()
    assert main(["compare", str(results), str(tmp_path / "report.json")]) == 0
    header = [line for line in capsys.readouterr().out.splitlines() if line.startswith("device")][0]
    assert "cpu.json" in header and "report.json[cpu.json]" in header


def test_report_refuses_to_replace_a_results_file_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results, other = tmp_path / "cpu.json", tmp_path / "other.json"
    results.write_text(json.dumps(make_results()))
    other.write_text(json.dumps(make_results(hostname="node-b")))
    before = other.read_bytes()
    assert main(["report", "--probes", str(results), "-o", str(other)]) == 2
    assert (
        "already exists (a probe results file with 10 ceiling(s) and 3 workload(s)); use --force"
        in capsys.readouterr().err
    )
    assert other.read_bytes() == before
    assert main(["report", "--probes", str(results), "-o", str(other), "--force"]) == 0
    assert json.loads(other.read_text())["schema"] == "gpuscope.report"


def test_one_finite_rule_for_writing_and_reading() -> None:
    assert encode_json({"a": [float("nan"), float("inf"), 1.5]}) == b'{"a":[null,null,1.5]}'
    assert [finite_or_none(v) for v in (1, 2.5, True, float("nan"), float("inf"), "3", None, 10**400)] == [
        1.0,
        2.5,
        None,
        None,
        None,
        None,
        None,
        None,
    ]
    document = copy.deepcopy(make_results())
    document["ceilings"][0]["value"] = float("nan")
    with pytest.raises(BadInputError, match=r"at `\$.ceilings\[0\].value`"):
        convert(document, Results, "in memory")


def test_probe_refuses_to_replace_another_runs_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 13: `probe --output existing.json` used to replace a file of 28 ceilings silently."""
    existing = tmp_path / "cpu.json"
    existing.write_text(json.dumps(make_results()))
    before = existing.read_bytes()
    assert main(["probe", "--suite", "quick", "-o", str(existing), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"gpuscope: error: {existing} already exists (a probe results file with 10 ceiling(s) and 3 workload(s)); "
        "use --force to replace it, or -o another path"
    )
    assert existing.read_bytes() == before
    other = tmp_path / "notes.txt"
    other.write_text("my notes")
    assert main(["probe", "--suite", "quick", "-o", str(other), "-q"]) == 2
    assert "a file that is not a gpuscope file" in capsys.readouterr().err


def test_a_partial_results_snapshot_has_summary_and_duration() -> None:
    from gpuscope.probing.runner import ProbeRunner
    from gpuscope.probing.suite import parse_suite

    suite = parse_suite(
        '[[probe]]\nkind = "matmul"\ndevices = ["cpu"]\ndtypes = ["fp32"]\nshapes = [[8, 8, 8]]\n', "s.toml"
    )
    partial = ProbeRunner(suite, "cpu", telemetry=False).partial_results()
    assert partial.partial is True and partial.summary == RunSummary(ok=0, failed=0, skipped=0)
    assert partial.duration_s == 0.0
    written = json.loads(encode_json(partial))  # what probe --output holds after an early Ctrl-C
    assert written["summary"] == {"ok": 0, "failed": 0, "skipped": 0} and written["partial"] is True
