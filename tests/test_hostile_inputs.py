"""Hostile input, file by file: every reader gpuscope has (results JSON, telemetry logs, report
JSON, suites, themes, configuration) given truncated, empty, binary, huge, wrong-typed,
wrong-version and deeply nested content answers with one line naming the file and the field or
line, and nothing else escapes. Hypothesis drives the log reader and the results loader with
random bytes, random JSON and mutated valid documents.

The command-line side (exit codes, no traceback, outputs left alone) is tests/test_hostile_cli.py.
"""

from __future__ import annotations

import copy
import json
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from support.roofline import cpu_results, h200_results
from support.samples import make_sample

from gpuscope.errors import BadInputError
from gpuscope.fileio import LIMITS_BYTES
from gpuscope.results import read_results
from gpuscope.schema.results import Results
from gpuscope.telemetry import logfile
from gpuscope.telemetry.logfile import open_log_writer, read_log, read_log_dicts
from gpuscope.telemetry.records import GpuSample, HostSample, Sample
from gpuscope.telemetry.values import Unavailable

DEEP = 100_000  # nesting depth of the "deeply nested" inputs

# --- helpers -------------------------------------------------------------------------------------


def one_line(message: str, *fragments: str) -> None:
    assert "\n" not in message, message
    assert "Traceback" not in message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def valid_results_text() -> str:
    return json.dumps(h200_results())


def results_with(**changes: Any) -> bytes:
    doc = h200_results()
    for dotted, value in changes.items():
        target: Any = doc
        parts = dotted.split("__")
        for part in parts[:-1]:
            target = target[int(part)] if part.isdigit() else target[part]
        last = parts[-1]
        if value is _DELETE:
            del target[last]
        elif last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value
    return json.dumps(doc).encode()


_DELETE = object()


def write_samples(path: Path, samples: list[Sample], fmt: str = "jsonl") -> None:
    with open_log_writer(path, fmt) as writer:
        for sample in samples:
            writer.write(sample)


def good_log_lines(count: int = 3) -> list[str]:
    return [
        json.dumps(logfile.sample_to_json_dict(make_sample(tick, gpus=1, cores=2)), separators=(",", ":"))
        for tick in range(count)
    ]


def record_with(path_and_value: tuple[str, Any]) -> str:
    """A valid JSON log line with one field (dotted path, list items by position) replaced."""
    data = logfile.sample_to_json_dict(make_sample(1, gpus=1, cores=2))
    dotted, value = path_and_value
    target: Any = data
    parts = dotted.split(".")
    for part in parts[:-1]:
        target = target[int(part)] if part.isdigit() else target[part]
    if value is _DELETE:
        del target[parts[-1]]
    else:
        target[int(parts[-1]) if parts[-1].isdigit() else parts[-1]] = value
    return json.dumps(data)


# --- results files ---------------------------------------------------------------------------------

