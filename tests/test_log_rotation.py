"""Rotation (issue 35): size and age limits, --keep, names that sort by time, a rotated set read
as one log (folder, glob, base name) with its gaps, and a reader following a rotating logger."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.samples import make_sample

from gpuscope.errors import BadInputError, UsageError
from gpuscope.report.telemetry import read_samples, summarize_samples
from gpuscope.telemetry.logfile import read_log
from gpuscope.telemetry.logpaths import log_files, rotated_files, rotated_name
from gpuscope.telemetry.logrotate import RotatingLogWriter, parse_age_s, parse_size_bytes
from gpuscope.telemetry.records import Sample

REPO = Path(__file__).resolve().parent.parent
HOUR = 1_700_002_800.0  # on the hour (UTC)


def samples(count: int, start: float = HOUR, step_s: float = 1.0) -> list[Sample]:
    return [make_sample(tick=k, gpus=1, timestamp=start + k * step_s - k) for k in range(count)]


def rotate(base: Path, records: list[Sample], **options: object) -> RotatingLogWriter:
    fmt = "csv" if ".csv" in base.name else "jsonl"
    settings = {"size_bytes": None, "every_s": None, "keep": None, **options}
    with RotatingLogWriter(str(base), fmt, **settings) as writer:  # type: ignore[arg-type]
        for sample in records:
            writer.write(sample)
    return writer


def test_sizes_and_ages_parse_with_one_line_errors() -> None:
    assert parse_size_bytes("1GB") == 10**9 and parse_size_bytes("2GiB") == 2 * 1024**3
    assert parse_size_bytes("500 MB") == 500 * 10**6
    assert parse_age_s("1h") == 3600 and parse_age_s("30m") == 1800 and parse_age_s("1d") == 86400
    for bad in ("", "1XB", "-1GB", "10"):
        with pytest.raises(UsageError, match="--rotate-size"):
            parse_size_bytes(bad)
    for bad in ("1y", "h", "0.1s"):
        with pytest.raises(UsageError, match="--rotate-every"):
            parse_age_s(bad)


@pytest.mark.parametrize("name", ["run.jsonl", "run.jsonl.zst", "run.csv.gz"])
def test_rotation_by_size_keeps_every_record_once_in_time_order(tmp_path: Path, name: str) -> None:
    base = tmp_path / name
    records = samples(60)
    writer = rotate(base, records, size_bytes=4096)
    files = rotated_files(str(base))
    assert len(files) >= 3 and files == writer.files_written == sorted(files)
    assert writer.records_written == 60
    for path in files:  # each file is a whole log on its own (a CSV file has its header)
        assert len(list(read_log(path))) >= 1
    for spelling in (str(base), str(tmp_path), str(tmp_path / ("run.*" + name[3:]))):
        back = list(read_log(spelling))
        assert [s.timestamp for s in back] == [s.timestamp for s in records], spelling
    assert summarize_samples(read_samples(str(base)), "x").samples == 60


def test_rotation_by_age_starts_on_the_clock_and_names_sort_by_time(tmp_path: Path) -> None:
    base = tmp_path / "run.jsonl.zst"
    rotate(base, samples(100, start=HOUR - 30.25), every_s=60.0)  # from 30 s before a minute to 69 s after
    files = [os.path.basename(path) for path in rotated_files(str(base))]
    assert files == [
        os.path.basename(rotated_name(str(base), HOUR - 30.25)),
        os.path.basename(rotated_name(str(base), HOUR - 0.25 + 1)),
        os.path.basename(rotated_name(str(base), HOUR + 59.75 + 1)),
    ]
    assert files[0] == "run.2023-11-14T22-59-29.750Z.jsonl.zst"


def test_keep_removes_the_oldest_files(tmp_path: Path) -> None:
    base = tmp_path / "run.jsonl"
    (tmp_path / "other.jsonl").write_text("not part of the set\n")
    rotate(base, samples(240), every_s=60.0, keep=2)
    files = rotated_files(str(base))
    assert len(files) == 2
    back = list(read_log(str(base)))
    assert back[0].timestamp == HOUR + 120 and back[-1].timestamp == HOUR + 239
    assert (tmp_path / "other.jsonl").exists()


def test_a_rotated_set_with_a_gap_reads_as_one_log_with_the_gap_shown(tmp_path: Path) -> None:
    base = tmp_path / "run.jsonl.zst"
    rotate(base, [*samples(10), *samples(10, start=HOUR + 3600)], every_s=3600.0)
    assert len(rotated_files(str(base))) == 2
    notes: list[str] = []
    assert len(list(read_log(str(base), on_warning=notes.append))) == 20
    assert len(notes) == 1 and "starts 3591 s after" in notes[0] and "the gap has no samples" in notes[0]
    warnings: list[str] = []
    telemetry = summarize_samples(read_samples(str(tmp_path), warnings), "x", warnings)
    assert telemetry.samples == 20 and any("gap" in note for note in warnings)
    power = next(panel for panel in telemetry.panels if panel.id == "power").lines[0]
    hole = power.v.index(None)
    assert power.t[hole - 1] == 9.0 and power.t[hole + 1] == 3600.0  # the line breaks across the gap
    assert power.v.count(None) == 1


def test_a_folder_or_glob_without_logs_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="a folder with no log in it"):
        log_files(str(tmp_path))
    with pytest.raises(BadInputError, match="no file matches"):
        log_files(str(tmp_path / "run.*.jsonl"))


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "GPUSCOPE_FAKE_NVML": "gpus=2xh200"}
    env.pop("PYTHONSTARTUP", None)
    return env


def test_a_reader_following_a_rotating_logger_never_loses_or_repeats_a_record(tmp_path: Path) -> None:
    """The logger rotates every few records (--rotate-size 8KiB) while a reader reads the set again
    and again: every read is a prefix of the final log, and the final log has every record written."""
    base = tmp_path / "run.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuscope", "log", "--interval", "0.1", "--duration", "4",
         "-o", str(base), "--rotate-size", "8KiB", "--no-processes"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env(), cwd=REPO,
    )  # fmt: skip
    reads: list[list[float]] = []
    try:
        while process.poll() is None:
            if rotated_files(str(base)):
                try:
                    reads.append([s.timestamp for s in read_log(str(base), on_warning=lambda message: None)])
                except BadInputError as exc:
                    assert "empty telemetry log" in str(exc)  # a file opened, its first record not yet written
            time.sleep(0.05)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    final = [s.timestamp for s in read_log(str(base))]
    written = int(stderr.split("wrote ")[1].split()[0])
    assert len(final) == written and final == sorted(final) and len(set(final)) == len(final)
    assert len(rotated_files(str(base))) >= 3
    assert len(reads) >= 5
    for seen in reads:
        assert seen == final[: len(seen)]


def gpuscope(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuscope", *args], capture_output=True, text=True, env=_env(), cwd=REPO, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "expected", "code"),
    [
        (["--rotate-size", "lots"], "--rotate-size 'lots': expected a size such as", 2),
        (["--rotate-every", "1y"], "--rotate-every '1y': expected a duration", 2),
        (["--keep", "3"], "--keep needs --rotate-size or --rotate-every", 2),
        (["--rotate-size", "1GB", "--keep", "0"], "--keep 0: at least 1", 2),
        (["--rotate-size", "1GB", "--append"], "--append does not apply with rotation", 2),
        (["--format", "csv"], "--format csv but --output", 2),
    ],
)
def test_bad_rotation_options_are_one_line_errors(tmp_path: Path, args: list[str], expected: str, code: int) -> None:
    result = gpuscope("log", "--duration", "1", "-o", str(tmp_path / "run.jsonl.zst"), *args)
    assert result.returncode == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuscope: error: ") and expected in lines[0], result.stderr
    assert not list(tmp_path.iterdir())


def test_rotation_needs_a_file_to_name_the_set() -> None:
    result = gpuscope("log", "--duration", "1", "--rotate-size", "1GB")
    assert result.returncode == 2 and "need --output FILE" in result.stderr
