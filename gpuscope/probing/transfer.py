"""Host <-> device and device <-> device copy bandwidth against size (GPU only).

``h2d``/``d2h`` with ``pinned`` (page-locked, true async DMA on a copy engine) or ``pageable``
(ordinary) host memory; ``d2d`` copies from this GPU to every other GPU (``d2d.peer``; peer
access through NVLink or PCIe, whichever the driver uses). One direction at a time; copies are
issued with ``Tensor.copy_(non_blocking=True)`` on the probe stream and timed with CUDA events on
that stream. Bytes = the buffer size, counted once (one direction).

With ``d2d`` on two or more GPUs, :func:`transfer_probe` adds nvbandwidth's device-pair matrix
(one direction, copy engines, every ordered pair; :mod:`gpuscope.probing.transfer_cuda`) and the
small-copy latencies as two more measurements (``parameters.matrix`` / ``parameters.latency``;
the cells and latencies in ``timing``). Without CUDA every direction is one skipped measurement.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from gpuscope.probing.context import ProbeContext
from gpuscope.probing.environment import oom_guard
from gpuscope.probing.errors import ProbeSkipped, ValidationFailed
from gpuscope.schema.core import as_detail
from gpuscope.schema.results import Measurement

__all__ = ["transfer_probe", "BYTES_RULE", "NEEDS_CUDA", "MATRIX_SIZE_MAX_BYTES", "MATRIX_REPEATS"]

BYTES_RULE = "buffer size, counted once per copy (one direction); GB = 1e9 bytes"
#: The one line a run without CUDA gets per direction.
NEEDS_CUDA = "transfers need a GPU (this run is on the CPU)"
#: The pair matrix copies the largest suite size up to this many bytes, ``MATRIX_REPEATS`` times a cell.
MATRIX_SIZE_MAX_BYTES = 64 * 2**20
MATRIX_REPEATS = 5


def _record(ctx: ProbeContext, direction: str, memory: str, size: int, peer: str | None) -> Measurement:
    label = f"{direction}.{memory}" if direction != "d2d" else "d2d.peer"
    return Measurement(
        kind="transfer",
        name=f"transfer {label} {size} B" + (f" to {peer}" if peer else ""),
        device=ctx.device.name,
        parameters=dict(
            direction=direction,
            memory=memory if direction != "d2d" else "device",
            size_bytes=size,
            peer=peer,
            engine="copy engine (cudaMemcpyAsync via Tensor.copy_)",
        ),
        flops=0,
        bytes=size,
        counting_rule={"bytes": BYTES_RULE},
        ceiling_name=label,
    )


def _one(ctx: ProbeContext, direction: str, memory: str, size: int, peer: str | None) -> Measurement:
    import torch

    record = _record(ctx, direction, memory, size, peer)
    device = ctx.device.torch_device
    ctx.budget.check(size * (2 if direction == "d2d" else 1), f"transfer {direction} {size} B")
    with oom_guard(f"transfer {direction} {size} B", ctx.device):
        elements = size // 4
        if direction == "d2d":
            src = torch.rand(elements, device=device).add_(0.5)
            dst = torch.empty(elements, device=peer)
        else:
            host = torch.rand(elements).add_(0.5)
            if memory == "pinned":
                host = host.pin_memory()
            gpu = torch.empty(elements, device=device)
            if direction == "h2d":
                src, dst = host, gpu
            else:
                gpu.copy_(host)
                src, dst = gpu, torch.empty(elements, pin_memory=(memory == "pinned"))
            del host, gpu  # src/dst hold what is still needed; these names must not keep a buffer alive
    non_blocking = memory == "pinned" or direction == "d2d"

    def run() -> None:
        dst.copy_(src, non_blocking=non_blocking)

    def validate() -> tuple[float, float]:
        index = torch.linspace(0, elements - 1, steps=min(elements, 257)).long()
        if not torch.equal(dst.cpu()[index], src.cpu()[index]):
            raise ValidationFailed(1.0, 0.0, f"{direction} copy")
        return 0.0, 0.0

    try:
        return ctx.measure(run, statistic="best", validate=validate, record=record, graphable=False)
    finally:
        # rebind rather than `del src, dst`: run/validate close over the names, and the buffers
        # must go before empty_cache can hand their memory back
        src = dst = torch.empty(0)
        torch.cuda.empty_cache()


def transfer_probe(
    directions: list[str],
    memories: list[str],
    sizes: list[int],
    ctx: ProbeContext,
    emit: Callable[[Measurement], None],
    on_step: Callable[[str], None] | None = None,
) -> None:
    """Every direction x host memory kind x size; ``d2d`` runs once per other GPU."""
    if not ctx.device.is_gpu:
        for direction in directions:
            emit(ctx.skipped(_record(ctx, direction, "pinned", 0, None), NEEDS_CUDA))
        return
    import torch

    for direction in directions:
        plan: list[tuple[str, str | None]] = [(memory, None) for memory in memories]  # (memory, peer device)
        if direction == "d2d":
            plan = [("device", f"cuda:{i}") for i in range(torch.cuda.device_count()) if i != ctx.device.index]
            if not plan:
                emit(
                    ctx.skipped(_record(ctx, "d2d", "device", 0, None), "device-to-device copies need two or more GPUs")
                )
        for memory, peer in plan:
            for size in sizes:
                ctx.check_cancel()
                if on_step is not None:
                    on_step(f"transfer {direction} {memory} {size} B")
                try:
                    emit(_one(ctx, direction, memory, size, peer))
                except ProbeSkipped as exc:
                    emit(ctx.skipped(_record(ctx, direction, memory, size, peer), str(exc)))
    if "h2d" in directions:
        ctx.check_cancel()
        if on_step is not None:
            on_step("transfer host table (copy engine and SM copies, both ways at once)")
        emit(host_measurement(ctx, min(max(sizes), MATRIX_SIZE_MAX_BYTES), MATRIX_REPEATS))
    if "d2d" in directions and torch.cuda.device_count() >= 2:
        ctx.check_cancel()
        if on_step is not None:
            on_step("transfer pair matrix and latency")
        size = min(max(sizes), MATRIX_SIZE_MAX_BYTES)
        for record in matrix_measurements(ctx, size, MATRIX_REPEATS):
            emit(record)


def host_measurement(ctx: ProbeContext, size_bytes: int, repeats: int) -> Measurement:
    """nvbandwidth's host table (H2D and D2H on copy engines pinned and pageable, SM copies, both
    directions at once) as one measurement, the rows in ``timing.host``; failed, never raised."""
    from gpuscope.probing.transfer_cuda import host_transfers
    from gpuscope.telemetry.topology_read import read_topology

    index = ctx.device.index or 0
    draft = Measurement(
        kind="transfer", name=f"transfer host table {size_bytes} B", device=ctx.device.name,
        parameters={"host_table": "nvbandwidth", "size_bytes": size_bytes, "repeats": repeats},
        flops=0, counting_rule={"bytes": BYTES_RULE}, versions=as_detail(ctx.versions),
    )  # fmt: skip
    expected: float | None = None
    try:  # the expected figure is optional: without NVML the table still runs
        gpu = next((g for g in read_topology().gpus if g.index == index), None)
        expected = gpu.pcie.expected_bytes_per_s if gpu is not None else None
    except Exception:  # noqa: BLE001, S110
        pass
    try:
        rows = host_transfers(index, size_bytes, repeats, expected)
    except Exception as exc:  # noqa: BLE001 - the table never ends the probe
        return msgspec.structs.replace(draft, status="failed", error=_first_line(exc))
    return msgspec.structs.replace(
        draft, status="ok", timing={"host": as_detail(msgspec.to_builtins(rows)), "clock": "cuda_event"}
    )


def matrix_measurements(ctx: ProbeContext, size_bytes: int, repeats: int) -> list[Measurement]:
    """The device-pair matrix (one direction) and the small-copy latencies as two measurements;
    a failure is one failed measurement each, never an exception."""
    import torch

    from gpuscope.probing.transfer_cuda import latencies, pair_matrix
    from gpuscope.telemetry.topology_read import read_topology

    devices = list(range(torch.cuda.device_count()))
    draft = Measurement(
        kind="transfer", name=f"transfer pair matrix {size_bytes} B", device=ctx.device.name,
        parameters=as_detail({"matrix": "unidirectional", "engine": "copy engine", "size_bytes": size_bytes,
                              "repeats": repeats, "devices": as_detail(list(devices))}),
        flops=0, counting_rule={"bytes": BYTES_RULE}, versions=as_detail(ctx.versions),
    )  # fmt: skip
    latency = msgspec.structs.replace(
        draft, name="transfer latency 8 B", parameters={"latency": "8-byte copy + synchronize", "copies": 200}
    )
    out: list[Measurement] = []
    topology = None
    try:  # the expected figures are optional: without NVML the cells have none
        topology = read_topology()
    except Exception:  # noqa: BLE001, S110
        pass
    try:
        matrix = pair_matrix(devices, size_bytes, repeats, bidirectional=False, topology=topology)
        out.append(
            msgspec.structs.replace(
                draft,
                status="ok",
                timing={
                    "cells": as_detail(msgspec.to_builtins(matrix.cells)),
                    "seconds": matrix.seconds,
                    "rule": matrix.rule,
                    "clock": "cuda_event",
                },
            )  # fmt: skip
        )
    except Exception as exc:  # noqa: BLE001 - the matrix never ends the probe
        out.append(msgspec.structs.replace(draft, status="failed", error=_first_line(exc)))
    try:
        seconds = latencies(devices)
        out.append(
            msgspec.structs.replace(
                latency,
                status="ok",
                timing=as_detail({"latency_s": as_detail(dict(seconds)), "rule": "median of 200 copies"}),
            )
        )
    except Exception as exc:  # noqa: BLE001
        out.append(msgspec.structs.replace(latency, status="failed", error=_first_line(exc)))
    return out


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