RESULTS_CORPUS: list[tuple[str, bytes, str]] = [
    ("empty", b"", "file is empty"),
    ("blank", b" \n\t\n", "file is empty"),
    ("truncated", valid_results_text()[:200].encode(), "invalid JSON"),
    ("truncated-at-1", b"{", "invalid JSON"),
    ("binary", bytes(range(256)) * 8, "not UTF-8"),
    ("utf16", valid_results_text().encode("utf-16"), "not UTF-8"),
    ("bom", b"\xef\xbb\xbf" + valid_results_text().encode(), "invalid JSON"),
    ("nul-bytes", b"\x00" * 4096, "invalid JSON"),
    ("deep-list", b"[" * DEEP + b"]" * DEEP, "expected `object`, got `array`"),
    ("deep-object", b'{"a":' * DEEP + b"1" + b"}" * DEEP, "nested too deeply"),
    (
        "deep-in-system",
        b'{"schema":"gpuscope.results","schema_version":1,"system":' + b"[" * DEEP + b"]" * DEEP + b"}",
        "got `array` - at `$.system`",
    ),
    ("top-level-list", b"[1, 2, 3]", "top level is list"),
    ("top-level-string", b'"gpuscope.results"', "top level is str"),
    ("top-level-null", b"null", "top level is NoneType"),
    ("no-schema", b'{"schema_version": 1}', "field 'schema'"),
    (
        "other-schema",
        b'{"schema": "gpuscope.report", "schema_version": 1}',
        "is a report file; this command reads a probe results file",
    ),
    ("version-2", results_with(schema_version=2), "schema_version 2 is not supported"),
    ("version-0", results_with(schema_version=0), "schema_version 0 is not supported"),
    ("version-string", results_with(schema_version="1"), "schema_version '1' is not supported"),
    ("version-true", results_with(schema_version=True), "schema_version True is not supported"),
    ("version-missing", results_with(schema_version=_DELETE), "schema_version None"),
    ("devices-string", results_with(devices="cuda:0"), "`$.devices`"),
    ("ceilings-object", results_with(ceilings={}), "`$.ceilings`"),
    ("workloads-null", results_with(workloads=None), "`$.workloads`"),
    ("ceiling-not-object", results_with(ceilings__0=5), "`$.ceilings[0]`"),
    ("ceiling-value-string", results_with(ceilings__0__value="790e12"), "`$.ceilings[0].value`"),
    ("ceiling-value-negative", results_with(ceilings__0__value=-1.0), "`$.ceilings[0].value`"),
    ("ceiling-value-zero", results_with(ceilings__0__value=0), "`$.ceilings[0].value`"),
    ("ceiling-value-huge", results_with(ceilings__0__value=1e308), "`$.ceilings[0].value`"),
    ("ceiling-value-denormal", results_with(ceilings__0__value=1e-320), "`$.ceilings[0].value`"),
    ("ceiling-value-bool", results_with(ceilings__0__value=True), "`$.ceilings[0].value`"),
    (
        "ceiling-value-inf-literal",
        valid_results_text().replace("790000000000000.0", "Infinity").encode(),
        "invalid JSON",
    ),
    ("ceiling-value-nan-literal", valid_results_text().replace("790000000000000.0", "NaN").encode(), "invalid JSON"),
    (
        "ceiling-value-1e400",
        valid_results_text().replace("790000000000000.0", "1e400").encode(),
        "`$.ceilings[0].value`",
    ),
    ("ceiling-kind-unknown", results_with(ceilings__0__kind="magic"), "`$.ceilings[0].kind`"),
    ("ceiling-unit-unknown", results_with(ceilings__0__unit="furlongs"), "`$.ceilings[0].unit`"),
    ("ceiling-device-empty", results_with(ceilings__0__device=""), "`$.ceilings[0].device`"),
    ("ceiling-device-number", results_with(ceilings__0__device=0), "`$.ceilings[0].device`"),
    ("ceiling-name-missing", results_with(ceilings__0__name=_DELETE), "field `name` - at `$.ceilings[0]`"),
    ("workload-name-list", results_with(workloads__0__name=["x"]), "`$.workloads[0].name`"),
    ("workload-flops-negative", results_with(workloads__0__flops=-5), "`$.workloads[0].flops`"),
    ("workload-time-string", results_with(workloads__0__time_s="1 s"), "`$.workloads[0].time_s`"),
    ("workload-time-tiny", results_with(workloads__0__time_s=1e-300), "field `time_s` must be 0 or at least"),
    ("workload-bytes-huge", results_with(workloads__0__bytes=1e300), "`$.workloads[0].bytes`"),
    ("system-list", results_with(system=[]), "`$.system`"),
]


@pytest.mark.parametrize("content, fragment", [pytest.param(c, f, id=i) for i, c, f in RESULTS_CORPUS])
def test_bad_results_file_is_one_line_naming_file_and_field(tmp_path: Path, content: bytes, fragment: str) -> None:
    path = tmp_path / "results.json"
    path.write_bytes(content)
    with pytest.raises(BadInputError) as caught:
        read_results(path)
    one_line(str(caught.value), str(path), fragment)
    assert caught.value.exit_code == 3


def test_results_paths_that_are_not_files(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="no such file"):
        read_results(tmp_path / "absent.json")
    with pytest.raises(BadInputError, match="is a directory"):
        read_results(tmp_path)
    import os

    unreadable = tmp_path / "secret.json"
    unreadable.write_text(valid_results_text())
    unreadable.chmod(0)
    if os.geteuid() != 0:  # root reads anything
        with pytest.raises(BadInputError, match="permission denied"):
            read_results(unreadable)


def test_huge_results_file_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with open(path, "wb") as handle:  # sparse: instant, takes no disk
        handle.truncate(LIMITS_BYTES["results"] + 1)
    with pytest.raises(BadInputError) as caught:
        read_results(path)
    one_line(str(caught.value), str(path), "too large")


def test_extreme_but_valid_numbers_load_and_chart(tmp_path: Path) -> None:
    """The edges of the accepted range still give a finite model and a chart."""
    from gpuscope.roofline.loading import load_model
    from gpuscope.roofline.model_json import model_to_json
    from gpuscope.roofline.paint_text import MONOCHROME_PALETTE, render_roofline

    doc = cpu_results()
    doc["ceilings"][0]["value"] = 1e30
    doc["ceilings"][2]["value"] = 1e-15
    doc["workloads"][0].update(flops=1e30, bytes=1e-15, time_s=1e-15)
    path = tmp_path / "edge.json"
    path.write_text(json.dumps(doc))
    model = load_model([path], datasheet=False)
    json.dumps(model_to_json(model), allow_nan=False)
    assert render_roofline(model, 80, 20, palette=MONOCHROME_PALETTE)


