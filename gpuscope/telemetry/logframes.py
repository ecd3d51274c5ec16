"""Compressed telemetry logs: a stream of independently decodable frames, each announced by a
small index header that decompressors skip.

A compressed log (``run.jsonl.zst``, ``run.jsonl.gz``, ``run.csv.gz``) is a concatenation of
frames; each frame holds whole lines (records) of the plain log, so ``zstdcat run.jsonl.zst`` or
``zcat run.csv.gz`` prints the plain log. Before each zstd frame stands a zstd *skippable frame*
(magic ``0x184D2A5E``, ignored by every zstd decoder); each gzip member carries the same header in
its ``FEXTRA`` field (subfield ``GS``, ignored by gzip). The header is ``GSF1`` and then, little
endian, the first and last record's ``timestamp`` (float64 seconds since the epoch), the record
count (uint32) and the byte length of the frame that follows (uint32). Hopping from header to header
lists every frame's time range and offset without decompressing anything: the index replay seeks
with. A file cut mid-frame (a killed writer, a full disk) reads up to its last whole frame.
"""

from __future__ import annotations

import io
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import zstandard

__all__ = [
    "CODECS",
    "Frame",
    "FrameScan",
    "codec_of_name",
    "plain_name",
    "sniff_codec",
    "encode_frame",
    "scan_frames",
    "decode_frame",
    "FramedReader",
]

#: Codec by file-name suffix.
CODECS = {".zst": "zst", ".gz": "gz"}
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_SKIPPABLE_MAGIC = 0x184D2A5E
_GZIP_MAGIC = b"\x1f\x8b"
_TAG = b"GSF1"
_HEADER = struct.Struct("<4sddII")  # tag, first timestamp, last timestamp, records, frame bytes
_GZIP_FIXED = struct.Struct("<2sBBIBBH")  # magic, method, flags, mtime, xfl, os, xlen
_GZIP_SUBFIELD = struct.Struct("<2sH")
_ZSTD_LEVEL = 3
#: A frame longer than this is not one gpuscope wrote (frames hold at most a few seconds).
MAX_FRAME_BYTES = 256 * 1024 * 1024


def codec_of_name(name: str) -> str | None:
    """``"zst"``, ``"gz"`` or ``None`` (plain) from the file name's last suffix."""
    return CODECS.get(os.path.splitext(name)[1].lower())


def plain_name(name: str) -> str:
    """The name without its compression suffix (``run.csv.gz`` -> ``run.csv``)."""
    stem, ext = os.path.splitext(name)
    return stem if ext.lower() in CODECS else name


def sniff_codec(head: bytes) -> str | None:
    """The codec of a file from its first bytes (``None``: plain text)."""
    if head.startswith(_ZSTD_MAGIC) or (
        len(head) >= 4 and 0x184D2A50 <= int.from_bytes(head[:4], "little") <= 0x184D2A5F
    ):
        return "zst"
    if head.startswith(_GZIP_MAGIC):
        return "gz"
    return None


_compressor = zstandard.ZstdCompressor(level=_ZSTD_LEVEL, write_checksum=True, write_content_size=True)


