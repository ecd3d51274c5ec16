"""Transfers as nvbandwidth measures them (CUDA only; torch is imported inside each function):
host-to-device and device-to-host on a copy engine and with an SM copy kernel, pinned and
pageable, each way and both at once; every ordered device pair on copy engines, one direction
and bidirectional, with the topology's expected figure in each cell; small-transfer latency.

Timing: CUDA events on the copy's own stream, ``repeats`` copies after one warm-up copy; bytes =
the buffer, once per copy (one direction; a bidirectional figure is one direction's rate while the
opposite copy runs on another stream). SM copies use the Triton ``copy`` kernel of
:mod:`gpuscope.probing.triton_kernels` reading (or writing) pinned host memory through unified
addressing. Run on a GPU machine::

    python -m gpuscope.probing.transfer_cuda OUT.json [--size-mib 256] [--repeats 5] [--sysfs /sys]

which prints the tables and writes a :class:`~gpuscope.probing.transfer_matrix.TransferReport`.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from gpuscope.probing.transfer_matrix import (
    HostTransfer,
    PairCell,
    PairMatrix,
    TransferReport,
    expected_cell,
    flag_cells,
    render_host_transfers,
    render_pair_matrix,
)
from gpuscope.schema.core import encode_json
from gpuscope.telemetry.topology import Topology

if TYPE_CHECKING:
    import torch

__all__ = ["host_transfers", "pair_matrix", "latencies", "main", "load_report"]

_LATENCY_COPIES = 200


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _timed(stream: torch.cuda.Stream, run: Callable[[], object], repeats: int) -> tuple[object, object]:
    """Record ``repeats`` calls of ``run`` on ``stream`` between two events; returns the events."""
    import torch

    with torch.cuda.stream(stream):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record(stream)
        for _ in range(repeats):
            run()
        end.record(stream)
    return start, end


def _rate(size_bytes: int, repeats: int, events: tuple[object, object]) -> float:
    start, end = events
    elapsed_s = float(start.elapsed_time(end)) / 1e3  # type: ignore[attr-defined]
    return size_bytes * repeats / elapsed_s if elapsed_s > 0 else float("nan")


def _sm_into(gpu: torch.Tensor, host: torch.Tensor) -> Callable[[], object]:
    return _sm_copy(host, gpu)


def _sm_from(gpu: torch.Tensor, host: torch.Tensor) -> Callable[[], object]:
    return _sm_copy(gpu, host)


def _sm_copy(src: torch.Tensor, dst: torch.Tensor) -> Callable[[], object]:
    from gpuscope.probing import triton_kernels

    programs = 4 * 132  # enough CTAs in flight for any current GPU; one pass per launch
    return lambda: triton_kernels.launch_bandwidth("copy", [src, dst], 1, programs)


def host_transfers(device: int, size_bytes: int, repeats: int, expected: float | None) -> list[HostTransfer]:
    """H2D and D2H: copy engine pinned and pageable, SM copy pinned, and both directions at once
    (copy engine, pinned). ``expected``: the GPU's PCIe link at its maximum, one direction."""
    import torch

    torch.cuda.set_device(device)
    elements = size_bytes // 4
    gpu_buffer = torch.rand(elements, device=device)
    gpu_other = torch.empty(elements, device=device)
    rows: list[HostTransfer] = []

    def measure(
        name: str, direction: str, engine: str, memory: str, make: Callable[[torch.Tensor], Callable[[], object]]
    ) -> None:
        row = HostTransfer(
            name=name, direction=direction, engine=engine, memory=memory, bidirectional=False,
            size_bytes=elements * 4, expected_bytes_per_s=expected,
        )  # fmt: skip
        try:
            host = torch.rand(elements, pin_memory=(memory == "pinned"))
            run = make(host)
            stream = torch.cuda.Stream(device)
            with torch.cuda.stream(stream):
                run()  # warm-up
            events = _timed(stream, run, repeats)
            stream.synchronize()
            row.bytes_per_s = _rate(row.size_bytes, repeats, events)
        except Exception as exc:  # noqa: BLE001 - one failing transfer never spoils the table
            row.error = _first_line(exc)
        rows.append(row)

    for memory in ("pinned", "pageable"):
        blocking = memory == "pinned"  # a pageable copy is synchronous whatever it is asked
        measure(f"h2d.ce.{memory}", "h2d", "ce", memory, functools.partial(_ce_into, gpu_buffer, blocking))
        measure(f"d2h.ce.{memory}", "d2h", "ce", memory, functools.partial(_ce_from, gpu_buffer, blocking))
    measure("h2d.sm.pinned", "h2d", "sm", "pinned", functools.partial(_sm_into, gpu_buffer))
    measure("d2h.sm.pinned", "d2h", "sm", "pinned", functools.partial(_sm_from, gpu_buffer))
    rows.extend(_bidirectional_host(device, elements, repeats, expected, gpu_buffer, gpu_other))
    return rows