# Hypothesis: random JSON and mutated documents never raise anything but BadInputError.

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
WEIRD_VALUES = [
    None,
    True,
    False,
    0,
    -1,
    1e308,
    -1e308,
    1e-320,
    2**70,
    "",
    "x" * 300,
    "cuda:",
    "cpu",
    [],
    {},
    [1],
    {"a": 1},
    "\x00",
    0.0,
]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found.extend(_paths(value, prefix + (key,)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.extend(_paths(value, prefix + (index,)))
    return found


def mutate(document: Any, rng: random.Random, replacements: list[Any], count: int) -> Any:
    """``document`` with ``count`` random nodes replaced (or deleted from their object)."""
    document = copy.deepcopy(document)
    for _ in range(count):
        paths = _paths(document)[1:]
        if not paths:
            break
        path = rng.choice(paths)
        parent: Any = document
        for part in path[:-1]:
            parent = parent[part]
        if isinstance(parent, dict) and rng.random() < 0.15:
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(rng.choice(replacements))
    return document


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=json_values)
def test_random_json_as_results_is_bad_input_or_a_document(tmp_path: Path, value: Any) -> None:
    path = tmp_path / "random.json"
    path.write_text(json.dumps(value))
    try:
        document = read_results(path)
    except BadInputError as exc:
        one_line(str(exc), str(path))
    else:
        assert isinstance(document, Results)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), count=st.integers(1, 4), base=st.sampled_from(["h200", "cpu"]))
def test_mutated_results_load_and_build_a_finite_model_or_fail_in_one_line(
    tmp_path: Path, seed: int, count: int, base: str
) -> None:
    from gpuscope.roofline.loading import load_model
    from gpuscope.roofline.model_json import model_to_json
    from gpuscope.roofline.paint_text import MONOCHROME_PALETTE, render_roofline

    document = mutate(h200_results() if base == "h200" else cpu_results(), random.Random(seed), WEIRD_VALUES, count)
    path = tmp_path / "mutated.json"
    path.write_text(json.dumps(document))
    try:
        model = load_model([path], datasheet=False)
    except BadInputError as exc:
        one_line(str(exc), str(path))
        return
    json.dumps(model_to_json(model), allow_nan=False, default=str)
    render_roofline(model, 70, 16, palette=MONOCHROME_PALETTE)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=300))