def encode_frame(codec: str, lines: bytes, first_s: float, last_s: float, count: int) -> bytes:
    """One indexed frame of ``lines`` (whole records), ready to append with one write."""
    if codec == "zst":
        body = _compressor.compress(lines)
        header = _HEADER.pack(_TAG, first_s, last_s, count, len(body))
        return struct.pack("<II", _SKIPPABLE_MAGIC, len(header)) + header + body
    deflate = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    data = deflate.compress(lines) + deflate.flush()
    trailer = struct.pack("<II", zlib.crc32(lines), len(lines) & 0xFFFFFFFF)
    extra_length = _GZIP_SUBFIELD.size + _HEADER.size
    fixed_size = _GZIP_FIXED.size + extra_length
    member_bytes = fixed_size + len(data) + len(trailer)
    header = _HEADER.pack(_TAG, first_s, last_s, count, member_bytes)
    fixed = _GZIP_FIXED.pack(_GZIP_MAGIC, 8, 0x04, 0, 0, 255, extra_length)
    return fixed + _GZIP_SUBFIELD.pack(b"GS", _HEADER.size) + header + data + trailer


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame of a compressed log: ``[offset, offset + length)`` decodes alone."""

    offset: int
    length: int
    first_s: float
    last_s: float
    count: int


@dataclass(slots=True)
class FrameScan:
    """The frames of a file: ``indexed`` False when the file has no gpuscope headers (a log
    compressed by another program: read it as one stream); ``end``: where the last whole frame
    ends; ``cut``: bytes after it (a cut frame or garbage)."""

    frames: list[Frame]
    indexed: bool
    end: int
    cut: int


def scan_frames(fd: int, codec: str, size: int | None = None) -> FrameScan:
    """Hop from header to header of the file open as ``fd`` (reads only the headers)."""
    size = os.fstat(fd).st_size if size is None else size
    frames: list[Frame] = []
    offset = 0
    while offset < size:
        frame = _frame_at(fd, codec, offset, size)
        if frame is None:
            break
        frames.append(frame)
        offset = frame.offset + frame.length
    indexed = bool(frames) or size == 0
    return FrameScan(frames, indexed, offset, size - offset)


def _frame_at(fd: int, codec: str, offset: int, size: int) -> Frame | None:
    """The whole frame whose header starts at ``offset``; None when there is none (cut, foreign)."""
    if codec == "zst":
        head = os.pread(fd, 8 + _HEADER.size, offset)
        if len(head) < 8 + _HEADER.size:
            return None
        magic, length = struct.unpack_from("<II", head)
        if magic != _SKIPPABLE_MAGIC or length != _HEADER.size:
            return None
        tag, first_s, last_s, count, body = _HEADER.unpack_from(head, 8)
        start = offset + 8 + _HEADER.size
    else:
        fixed_size = _GZIP_FIXED.size + _GZIP_SUBFIELD.size + _HEADER.size
        head = os.pread(fd, fixed_size, offset)
        if len(head) < fixed_size:
            return None
        magic, method, flags, _, _, _, _ = _GZIP_FIXED.unpack_from(head)
        subfield, _ = _GZIP_SUBFIELD.unpack_from(head, _GZIP_FIXED.size)
        if magic != _GZIP_MAGIC or method != 8 or flags != 0x04 or subfield != b"GS":
            return None
        tag, first_s, last_s, count, body = _HEADER.unpack_from(head, _GZIP_FIXED.size + _GZIP_SUBFIELD.size)
        start = offset
    if tag != _TAG or body > MAX_FRAME_BYTES or start + body > size:
        return None
    return Frame(start, body, first_s, last_s, count)


class FrameError(ValueError):
    """A frame does not decompress (corrupt bytes); ``str`` is one line."""


def decode_frame(codec: str, data: bytes) -> bytes:
    """The plain lines of one frame (as :func:`scan_frames` delimits it)."""
    try:
        if codec == "zst":
            return zstandard.ZstdDecompressor().decompress(data)
        return zlib.decompress(data, 31)
    except (zstandard.ZstdError, zlib.error) as exc:
        raise FrameError(f"corrupt compressed frame ({exc})") from None


class FramedReader(io.RawIOBase):
    """The plain bytes of a compressed log, frame after frame (for a line reader on top).

    An indexed file stops at its last whole frame (``cut`` says how many bytes followed it); a
    file compressed by another program is decompressed as one stream, and ``cut`` is set when it
    ends inside a frame."""

    def __init__(self, fd: int, codec: str) -> None:
        super().__init__()
        self._fd = fd
        self._codec = codec
        self.scan = scan_frames(fd, codec)
        self.cut = self.scan.cut if self.scan.indexed else 0
        self._chunks = self._indexed_chunks() if self.scan.indexed else self._stream_chunks()
        self._buffer = memoryview(b"")

    def readable(self) -> bool:
        return True

    def _indexed_chunks(self) -> Iterator[bytes]:
        for frame in self.scan.frames:
            data = os.pread(self._fd, frame.length, frame.offset)
            try:
                yield decode_frame(self._codec, data)
            except FrameError as exc:
                raise FrameError(f"{exc} at byte {frame.offset}") from None

    def _stream_chunks(self) -> Iterator[bytes]:
        with os.fdopen(os.dup(self._fd), "rb") as raw:
            raw.seek(0)
            if self._codec == "zst":
                reader: Any = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
            else:
                import gzip

                reader = gzip.GzipFile(fileobj=raw, mode="rb")
            while True:
                try:
                    chunk = reader.read(1024 * 1024)
                except (zstandard.ZstdError, EOFError, OSError, zlib.error):
                    self.cut = 1  # a stream that ends inside a frame
                    return
                if not chunk:
                    return
                yield chunk

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._buffer:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._buffer = memoryview(chunk)
        count = min(len(buffer), len(self._buffer))
        buffer[:count] = self._buffer[:count]
        self._buffer = self._buffer[count:]
        return count
