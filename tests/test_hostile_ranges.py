"""Hostile ranges (issues 24.5, 24.6, 24.8, 24.9 and 36.2): what a writer writes, every reader
accepts, and what a reader accepts, every consumer handles.

- one declared range per field (gpuscope.schema.core: Timestamp, Watts...): the log reader refuses
  what no clock or sensor can give (power 1e300 W, a timestamp past year 9999) in one line, and
  anything it accepts goes through ``report`` and ``report --from`` (a property test);
- a wall clock that steps (an ``LD_PRELOAD`` shim compiled here): durations stay non-negative and
  every reader takes what ``probe`` and ``log`` wrote;
- ``alerts.toml`` read bounded and checked like the settings; ``$COLUMNS`` under the width cap;
- a real ``gpuscope serve`` with idle and slowloris connections still answers a scrape.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from support.samples import make_sample

from gpuscope.cli import main
from gpuscope.errors import BadInputError
from gpuscope.schema.core import MAX_TIMESTAMP_S
from gpuscope.telemetry.logfile import open_log_writer, read_log, sample_to_json_dict
from gpuscope.telemetry.records import (
    CpuCoreSample,
    GpuProcessSample,
    GpuSample,
    HostSample,
    InfinibandPortSample,
    NicSample,
    NvLinkLinkSample,
    Sample,
    XidEvent,
)
from gpuscope.telemetry.values import Unavailable
from gpuscope.telemetry.wire import field_ranges, within_ranges

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "tests" / "data" / "results-v1-dict-writers.json"

# --- helpers -------------------------------------------------------------------------------------


def _env(**more: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("GPUSCOPE_FAKE_NVML", None)
    env.pop("COLUMNS", None)
    env.update(more)
    return env


def gpuscope(*args: str, timeout_s: float = 180, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuscope", *args],
        capture_output=True, text=True, timeout=timeout_s, env=_env(**env), cwd=REPO,
    )  # fmt: skip


def one_line_error(done: subprocess.CompletedProcess[str], code: int, *fragments: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code, (done.returncode, done.stderr[-2000:])
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def write_log(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def log_records(count: int = 3, **gpu0: Any) -> list[dict[str, Any]]:
    records = []
    for tick in range(count):
        record = sample_to_json_dict(make_sample(tick, gpus=1, cores=2))
        record["gpus"][0].update(gpu0)
        records.append(record)
    return records


# A wall clock that lies: real + SHIM_WALL_OFFSET_S, stepping back SHIM_WALL_BACK_PER_S seconds per real second.
SHIM_C = r"""
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static double offset_s, back_per_s;
static struct timespec start;
static int ready;

static void init(void) {
    if (ready) return;
    const char *offset = getenv("SHIM_WALL_OFFSET_S"), *back = getenv("SHIM_WALL_BACK_PER_S");
    offset_s = offset ? atof(offset) : 0.0;
    back_per_s = back ? atof(back) : 0.0;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &start);
    ready = 1;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    init();
    if (syscall(SYS_clock_gettime, id, ts) != 0) return -1;
    if (id != CLOCK_REALTIME && id != CLOCK_REALTIME_COARSE) return 0;
    struct timespec now;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &now);
    double elapsed = (now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9;
    double delta = offset_s - back_per_s * elapsed;
    long long whole = (long long)delta;
    long long sec = (long long)ts->tv_sec + whole;
    long long rem = ts->tv_nsec + (long long)((delta - (double)whole) * 1e9);
    while (rem < 0) { rem += 1000000000LL; sec -= 1; }
    while (rem >= 1000000000LL) { rem -= 1000000000LL; sec += 1; }
    ts->tv_sec = (time_t)sec;
    ts->tv_nsec = (long)rem;
    return 0;
}

