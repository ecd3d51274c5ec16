"""The probe session (no Textual): typed events in, progress, rows and the results document out."""

from __future__ import annotations

import json
from pathlib import Path

from support.reports import make_results

from gpuscope.probing.session import ProbeSession
from gpuscope.schema.events import (
    Exited,
    Failed,
    Finished,
    Log,
    MeasurementDone,
    Progress,
    Started,
    decode_event,
    encode_event,
)
from gpuscope.schema.results import Ceiling, Measurement

FP32 = Ceiling(device="cpu", kind="compute", name="fp32", value=1e11, unit="FLOP/s")


def _session(tmp_path: Path) -> ProbeSession:
    return ProbeSession("quick.toml", "cpu", tmp_path / "out.json", started_s=100.0)


def test_events_round_trip_as_json_lines_and_unknown_lines_are_logs() -> None:
    for event in (
        Started(total=3, suite="quick", device="cpu"),
        Progress(done=1, total=3, name="matmul fp32", phase="start"),
        MeasurementDone(measurement=Measurement(id="m1", time_s=0.5), ceilings=[FP32]),
        Finished(output="/tmp/r.json", partial=True),
        Failed(message="no such suite"),
    ):
        line = encode_event(event)
        assert line.endswith(b"\n") and line.count(b"\n") == 1 and b"wall_s" not in line
        assert decode_event(line, wall_s=7.0) == type(event)(
            **{**{f: getattr(event, f) for f in event.__struct_fields__}, "wall_s": 7.0}
        )
    assert decode_event("loading torch...") == Log(line="loading torch...")
    assert decode_event('{"event": "progress", "done": "x", "total": 3}') == Log(
        line='{"event": "progress", "done": "x", "total": 3}'
    )
    assert decode_event('{"event": "launch-missiles"}') == Log(line='{"event": "launch-missiles"}')
    bad = '{"event": "measurement", "measurement": {"id": "m1"}, "ceilings": [{"name": "fp32"}]}'
    assert decode_event(bad) == Log(line=bad)  # a ceiling without device, kind, value, unit


def test_non_finite_numbers_in_a_measurement_become_null_on_the_wire() -> None:
    line = encode_event(MeasurementDone(measurement=Measurement(validation_error=float("nan"), time_s=float("inf"))))
    assert json.loads(line)["measurement"] == {"validation_error": None, "time_s": None}


def test_progress_and_measurements_build_a_partial_document(tmp_path: Path) -> None:
    session = _session(tmp_path)
    session.apply(Started(total=2, suite="quick", device="cpu"))
    assert (session.total, session.done) == (2, 0) and "Running quick on cpu: 2 measurements" in session.status
    session.apply(Progress(done=0, total=2, name="matmul fp32", phase="start", wall_s=101.0))
    first = Measurement(id="m1", name="matmul fp32", status="ok")
    row = session.apply(MeasurementDone(measurement=first, ceilings=[FP32], wall_s=103.0))
    assert row is not None and (row.name, row.device, row.start_s, row.end_s) == ("matmul fp32", "cpu", 101.0, 103.0)
    results = session.results
    assert results is not None and results.partial is True and results.partial_reason == "in progress"
    assert results.measurements == [first] and results.ceilings == [FP32] and session.written is None
    assert results.suite is not None and (results.suite.name, results.suite.path) == ("quick", "quick.toml")
    second = session.apply(
        MeasurementDone(measurement=Measurement(id="m2", device="cuda:0", status="failed"), wall_s=104.0)
    )
    assert second is not None and (second.start_s, second.device, second.status, second.name) == (
        103.0,
        "cuda:0",
        "failed",
        "m2",
    )
    assert session.results is not None and [m.id for m in session.results.measurements] == ["m1", "m2"]


def test_finished_reads_the_file_back_and_a_bad_file_is_an_error(tmp_path: Path) -> None:
    session = _session(tmp_path)
    path = tmp_path / "out.json"
    path.write_text(json.dumps(make_results()))
    session.apply(Finished(output=str(path)))
    assert session.finished and session.status.startswith("Done: ")
    assert session.results is not None and session.written == path.read_bytes()
    broken = _session(tmp_path)
    path.write_text('{"schema": "gpuscope.results", "schema_version": 1, "ceilings": [{"device": true}]}')
    broken.apply(Finished(output=str(path)))
    assert not broken.finished and broken.error is not None and "`$.ceilings[0].device`" in broken.error


def test_failure_and_exit_codes_end_in_a_status_line(tmp_path: Path) -> None:
    session = _session(tmp_path)
    session.apply(Failed(message="suite.toml: no such file"))
    assert session.status == "Failed: suite.toml: no such file"
    session.apply(Exited(returncode=3, stderr="x\nlast words\n"))
    assert session.exited and session.status == "Failed: suite.toml: no such file"  # the failure stays shown
    crashed = _session(tmp_path)
    crashed.apply(Exited(returncode=-9, stderr="x\nKilled\n"))
    assert crashed.status == "The probe process exited with code -9. Killed"