def test_random_bytes_as_results_is_bad_input(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bytes.json"
    path.write_bytes(content)
    try:
        read_results(path)
    except BadInputError as exc:
        one_line(str(exc), str(path))


# --- telemetry logs --------------------------------------------------------------------------------

GOOD = good_log_lines(3)
LOG_CORPUS: list[tuple[str, bytes, str]] = [
    ("empty", b"", "empty telemetry log"),
    ("blank-lines", b"\n\n  \n", "empty telemetry log"),
    ("binary", bytes(range(256)) * 16, ":1: not a gpuscope telemetry log"),
    ("nul-bytes", b"\x00" * 5000 + b"\n", ":1: not a gpuscope telemetry log"),
    ("png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, ":1: not a gpuscope telemetry log"),
    (
        "results-json-pretty",
        json.dumps(h200_results(), indent=2).encode(),
        "is a probe results file; this command reads a `gpuscope log` telemetry log",
    ),
    (
        "results-json-compact",
        json.dumps(h200_results()).encode() + b"\n",
        "is a probe results file; this command reads a `gpuscope log` telemetry log",
    ),
    ("only-truncated-line", GOOD[0][: len(GOOD[0]) // 2].encode(), "empty telemetry log (no complete records)"),
    ("garbage-line-2", (GOOD[0] + "\nhello\n" + GOOD[1] + "\n").encode(), ":2: not a JSON object"),
    ("cut-line-in-middle", (GOOD[0] + "\n" + GOOD[1][:50] + "\n" + GOOD[2] + "\n").encode(), ":2: not a JSON object"),
    (
        "binary-line-3",
        (GOOD[0] + "\n" + GOOD[1] + "\n").encode() + b"\xff\xfe\x00garbage\n" + (GOOD[2] + "\n").encode(),
        ":3:",
    ),
    ("json-array-line", (GOOD[0] + "\n[1,2,3]\n").encode(), ":2: not a JSON object"),
    ("json-number-line", (GOOD[0] + "\n42\n").encode(), ":2: not a JSON object"),
    ("deep-line", b'{"a":' + b"[" * DEEP + b"]" * DEEP + b"}\n", ":1: not a JSON object (nested too deeply)"),
    (
        "deep-field",
        (GOOD[0] + "\n").encode() + b'{"schema_version":1,"timestamp":1,"x":' + b"[" * DEEP + b"]" * DEEP + b"}\n",
        ":2: not a JSON object (nested too deeply)",
    ),
    (
        "nan-literal",
        (GOOD[0] + "\n" + GOOD[1].replace('"timestamp":1700000001.0', '"timestamp":NaN') + "\n").encode(),
        ":2: not a JSON object (invalid JSON",
    ),
    (
        "infinity-literal",
        (GOOD[0].replace('"timestamp":1700000000.0', '"timestamp":Infinity') + "\n").encode(),
        ":1: not a JSON object (invalid JSON",
    ),
    (
        "version-2",
        (GOOD[0].replace('"schema_version":1', '"schema_version":2') + "\n").encode(),
        ":1: schema_version 2 is not supported",
    ),
    (
        "version-string",
        (GOOD[0].replace('"schema_version":1', '"schema_version":"1"') + "\n").encode(),
        ":1: schema_version '1' is not supported",
    ),
    (
        "version-true",
        (GOOD[0].replace('"schema_version":1', '"schema_version":true') + "\n").encode(),
        ":1: schema_version True is not supported",
    ),
    ("version-missing", b'{"timestamp": 1}\n', ":1: record has no schema_version"),
    (
        "timestamp-missing",
        record_with(("timestamp", _DELETE)).encode() + b"\n",
        ":1: not a gpuscope telemetry record (object missing required field `timestamp`)",
    ),
    (
        "timestamp-string",
        record_with(("timestamp", "yesterday")).encode() + b"\n",
        "expected `float`, got `str` - at `$.timestamp`",
    ),
    ("timestamp-null", record_with(("timestamp", None)).encode() + b"\n", "got `null` - at `$.timestamp`"),
    ("timestamp-bool", record_with(("timestamp", True)).encode() + b"\n", "got `bool` - at `$.timestamp`"),
    ("host-number", record_with(("host", 5)).encode() + b"\n", "got `int` - at `$.host`"),
    ("host-string", record_with(("host", "node")).encode() + b"\n", "got `str` - at `$.host`"),
    ("gpus-string", record_with(("gpus", "abc")).encode() + b"\n", "got `str` - at `$.gpus`"),
    ("gpus-of-numbers", record_with(("gpus", [1, 2])).encode() + b"\n", "got `int` - at `$.gpus[0]`"),
    ("gpus-null-item", record_with(("gpus", [None])).encode() + b"\n", "got `null` - at `$.gpus[0]`"),
    (
        "gpu-power-string",
        record_with(("gpus.0.power_w", "300 W")).encode() + b"\n",
        "got `str` - at `$.gpus[0].power_w`",
    ),
    ("gpu-index-float", record_with(("gpus.0.index", 0.5)).encode() + b"\n", "multiple of 1.0 - at `$.gpus[0].index`"),
    ("gpu-index-huge", record_with(("gpus.0.index", 2**80)).encode() + b"\n", "at `$.gpus[0].index`"),
    ("gpu-name-object", record_with(("gpus.0.name", {"a": 1})).encode() + b"\n", "got `object` - at `$.gpus[0].name`"),
    (
        "nvlink-links-object",
        record_with(("gpus.0.nvlink_links", {})).encode() + b"\n",
        "got `object` - at `$.gpus[0].nvlink_links`",
    ),
    (
        "throttle-numbers",
        record_with(("gpus.0.throttle_reasons", [1])).encode() + b"\n",
        "got `int` - at `$.gpus[0].throttle_reasons[0]`",
    ),
    (
        "processes-string",
        record_with(("gpus.0.processes", "none")).encode() + b"\n",
        "got `str` - at `$.gpus[0].processes`",
    ),
    (
        "core-util-list",
        record_with(("host.cores.0.utilization_percent", [50])).encode() + b"\n",
        "got `array` - at `$.host.cores[0].utilization_percent`",
    ),
    ("cores-object", record_with(("host.cores", {"0": {}})).encode() + b"\n", "got `object` - at `$.host.cores`"),
    (
        "nic-up-string",
        record_with(("host.nics.1.is_up", "yes")).encode() + b"\n",
        "got `str` - at `$.host.nics[1].is_up`",
    ),
    (
        "unavailable-string",
        record_with(("unavailable", "timestamp")).encode() + b"\n",
        "got `str` - at `$.unavailable`",
    ),
    (
        "unavailable-list",
        record_with(("host.unavailable", ["x"])).encode() + b"\n",
        "got `array` - at `$.host.unavailable`",
    ),
    (
        "unavailable-reason-number",
        record_with(("host.unavailable", {"cpu_utilization_percent": 3})).encode() + b"\n",
        "got `int` - at `$.host.unavailable[...]`",
    ),
    (
        "unavailable-timestamp",
        record_with(("unavailable", {"timestamp": "error: x"})).encode() + b"\n",
        "field `timestamp` is listed as unavailable",
    ),
    (
        "csv-header-only-garbage",
        b"schema_version,timestamp\n1,2\n",
        ":1: CSV header does not end with the 'unavailable' column",
    ),
    ("csv-cell-count", b"schema_version,timestamp,unavailable\n1,2\n", ":2: 2 cells, the header has 3"),
    ("csv-float-garbage", b"schema_version,timestamp,unavailable\n1,abc,\n", ":2: bad cell"),
    ("csv-nan", b"schema_version,timestamp,unavailable\n1,nan,\n", "expected `float` >= 0.0 - at `$.timestamp`"),
    ("csv-inf", b"schema_version,timestamp,unavailable\n1,inf,\n", "expected `float` <= 253402214400.0"),
    (
        "csv-unavailable-list",
        b'schema_version,timestamp,unavailable\n1,2.0,"[1]"\n',
        ":2: the 'unavailable' cell is not a JSON object",
    ),
    (
        "csv-unavailable-deep",
        b'schema_version,timestamp,unavailable\n1,2.0,"' + b"[" * 5000 + b"]" * 5000 + b'"\n',
        ":2: bad cell (JSON nested too deeply)",
    ),
    (
        "csv-cell-too-long",
        b'schema_version,timestamp,unavailable\n1,2.0,"' + b"x" * 200_000 + b'"\n',
        ":2: bad CSV row (field larger than field limit",
    ),
    ("csv-version-2", b"schema_version,timestamp,unavailable\n2,2.0,\n", ":2: schema_version 2 is not supported"),
]


@pytest.mark.parametrize("content, fragment", [pytest.param(c, f, id=i) for i, c, f in LOG_CORPUS])
@pytest.mark.parametrize("reader", [read_log, read_log_dicts], ids=["read_log", "read_log_dicts"])
def test_bad_log_is_one_line_naming_file_and_line(
    tmp_path: Path, reader: Callable[..., Any], content: bytes, fragment: str
) -> None:
    path = tmp_path / "telemetry.jsonl"
    path.write_bytes(content)
    warnings: list[str] = []
    with pytest.raises(BadInputError) as caught:
        list(reader(path, on_warning=warnings.append))
    one_line(str(caught.value), str(path), fragment)
    assert caught.value.exit_code == 3


def test_missing_and_directory_logs(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="cannot read telemetry log"):
        list(read_log(tmp_path / "absent.jsonl"))
    with pytest.raises(BadInputError, match="cannot read telemetry log"):
        list(read_log(tmp_path))


def test_huge_line_is_refused_without_holding_it(tmp_path: Path) -> None:
    """A 300 MB file with no newline (sparse: no disk used) is refused after one bounded read."""
    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as handle:
        handle.write((GOOD[0] + "\n").encode())
        handle.truncate(300 * 1024 * 1024)
    records: list[Sample] = []
    with pytest.raises(BadInputError) as caught:
        for record in read_log(path):
            records.append(record)
    one_line(str(caught.value), f"{path}:2:", "longer than")
    assert len(records) == 1  # what came before is delivered


def test_a_long_valid_log_reads_back_whole(tmp_path: Path) -> None:
    """A few thousand records (8 GPUs each) read back to the same samples, JSONL and CSV."""
    samples = [make_sample(tick, gpus=8, cores=16) for tick in range(300)]
    for fmt in ("jsonl", "csv"):
        path = tmp_path / f"long.{fmt}"
        write_samples(path, samples, fmt)
        assert list(read_log(path)) == samples


def test_null_metric_without_a_reason_reads_as_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "edited.jsonl"
    line = record_with(("gpus.0.power_w", None))
    data = json.loads(line)
    data["gpus"][0].get("unavailable", {}).pop("power_w", None)
    path.write_text(json.dumps(data) + "\n")
    (sample,) = read_log(path)
    assert isinstance(sample.gpus[0].power_w, Unavailable)
    assert "null in log" in str(sample.gpus[0].power_w)


def test_unknown_fields_from_a_newer_gpuscope_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "newer.jsonl"
    data = json.loads(GOOD[0])
    data["future_field"] = {"anything": [1, 2, {"x": None}]}
    data["gpus"][0]["future_metric_w"] = "text"
    path.write_text(json.dumps(data) + "\n")
    (sample,) = read_log(path)
    assert sample.timestamp == data["timestamp"]


def _check_types(sample: Sample) -> None:
    """What a consumer relies on after a successful read."""
    assert isinstance(sample.timestamp, (int, float)) and math.isfinite(sample.timestamp)
    assert isinstance(sample.host, (HostSample, Unavailable))
    assert isinstance(sample.gpus, (list, Unavailable))
    for gpu in sample.gpus if isinstance(sample.gpus, list) else []:
        assert isinstance(gpu, GpuSample)
        for name in ("power_w", "utilization_percent", "dram_bandwidth_bytes_per_s"):
            value = getattr(gpu, name)
            assert isinstance(value, Unavailable) or (isinstance(value, (int, float)) and not isinstance(value, bool))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=400))
def test_random_bytes_as_a_log_is_bad_input(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(content)
    try:
        for sample in read_log(path, on_warning=lambda message: None):
            _check_types(sample)
    except BadInputError as exc:
        one_line(str(exc), str(path))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=json_values, position=st.integers(0, 3))
def test_random_json_line_in_a_log_is_bad_input_or_a_typed_record(tmp_path: Path, value: Any, position: int) -> None:
    lines = list(GOOD)
    if isinstance(value, dict):
        value = {"schema_version": 1, "timestamp": 1.0, **value}
    lines.insert(position, json.dumps(value))
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    try:
        for sample in read_log(path):
            _check_types(sample)
    except BadInputError as exc:
        one_line(str(exc), f"{path}:{position + 1}:")


_LOG_REPLACEMENTS = [None, True, 0, -1, 1.5, 2**70, 1e308, "", "text", [], [1, "a"], {}, {"x": 1}, [None], [{}]]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), count=st.integers(1, 3), fmt=st.sampled_from(["jsonl", "csv"]))
def test_mutated_records_read_as_typed_samples_or_fail_in_one_line(
    tmp_path: Path, seed: int, count: int, fmt: str
) -> None:
    rng = random.Random(seed)
    base = logfile.sample_to_json_dict(make_sample(1, gpus=2, cores=2))
    mutated = mutate(base, rng, _LOG_REPLACEMENTS, count)
    path = tmp_path / f"mutated.{fmt}"
    if fmt == "jsonl":
        path.write_text(json.dumps(mutated) + "\n")
    else:  # mutate the CSV row's cells instead
        write_samples(path, [make_sample(1, gpus=2, cores=2)], "csv")
        header, row = path.read_text().splitlines()
        import csv as _csv
        import io

        cells = next(_csv.reader([row]))
        for _ in range(count):
            cells[rng.randrange(len(cells))] = rng.choice(
                ["", "x", "1e400", "nan", "-1", "[1]", "{}", "true", '{"a": 1}', "\x00"]
            )
        buffer = io.StringIO()
        _csv.writer(buffer, lineterminator="\n").writerow(cells)
        path.write_text(header + "\n" + buffer.getvalue())
    try:
        for sample in read_log(path):
            _check_types(sample)
    except BadInputError as exc:
        one_line(str(exc), str(path))


