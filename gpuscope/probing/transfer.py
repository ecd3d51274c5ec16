"""Host <-> device and device <-> device copy bandwidth against size (GPU only).

``h2d``/``d2h`` with ``pinned`` (page-locked, true async DMA on a copy engine) or ``pageable``
(ordinary) host memory; ``d2d`` copies from this GPU to every other GPU (``d2d.peer``; peer
access through NVLink or PCIe, whichever the driver uses). One direction at a time; copies are
issued with ``Tensor.copy_(non_blocking=True)`` on the probe stream and timed with CUDA events on
that stream. Bytes = the buffer size, counted once (one direction).
"""

from __future__ import annotations

from collections.abc import Callable

from gpuscope.probing.context import ProbeContext
from gpuscope.probing.environment import oom_guard
from gpuscope.probing.errors import ProbeSkipped, ValidationFailed
from gpuscope.schema.results import Measurement

__all__ = ["transfer_probe", "BYTES_RULE"]

BYTES_RULE = "buffer size, counted once per copy (one direction); GB = 1e9 bytes"


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
            emit(
                ctx.skipped(_record(ctx, direction, "pinned", 0, None), "transfers need a GPU (this run is on the CPU)")
            )
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
