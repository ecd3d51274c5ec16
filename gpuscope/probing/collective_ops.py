"""The collectives' kernels and their exact validation (torch.distributed, imported inside each
function: torch loads only in the worker processes and the distributed ranks)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from torch.distributed import ProcessGroup

__all__ = ["collective_kernel", "validate_collective"]


def collective_kernel(
    op: str, elements: int, n: int, device: torch.device, group: ProcessGroup | None, into: bool
) -> tuple[Callable[[], object], int, int]:
    """One ``op`` over ``group`` (None: every rank) on ``elements`` float32 values; ``into``: use
    ``all_gather_into_tensor``. Returns (the call, this rank's input bytes, its output bytes), the
    sizes read from the tensors the call binds."""
    import torch
    import torch.distributed as dist

    if op == "allreduce":
        buffer = torch.rand(elements, device=device).add_(0.5)
        run = lambda: dist.all_reduce(buffer, op=dist.ReduceOp.MAX, group=group)  # noqa: E731 - MAX keeps values
        return run, _nbytes(buffer), _nbytes(buffer)
    if op == "allgather":
        chunk = torch.rand(elements // n, device=device).add_(0.5)
        gathered = torch.empty(elements, device=device)
        pieces = list(gathered.chunk(n))
        if into:
            return lambda: dist.all_gather_into_tensor(gathered, chunk, group=group), _nbytes(chunk), _nbytes(gathered)
        return lambda: dist.all_gather(pieces, chunk, group=group), _nbytes(chunk), _nbytes(gathered)
    if op == "reducescatter":
        whole = torch.rand(elements, device=device).add_(0.5)
        part = torch.empty(elements // n, device=device)
        if hasattr(dist, "reduce_scatter_tensor"):
            run = lambda: dist.reduce_scatter_tensor(part, whole, op=dist.ReduceOp.MAX, group=group)  # noqa: E731
            return run, _nbytes(whole), _nbytes(part)
        chunks = list(whole.chunk(n))
        run = lambda: dist.reduce_scatter(part, chunks, op=dist.ReduceOp.MAX, group=group)  # noqa: E731
        return run, _nbytes(whole), _nbytes(part)
    if op == "alltoall":
        send = torch.rand(elements, device=device).add_(0.5)
        receive = torch.empty(elements, device=device)
        return lambda: dist.all_to_all_single(receive, send, group=group), _nbytes(send), _nbytes(receive)
    if op == "broadcast":
        buffer = torch.rand(elements, device=device).add_(0.5)
        root = _group_root(group)
        return lambda: dist.broadcast(buffer, src=root, group=group), _nbytes(buffer), _nbytes(buffer)
    raise ValueError(f"unknown collective {op!r}")


def _nbytes(tensor: torch.Tensor) -> int:
    return int(tensor.numel() * tensor.element_size())


def _group_root(group: ProcessGroup | None) -> int:
    """The global rank of the group's first member (its broadcast root)."""
    import torch.distributed as dist

    if group is None:
        return 0
    return int(dist.get_global_rank(group, 0)) if hasattr(dist, "get_global_rank") else 0


def validate_collective(
    op: str, elements: int, n: int, rank: int, device: torch.device, group: ProcessGroup | None, into: bool
) -> float:
    """One call of ``op`` with known values (SUM where it reduces); the relative error (0.0 exact)."""
    import torch
    import torch.distributed as dist

    expected_sum = n * (n + 1) / 2
    if op == "allreduce":
        buffer = torch.full((elements,), float(rank + 1), device=device)
        dist.all_reduce(buffer, op=dist.ReduceOp.SUM, group=group)
        return float((buffer - expected_sum).abs().max().item()) / expected_sum
    if op == "reducescatter":
        whole = torch.full((elements,), float(rank + 1), device=device)
        part = torch.empty(elements // n, device=device)
        if hasattr(dist, "reduce_scatter_tensor"):
            dist.reduce_scatter_tensor(part, whole, op=dist.ReduceOp.SUM, group=group)
        else:
            dist.reduce_scatter(part, list(whole.chunk(n)), op=dist.ReduceOp.SUM, group=group)
        return float((part - expected_sum).abs().max().item()) / expected_sum
    position = dist.get_group_rank(group, rank) if group is not None and hasattr(dist, "get_group_rank") else rank
    if op == "alltoall":  # chunk j of member p holds p * n + j; member p receives j * n + p from member j
        per_chunk = elements // n
        send = (torch.arange(n, device=device, dtype=torch.float32) + position * n).repeat_interleave(per_chunk)
        receive = torch.empty(elements, device=device)
        dist.all_to_all_single(receive, send, group=group)
        expected = (torch.arange(n, device=device, dtype=torch.float32) * n + position).repeat_interleave(per_chunk)
        return float((receive - expected).abs().max().item()) / (n * n)
    if op == "broadcast":
        buffer = torch.full((elements,), 7.0 if position == 0 else 0.0, device=device)
        dist.broadcast(buffer, src=_group_root(group), group=group)
        return float((buffer - 7.0).abs().max().item()) / 7.0
    chunk = torch.full((elements // n,), float(rank + 1), device=device)
    if into:
        gathered = torch.empty(elements, device=device)
        dist.all_gather_into_tensor(gathered, chunk, group=group)
    else:
        pieces = [torch.empty_like(chunk) for _ in range(n)]
        dist.all_gather(pieces, chunk, group=group)
        gathered = torch.cat(pieces)
    expected = torch.arange(1, n + 1, device=device, dtype=torch.float32).repeat_interleave(elements // n)
    return float((gathered - expected).abs().max().item()) / n
