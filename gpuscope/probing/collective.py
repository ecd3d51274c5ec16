"""Collective bandwidth over torch.distributed, nccl-tests style: all-reduce, all-gather,
reduce-scatter, all-to-all and broadcast.

The probe starts ``world_size`` local worker processes (``python -m gpuscope.probing.collective``)
that meet through a file store in a private temporary folder: gloo over the loopback interface
(127.0.0.1 only) on CPU, NCCL with one GPU per rank on GPU. For each size S (bytes of the full
buffer: the all-reduce buffer, the all-gather *output*...: :data:`gpuscope.probing.collective_stats.BYTES_RULE`), every
sample is a barrier and ``iters`` back-to-back collectives, each timed alone on every rank; rank 0
gathers every rank's per-iteration times (``rank_iteration_s``), and a sample's time is the slowest
rank's mean call time. The bus factors, percentiles, per-rank spread and the straggler rule are
in :mod:`gpuscope.probing.collective_stats`.

Timing uses ``ReduceOp.MAX`` so repeated in-place reductions keep their values (same traffic and
cost as SUM); one call of each op with known values is validated exactly. ``slow_rank``/``slow_s``
make one rank sleep before each timed call (outside its timer): a rank whose work before the
collective is slower, which the others then wait for (tests and demonstrations of the straggler rule).

:func:`run_collectives` is the timing every rank runs (``torch.distributed`` already initialised),
for these workers and for the ranks of ``gpuscope probe --distributed``: for each group size n the
first n ranks form a group (``new_group`` is called by every rank, in the same order); rank 0 is
in every group and returns the raw timings, the other ranks an empty list.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from gpuscope.paths import child_env
from gpuscope.probing.collective_ops import collective_kernel, validate_collective
from gpuscope.probing.collective_stats import (
    BYTES_RULE,
    OPS,
    STRAGGLER_MARGIN,
    bus_factor,
    rank_statistics,
    sample_times_s,
)
from gpuscope.probing.context import ProbeContext, finish_measurement
from gpuscope.probing.stats import summarize
from gpuscope.schema.core import Detail, DetailMap, as_detail, encode_json
from gpuscope.schema.results import Measurement

if TYPE_CHECKING:  # the types only: torch loads in the worker processes and distributed ranks
    import torch
    from torch.distributed import ProcessGroup

__all__ = [
    "CollectiveTiming",
    "bus_factor",
    "group_sizes",
    "collective_probe",
    "collective_record",
    "run_collectives",
    "BYTES_RULE",
    "OPS",
]


class CollectiveTiming(msgspec.Struct, kw_only=True):
    """The raw timings of one op and size over a group of ranks (what rank 0 gathers; a worker
    process hands them to the probe as JSON). ``validation_error`` 0.0: validated exactly."""

    op: str
    group_size: int
    ranks: list[int]
    size_bytes: int
    iters: int
    samples_s: list[float]
    warmup_samples_s: list[float] = msgspec.field(default_factory=list)
    validation_error: float | None = None
    error: str | None = None
    #: each rank's time of every timed call, sample after sample (row r: ``ranks[r]``)
    rank_iteration_s: list[list[float]] = msgspec.field(default_factory=list)
    #: one rank's input and output buffers (bytes), read from the tensors the call binds
    rank_input_bytes: int | None = None
    rank_output_bytes: int | None = None


def group_sizes(world_size: int) -> list[int]:
    """Collective group sizes measured for ``world_size`` ranks: 2, 4, 8, ... below it, then it."""
    sizes: list[int] = []
    size = 2
    while size < world_size:
        sizes.append(size)
        size *= 2
    if world_size >= 2:
        sizes.append(world_size)
    return sizes


# --- worker (a separate process) -------------------------------------------------------------


class _WorkerSpec(msgspec.Struct, kw_only=True):
    """What :func:`collective_probe` asks of every worker process (JSON on its command line)."""

    backend: str
    world: int
    store: str  # the file store's path
    ops: list[str]
    sizes: list[int]
    samples: int
    warmup: int
    target_sample_s: float
    output: str  # where rank 0 writes the timings
    cancel_file: str  # present: stop at the next size
    timeout_s: int
    slow_rank: int | None = None  # this rank sleeps slow_s before each timed call
    slow_s: float = 0.0


def _worker(rank: int, spec: _WorkerSpec) -> int:
    """One rank: the default group is gloo (over the file store); the collectives run in a group
    of every rank on ``spec.backend`` (:func:`run_collectives`)."""
    import datetime

    import torch
    import torch.distributed as dist

    world, timeout = spec.world, datetime.timedelta(seconds=spec.timeout_s)
    dist.init_process_group("gloo", init_method=f"file://{spec.store}", rank=rank, world_size=world, timeout=timeout)
    if spec.backend == "nccl":
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
    else:
        torch.set_num_threads(1)
        device = torch.device("cpu")
    results = run_collectives(
        spec.ops,
        spec.sizes,
        rank=rank,
        world_size=world,
        device=device,
        backend=spec.backend,
        samples=spec.samples,
        target_sample_s=spec.target_sample_s,
        warmup=spec.warmup,
        should_stop=Path(spec.cancel_file).exists,
        groups=[world],
        slow_rank=spec.slow_rank,
        slow_s=spec.slow_s,
    )
    if rank == 0:
        tmp = Path(spec.output + ".tmp")
        tmp.write_bytes(encode_json(results))
        os.replace(tmp, spec.output)
    dist.barrier()
    dist.destroy_process_group()
    return 0


def run_collectives(
    ops: list[str],
    sizes_bytes: list[int],
    *,
    rank: int,
    world_size: int,
    device: torch.device | str,
    backend: str,
    samples: int,
    target_sample_s: float,
    warmup: int = 2,
    should_stop: Callable[[], bool] = lambda: False,
    on_result: Callable[[CollectiveTiming], None] | None = None,
    groups: list[int] | None = None,
    slow_rank: int | None = None,
    slow_s: float = 0.0,
) -> list[CollectiveTiming]:
    """Time ``ops`` (:data:`OPS`) at ``sizes_bytes`` for every group size (``groups``; default
    :func:`group_sizes` of ``world_size``).

    ``device`` is a torch device (``cpu`` with gloo, ``cuda:LOCAL_RANK`` with nccl). A stop
    request on any rank (``should_stop``) ends the sweep on all ranks at the next size. Rank
    ``slow_rank`` sleeps ``slow_s`` seconds before each timed call (a straggler on purpose).
    """
    unknown = [op for op in ops if op not in OPS]
    if unknown:
        raise ValueError(f"unknown collective(s) {', '.join(unknown)}; known: {', '.join(OPS)}")
    import torch
    import torch.distributed as dist

    device = torch.device(device)
    is_cuda = device.type == "cuda"

    def sync() -> None:
        if is_cuda:
            torch.cuda.synchronize(device)

    results: list[CollectiveTiming] = []
    has_into = hasattr(dist, "all_gather_into_tensor")
    everyone = torch.zeros(1)  # the default group is gloo: a CPU tensor
    for n in groups or group_sizes(world_size):
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
                run, input_bytes, output_bytes = collective_kernel(op, elements, n, device, group, has_into and is_cuda)
                delay_s = slow_s if rank == slow_rank else 0.0
                iters, warm, timed, per_rank = time_collective(
                    run, sync, device, group, target_sample_s, warmup, samples, delay_s=delay_s, group_size=n
                )
                error = validate_collective(op, elements, n, rank, device, group, has_into and is_cuda)
                item = CollectiveTiming(
                    op=op, group_size=n, ranks=members, size_bytes=elements * 4, iters=iters, samples_s=timed,
                    warmup_samples_s=warm, validation_error=error, rank_iteration_s=per_rank,
                    rank_input_bytes=input_bytes, rank_output_bytes=output_bytes,
                )  # fmt: skip
                if rank == 0:
                    results.append(item)
                    if on_result is not None:
                        on_result(item)
            if stopped:
                break
    return results


def time_collective(
    run: Callable[[], object],
    sync: Callable[[], None],
    device: torch.device,
    group: ProcessGroup | None,
    target_sample_s: float,
    warmup: int,
    samples: int,
    *,
    delay_s: float = 0.0,
    group_size: int | None = None,
) -> tuple[int, list[float], list[float], list[list[float]]]:
    """``(iters, warmup seconds, sample seconds, every rank's per-iteration seconds)`` of ``run``:
    the first call discarded, ``iters`` sized so a sample spans ``target_sample_s``; each sample is
    a barrier and ``iters`` calls, each timed alone (call to result ready) after sleeping
    ``delay_s`` (outside the timer); a sample's time is the slowest rank's mean call time."""
    import torch
    import torch.distributed as dist

    n = group_size if group_size is not None else dist.get_world_size(group)
    run()
    sync()
    dist.barrier(group=group)
    start = time.perf_counter()
    run()
    sync()
    timer = torch.full((1,), time.perf_counter() - start + delay_s, dtype=torch.float64, device=device)
    dist.all_reduce(timer, op=dist.ReduceOp.MAX, group=group)
    iters = max(1, min(10_000, math.ceil(target_sample_s / max(float(timer.item()), 1e-6))))

    def one_sample() -> list[float]:
        times: list[float] = []
        dist.barrier(group=group)
        for _ in range(iters):
            if delay_s:
                time.sleep(delay_s)
            start = time.perf_counter()
            run()
            sync()
            times.append(time.perf_counter() - start)
        return times

    warm: list[float] = []
    for _ in range(warmup):
        mean = torch.full((1,), sum(one_sample()) / iters, dtype=torch.float64, device=device)
        dist.all_reduce(mean, op=dist.ReduceOp.MAX, group=group)
        warm.append(float(mean.item()))
    own: list[float] = []
    for _ in range(samples):
        own.extend(one_sample())
    mine = torch.tensor(own, dtype=torch.float64, device=device)
    gathered = [torch.empty_like(mine) for _ in range(n)]
    dist.all_gather(gathered, mine, group=group)
    per_rank = [[float(value) for value in rows.cpu().tolist()] for rows in gathered]
    return iters, warm, sample_times_s(per_rank, iters), per_rank


# --- probe (the parent) -------------------------------------------------------------------


#: Per-iteration times kept in a measurement's ``timing.rank_iteration_s`` up to this many values
#: (ranks x iterations); beyond it only the statistics are kept (a results file stays small).
RAW_ITERATIONS_MAX = 4096


def collective_record(
    item: CollectiveTiming,
    name: str,
    device: str,
    versions: Detail,
    parameters: DetailMap,
    margin: float = STRAGGLER_MARGIN,
) -> Measurement:
    """The measurement of one op and size timed over ``item.group_size`` ranks; ``parameters``
    (``op``, ``backend``, ``world_size``...) go into its parameters. ok only when validated exactly.
    ``timing`` carries the per-iteration p50/p99, each rank's time, min/max/spread across ranks
    and the straggler (:func:`gpuscope.probing.collective_stats.rank_statistics`, ``margin``)."""
    samples = [float(s) for s in item.samples_s]
    per_rank: DetailMap = {}
    if item.rank_iteration_s:
        per_rank = rank_statistics(item.rank_iteration_s, item.ranks or list(range(item.group_size)), margin)
        values = sum(len(row) for row in item.rank_iteration_s)
        per_rank["rank_iteration_s"] = (
            as_detail([as_detail(list(row)) for row in item.rank_iteration_s])
            if values <= RAW_ITERATIONS_MAX
            else f"omitted ({values} values)"
        )
    error = item.error
    if not error and item.validation_error not in (0.0, None):
        error = f"validation failed: error {item.validation_error:.3g}"
    ok = bool(samples) and not error and item.validation_error == 0.0
    timing: DetailMap = {
        "samples_s": as_detail(list(samples)), "warmup_samples_s": as_detail(list(item.warmup_samples_s)),
        "inner_reps": item.iters,
        "clock": "perf_counter per call on every rank; a sample: the slowest rank's mean call",
    }  # fmt: skip
    record = finish_measurement(
        Measurement(
            kind="collective", name=name, device=device,
            parameters=as_detail(
                parameters
                | {"size_bytes": item.size_bytes, "iters_per_sample": item.iters, "dtype": "fp32",
                   "group_size": item.group_size, "rank_input_bytes": item.rank_input_bytes,
                   "rank_output_bytes": item.rank_output_bytes}  # fmt: skip
            ),
            flops=0, bytes=item.size_bytes, counting_rule={"bytes": BYTES_RULE}, versions=versions or {},
        ),
        statistic="best", status="ok" if ok else "failed", error=None if ok else (error or "no samples"),
        timing=timing | per_rank,
        summary=summarize(samples, "best") if ok else None, validation_error=item.validation_error,
        validation_tolerance=0.0,
    )  # fmt: skip
    if not ok or record.bytes_per_s is None:
        return record
    factor = bus_factor(item.op, item.group_size)
    return msgspec.structs.replace(
        record, algbw_bytes_per_s=record.bytes_per_s, busbw_bytes_per_s=record.bytes_per_s * factor, bus_factor=factor
    )


def collective_probe(
    ops: list[str],
    sizes: list[int],
    world_size: int | None,
    ctx: ProbeContext,
    emit: Callable[[Measurement], None],
    timeout_s: float = 300.0,
    *,
    slow_rank: int | None = None,
    slow_s: float = 0.0,
) -> None:
    """Run the workers, turn their timings into measurements (``emit`` each). ``slow_rank``
    sleeps ``slow_s`` before each timed call (a straggler on purpose, for tests and demos)."""
    backend = "nccl" if ctx.device.is_gpu else "gloo"
    if world_size is None and ctx.device.is_gpu:
        import torch

        world_size = torch.cuda.device_count()
    world_size = 2 if world_size is None else world_size

    def per_op(status: str, error: str) -> None:
        """One measurement per op when there is no per-size result (skipped or failed)."""
        for op in ops:
            draft = Measurement(
                kind="collective", name=f"collective {op}", device=ctx.device.name,
                parameters={"op": op, "backend": backend, "world_size": world_size}, flops=0, bytes=0,
                counting_rule={"bytes": BYTES_RULE}, versions=as_detail(ctx.versions),
            )  # fmt: skip
            emit(finish_measurement(draft, statistic="best", status=status, error=error))

    if world_size < 2:
        ranks = "GPUs" if ctx.device.is_gpu else "processes"
        return per_op(
            "skipped", f"{backend} collectives need two or more ranks ({ranks}); this device has {world_size}"
        )
    policy = ctx.ceiling_policy
    off: dict[str, Detail] = {"available": False, "reason": "telemetry turned off"}
    before = ctx.telemetry.snapshot() if ctx.telemetry is not None else off
    with tempfile.TemporaryDirectory(prefix="gpuscope-collective-") as folder:
        store = Path(folder) / "store"
        output = Path(folder) / "result.json"
        cancel_file = Path(folder) / "cancel"
        loopback = _loopback_interface()
        env = child_env(
            GLOO_SOCKET_IFNAME=loopback, NCCL_SOCKET_IFNAME=loopback, MASTER_ADDR="127.0.0.1", OMP_NUM_THREADS="1"
        )
        spec = _WorkerSpec(
            backend=backend, world=world_size, store=str(store), ops=ops, sizes=sizes, samples=policy.samples,
            warmup=3, target_sample_s=policy.target_sample_s, output=str(output), cancel_file=str(cancel_file),
            timeout_s=int(timeout_s), slow_rank=slow_rank, slow_s=slow_s,
        )  # fmt: skip
        command = [sys.executable, "-m", "gpuscope.probing.collective"]  # + RANK SPEC_JSON
        spec_json = encode_json(spec).decode()
        processes = [
            subprocess.Popen(
                [*command, str(rank), spec_json], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
            )
            for rank in range(world_size)
        ]  # fmt: skip
        failure = _wait(processes, ctx, cancel_file, timeout_s)
        items = msgspec.json.decode(output.read_bytes(), type=list[CollectiveTiming]) if output.exists() else None
    after = ctx.telemetry.snapshot() if ctx.telemetry is not None else before
    if items is None:
        per_op("failed", failure or "workers wrote no result")
    for item in items or []:
        parameters: DetailMap = {"op": item.op, "backend": backend, "world_size": world_size}
        if item.op == "allreduce":
            parameters["reduce_op"] = "max while timing; sum validated"
        name = f"collective {item.op} {item.size_bytes} B x{world_size}"
        result = collective_record(item, name, ctx.device.name, as_detail(ctx.versions), parameters)
        emit(
            msgspec.structs.replace(
                result,
                telemetry_before=before,
                telemetry_after=after,
                telemetry_during={"available": False, "reason": "collectives run in worker processes"},
            )  # fmt: skip
        )
    if failure and items is not None:
        ctx.log(failure)
    ctx.check_cancel()


def _loopback_interface() -> str:
    import socket

    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        return "lo"
    return "lo" if "lo" in names or not names else names[0]


def _wait(processes: list[subprocess.Popen[str]], ctx: ProbeContext, cancel_file: Path, timeout_s: float) -> str | None:
    """Wait for the workers; on cancel ask them to stop, then end them. Returns a failure line or None."""
    deadline = time.monotonic() + timeout_s
    cancelled_at: float | None = None
    while True:
        codes = [p.poll() for p in processes]
        if all(code is not None for code in codes):
            break
        if ctx.cancel.is_set() and cancelled_at is None:
            cancel_file.touch()
            cancelled_at = time.monotonic()
        cancel_over = cancelled_at is not None and time.monotonic() - cancelled_at > 0.5
        if cancel_over or any(code not in (None, 0) for code in codes) or time.monotonic() > deadline:
            _end(processes)
            break
        time.sleep(0.05)
    bad = [(rank, p.returncode) for rank, p in enumerate(processes) if p.returncode not in (0, None)]
    if not bad or ctx.cancel.is_set():
        return None
    rank, code = bad[0]
    stream = processes[rank].stderr
    stderr = (stream.read() if stream else "") or ""
    last = [line for line in stderr.strip().splitlines() if line.strip()][-1:] or [f"exit code {code}"]
    return f"collective worker rank {rank} failed: {last[0][:300]}"


def _end(processes: list[subprocess.Popen[str]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


if __name__ == "__main__":  # a worker: python -m gpuscope.probing.collective RANK SPEC_JSON
    import warnings

    warnings.filterwarnings("ignore")
    raise SystemExit(_worker(int(sys.argv[1]), msgspec.json.decode(sys.argv[2], type=_WorkerSpec)))