def _bidirectional_host(
    device: int, elements: int, repeats: int, expected: float | None, up: torch.Tensor, down: torch.Tensor
) -> list[HostTransfer]:
    import torch

    rows = [
        HostTransfer(
            name=f"{direction}.ce.pinned.bidir",
            direction=direction,
            engine="ce",
            memory="pinned",
            bidirectional=True,
            size_bytes=elements * 4,
            expected_bytes_per_s=expected,
        )  # fmt: skip
        for direction in ("h2d", "d2h")
    ]
    try:
        host_in = torch.rand(elements, pin_memory=True)
        host_out = torch.empty(elements, pin_memory=True)
        streams = [torch.cuda.Stream(device), torch.cuda.Stream(device)]
        runs = [_ce(up, host_in, True), _ce(host_out, down, True)]
        for stream, run in zip(streams, runs, strict=True):
            with torch.cuda.stream(stream):
                run()
        torch.cuda.synchronize(device)
        events = [_timed(stream, run, repeats) for stream, run in zip(streams, runs, strict=True)]
        torch.cuda.synchronize(device)
        for row, pair in zip(rows, events, strict=True):
            row.bytes_per_s = _rate(row.size_bytes, repeats, pair)
    except Exception as exc:  # noqa: BLE001
        for row in rows:
            row.error = _first_line(exc)
    return rows


def pair_matrix(
    devices: list[int], size_bytes: int, repeats: int, *, bidirectional: bool, topology: Topology | None
) -> PairMatrix:
    """Every ordered pair of ``devices`` on copy engines (``Tensor.copy_`` between GPUs: peer
    copies when the driver allows them), each cell timed on the source GPU's stream."""
    import torch

    started = time.perf_counter()
    elements = size_bytes // 4
    buffers = {d: (torch.rand(elements, device=d), torch.empty(elements, device=d)) for d in devices}
    streams = {d: torch.cuda.Stream(d) for d in devices}
    cells: list[PairCell] = []
    for src in devices:
        for dst in devices:
            if src == dst:
                continue
            connection, expected = expected_cell(topology, src, dst)
            cell = PairCell(src=src, dst=dst, connection=connection, expected_bytes_per_s=expected)
            try:
                forward = _copier(buffers[dst][1], buffers[src][0])
                backward = _copier(buffers[src][1], buffers[dst][0])
                for device, run in ((src, forward), (dst, backward)):
                    with torch.cuda.stream(streams[device]):
                        run()
                for device in (src, dst):
                    torch.cuda.synchronize(device)
                events = _timed(streams[src], forward, repeats)
                if bidirectional:
                    _timed(streams[dst], backward, repeats)
                for device in (src, dst):
                    torch.cuda.synchronize(device)
                cell.bytes_per_s = _rate(elements * 4, repeats, events)
            except Exception as exc:  # noqa: BLE001
                cell.error = _first_line(exc)
            cells.append(cell)
    return PairMatrix(
        mode="bidirectional" if bidirectional else "unidirectional", engine="copy engine", size_bytes=elements * 4,
        repeats=repeats, devices=list(devices), cells=flag_cells(cells), seconds=time.perf_counter() - started,
    )  # fmt: skip