# --- report JSON (gpuscope report / compare read these back) ---------------------------------------


def _report_document(tmp_path: Path) -> dict[str, Any]:
    from gpuscope.report import make_report

    results = tmp_path / "results.json"
    results.write_text(valid_results_text())
    return make_report([results])


@pytest.mark.parametrize(
    "mutation, fragment",
    [
        (lambda doc: doc.update(schema_version=99), "report schema_version 99 is not supported"),
        (lambda doc: doc.update(ceilings="x"), "got `str` - at `$.ceilings`"),
        (lambda doc: doc.update(roofline=[]), "got `array` - at `$.roofline`"),
        (lambda doc: doc.update(telemetry=5), "expected `object | null`, got `int` - at `$.telemetry`"),
        (lambda doc: doc.pop("systems"), "missing required field `systems`"),
    ],
    ids=["version", "ceilings", "roofline", "telemetry", "systems"],
)
def test_bad_report_json_is_one_line(tmp_path: Path, mutation: Callable[[dict[str, Any]], Any], fragment: str) -> None:
    from gpuscope.report.io import load_input

    document = _report_document(tmp_path)
    mutation(document)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(document))
    with pytest.raises(BadInputError) as caught:
        load_input(path)
    one_line(str(caught.value), str(path), fragment)


def _set_path(document: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        document = document[part]
    document[path[-1]] = value


@pytest.mark.parametrize(
    "path, value, fragment",
    [
        (("warnings",), 1e308, "expected `array | null`, got `float` - at `$.warnings`"),
        (("systems", 0), 5, "got `int` - at `$.systems[0]`"),
        (("ceilings", 0), 2**70, "`$.ceilings[0]`"),
        (("roofline", "points", 0), "", "got `str` - at `$.roofline.points[0]`"),
        (("roofline", "roofs", 0, "value"), 1e-320, "expected `float` >= 1e-15 - at `$.roofline.roofs[0].value`"),
        (("low_percent_of_spec", "compute"), "70", "expected `float`, got `str` - at `$.low_percent_of_spec[...]`"),
        (("results", 0, "document", "ceilings", 0, "value"), -1.0, "`$.results[0].document.ceilings[0].value`"),
    ],
    ids=["warnings", "system", "ceiling", "point", "roof-value", "threshold", "embedded-results"],
)
def test_bad_inner_report_field_names_its_path(
    tmp_path: Path, path: tuple[Any, ...], value: Any, fragment: str
) -> None:
    """A report.json read back is checked in full (gpuscope/schema/report.py), not only at the top."""
    from gpuscope.report.io import load_input

    document = _report_document(tmp_path)
    _set_path(document, path, value)
    target = tmp_path / "rep.json"
    target.write_text(json.dumps(document))
    with pytest.raises(BadInputError) as caught:
        load_input(target)
    one_line(str(caught.value), str(target), fragment)


def test_bad_telemetry_line_in_report_names_its_path(tmp_path: Path) -> None:
    from support.reports import make_log_samples, make_results, write_log, write_results

    from gpuscope.report import make_report
    from gpuscope.report.io import load_input

    write_results(tmp_path / "results.json", make_results())
    write_log(tmp_path / "telemetry.jsonl", make_log_samples(count=20))
    document = make_report([tmp_path / "results.json"], tmp_path / "telemetry.jsonl")
    line = document["telemetry"]["panels"][0]["lines"][0]
    target = tmp_path / "rep.json"
    for change, fragment in (
        (lambda: line["v"].pop(), "20 times (t) but 19 values (v) - at `$.telemetry.panels[0].lines[0]`"),
        (lambda: line.update(style="x"), "at `$.telemetry.panels[0].lines[0].style`"),
    ):
        saved = copy.deepcopy(line)
        change()
        target.write_text(json.dumps(document))
        with pytest.raises(BadInputError) as caught:
            load_input(target)
        one_line(str(caught.value), str(target), fragment)
        line.clear()
        line.update(saved)


def test_report_json_round_trip_passes_the_full_check(tmp_path: Path) -> None:
    """Every report gpuscope writes (with telemetry, redacted or not) reads back and re-renders the same HTML."""
    from support.reports import make_log_samples, make_results, write_log, write_results

    from gpuscope.report import make_report, render_report

    write_results(tmp_path / "results.json", make_results(hbm_bytes_per_s=[3.0e12, 2.2e12]))
    write_log(tmp_path / "telemetry.jsonl", make_log_samples(count=30))
    for redact in (False, True):
        report = make_report([tmp_path / "results.json"], tmp_path / "telemetry.jsonl", redact=redact)
        (tmp_path / "rep.json").write_text(json.dumps(report))
        assert render_report(make_report([tmp_path / "rep.json"]), "html") == render_report(report, "html")


@settings(
    max_examples=40, deadline=None, phases=[Phase.generate], suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 2**32 - 1), count=st.integers(1, 3))
