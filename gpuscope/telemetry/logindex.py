"""Replay without loading the log: an index of blocks (time range, byte range) and the samples
decoded only for the blocks shown.

A compressed log's blocks are its frames, listed from their headers
(:mod:`gpuscope.telemetry.logframes`) without decompressing anything; a plain log is cut into
blocks of about 4 MiB at line ends (one pass over the bytes, no JSON decoded but each block's
first line). ``gpuscope replay`` reads it through a cursor (:mod:`gpuscope.commands.replay`): the first
frame needs one block decoded, a seek one or a few more, and only the last blocks decoded stay in
memory (about 1,500 samples). Gaps between the files of a rotated set are skipped in at most 1 s of
wall time (and listed in :attr:`LogIndex.gaps`).
"""

from __future__ import annotations

import bisect
import os
import re
import stat
from array import array
from collections import OrderedDict
from dataclasses import dataclass

import msgspec

from gpuscope.batchgc import few_collections
from gpuscope.errors import BadInputError
from gpuscope.fileio import check_input_size
from gpuscope.schema.kinds import LOG, sniff_kind, wrong_kind_message
from gpuscope.telemetry.logframes import FrameError, decode_frame, scan_frames, sniff_codec
from gpuscope.telemetry.logpaths import describe_gap, log_files
from gpuscope.telemetry.logread import MAX_LINE_BYTES, read_log, samples_of_bytes
from gpuscope.telemetry.records import Sample

__all__ = ["Block", "LogIndex", "GAP_WAIT_S"]

_BLOCK_BYTES = 4 * 1024 * 1024
#: Decoded samples kept (a seek rebuilds up to 900 samples of chart history; a sample is ~40 KB of objects).
_CACHED_SAMPLES = 1500
#: Wall seconds a replay waits at a gap (a time jump between two files of a set).
GAP_WAIT_S = 1.0


@dataclass(frozen=True, slots=True)
class Block:
    """Samples ``[start, start + count)`` of the log, in file ``path`` at ``[offset, offset + length)``."""

    path: str
    codec: str | None
    offset: int
    length: int
    first_s: float
    count: int
    header: bytes  # a CSV file's header line (prepended to each block), b"" for JSON lines
    first_line: int = 1  # the line number of the block's first line in the (decompressed) file


class _Stamp(msgspec.Struct):
    timestamp: float


def _first_stamp(line: bytes, csv: bool) -> float:
    try:
        if csv:
            return float(line.split(b",", 2)[1])
        return msgspec.json.decode(line, type=_Stamp).timestamp
    except (ValueError, IndexError, RecursionError, msgspec.DecodeError, msgspec.ValidationError):
        return float("nan")


