"""A fast read of a JSON-lines log for reductions (``report --log``): only the fields a report
uses, decoded by narrow msgspec types that skip the rest of each line unparsed.

The narrow types take every field they read with the same type and range as the full wire types
(:mod:`gpuscope.telemetry.wire`); a metric ``null`` with a reason in its object's ``unavailable``
map becomes :class:`~gpuscope.telemetry.values.Unavailable`, as the full reader makes it. Any
line the narrow types refuse, a CSV log, or a compressed file without gpuscope's frame index
hands over to :func:`gpuscope.telemetry.logread.read_log` at that file, which says what is wrong
in one line naming the file and line (or skips a cut last line with its warning). Every field the
narrow types leave out is neither read nor checked: that is the saving.
"""

from __future__ import annotations

import gc
import os
import stat
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import msgspec

from gpuscope.batchgc import few_collections
from gpuscope.errors import BadInputError
from gpuscope.fileio import check_input_size
from gpuscope.telemetry.logframes import FrameError, decode_frame, scan_frames, sniff_codec
from gpuscope.telemetry.logpaths import describe_gap, log_files
from gpuscope.telemetry.logread import MAX_LINE_BYTES, read_log
from gpuscope.telemetry.records import SCHEMA_VERSION, GpuProcessSample, GpuSample, HostSample, Sample
from gpuscope.telemetry.values import Unavailable
from gpuscope.telemetry.wire import field_ranges

__all__ = ["scan_log"]

_CHUNK_BYTES = 8 * 1024 * 1024


def _number(cls: type, name: str) -> Any:
    low, high, is_int = field_ranges(cls)[name]
    return Annotated[int if is_int else float, msgspec.Meta(ge=low, le=high)] | (float if is_int else None) | None


def _struct(name: str, cls: type, numbers: tuple[str, ...], others: dict[str, Any]) -> type:
    fields: list[Any] = [(field, _number(cls, field), None) for field in numbers]
    fields += [(field, kind, default) for field, (kind, default) in others.items()]
    fields.append(("unavailable", dict[str, str] | None, None))
    return msgspec.defstruct(name, fields, gc=False, forbid_unknown_fields=False)


_GPU_NUMBERS = (
    "utilization_percent", "sm_activity_percent", "tensor_activity_percent", "dram_bandwidth_bytes_per_s",
    "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s", "power_w",
    "temperature_gpu_c", "sm_clock_mhz", "memory_clock_mhz", "memory_used_bytes", "energy_j",
)  # fmt: skip
_HOST_NUMBERS = ("cpu_utilization_percent", "memory_used_bytes")
_PROCESS_NUMBERS = ("gpu_memory_bytes", "sm_percent")
_Process = _struct(
    "_Process", GpuProcessSample, _PROCESS_NUMBERS,
    {"pid": (int, 0), "name": (str | None, None), "user": (str | None, None), "kind": (str, "")},
)  # fmt: skip
_Gpu = _struct(
    "_Gpu", GpuSample, _GPU_NUMBERS,
    {"index": (int, 0), "name": (str, ""), "uuid": (str, ""), "mig_parent_index": (int | None, None),
     "mig_gpu_instance_id": (int | None, None), "mig_compute_instance_id": (int | None, None),
     "processes": (list[_Process] | None, None), "throttle_reasons": (list[str] | None, None)},  # type: ignore[valid-type]
)  # fmt: skip
_Host = _struct("_Host", HostSample, _HOST_NUMBERS, {"hostname": (str | None, None)})
_Sample = msgspec.defstruct(
    "_Sample",
    [
        ("schema_version", int),
        ("timestamp", _number(Sample, "timestamp")),
        ("host", _Host),
        ("gpus", list[_Gpu]),  # type: ignore[valid-type]
        ("driver_version", str | None, None),
        ("gpu_unavailable", str | None, None),
        ("simulated", str | None, None),
        ("alerts", list[str] | None, None),
        ("sample_cost_s", _number(Sample, "sample_cost_s"), None),
    ],
    gc=False,
)
_DECODER: msgspec.json.Decoder[Any] = msgspec.json.Decoder(_Sample)
_REASONS: dict[str, Unavailable] = {}


