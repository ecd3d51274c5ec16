"""Log writers and the reader: round trips, CSV flattening, truncation, bad input (with hypothesis)."""

from __future__ import annotations

import csv
import dataclasses
import errno
import json
import os
import types
import typing
from pathlib import Path
from typing import Any, Union

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.samples import make_gpu_sample, make_sample

from gpuscope.errors import BadInputError, GpuscopeError, UsageError
from gpuscope.telemetry import logfile
from gpuscope.telemetry.flatten import flatten_record
from gpuscope.telemetry.logfile import (
    TruncatedLogWarning,
    open_log_writer,
    read_log,
    read_log_dicts,
    sample_to_json_dict,
)
from gpuscope.telemetry.logframes import sniff_codec
from gpuscope.telemetry.records import SCHEMA_VERSION, GpuSample, HostSample, Sample
from gpuscope.telemetry.values import Reason, Unavailable


def write_log(path: Path, samples: list[Sample], fmt: str = "jsonl") -> None:
    with open_log_writer(path, fmt) as writer:
        for sample in samples:
            writer.write(sample)


# --- JSON lines ------------------------------------------------------------------------------------


def test_jsonl_lines_are_complete_objects_with_version_and_timestamp_first(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    samples = [make_sample(tick) for tick in range(3)]
    write_log(path, samples)
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    for tick, line in enumerate(lines):
        data = json.loads(line)
        assert list(data)[:2] == ["schema_version", "timestamp"]
        assert data["schema_version"] == SCHEMA_VERSION
        assert data["timestamp"] == 1_700_000_000.0 + tick
    assert list(read_log(path)) == samples


def test_unavailable_fields_are_null_with_a_reason(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    write_log(path, [make_sample(0, gpus=0)])
    data = json.loads(path.read_text())
    assert data["host"]["cpu_utilization_percent"] is None
    assert data["host"]["unavailable"]["cpu_utilization_percent"].startswith("warming_up")
    assert data["driver_version"] is None and data["unavailable"]["driver_version"].startswith("no_driver")
    back = next(read_log(path))
    assert back.gpu_unavailable == Unavailable(Reason.NO_DRIVER, "libnvidia-ml.so.1 not found")


def test_non_finite_floats_never_make_invalid_json(tmp_path: Path) -> None:
    sample = make_sample(1)
    sample.gpus[0].power_w = float("nan")
    path = tmp_path / "nan.jsonl"
    write_log(path, [sample])
    data = json.loads(path.read_text())  # strict JSON parse of the line
    assert data["gpus"][0]["power_w"] is None


def test_read_log_dicts_yields_plain_dicts(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    write_log(path, [make_sample(0), make_sample(1)])
    dicts = list(read_log_dicts(path))
    assert [d["timestamp"] for d in dicts] == [1_700_000_000.0, 1_700_000_001.0]
    assert dicts[1]["gpus"][0]["power_w"] == 550.5


# --- CSV -------------------------------------------------------------------------------------------


def _expected_columns(prefix: str, record: Any) -> list[str]:
    """Flattened names derived from the dataclass fields, independently of the writer."""
    out: list[str] = []
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        name = prefix + f.name
        if dataclasses.is_dataclass(value) and not isinstance(value, Unavailable):
            out += _expected_columns(name + ".", value)
        elif f.name != "processes" and isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
            for index, item in enumerate(value):
                out += _expected_columns(f"{name}.{index}.", item)
        else:
            out.append(name)
    return out


def test_csv_header_is_the_flattened_record_fields(tmp_path: Path) -> None:
    path = tmp_path / "run.csv"
    sample = make_sample(1, gpus=2, cores=3)
    write_log(path, [sample, make_sample(2, gpus=2, cores=3)], fmt="csv")
    rows = list(csv.reader(path.read_text().splitlines()))
    header = rows[0]
    assert header[:2] == ["schema_version", "timestamp"]
    assert header[-1] == "unavailable"
    assert sorted(header[:-1]) == sorted(_expected_columns("", sample))
    for column in (
        "host.cores.0.utilization_percent",
        "host.cores.2.frequency_mhz",
        "gpus.0.power_w",
        "gpus.1.nvlink_links.1.rx_bytes_per_s",
        "host.infiniband_ports.0.rx_bytes_per_s",
        "gpus.0.processes",
    ):
        assert column in header
    assert all(len(row) == len(header) for row in rows[1:])
    first = dict(zip(header, rows[1]))
    assert first["gpus.0.power_w"] == "550.5"
    assert first["gpus.0.temperature_memory_c"] == ""  # unavailable: empty cell ...
    assert (
        json.loads(first["unavailable"])["gpus.0.temperature_memory_c"] == "not_supported: no memory sensor"
    )  # ... and why
    assert first["host.nics.0.is_loopback"] == "true"
    assert json.loads(first["gpus.0.processes"])[0]["pid"] == 1234


def test_csv_reads_back_to_the_same_samples(tmp_path: Path) -> None:
    path = tmp_path / "run.csv"
    samples = [make_sample(tick, gpus=2) for tick in range(3)]
    write_log(path, samples, fmt="csv")
    assert list(read_log(path)) == samples


def test_csv_keeps_the_first_header_when_devices_come_and_go(tmp_path: Path) -> None:
    path = tmp_path / "run.csv"
    first = make_sample(1, gpus=2)
    fewer = make_sample(2, gpus=1)
    more = make_sample(3, gpus=3)
    warnings_seen: list[str] = []
    with open_log_writer(path, "csv", on_warning=warnings_seen.append) as writer:
        for sample in (first, fewer, more):
            writer.write(sample)
    assert len(warnings_seen) == 1 and "use --format jsonl" in warnings_seen[0]
    back = list(read_log(path))
    assert back[0] == first
    assert back[1] == fewer  # the missing GPU's empty columns are dropped again
    assert len(back[2].gpus) == 2  # the third GPU had no columns


# --- reader errors ---------------------------------------------------------------------------------


def test_empty_and_missing_files_are_one_line_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(BadInputError, match=r"empty\.jsonl: empty telemetry log"):
        list(read_log(empty))
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n\n")
    with pytest.raises(BadInputError, match="empty telemetry log"):
        list(read_log(blank))
    with pytest.raises(BadInputError, match="cannot read"):
        list(read_log(tmp_path / "absent.jsonl"))


def test_garbage_line_names_its_line_number(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    write_log(path, [make_sample(0), make_sample(1)])
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + "this is not json\n" + lines[1])
    with pytest.raises(BadInputError, match=r"run\.jsonl:2: not a JSON object"):
        list(read_log(path))


def test_wrong_schema_version_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "future.jsonl"
    data = sample_to_json_dict(make_sample(0))
    data["schema_version"] = SCHEMA_VERSION + 1
    path.write_text(json.dumps(data) + "\n")
    with pytest.raises(BadInputError, match=rf"future\.jsonl:1: schema_version {SCHEMA_VERSION + 1} is not supported"):
        list(read_log(path))
    del data["schema_version"]
    path.write_text(json.dumps(data) + "\n")
    with pytest.raises(BadInputError, match="no schema_version"):
        list(read_log(path))


def test_not_a_log_at_all(tmp_path: Path) -> None:
    path = tmp_path / "photo.jpg"
    path.write_bytes(b"\xff\xd8\xff\xe0garbage")
    with pytest.raises(BadInputError, match=r"photo\.jpg:1: not a gpuscope telemetry log"):
        list(read_log(path))


def test_csv_row_with_wrong_cell_count(tmp_path: Path) -> None:
    path = tmp_path / "run.csv"
    write_log(path, [make_sample(0), make_sample(1)], fmt="csv")
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + "1,2,3\n" + lines[2])
    with pytest.raises(BadInputError, match=r"run\.csv:2: 3 cells"):
        list(read_log(path))


def test_incomplete_last_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    for fmt in ("jsonl", "csv"):
        path = tmp_path / f"killed.{fmt}"
        samples = [make_sample(tick) for tick in range(3)]
        write_log(path, samples, fmt=fmt)
        text = path.read_bytes()
        path.write_bytes(text[: len(text) - 40])  # SIGKILL in the middle of the last line
        with pytest.warns(TruncatedLogWarning, match=r"killed\.\w+:\d+: incomplete last line skipped"):
            assert list(read_log(path)) == samples[:2]


# --- writer failures -------------------------------------------------------------------------------


def test_unwritable_output_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot write output"):
        open_log_writer(tmp_path / "no" / "such" / "dir" / "x.jsonl")
    with pytest.raises(UsageError, match="cannot write output"):
        open_log_writer(tmp_path)  # a directory
    with pytest.raises(UsageError, match="unknown log format"):
        open_log_writer(tmp_path / "x.xml", "xml")


def test_disk_full_keeps_the_records_before_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "full.jsonl"
    writer = open_log_writer(path, "jsonl")
    writer.write(make_sample(0))
    writer.write(make_sample(1))
    real_write = os.write
    calls = {"n": 0}

    def filling_write(fd: int, data: Any) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(data[:100]))  # a partial write, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(logfile.os, "write", filling_write)
    with pytest.raises(GpuscopeError, match=r"No space left on device after 2 records; the records written are intact"):
        writer.write(make_sample(2))
    monkeypatch.undo()
    writer.close()
    assert list(read_log(path)) == [make_sample(0), make_sample(1)]  # the partial line was cut back


# --- properties ------------------------------------------------------------------------------------

_unavailable = st.builds(Unavailable, st.sampled_from(list(Reason)), st.text(max_size=20))
_csv_text = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12)