class LogIndex:
    """The blocks of a log (a file, folder, glob or rotated set), oldest first."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.blocks: list[Block] = []
        self.warnings: list[str] = []
        self.gaps: list[str] = []
        for name in log_files(path):
            before = len(self.blocks)
            self._add_file(name)
            if before and len(self.blocks) > before:
                previous = self.blocks[before - 1]
                last = self._samples(previous)
                gap = describe_gap(previous.path, last[-1].timestamp, name, self.blocks[before].first_s, _step_s(last))
                if gap:
                    self.gaps.append(gap)
        if not self.blocks:
            raise BadInputError(f"{path}: empty telemetry log (no records)")
        self.starts = array("q", [0])
        for block in self.blocks:
            self.starts.append(self.starts[-1] + block.count)
        self.first_times = [block.first_s for block in self.blocks]
        self._cache: OrderedDict[int, list[Sample]] = OrderedDict()
        self._cached = 0  # samples held in _cache

    def __len__(self) -> int:
        return self.starts[-1]

    def _add_file(self, name: str) -> None:
        try:
            with open(name, "rb") as handle:
                fd = handle.fileno()
                check_input_size(fd, name, "telemetry log")
                if not stat.S_ISREG(os.fstat(fd).st_mode):  # a device or FIFO: read once, as a stream
                    self._add_loaded(name)
                    return
                codec = sniff_codec(os.pread(fd, 4, 0))
                if codec is None:
                    _refuse_another_kind(name, fd)
                    self._add_plain(name, fd)
                    return
                scan = scan_frames(fd, codec)
                if not scan.indexed:  # compressed by another program: no frames to seek by
                    self._add_loaded(name)
                    return
                if scan.cut:
                    self.warnings.append(f"{name}: incomplete last frame skipped (the writer was probably killed)")
                header = b""
                line = 1
                for number, frame in enumerate(scan.frames):
                    if number == 0:
                        first = decode_frame(codec, os.pread(fd, frame.length, frame.offset))
                        if first.startswith(b"schema_version,"):
                            header = first[: first.index(b"\n") + 1]
                    block = Block(name, codec, frame.offset, frame.length, frame.first_s, frame.count, header, line)
                    self.blocks.append(block)
                    line += frame.count + (1 if header and number == 0 else 0)
        except OSError as exc:
            raise BadInputError(f"{name}: cannot read telemetry log: {exc.strerror or exc}") from None
        except FrameError as exc:
            raise BadInputError(f"{name}: {exc}") from None

    def _add_plain(self, name: str, fd: int) -> None:
        size = os.fstat(fd).st_size
        offset = 0
        header = b""
        line = 1
        while offset < size:
            data = os.pread(fd, _BLOCK_BYTES, offset)
            end = data.rfind(b"\n")
            if end < 0 and len(data) == _BLOCK_BYTES:  # one long line: read up to the longest a record may be
                data = os.pread(fd, MAX_LINE_BYTES + 1, offset)
                end = data.rfind(b"\n")
                if end < 0 and len(data) > MAX_LINE_BYTES:
                    raise BadInputError(
                        f"{name}:{line}: line longer than {MAX_LINE_BYTES} bytes; not a gpuscope telemetry record"
                    )
            if end < 0:
                self.warnings.append(f"{name}: incomplete last line skipped (the writer was probably killed)")
                break
            block = data[: end + 1]
            start = offset
            if offset == 0 and block.startswith(b"schema_version,"):
                header = block[: block.index(b"\n") + 1]
                block = block[len(header) :]
                start += len(header)
                line += 1
            count = block.count(b"\n")
            if count:
                newline = block.find(b"\n")
                stamp = _first_stamp(block[:newline], bool(header))
                self.blocks.append(Block(name, None, start, len(block), stamp, count, header, line))
            line += count
            offset += end + 1

    def _add_loaded(self, name: str) -> None:
        """A file without an index: decoded once, held as one block."""
        samples = list(read_log(name, on_warning=self.warnings.append))
        block = Block(name, "loaded", len(self.blocks), 0, samples[0].timestamp, len(samples), b"")
        self.blocks.append(block)
        self._loaded = getattr(self, "_loaded", {})
        self._loaded[block.offset] = samples

    def _samples(self, block: Block) -> list[Sample]:
        if block.codec == "loaded":
            return self._loaded[block.offset]  # type: ignore[no-any-return]
        with open(block.path, "rb") as handle:
            data = os.pread(handle.fileno(), block.length, block.offset)
        try:
            if block.codec is not None:
                data = decode_frame(block.codec, data)
                if block.header and data.startswith(block.header):
                    data = data[len(block.header) :]
        except FrameError as exc:
            raise BadInputError(f"{block.path}: {exc} at byte {block.offset}") from None
        with few_collections():
            try:
                samples = samples_of_bytes(block.header + data, block.path, self.warnings.append)
            except BadInputError as exc:  # line numbers of the block -> of the file
                shift = block.first_line - (2 if block.header else 1)
                text = re.sub(
                    rf"^{re.escape(block.path)}:(\d+):",
                    lambda match: f"{block.path}:{int(match.group(1)) + shift}:",
                    str(exc),
                )
                raise BadInputError(text) from None
        if not samples:
            raise BadInputError(f"{block.path}: no record at byte {block.offset}")
        while len(samples) < block.count:  # blank lines counted as records: keep positions
            samples.append(samples[-1])
        return samples[: block.count]

    def block_samples(self, number: int) -> list[Sample]:
        """The samples of block ``number`` (decoded once, the last few kept)."""
        cached = self._cache.get(number)
        if cached is not None:
            self._cache.move_to_end(number)
            return cached
        samples = self._samples(self.blocks[number])
        self._cache[number] = samples
        self._cached += len(samples)
        while self._cached > _CACHED_SAMPLES and len(self._cache) > 1:
            self._cached -= len(self._cache.popitem(last=False)[1])
        return samples

    def sample(self, position: int) -> Sample:
        """The sample at ``position`` (0-based over the whole log)."""
        number = bisect.bisect_right(self.starts, position) - 1
        return self.block_samples(number)[position - self.starts[number]]

    def position_at(self, time_s: float) -> int:
        """The last sample at or before ``time_s`` (0 before the first)."""
        number = max(0, bisect.bisect_right(self.first_times, time_s) - 1)
        times = [sample.timestamp for sample in self.block_samples(number)]
        return self.starts[number] + max(0, bisect.bisect_right(times, time_s) - 1)


def _step_s(samples: list[Sample]) -> float:
    return samples[-1].timestamp - samples[-2].timestamp if len(samples) > 1 else 1.0


def _refuse_another_kind(name: str, fd: int) -> None:
    """Raise :class:`BadInputError` saying what ``name`` is when it is a gpuscope file of another kind
    (a probe results file, a report): its first line is not a log record, so it is read whole to tell."""
    first = os.pread(fd, 64 * 1024, 0).lstrip().split(b"\n", 1)[0]
    if first.startswith(b"schema_version,") or sniff_kind(first) == LOG:
        return
    problem = wrong_kind_message(name, os.pread(fd, 64 * 1024 * 1024, 0), LOG)
    if problem is not None:
        raise BadInputError(problem)
