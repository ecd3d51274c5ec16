"""Collective bandwidth across the ranks of a torchrun job, one group size at a time.

Every rank calls :func:`run_collectives` (``torch.distributed`` is already initialised). For each
group size n from :func:`gpuscope.probing.cluster.group_sizes` the first n ranks form a group
(``new_group`` is called by every rank, in the same order) and time each op and size as
:mod:`gpuscope.probing.collective` does: a barrier, ``iters`` back-to-back collectives, the
slowest rank's time per collective (``ReduceOp.MAX``), best of ``samples``. Rank 0 is in every
group and returns the raw timings; the other ranks return an empty list.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["run_collectives"]


def run_collectives(
    ops: list[str],
    sizes_bytes: list[int],
    *,
    rank: int,
    world_size: int,
    device: Any,
    backend: str,
    samples: int,
    target_sample_s: float,
    warmup: int = 2,
    should_stop: Callable[[], bool] = lambda: False,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Time ``ops`` (``allreduce``, ``allgather``) at ``sizes_bytes`` for every group size.

    ``device`` is a torch device (``cpu`` with gloo, ``cuda:LOCAL_RANK`` with nccl). A stop
    request on any rank (``should_stop``) ends the sweep on all ranks at the next size.
    """
    import torch
    import torch.distributed as dist

    from gpuscope.probing.cluster import group_sizes
    from gpuscope.probing.collective import collective_kernel, time_collective, validate_collective

    is_cuda = torch.device(device).type == "cuda"

    def sync() -> None:
        if is_cuda:
            torch.cuda.synchronize(device)

    results: list[dict[str, Any]] = []
    has_into = hasattr(dist, "all_gather_into_tensor")
    everyone = torch.zeros(1)  # the default group is gloo: a CPU tensor
    for n in group_sizes(world_size):
        everyone.fill_(1.0 if should_stop() else 0.0)
        dist.all_reduce(everyone, op=dist.ReduceOp.MAX)  # all ranks agree before the next new_group
        if everyone.item() > 0:
            break
        members = list(range(n))
        group = dist.new_group(members, backend=backend)  # collective over the default group
        if rank >= n:
            continue
        flag = torch.zeros(1, device=device)
        stopped = False
        for op in ops:
            for size in sizes_bytes:
                flag.fill_(1.0 if should_stop() else 0.0)
                dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group)
                if flag.item() > 0:
                    stopped = True
                    break
                elements = max(n, size // 4 // n * n)
                run = collective_kernel(op, elements, n, device, group, has_into and is_cuda)
                iters, warm, timed = time_collective(run, sync, device, group, target_sample_s, warmup, samples)
                error = validate_collective(op, elements, n, rank, device, group, has_into and is_cuda)
                item = {
                    "op": op,
                    "group_size": n,
                    "ranks": members,
                    "size_bytes": elements * 4,
                    "iters": iters,
                    "samples_s": timed,
                    "warmup_samples_s": warm,
                    "validation_error": error,
                }
                if rank == 0:
                    results.append(item)
                    if on_result is not None:
                        on_result(item)
            if stopped:
                break
    return results