def test_mutated_report_json_renders_or_fails_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, seed: int, count: int
) -> None:
    """A report.json read back (``gpuscope compare`` and ``report`` accept them) and rendered."""
    from gpuscope.report import make_report, render_report

    folder = tmp_path_factory.mktemp("report")
    document = mutate(_report_document(folder), random.Random(seed), WEIRD_VALUES, count)
    path = folder / "mutated.json"
    path.write_text(json.dumps(document))
    try:
        report = make_report([path])
        for fmt in ("md", "json", "html"):
            render_report(report, fmt)
    except BadInputError as exc:
        one_line(str(exc), str(path))


# --- suites, themes, configuration (TOML) ----------------------------------------------------------

TOML_CORPUS: list[tuple[str, bytes]] = [
    ("empty", b""),
    ("binary", bytes(range(256)) * 4),
    ("truncated", b'[suite]\nname = "x'),
    ("not-toml", b"{ this is : json }"),
    ("python-payload", b'__import__("os").system("touch PWNED")\n'),
    ("wrong-types", b'[suite]\nname = 5\n[theme]\nname = ["x"]\nprimary = 3\n[[probe]]\nkind = {}\n'),
    ("deep-array", b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n"),
    ("deep-inline-table", b"a = " + b"{b = " * 5000 + b"1" + b"}" * 5000 + b"\n"),
]


def _toml_param(name: str, content: bytes) -> Any:
    return pytest.param(content, id=name)


@pytest.mark.parametrize("content", [_toml_param(n, c) for n, c in TOML_CORPUS])
def test_bad_suite_file_is_one_line(tmp_path: Path, content: bytes) -> None:
    from gpuscope.probing.suite import load_suite

    path = tmp_path / "suite.toml"
    path.write_bytes(content)
    with pytest.raises(BadInputError) as caught:
        load_suite(str(path))
    one_line(str(caught.value), str(path))
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("content", [_toml_param(n, c) for n, c in TOML_CORPUS])
def test_bad_theme_file_is_one_line(tmp_path: Path, content: bytes) -> None:
    from gpuscope.tui.themes import ThemeError, load_theme_file

    path = tmp_path / "theme.toml"
    path.write_bytes(content)
    with pytest.raises(ThemeError) as caught:
        load_theme_file(path)
    one_line(str(caught.value), str(path))


def test_huge_theme_file_is_refused(tmp_path: Path) -> None:
    from gpuscope.tui.themes import ThemeError, load_theme_file

    path = tmp_path / "huge.toml"
    with open(path, "wb") as handle:
        handle.truncate(200 * 1024 * 1024)
    with pytest.raises(ThemeError, match="too large"):
        load_theme_file(path)


@pytest.mark.parametrize("content", [_toml_param(n, c) for n, c in TOML_CORPUS])
def test_bad_config_file_gives_defaults_and_one_line(tmp_path: Path, content: bytes) -> None:
    from gpuscope.tui.config import Settings, load_settings

    path = tmp_path / "config.toml"
    path.write_bytes(content)
    settings, problem = load_settings(path)
    assert isinstance(settings, Settings)
    if problem is not None:
        one_line(problem, str(path))


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_every_cut_point_reads_back_the_whole_records_before_it(tmp_path: Path, fmt: str) -> None:
    """A writer killed at any byte (SIGKILL, power loss): the reader returns exactly the records
    whose line is whole, and warns exactly when a line was cut. Every byte offset is tried."""
    records = [make_sample(tick, gpus=1, cores=1) for tick in range(2)]
    full = tmp_path / f"full.{fmt}"
    write_samples(full, records, fmt)
    data = full.read_bytes()
    header_lines = 1 if fmt == "csv" else 0
    cut_path = tmp_path / f"cut.{fmt}"
    for keep in range(len(data) + 1):
        body = data[:keep]
        cut_path.write_bytes(body)
        whole_lines = body.count(b"\n")
        cut_mid_line = keep > 0 and not body.endswith(b"\n")
        if cut_mid_line and data[keep : keep + 1] == b"\n":
            whole_lines, cut_mid_line = whole_lines + 1, False  # only the newline is missing
        expected = max(0, whole_lines - header_lines)
        warned: list[str] = []
        if expected == 0:
            with pytest.raises(BadInputError, match="empty telemetry log"):
                list(read_log(cut_path, on_warning=warned.append))
        else:
            assert list(read_log(cut_path, on_warning=warned.append)) == records[:expected], f"cut at byte {keep}"
        assert bool(warned) == cut_mid_line, f"cut at byte {keep}: warnings {warned}"


# --- unbounded input (issue 16, class 2) ---------------------------------------------------------


def _reader_for(kind: str) -> Callable[[Path], Any]:
    """The library reader of each file kind, returning its one-line problem (or raising it)."""
    if kind == "results":
        return read_results
    if kind == "report":
        from gpuscope.report.io import load_input

        return lambda path: load_input(path, 0)
    if kind == "suite":
        from gpuscope.probing.suite import load_suite

        return lambda path: load_suite(str(path))
    if kind == "theme":
        from gpuscope.tui.themes import load_theme_file

        return load_theme_file
    if kind == "settings":
        from gpuscope.tui.config import load_settings

        def settings(path: Path) -> Any:
            _, problem = load_settings(path)
            assert problem is not None
            raise BadInputError(problem)

        return settings
    return lambda path: list(read_log(path))


UNBOUNDED_KINDS = ["results", "report", "suite", "theme", "settings", "telemetry log"]


@pytest.mark.parametrize("source", ["dev-zero", "sparse-2g"])
@pytest.mark.parametrize("kind", UNBOUNDED_KINDS)
def test_unbounded_input_is_refused_after_one_bounded_read(tmp_path: Path, kind: str, source: str) -> None:
    """/dev/zero and a 2 GB sparse file as every kind of input: one line naming the file, and
    memory stays bounded (tracemalloc peak under the kind's limit plus a chunk, far below 2 GB)."""
    import tracemalloc

    from gpuscope.fileio import LIMITS_BYTES

    if source == "dev-zero":
        path = Path("/dev/zero")
    else:
        path = tmp_path / "sparse.bin"
        with open(path, "wb") as handle:
            handle.truncate(2 * 1024**3)
    read = _reader_for(kind)
    tracemalloc.start()
    try:
        with pytest.raises(Exception) as caught:  # noqa: PT011 - each reader has its own error class
            read(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(caught.value)
    assert len(message.splitlines()) == 1 and str(path) in message, message
    # a device may also be refused before any read (TOML files gpuscope writes back must be regular)
    assert any(why in message for why in ("too large", "line longer than", "not a regular file")), message
    held = 16 * 1024 * 1024 if kind == "telemetry log" else LIMITS_BYTES[kind]  # a log is read a line at a time
    bound = held * (2.25 if kind == "telemetry log" else 1.25) + 4 * 1024 * 1024  # readline buffers a line twice
    assert peak < bound, f"{peak / 1e6:.0f} MB held reading {source} as {kind}"


def test_size_limits_are_per_kind_and_a_file_at_the_limit_is_read(tmp_path: Path) -> None:
    from gpuscope.fileio import LIMITS_BYTES, FileTooLargeError, read_bytes_bounded

    assert LIMITS_BYTES["suite"] < LIMITS_BYTES["results"] and LIMITS_BYTES["theme"] <= LIMITS_BYTES["suite"]
    exact = tmp_path / "exact.toml"
    exact.write_bytes(b"#" * LIMITS_BYTES["theme"])
    assert len(read_bytes_bounded(exact, "theme")) == LIMITS_BYTES["theme"]
    with open(exact, "ab") as handle:
        handle.write(b"#")
    with pytest.raises(FileTooLargeError, match="too large for a theme TOML file"):
        read_bytes_bounded(exact, "theme")