def _copier(dst: torch.Tensor, src: torch.Tensor) -> Callable[[], object]:
    return _ce(dst, src, True)


def _sync(device: int) -> None:
    import torch

    torch.cuda.synchronize(device)


def _ce_into(gpu: torch.Tensor, non_blocking: bool, host: torch.Tensor) -> Callable[[], object]:
    return _ce(gpu, host, non_blocking)


def _ce_from(gpu: torch.Tensor, non_blocking: bool, host: torch.Tensor) -> Callable[[], object]:
    return _ce(host, gpu, non_blocking)


def _ce(dst: torch.Tensor, src: torch.Tensor, non_blocking: bool) -> Callable[[], object]:
    """A copy-engine copy ``dst <- src`` (``Tensor.copy_``: cudaMemcpyAsync)."""
    return lambda: dst.copy_(src, non_blocking=non_blocking)


def latencies(devices: list[int], copies: int = _LATENCY_COPIES) -> dict[str, float]:
    """Median seconds of one synchronous 8-byte copy: host-device each way on the first device,
    and every ordered device pair."""
    import torch

    def median(run: Callable[[], object], sync: Callable[[], None]) -> float:
        run()
        sync()
        times = []
        for _ in range(copies):
            start = time.perf_counter()
            run()
            sync()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    first = devices[0]
    small = {d: torch.zeros(2, device=d) for d in devices}
    host = torch.zeros(2, pin_memory=True)
    out: dict[str, float] = {
        "h2d": median(_ce(small[first], host, True), functools.partial(_sync, first)),
        "d2h": median(_ce(host, small[first], True), functools.partial(_sync, first)),
    }
    for src in devices:
        for dst in devices:
            if src != dst:
                out[f"d2d {src}->{dst}"] = median(_copier(small[dst], small[src]), functools.partial(_sync, src))
    return out


def main(argv: list[str] | None = None) -> int:
    """Measure everything, print the tables, write the report (exit 0; 4 without CUDA)."""
    import torch

    from gpuscope.telemetry.topology_read import read_topology

    parser = argparse.ArgumentParser(prog="python -m gpuscope.probing.transfer_cuda")
    parser.add_argument("output", type=Path)
    parser.add_argument("--size-mib", type=float, default=256.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sysfs", default="/sys")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpuscope: error: transfers need CUDA (torch.cuda.is_available() is False)", file=sys.stderr)
        return 4
    topology = read_topology(args.sysfs)
    devices = list(range(torch.cuda.device_count()))
    size = int(args.size_mib * 2**20)
    pcie = topology.gpus[0].pcie.expected_bytes_per_s if topology.gpus else None
    report = TransferReport(device=0, host=host_transfers(0, size, args.repeats, pcie))
    if len(topology.gpus) != len(devices):
        report.notes.append("NVML and CUDA see different GPUs: expected figures may not match their cells")
    if len(devices) >= 2:
        for bidirectional in (False, True):
            report.matrices.append(
                pair_matrix(devices, size, args.repeats, bidirectional=bidirectional, topology=topology)
            )
    else:
        report.notes.append("one GPU: no device pairs")
    report.latency_s = latencies(devices)
    print(render_host_transfers(report.host))
    for matrix in report.matrices:
        print()
        print(render_pair_matrix(matrix))
        print(f"({matrix.seconds:.1f} s)")
    print()
    for name, seconds in report.latency_s.items():
        print(f"latency {name}: {seconds * 1e6:.1f} us")
    args.output.write_bytes(encode_json(report))
    return 0


def load_report(path: Path) -> TransferReport:
    """A report written by :func:`main`."""
    return msgspec.json.decode(path.read_bytes(), type=TransferReport)


if __name__ == "__main__":
    raise SystemExit(main())
