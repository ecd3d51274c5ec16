"""Compressed logs (issue 35): indexed zstd/gzip frames, cut files, --append, the readers."""

from __future__ import annotations

import gzip
import os
import subprocess
import warnings
from pathlib import Path

import pytest
import zstandard
from support.samples import make_sample

from gpuscope.errors import BadInputError, UsageError
from gpuscope.report.telemetry import read_samples, summarize_samples
from gpuscope.telemetry.logfile import TruncatedLogWarning, open_log_writer, read_log, sample_to_json_dict
from gpuscope.telemetry.logframes import scan_frames, sniff_codec
from gpuscope.telemetry.records import Sample

NAMES = ["run.jsonl.zst", "run.jsonl.gz", "run.csv.gz", "run.csv.zst"]


def samples(count: int, start: float = 1_700_000_000.0, step_s: float = 1.0) -> list[Sample]:
    return [make_sample(tick=k, gpus=2, timestamp=start + k * step_s - k) for k in range(count)]


def write(path: Path, records: list[Sample], interval_s: float = 1.0) -> None:
    fmt = "csv" if ".csv" in path.name else "jsonl"
    with open_log_writer(path, fmt, interval_s=interval_s) as writer:
        for sample in records:
            writer.write(sample)


def plain_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix == ".zst":
        return zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True).read()
    return gzip.decompress(data)


@pytest.mark.parametrize("name", NAMES)
def test_compressed_log_reads_back_and_decompresses_with_the_standard_tools(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    records = samples(23)
    write(path, records)
    assert sniff_codec(path.read_bytes()[:4]) == name.rsplit(".", 1)[1]
    back = list(read_log(path))
    assert [sample_to_json_dict(s) for s in back] == [sample_to_json_dict(s) for s in records]
    # each frame holds whole records, at most 5 at a 1 s interval (5 s), and is listed by its header
    with open(path, "rb") as handle:
        scan = scan_frames(handle.fileno(), name.rsplit(".", 1)[1])
    assert scan.indexed and scan.cut == 0
    assert [frame.count for frame in scan.frames] == [5, 5, 5, 5, 3]
    assert scan.frames[1].first_s == records[5].timestamp and scan.frames[1].last_s == records[9].timestamp
    # what a decompressor prints is the plain log (a CSV with one header)
    text = plain_bytes(path).decode()
    plain = tmp_path / name.rsplit(".", 1)[0]
    write(plain, records)
    assert text == plain.read_text()


def test_zstdcat_prints_the_plain_log(tmp_path: Path) -> None:
    if subprocess.run(["which", "zstdcat"], capture_output=True).returncode != 0:
        pytest.skip("zstdcat is not installed")
    path = tmp_path / "run.jsonl.zst"
    write(path, samples(7))
    out = subprocess.run(["zstdcat", str(path)], capture_output=True, check=True).stdout
    assert out.count(b"\n") == 7 and out.startswith(b'{"schema_version":1,"timestamp":')


def test_frames_follow_the_interval(tmp_path: Path) -> None:
    """At 0.1 s a frame holds 50 records (5 s); at 10 s every record is its own frame."""
    for interval_s, expected in ((0.1, [50, 10]), (10.0, [1, 1, 1])):
        path = tmp_path / f"i{interval_s}.jsonl.zst"
        write(path, samples(sum(expected), step_s=interval_s), interval_s=interval_s)
        with open(path, "rb") as handle:
            assert [frame.count for frame in scan_frames(handle.fileno(), "zst").frames] == expected


@pytest.mark.parametrize("name", ["run.jsonl.zst", "run.csv.gz"])
def test_a_file_cut_mid_frame_reads_up_to_its_last_whole_frame(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    write(path, samples(12))
    data = path.read_bytes()
    with open(path, "rb") as handle:
        frames = scan_frames(handle.fileno(), name.rsplit(".", 1)[1]).frames
    last, end_of_whole = frames[-1], frames[-2].offset + frames[-2].length
    for cut in sorted({end_of_whole + 1, end_of_whole + 20, last.offset + last.length // 2, len(data) - 1}):
        path.write_bytes(data[:cut])
        notes: list[str] = []
        back = list(read_log(path, on_warning=notes.append))
        assert len(back) == 10, cut  # the two whole frames
        assert notes and "incomplete last frame" in notes[0]
        report_notes: list[str] = []
        telemetry = summarize_samples(read_samples(path, report_notes), "x", report_notes)
        assert telemetry.samples == 10 and any("incomplete" in note for note in report_notes)


def test_a_corrupt_frame_in_the_middle_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl.zst"
    write(path, samples(12))
    with open(path, "rb") as handle:
        frame = scan_frames(handle.fileno(), "zst").frames[1]
    data = bytearray(path.read_bytes())
    data[frame.offset + frame.length // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(BadInputError, match=r"run\.jsonl\.zst: corrupt compressed frame .* at byte \d+"):
        list(read_log(path))
    with pytest.raises(BadInputError, match="corrupt compressed frame"):
        summarize_samples(read_samples(path), "x")


def test_a_log_compressed_by_another_program_still_reads(tmp_path: Path) -> None:
    plain = tmp_path / "run.jsonl"
    write(plain, samples(6))
    other = tmp_path / "other.jsonl.zst"
    other.write_bytes(zstandard.ZstdCompressor().compress(plain.read_bytes()))
    gz = tmp_path / "other.jsonl.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    for path in (other, gz):
        assert len(list(read_log(path))) == 6
        assert summarize_samples(read_samples(path), "x").samples == 6


def test_append_continues_a_compressed_log_after_a_cut_frame(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl.zst"
    write(path, samples(12))
    path.write_bytes(path.read_bytes()[:-7])  # a killed run
    with open_log_writer(path, "jsonl", existing="append") as writer:
        for sample in samples(3, start=1_700_001_000.0):
            writer.write(sample)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncatedLogWarning)
        assert len(list(read_log(path))) == 13


def test_append_refuses_a_file_that_is_not_a_compressed_gpuscope_log(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(b"hello\n"))
    before = path.read_bytes()
    with pytest.raises(UsageError, match="not a compressed log written by gpuscope log"):
        open_log_writer(path, "jsonl", existing="append")
    assert path.read_bytes() == before
    plain = tmp_path / "text.jsonl.gz"
    plain.write_text("not compressed\n")
    with pytest.raises(UsageError, match="plain text, not what its name says"):
        open_log_writer(plain, "jsonl", existing="append")


def test_a_full_disk_cuts_back_to_the_last_whole_frame(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from gpuscope.errors import GpuscopeError
    from gpuscope.telemetry import logfile

    path = tmp_path / "run.jsonl.zst"
    writer = open_log_writer(path, "jsonl")
    real_write = os.write
    calls = {"n": 0}

    def filling_write(fd: int, data: bytes) -> int:
        calls["n"] += 1
        if calls["n"] == 3:
            real_write(fd, bytes(data)[:10])  # part of the frame reached the disk
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(logfile.os, "write", filling_write)
    with pytest.raises(GpuscopeError, match="No space left on device after 10 records"):
        for sample in samples(15):
            writer.write(sample)
    writer._pending.clear()
    writer.close()
    monkeypatch.undo()
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncatedLogWarning)
        assert len(list(read_log(path))) == 10


def test_plain_logs_written_before_compression_still_read(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    write(path, samples(4))
    assert len(list(read_log(path))) == 4
    assert summarize_samples(read_samples(path), "x").samples == 4
