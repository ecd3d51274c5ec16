"""Results consumers read the typed view (issue 13): the roofline model, measure's append, the
shared command helpers."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest
from support.reports import make_results

from gpuscope.commands.options import add_value, call_user
from gpuscope.errors import BadInputError, GpuscopeError, UsageError
from gpuscope.measuring.measure import append_workload
from gpuscope.results import parse_results, read_results, to_results
from gpuscope.roofline.loading import build_model, load_model
from gpuscope.schema.core import encode_json
from gpuscope.schema.results import Device, System, Workload

DATA = Path(__file__).parent / "data"


def _without_nulls(value: object) -> object:
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    return [_without_nulls(item) for item in value] if isinstance(value, list) else value


def test_a_file_the_dict_writers_wrote_still_reads_with_every_field_declared(tmp_path: Path) -> None:
    """tests/data/results-v1-dict-writers.json: a tiny CPU suite (GEMM, memory, collective) and a
    ``measure`` point written by gpuscope 0.1.0 before the writers built typed results: explicit
    nulls, integer counts, and fields the schema did not declare then (caches, bus_factor, ...)."""
    raw = (DATA / "results-v1-dict-writers.json").read_bytes()
    results, document = parse_results(raw, "old.json"), json.loads(raw)
    # every field is declared now: the typed view writes the same keys and values (nulls left out)
    assert _without_nulls(json.loads(encode_json(results))) == _without_nulls(document)
    device = results.devices[0]
    assert device.caches is not None and (device.caches[0].level, device.caches[0].size_bytes) == (1, 32768)
    assert [m.bus_factor for m in results.measurements if m.kind == "collective"] == [1.0]
    measured = results.workloads[-1]
    assert measured.flop_counting_rule == "torch.utils.flop_counter.FlopCounterMode" and measured.pointwise_rule is None
    path = tmp_path / "old.json"
    path.write_bytes(raw)
    append_workload(path, Workload(name="new", device="cpu", flops=1.0, bytes=1.0, time_s=1.0), device, System())
    again = json.loads(path.read_text())  # measure appends, and keeps everything as written
    assert again["ceilings"] == document["ceilings"] and again["workloads"][:-1] == document["workloads"]
    assert again["devices"] == document["devices"] and read_results(path).workloads[-1].name == "new"


def test_append_keeps_every_field_it_does_not_declare(tmp_path: Path) -> None:
    document = make_results()
    document["from_a_newer_gpuscope"] = {"nested": [1, {"x": "y"}]}
    document["workloads"][0]["extra_detail"] = "kept"
    path = tmp_path / "r.json"
    path.write_text(json.dumps(document))
    device = Device(**document["devices"][0])
    append_workload(path, Workload(name="new", device=device.device, flops=1e9, bytes=1e6, time_s=0.5), device,
                    System(hostname="x"))  # fmt: skip
    again = json.loads(path.read_text())
    assert again["from_a_newer_gpuscope"] == {"nested": [1, {"x": "y"}]}
    assert again["workloads"][0]["extra_detail"] == "kept"
    assert [w["name"] for w in again["workloads"]] == [*(w["name"] for w in document["workloads"]), "new"]
    assert len(again["devices"]) == len(document["devices"])  # the device was listed already
    assert read_results(path).workloads[-1].name == "new"


def test_append_creates_a_file_and_refuses_another_kind(tmp_path: Path) -> None:
    path = tmp_path / "new.json"
    entry, workload = Device(device="cpu", type="cpu", host="h"), Workload(name="w", flops=1.0, bytes=1.0, time_s=1.0)
    append_workload(path, workload, entry, System())
    typed = read_results(path)
    assert [d.device for d in typed.devices] == ["cpu"] and [w.name for w in typed.workloads] == ["w"]
    log = tmp_path / "log.json"
    log.write_text('{"schema": "gpuscope.report", "schema_version": 1}')
    with pytest.raises(BadInputError, match="report"):
        append_workload(log, workload, entry, System())


def test_the_model_reads_typed_and_dict_documents_alike(tmp_path: Path) -> None:
    document = make_results()
    path = tmp_path / "r.json"
    path.write_text(json.dumps(document))
    from_file = load_model([path], datasheet=False)
    from_dict = build_model([(str(path), to_results(document, str(path)))], datasheet=False)
    assert [(r.key, r.name, r.value) for d in from_file.devices for r in d.roofs] == [
        (r.key, r.name, r.value) for d in from_dict.devices for r in d.roofs
    ]
    assert [p.name for p in from_file.points] == [p.name for p in from_dict.points] != []


def test_a_dict_that_is_not_results_is_refused_in_one_line() -> None:
    with pytest.raises(BadInputError, match=r"^bad is a report file; .* reads a probe results file$"):
        to_results({"schema": "gpuscope.report", "schema_version": 1}, "bad")


def test_in_memory_nan_reads_as_the_file_would_hold_it() -> None:
    document = make_results()
    document["measurements"][0]["spread"] = math.nan
    assert to_results(document, "run").measurements[0].spread is None
    document["measurements"][0]["spread"] = "wide"
    with pytest.raises(BadInputError, match=r"run: .* `\$.measurements\[0\].spread`"):
        to_results(document, "run")


def test_terminal_controls_in_a_results_file_are_kept_in_the_model_and_escaped_on_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Text is made safe once, where it reaches the terminal (gpuscope.textsafe), not in the model."""
    from gpuscope.cli import main

    document = make_results()
    document["workloads"][0]["name"] = "evil\x1b[2J"
    document["ceilings"][0]["note"] = "bell\x07"
    model = build_model([("r.json", to_results(document, "r.json"))], datasheet=False)
    assert "evil\x1b[2J" in [p.name for p in model.points]
    path = tmp_path / "r\x1b.json"
    path.write_text(json.dumps(document))
    assert main(["roofline", "--probes", str(path), "--no-color", "--width", "100"]) == 0
    out = capsys.readouterr().out
    assert "evil\\x1b[2J" in out and "\x1b" not in out and "\x07" not in out


def test_call_user_names_the_function_and_passes_gpuscope_errors() -> None:
    def broken() -> None:
        raise ValueError("bad shape\nsecond line")

    with pytest.raises(GpuscopeError, match=r"^mod:fn raised ValueError: bad shape$"):
        call_user("mod:fn", broken)

    def refused() -> None:
        raise UsageError("--flops: no")

    with pytest.raises(UsageError, match="--flops: no"):
        call_user("mod:fn", refused)
    assert call_user("mod:fn", lambda: 3) == 3


def test_add_value_takes_its_type_from_the_default() -> None:
    parser = argparse.ArgumentParser()
    add_value(parser, "--wait", 0.5, "SECONDS", "seconds")
    add_value(parser, "--steps", 3, "N", "steps")
    args = parser.parse_args(["--wait", "2", "--steps", "7"])
    assert (args.wait, args.steps) == (2.0, 7) and isinstance(args.wait, float) and isinstance(args.steps, int)
    assert parser.parse_args([]).wait == 0.5