int gettimeofday(struct timeval *tv, void *tz) {
    (void)tz;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
"""


@pytest.fixture(scope="module")
def clock_shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the clock shim")
    folder = tmp_path_factory.mktemp("shim")
    (folder / "shim.c").write_text(SHIM_C)
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O2", "-o", str(folder / "shim.so"), str(folder / "shim.c")], check=True
    )
    return folder / "shim.so"


TINY_SUITE = """\
[suite]
name = "tiny"
samples = 3
target_sample_s = 0.002
warmup_max_s = 0.2
contention_retries = 0

[[probe]]
kind = "matmul"
dtypes = ["fp32"]
shapes = [[96, 96, 96]]

[[probe]]
kind = "matmul"
role = "workload"
dtypes = ["fp32"]
shapes = [[64, 128, 32]]
"""

# --- one range per field: the log reader, report, report --from (24.8, 24.6) ----------------------


def test_log_with_power_1e300_is_refused_in_one_line(tmp_path: Path) -> None:
    """A log whose power_w is 1e300: report --log refuses it in one line naming file, line and field."""
    log = write_log(tmp_path / "hot.jsonl", log_records(power_w=1e300))
    done = gpuscope("report", "--probes", str(RESULTS), "--log", str(log), "-o", str(tmp_path / "r.json"))
    one_line_error(done, 3, "hot.jsonl:1", "$.gpus[0].power_w")
    assert not (tmp_path / "r.json").exists()


def test_log_with_timestamps_1e17_is_refused_in_one_line(tmp_path: Path) -> None:
    """A log whose timestamps are 1e17 (past year 9999, no clock shows it): refused in one line."""
    records = log_records()
    for offset, record in enumerate(records):
        record["timestamp"] = 1e17 + offset
    log = write_log(tmp_path / "far.jsonl", records)
    done = gpuscope("report", "--probes", str(RESULTS), "--log", str(log), "-o", str(tmp_path / "r.json"))
    one_line_error(done, 3, "far.jsonl:1", "$.timestamp")


def test_replay_of_a_log_stamped_1e17_is_refused_before_the_screen_opens(tmp_path: Path) -> None:
    """replay of a log whose timestamps are 1e17 (was a traceback from the top bar's clock): one line, exit 3."""
    records = log_records()
    for offset, record in enumerate(records):
        record["timestamp"] = 1e17 + offset
    log = write_log(tmp_path / "far.jsonl", records)
    done = subprocess.run(
        [sys.executable, "-m", "gpuscope", "replay", str(log)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=_env(), cwd=REPO,
    )  # fmt: skip
    one_line_error(done, 3, "far.jsonl:1", "$.timestamp")


def test_every_number_of_a_record_declares_its_range() -> None:
    """A record field that is a bare float or int (no declared range) would let any value through: none is."""
    import dataclasses
    import typing

    for cls in (Sample, HostSample, CpuCoreSample, NicSample, InfinibandPortSample, GpuSample, NvLinkLinkSample,
                GpuProcessSample, XidEvent):  # fmt: skip
        plain = typing.get_type_hints(cls)  # ranges stripped: Metric[Watts] reads float | Unavailable
        ranged = field_ranges(cls)
        for field in dataclasses.fields(cls):
            kinds = typing.get_args(plain[field.name]) or (plain[field.name],)
            if field.name != "schema_version" and any(kind in (int, float) for kind in kinds):
                assert field.name in ranged, f"{cls.__name__}.{field.name} declares no range"


@pytest.mark.parametrize(
    ("field", "value"),
    [("temperature_gpu_c", -300.0), ("sm_clock_mhz", 1e300), ("utilization_percent", 1e9), ("memory_used_bytes", -1)],
)
def test_log_with_unphysical_gpu_value_is_refused(tmp_path: Path, field: str, value: float) -> None:
    """A log with an unphysical reading (-300 °C, 1e300 MHz, 1e9 %, -1 bytes): refused naming the field."""
    log = write_log(tmp_path / "odd.jsonl", log_records(**{field: value}))
    with pytest.raises(BadInputError) as caught:
        list(read_log(log))
    assert f"$.gpus[0].{field}" in str(caught.value) and "odd.jsonl:1" in str(caught.value)


_NESTED: dict[type, dict[str, type]] = {
    Sample: {"host": HostSample, "gpus": GpuSample},
    HostSample: {"cores": CpuCoreSample, "nics": NicSample, "infiniband_ports": InfinibandPortSample},
    GpuSample: {
        "nvlink_links": NvLinkLinkSample, "processes": GpuProcessSample, "xid_events": XidEvent, "xid_recent": XidEvent,
    },
}  # fmt: skip


def _edge_value(low: float, high: float, is_int: bool) -> st.SearchStrategy[float | int]:
    if is_int:
        return st.one_of(st.sampled_from([int(low), int(high)]), st.integers(int(low), int(high)))
    return st.one_of(st.sampled_from([low, high]), st.floats(low, high, allow_nan=False))


def _draw_record(data: st.DataObject, cls: type, record: dict[str, Any]) -> None:
    """Every ranged number of ``record`` (a ``cls``) replaced by a value drawn from its range (edges often)."""
    for name, (low, high, is_int) in field_ranges(cls).items():
        if record.get(name) is not None:
            record[name] = data.draw(_edge_value(low, high, is_int), label=f"{cls.__name__}.{name}")
    for name, child in _NESTED.get(cls, {}).items():
        value = record.get(name)
        for item in value if isinstance(value, list) else [value] if isinstance(value, dict) else []:
            _draw_record(data, child, item)


def _with_xids(record: dict[str, Any]) -> dict[str, Any]:
    event = {"xid": 79, "count": 2, "first_time_s": 1.0, "last_time_s": 2.0, "meaning": "fell off the bus"}
    for gpu in record["gpus"]:
        gpu["xid_events"] = [dict(event)]
        gpu["xid_recent"] = [dict(event)]
        gpu.get("unavailable", {}).pop("xid_events", None)
        gpu.get("unavailable", {}).pop("xid_recent", None)
    return record


@settings(
    max_examples=12, deadline=None, phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)  # fmt: skip
@given(data=st.data())
def test_anything_the_log_reader_accepts_reads_back_from_report(tmp_path: Path, data: st.DataObject) -> None:
    """Property: a log with every number anywhere in its declared range (edges often) -> report -> report --from."""
    records = [_with_xids(sample_to_json_dict(make_sample(tick, gpus=2, cores=2))) for tick in range(3)]
    for record in records:
        _draw_record(data, Sample, record)
    log = write_log(tmp_path / "edge.jsonl", records)
    assert len(list(read_log(log))) == 3  # the reader accepts it
    report, again = tmp_path / "r.json", tmp_path / "again.html"
    assert main(["report", "--probes", str(RESULTS), "--log", str(log), "-o", str(report), "--force"]) == 0
    assert main(["report", "--from", str(report), "-o", str(again), "--force"]) == 0


def test_a_sample_out_of_range_is_written_as_unavailable_and_reads_back(tmp_path: Path) -> None:
    """A collector giving NaN °C, 0xFFFFFFFF W and a clock before 1970: the written log reads back."""
    sample = make_sample(1, gpus=1, cores=2)
    sample.timestamp = -2e9
    sample.gpus[0].power_w = 4294967295.0
    sample.gpus[0].temperature_gpu_c = math.nan
    sample.host.cores[0].utilization_percent = -5.0
    within_ranges(sample)
    log = tmp_path / "clamped.jsonl"
    with open_log_writer(log, "jsonl") as writer:
        writer.write(sample)
    (back,) = list(read_log(log))
    assert back.timestamp == 0.0
    for value in (back.gpus[0].power_w, back.gpus[0].temperature_gpu_c, back.host.cores[0].utilization_percent):
        assert isinstance(value, Unavailable) and "out of range" in value.detail


def test_a_report_at_the_timestamp_range_edges_renders_every_format(tmp_path: Path) -> None:
    """Timestamps 0 and 9999-12-31 (the range's ends) in a log: report writes JSON, HTML and Markdown."""
    records = log_records(2)
    records[0]["timestamp"], records[1]["timestamp"] = 0.0, MAX_TIMESTAMP_S
    log = write_log(tmp_path / "ends.jsonl", records)
    report = tmp_path / "r.json"
    assert main(["report", "--probes", str(RESULTS), "--log", str(log), "-o", str(report)]) == 0
    for name in ("r.html", "r.md"):
        assert main(["report", "--from", str(report), "-o", str(tmp_path / name)]) == 0
    assert "9999-12-31" in (tmp_path / "r.html").read_text()


def test_results_with_a_median_of_1e300_is_refused_in_one_line(tmp_path: Path) -> None:
    """A results file whose ceiling median_value is 1e300 (was accepted, then report --from refused it)."""
    document = json.loads(RESULTS.read_text())
    document["ceilings"][0]["median_value"] = 1e300
    path = tmp_path / "wild.json"
    path.write_text(json.dumps(document))
    done = gpuscope("report", "--probes", str(path), "-o", str(tmp_path / "r.json"))
    one_line_error(done, 3, "wild.json", "$.ceilings[0].median_value")


def _schema_node(node: Any, defs: dict[str, Any], key: str) -> Any:
    """The first ``key`` (``properties``, ``items``, ``maximum``) of ``node`` or of one of its ``anyOf`` options."""
    for option in [node, *(node.get("anyOf", []) if isinstance(node, dict) else [])]:
        while isinstance(option, dict) and "$ref" in option:
            option = defs[option["$ref"].rsplit("/", 1)[1]]
        if isinstance(option, dict) and key in option:
            return option if key in ("maximum", "minimum") else option[key]
    return None


def _to_edges(value: Any, node: Any, defs: dict[str, Any], edge: str) -> Any:
    """``value`` with every number that the published schema bounds set to that bound (``maximum``/``minimum``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        bounded = _schema_node(node, defs, "maximum")
        return bounded.get(edge, value) if bounded else value
    if isinstance(value, dict):
        props = _schema_node(node, defs, "properties") or {}
        return {
            key: _to_edges(item, props.get(key), defs, edge) if key in props else item for key, item in value.items()
        }
    if isinstance(value, list):
        items = _schema_node(node, defs, "items")
        return [_to_edges(item, items, defs, edge) if items is not None else item for item in value]
    return value


@pytest.mark.parametrize("edge", ["maximum", "minimum"])
def test_results_with_every_number_at_its_range_edge_go_through_every_reader(tmp_path: Path, edge: str) -> None:
    """A results file with every number at its schema maximum (or minimum): report, --from, roofline, compare."""
    schema = json.loads((REPO / "docs" / "schemas" / "results.schema.json").read_text())
    document = _to_edges(json.loads(RESULTS.read_text()), schema, schema.get("$defs", {}), edge)
    results = tmp_path / "edge.json"
    results.write_text(json.dumps(document))
    report = tmp_path / "r.json"
    assert main(["report", "--probes", str(results), "-o", str(report)]) == 0
    assert main(["report", "--from", str(report), "-o", str(tmp_path / "r.html")]) == 0
    assert main(["roofline", "--probes", str(results), "--no-color", "--width", "80"]) == 0
    assert main(["compare", str(results), str(results)]) == 0


def test_columns_of_a_million_draws_at_most_the_width_cap() -> None:
    """COLUMNS=1000000 gpuscope roofline (was: allocating until MemoryError): drawn at the 1000-column cap."""
    done = gpuscope("roofline", "--probes", str(RESULTS), "--no-color", COLUMNS="1000000", LINES="1000000")
    assert done.returncode == 0, done.stderr[-2000:]
    assert max(len(line) for line in done.stdout.splitlines()) <= 1000


@pytest.mark.parametrize("columns", ["0", "-7", "abc", "59"])
def test_columns_garbage_or_too_narrow_still_draws(columns: str) -> None:
    """COLUMNS=0, -7, abc or 59 (under the minimum): roofline still draws, at least 60 columns wide."""
    done = gpuscope("roofline", "--probes", str(RESULTS), "--no-color", COLUMNS=columns)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]


# --- alerts.toml: bounded, checked, one line (24.5) ---------------------------------------------


def _sparse(path: Path, size_bytes: int) -> None:
    with path.open("wb") as handle:
        handle.truncate(size_bytes)


def _snapshot_with_alerts(tmp_path: Path, make: Any) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    make(config / "alerts.toml")
    return gpuscope("snapshot", "--no-gpu", "--wait", "0.1", GPUSCOPE_CONFIG_DIR=str(config))


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda path: path.symlink_to("/dev/zero"), id="dev-zero"),
        pytest.param(lambda path: _sparse(path, 2**30), id="sparse-1GiB"),
    ],
)
def test_alerts_toml_that_never_ends_is_one_warning(tmp_path: Path, make: Any) -> None:
    """alerts.toml linked to /dev/zero, or a 1 GiB sparse file (was a MemoryError traceback): one warning."""
    done = _snapshot_with_alerts(tmp_path, make)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    warnings = [line for line in done.stderr.splitlines() if "alerts.toml" in line]
    assert len(warnings) == 1 and "too large" in warnings[0] and "default alert thresholds used" in warnings[0]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("gpu_temperature_c = [nan, nan, nan]\n", "gpu_temperature_c holds nan"),
        ("gpu_temperature_c = [30, 20, 10]\n", "gpu_temperature_c must be increasing"),
        ("memory_temperature_c = [-inf, 1, 2]\n", "$.memory_temperature_c[0]"),
        ("power_fraction_of_cap = [1, 2]\n", "$.power_fraction_of_cap"),
        ("gpu_temprature_c = [1, 2, 3]\n", "gpu_temprature_c"),
        ('[throttle_levels]\nsw_power_cap = "loud"\n', "invalid enum value 'loud'"),
    ],
)
def test_bad_alert_thresholds_are_one_warning_naming_the_field(tmp_path: Path, text: str, fragment: str) -> None:
    """alerts.toml with NaN, reversed, -inf, short, misspelt or unknown-level thresholds: one warning."""
    done = _snapshot_with_alerts(tmp_path, lambda path: path.write_text(text))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    warnings = [line for line in done.stderr.splitlines() if "alerts.toml" in line]
    assert len(warnings) == 1 and fragment in warnings[0] and "ignored" in warnings[0], done.stderr


def test_nan_temperature_thresholds_do_not_silently_turn_alerts_off(tmp_path: Path) -> None:
    """[nan, nan, nan] for the GPU temperature keeps the default thresholds: a 95 °C GPU still alerts."""
    from gpuscope.telemetry.alerts import evaluate, load_thresholds

    path = tmp_path / "alerts.toml"
    path.write_text("gpu_temperature_c = [nan, nan, nan]\necc_uncorrected_errors = [inf, inf, 1]\n")
    thresholds, problem = load_thresholds(path)
    assert problem is not None and "nan" in problem
    sample = make_sample(1, gpus=1, cores=2)
    sample.gpus[0].temperature_gpu_c = 95.0
    assert any(alert.kind == "temperature" and alert.level == "critical" for alert in evaluate(sample, thresholds))


# --- a wall clock that steps (36.2) ------------------------------------------------------------


@pytest.mark.slow
def test_probe_while_the_wall_clock_steps_back_writes_a_file_every_reader_takes(
    tmp_path: Path, clock_shim: Path
) -> None:
    """probe while the wall clock steps back 2 h a second (was duration_s -7198): roofline, compare, report read it."""
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY_SUITE)
    results = tmp_path / "r.json"
    done = gpuscope(
        "probe", "--device", "cpu", "--suite", str(suite), "-o", str(results), "--no-telemetry",
        LD_PRELOAD=str(clock_shim), SHIM_WALL_BACK_PER_S="7200",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(results.read_text())["duration_s"] >= 0
    for command in (
        ["roofline", "--probes", str(results), "--no-color"],
        ["compare", str(results), str(results)],
        ["report", "--probes", str(results), "-o", str(tmp_path / "report.json")],
    ):
        assert gpuscope(*command).returncode == 0, command


@pytest.mark.parametrize(
    "clock",
    [
        pytest.param({"SHIM_WALL_BACK_PER_S": "7200"}, id="stepping-back"),
        pytest.param({"SHIM_WALL_OFFSET_S": "-2000000000"}, id="before-1970"),
        pytest.param({"SHIM_WALL_OFFSET_S": "7000000000"}, id="year-2248"),
    ],
)
def test_log_under_a_lying_wall_clock_reads_back_through_report(
    tmp_path: Path, clock_shim: Path, clock: dict[str, str]
) -> None:
    """log while the wall clock steps back, reads 1906 or reads 2248: report and report --from read it."""
    log = tmp_path / "run.jsonl"
    done = gpuscope(
        "log", "--no-gpu", "--duration", "1", "--interval", "0.2", "-o", str(log), LD_PRELOAD=str(clock_shim), **clock
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert all(0 <= sample.timestamp <= MAX_TIMESTAMP_S for sample in read_log(log))
    report = tmp_path / "r.json"
    assert gpuscope("report", "--probes", str(RESULTS), "--log", str(log), "-o", str(report)).returncode == 0
    assert gpuscope("report", "--from", str(report), "-o", str(tmp_path / "r.html")).returncode == 0


def test_probe_session_elapsed_time_comes_from_the_monotonic_clock() -> None:
    """The probes screen's elapsed seconds while the wall clock is set back a day: never negative."""
    from unittest import mock

    from gpuscope.probing.session import ProbeSession
    from gpuscope.schema.events import Progress

    session = ProbeSession("tiny.toml", "cpu", Path("r.json"))
    with mock.patch("time.time", return_value=time.time() - 86400):
        session.apply(Progress(done=1, total=2, name="matmul", phase="start"))
    assert re.search(r"· \d+ s$", session.status), session.status


# --- the exporter and idle connections (24.9) -----------------------------------------------------


@pytest.fixture()
def serve() -> Iterator[tuple[str, int]]:
    """A real ``gpuscope serve`` on fake GPUs, its (host, port)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuscope", "serve", "--listen", "127.0.0.1:0", "--interval", "0.2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO,
        env=_env(GPUSCOPE_FAKE_NVML="gpus=2xh200"),
    )  # fmt: skip
    try:
        assert process.stderr is not None
        match = re.search(r"http://([\d.]+):(\d+)/metrics", process.stderr.readline())
        assert match, "serve did not say where it listens"
        host, port = match.group(1), int(match.group(2))
        deadline = time.monotonic() + 30
        while _scrape(host, port)[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        yield host, port
        assert process.poll() is None, "serve ended"
    finally:
        process.terminate()
        process.wait(timeout=20)


def _scrape(host: str, port: int, timeout_s: float = 3.0) -> tuple[int, bytes]:
    """(status, body) of GET /metrics; (0, b"") when no answer came within ``timeout_s``."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: prometheus\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
    except OSError:
        return 0, b""
    match = re.match(rb"HTTP/1\.[01] (\d{3})", answer)
    return (int(match.group(1)), answer) if match else (0, answer)


def test_64_silent_connections_do_not_lock_a_scrape_out(serve: tuple[str, int]) -> None:
    """64 (then 200) connections opened and left silent (was: 503): a scrape still gets 200 and metrics."""
    host, port = serve
    idle = []
    try:
        for count in (64, 200):
            while len(idle) < count:
                idle.append(socket.create_connection((host, port), timeout=3))
            status, body = _scrape(host, port)
            assert status == 200 and b"gpuscope_exporter_samples_total" in body, (count, status, body[:200])
    finally:
        for sock in idle:
            sock.close()


def test_slowloris_connections_do_not_lock_a_scrape_out(serve: tuple[str, int]) -> None:
    """64 connections trickling a request one byte at a time (slowloris): a scrape still gets 200."""
    host, port = serve
    stop = threading.Event()
    slow = [socket.create_connection((host, port), timeout=3) for _ in range(64)]
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4000

    def trickle() -> None:
        for position in range(len(request)):
            for sock in slow:
                try:
                    sock.send(request[position : position + 1])
                except OSError:
                    pass
            if stop.wait(0.05):
                return

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        time.sleep(0.5)
        for _ in range(3):
            status, _ = _scrape(host, port)
            assert status == 200
    finally:
        stop.set()
        thread.join(timeout=5)
        for sock in slow:
            sock.close()


def test_a_connection_that_never_finishes_its_request_is_closed(serve: tuple[str, int]) -> None:
    """A connection sending half a request and then a byte every 0.2 s: the exporter closes it (no leak)."""
    host, port = serve
    with socket.create_connection((host, port), timeout=3) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\n")
        closed = False
        deadline = time.monotonic() + 30
        while not closed and time.monotonic() < deadline:
            try:
                sock.send(b"a")
                sock.settimeout(0.2)
                closed = sock.recv(1) == b""
            except TimeoutError:
                continue
            except OSError:  # reset by the peer
                closed = True
        assert closed