def _strategy(annotation: Any, text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:  # a number with its quantity's range: generate within it
        base, *extras = typing.get_args(annotation)
        bounds = {
            key: getattr(meta, key) for meta in extras for key in ("ge", "le") if getattr(meta, key, None) is not None
        }
        if base is float:
            low, high = bounds.get("ge"), bounds.get("le")
            return st.floats(min_value=low, max_value=high, allow_nan=False, allow_infinity=False)
        if base is int:
            return st.integers(min_value=bounds.get("ge", -(2**62)), max_value=bounds.get("le", 2**62))
        return _strategy(base, text)
    if origin in (Union, types.UnionType):
        return st.one_of(
            *[
                _unavailable if a is Unavailable else st.none() if a is type(None) else _strategy(a, text)
                for a in typing.get_args(annotation)
            ]
        )
    if origin is list:
        return st.lists(_strategy(typing.get_args(annotation)[0], text), max_size=2)
    if dataclasses.is_dataclass(annotation):
        hints = typing.get_type_hints(annotation, include_extras=True)
        fields = {
            f.name: _strategy(hints[f.name], text) for f in dataclasses.fields(annotation) if f.name != "schema_version"
        }
        return st.builds(annotation, **fields)
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return st.integers(min_value=-(2**62), max_value=2**62)
    if annotation is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if annotation is str:
        return text
    raise AssertionError(f"no strategy for {annotation!r}")


samples = _strategy(Sample, st.text(max_size=12))
csv_samples = _strategy(Sample, _csv_text)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(records=st.lists(samples, min_size=1, max_size=3))
def test_jsonl_round_trip_property(tmp_path: Path, records: list[Sample]) -> None:
    path = tmp_path / "prop.jsonl"
    write_log(path, records)
    assert list(read_log(path)) == records


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(record=csv_samples)
def test_csv_round_trip_property(tmp_path: Path, record: Sample) -> None:
    path = tmp_path / "prop.csv"
    write_log(path, [record], fmt="csv")
    assert list(read_log(path)) == [record]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(count=st.integers(1, 4), fmt=st.sampled_from(["jsonl", "csv"]), cut=st.floats(0.0, 1.0))
def test_any_truncation_reads_a_prefix_and_warns_only_when_a_line_is_cut(
    tmp_path: Path, count: int, fmt: str, cut: float
) -> None:
    path = tmp_path / f"cut.{fmt}"
    records = [make_sample(tick, gpus=1, cores=2) for tick in range(count)]
    write_log(path, records, fmt=fmt)
    data = path.read_bytes()
    keep = int(len(data) * cut)
    path.write_bytes(data[:keep])
    body = data[:keep]
    header_lines = 1 if fmt == "csv" else 0
    cut_mid_line = keep > 0 and not body.endswith(b"\n")
    full_lines = body.count(b"\n")
    if cut_mid_line and data[keep : keep + 1] == b"\n":
        full_lines += 1  # cut exactly before the newline: the line itself is complete
        cut_mid_line = False
    expected = max(0, full_lines - header_lines)
    warned: list[str] = []
    if expected == 0:
        with pytest.raises(BadInputError, match="empty telemetry log"):
            list(read_log(path, on_warning=warned.append))
    else:
        assert list(read_log(path, on_warning=warned.append)) == records[:expected]
    assert bool(warned) == cut_mid_line
    for message in warned:
        assert "incomplete last line skipped" in message


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    garbage=st.binary(min_size=1, max_size=40).filter(lambda b: b"\n" not in b and b.strip()),
    position=st.integers(0, 2),
)
@example(garbage=b"(\xb5/\xfd", position=0)  # zstd's magic first: read as a compressed log
def test_garbage_in_the_middle_is_a_bad_input_error_with_its_line(
    tmp_path: Path, garbage: bytes, position: int
) -> None:
    path = tmp_path / "garbage.jsonl"
    write_log(path, [make_sample(tick, gpus=0, cores=1) for tick in range(3)])
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(position, garbage + b"\n")
    path.write_bytes(b"".join(lines))
    try:
        list(read_log(path))
    except BadInputError as exc:
        message = str(exc)
        assert "\n" not in message
        if position == 0 and sniff_codec(garbage) is not None:  # a compressed file's magic: the file, not a line
            assert message.startswith(f"{path}:")
        else:
            assert message.startswith(f"{path}:{position + 1}:")
    else:  # the bytes happened to be a valid record: impossible for a schema'd object this short
        raise AssertionError(f"{garbage!r} was accepted")


def test_host_sample_fields_all_reach_the_csv_header() -> None:
    sample = make_sample(1, gpus=1)
    values, _ = flatten_record(sample_to_json_dict(sample))
    for f in dataclasses.fields(HostSample):
        assert any(column == f"host.{f.name}" or column.startswith(f"host.{f.name}.") for column in values), f.name
    for f in dataclasses.fields(GpuSample):
        assert any(column == f"gpus.0.{f.name}" or column.startswith(f"gpus.0.{f.name}.") for column in values), f.name
    assert make_gpu_sample(0).name in {str(v) for v in values.values()}