def _unavailable(record: Any, names: tuple[str, ...]) -> None:
    missing = record.unavailable
    if missing:
        for name in names:
            text = missing.get(name)
            if text is not None and getattr(record, name) is None:
                reason = _REASONS.get(text)
                if reason is None:
                    reason = _REASONS[text] = Unavailable.from_json(text)
                setattr(record, name, reason)


class _Refused(Exception):
    """A line the narrow types refuse: the full reader takes over."""


def _decode(line: bytes) -> Any:
    try:
        sample = _DECODER.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        raise _Refused from None
    if sample.schema_version != SCHEMA_VERSION:
        raise _Refused
    _unavailable(sample.host, _HOST_NUMBERS)
    for gpu in sample.gpus:
        _unavailable(gpu, (*_GPU_NUMBERS, "processes"))
    return sample


def _blocks(label: str, warn: Callable[[str], None]) -> Iterator[tuple[list[bytes], bytes | None]]:
    """The file's lines in blocks of whole lines, each with the file's last line when that lacks
    its newline (else None). Raises :class:`_Refused` for what the fast path does not read."""
    try:
        handle = open(label, "rb")  # noqa: SIM115 - closed below
    except OSError:
        raise _Refused from None
    with handle:
        fd = handle.fileno()
        try:
            check_input_size(fd, label, "telemetry log")
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise _Refused  # a device or FIFO: the full reader bounds its lines
            codec = sniff_codec(os.pread(fd, 4, 0))
        except OSError:
            raise _Refused from None
        if codec is None:
            rest = b""
            while True:
                data = handle.read(_CHUNK_BYTES)
                if not data:
                    break
                data = rest + data
                end = data.rfind(b"\n") + 1
                rest = data[end:]
                if len(rest) > MAX_LINE_BYTES:
                    raise _Refused  # no record is that long: the full reader says where
                if end:
                    yield data[:end].split(b"\n")[:-1], None
            if rest:
                yield [], rest
            return
        scan = scan_frames(fd, codec)
        if not scan.indexed:
            raise _Refused
        for frame in scan.frames:
            try:
                data = decode_frame(codec, os.pread(fd, frame.length, frame.offset))
            except FrameError:
                raise _Refused from None
            if not data.endswith(b"\n"):
                raise _Refused
            yield data.split(b"\n")[:-1], None
        if scan.cut:
            warn(f"{label}: incomplete last frame skipped (the writer was probably killed)")


def _scan_file(label: str, warn: Callable[[str], None]) -> Iterator[Any]:
    count = 0
    try:
        for lines, cut in _blocks(label, warn):
            for line in lines:
                if line.startswith(b"schema_version,"):
                    raise _Refused  # CSV
                if not line.strip():
                    continue
                yield _decode(line)
                count += 1
            if cut is not None and cut.strip():
                try:
                    yield _decode(cut)
                    count += 1
                except _Refused:
                    if not count:
                        raise
                    warn(f"{label}: incomplete last line skipped (the writer was probably killed)")
    except _Refused:
        for number, sample in enumerate(read_log(label, on_warning=warn)):
            if number >= count:
                yield sample
        return
    if count == 0:
        raise BadInputError(f"{label}: empty telemetry log (no records)")


def scan_log(path: str | os.PathLike[str], on_warning: Callable[[str], None]) -> Iterator[Any]:
    """Samples of a log (a file, folder, glob or rotated set) with the fields a report reads, as
    objects with :class:`~gpuscope.telemetry.records.Sample`'s attribute names; oldest first.
    Gaps between files are reported through ``on_warning``; the collector runs rarely meanwhile."""
    files = log_files(os.fspath(path))
    previous: tuple[str, float, float] | None = None
    with few_collections():
        for name in files:
            first = True
            last_s = step_s = 0.0
            for sample in _scan_file(name, on_warning):
                if first and previous is not None:
                    gap = describe_gap(previous[0], previous[1], name, sample.timestamp, previous[2])
                    if gap:
                        on_warning(gap)
                elif not first:
                    step_s = sample.timestamp - last_s
                first = False
                last_s = sample.timestamp
                yield sample
            if not first:
                previous = (name, last_s, step_s)
    gc.collect(0)
