"""Collective bandwidth over torch.distributed: all-reduce and all-gather, nccl-tests style.

The probe starts ``world_size`` local worker processes (``python -m gpuscope.probing.collective``)
that meet through a file store in a private temporary folder: gloo over the loopback interface
(127.0.0.1 only) on CPU, NCCL with one GPU per rank on GPU. For each size S (bytes of the full
buffer: the all-reduce buffer, the all-gather *output*), every sample times ``iters`` back-to-back
collectives after a barrier; the sample is the slowest rank's time per collective.

nccl-tests' definitions: ``algbw = S / t``; ``busbw = algbw x 2(n-1)/n`` for all-reduce and
``algbw x (n-1)/n`` for all-gather. Timing uses ``ReduceOp.MAX`` so repeated in-place
reductions keep their values (same traffic and cost as SUM); one SUM all-reduce and one
all-gather are validated exactly.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["OPS", "bus_factor", "collective_probe", "BYTES_RULE"]

OPS = ("allreduce", "allgather")
BYTES_RULE = (
    "nccl-tests: S = bytes of the full buffer (all-reduce: the buffer; all-gather: the gathered output); "
    "algbw = S / time; busbw = algbw x 2(n-1)/n (all-reduce) or x (n-1)/n (all-gather)"
)


def bus_factor(op: str, world_size: int) -> float:
    """nccl-tests' bus bandwidth factor for ``op`` over ``world_size`` ranks."""
    n = world_size
    if op == "allreduce":
        return 2.0 * (n - 1) / n
    if op == "allgather":
        return (n - 1) / n
    raise ValueError(f"unknown collective {op!r}")


# --- worker (a separate process) -------------------------------------------------------------


def _worker(args: argparse.Namespace) -> int:
    import datetime

    import torch
    import torch.distributed as dist

    backend = args.backend
    dist.init_process_group(
        backend,
        init_method=f"file://{args.store}",
        rank=args.rank,
        world_size=args.world,
        timeout=datetime.timedelta(seconds=args.timeout_s),
    )
    if backend == "nccl":
        torch.cuda.set_device(args.rank)
        device = torch.device("cuda", args.rank)
        sync: Callable[[], None] = lambda: torch.cuda.synchronize(device)  # noqa: E731
    else:
        torch.set_num_threads(1)
        device = torch.device("cpu")
        sync = lambda: None  # noqa: E731
    world = args.world
    results: list[dict[str, Any]] = []
    stop = torch.zeros(1, device=device)
    has_into = hasattr(dist, "all_gather_into_tensor")
    for op in args.ops.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            stop.fill_(1.0 if Path(args.cancel_file).exists() else 0.0)
            dist.all_reduce(stop, op=dist.ReduceOp.MAX)
            if stop.item() > 0:
                break
            elements = max(world, size // 4 // world * world)
            run = collective_kernel(op, elements, world, device, None, has_into and backend == "nccl")
            iters, warm, samples = time_collective(
                run, sync, device, None, args.target_sample_s, args.warmup, args.samples
            )
            error = validate_collective(op, elements, world, args.rank, device, None, has_into and backend == "nccl")
            results.append(
                {
                    "op": op,
                    "size_bytes": elements * 4,
                    "iters": iters,
                    "samples_s": samples,
                    "warmup_samples_s": warm,
                    "validation_error": error,
                }
            )
    if args.rank == 0:
        tmp = Path(args.output + ".tmp")
        tmp.write_text(json.dumps({"results": results, "torch": torch.__version__, "backend": backend}))
        os.replace(tmp, args.output)
    dist.barrier()
    dist.destroy_process_group()
    return 0


def time_collective(
    run: Callable[[], object],
    sync: Callable[[], None],
    device: Any,
    group: Any,
    target_sample_s: float,
    warmup: int,
    samples: int,
) -> tuple[int, list[float], list[float]]:
    """``(iters, warmup seconds, sample seconds)`` per call of ``run``: the first call discarded,
    ``iters`` sized so a sample spans ``target_sample_s``; each sample is a barrier, ``iters``
    back-to-back calls, and the slowest rank's time per call (every rank runs the same count)."""
    import torch
    import torch.distributed as dist

    run()
    sync()
    dist.barrier(group=group)
    start = time.perf_counter()
    run()
    sync()
    timer = torch.full((1,), time.perf_counter() - start, dtype=torch.float64, device=device)
    dist.all_reduce(timer, op=dist.ReduceOp.MAX, group=group)
    iters = max(1, min(10_000, math.ceil(target_sample_s / max(float(timer.item()), 1e-6))))
    warm: list[float] = []
    timed: list[float] = []
    for count, into in ((warmup, warm), (samples, timed)):
        for _ in range(count):
            dist.barrier(group=group)
            start = time.perf_counter()
            for _ in range(iters):
                run()
            sync()
            timer.fill_((time.perf_counter() - start) / iters)
            dist.all_reduce(timer, op=dist.ReduceOp.MAX, group=group)
            into.append(float(timer.item()))
    return iters, warm, timed


def collective_kernel(op: str, elements: int, n: int, device: Any, group: Any, into: bool) -> Callable[[], None]:
    """One ``op`` over ``group`` (None: every rank) on ``elements`` float32 values; ``into``: use
    ``all_gather_into_tensor``. Each call binds its own tensors."""
    import torch
    import torch.distributed as dist

    if op == "allreduce":
        buffer = torch.rand(elements, device=device).add_(0.5)
        return lambda: dist.all_reduce(buffer, op=dist.ReduceOp.MAX, group=group)  # MAX keeps values stable
    if op == "allgather":
        chunk = torch.rand(elements // n, device=device).add_(0.5)
        gathered = torch.empty(elements, device=device)
        pieces = list(gathered.chunk(n))
        if into:
            return lambda: dist.all_gather_into_tensor(gathered, chunk, group=group)
        return lambda: dist.all_gather(pieces, chunk, group=group)
    raise ValueError(f"unknown collective {op!r}")


def validate_collective(op: str, elements: int, n: int, rank: int, device: Any, group: Any, into: bool) -> float:
    """One SUM all-reduce or one all-gather with known values; the relative error (0.0 exact)."""
    import torch
    import torch.distributed as dist

    if op == "allreduce":
        buffer = torch.full((elements,), float(rank + 1), device=device)
        dist.all_reduce(buffer, op=dist.ReduceOp.SUM, group=group)
        expected_sum = n * (n + 1) / 2
        return float((buffer - expected_sum).abs().max().item()) / expected_sum
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


# --- probe (the parent) -------------------------------------------------------------------


def collective_probe(
    ops: list[str],
    sizes: list[int],
    world_size: int | None,
    ctx: Any,
    emit: Callable[[dict[str, Any]], None],
    timeout_s: float = 300.0,
) -> list[dict[str, Any]]:
    """Run the workers, turn their timings into measurement records (best busbw per size)."""
    from gpuscope.probing.context import measurement_record
    from gpuscope.probing.stats import summarize

    backend = "nccl" if ctx.device.is_gpu else "gloo"
    if world_size is None:
        if ctx.device.is_gpu:
            import torch

            world_size = torch.cuda.device_count()
        else:
            world_size = 2
    base_record = {"kind": "collective", "device": ctx.device.name, "flops": 0, "counting_rule": {"bytes": BYTES_RULE}}

    def op_record(op: str) -> dict[str, Any]:
        """The record of an op that has no per-size result (skipped or failed)."""
        parameters = {"op": op, "backend": backend, "world_size": world_size}
        return {**base_record, "name": f"collective {op}", "parameters": parameters, "bytes_": 0}

    if world_size < 2:
        results = []
        for op in ops:
            result = ctx.skipped(
                op_record(op),
                f"{backend} collectives need two or more ranks ({'GPUs' if ctx.device.is_gpu else 'processes'}); "
                f"this device has {world_size}",
            )
            emit(result)
            results.append(result)
        return results
    policy = ctx.ceiling_policy
    before = (
        ctx.telemetry.snapshot()
        if ctx.telemetry is not None
        else {"available": False, "reason": "telemetry turned off"}
    )
    with tempfile.TemporaryDirectory(prefix="gpuscope-collective-") as folder:
        store = Path(folder) / "store"
        output = Path(folder) / "result.json"
        cancel_file = Path(folder) / "cancel"
        env = dict(os.environ)
        env["GLOO_SOCKET_IFNAME"] = _loopback_interface()
        env["NCCL_SOCKET_IFNAME"] = env["GLOO_SOCKET_IFNAME"]
        env["MASTER_ADDR"] = "127.0.0.1"
        env["OMP_NUM_THREADS"] = "1"
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        command = [
            sys.executable, "-m", "gpuscope.probing.collective",
            "--backend", backend, "--world", str(world_size), "--store", str(store),
            "--ops", ",".join(ops), "--sizes", ",".join(str(s) for s in sizes),
            "--samples", str(policy.samples), "--warmup", "3",
            "--target-sample-s", str(policy.target_sample_s), "--output", str(output),
            "--cancel-file", str(cancel_file), "--timeout-s", str(int(timeout_s)),
        ]  # fmt: skip
        processes = [
            subprocess.Popen(
                [*command, "--rank", str(rank)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
            )
            for rank in range(world_size)
        ]
        failure = _wait(processes, ctx, cancel_file, timeout_s)
        data = json.loads(output.read_text()) if output.exists() else None
    after = ctx.telemetry.snapshot() if ctx.telemetry is not None else before
    results = []
    if data is None:
        for op in ops:
            result = measurement_record(
                statistic="best", status="failed", error=failure or "workers wrote no result", **op_record(op)
            )
            result["versions"] = ctx.versions
            emit(result)
            results.append(result)
        ctx.check_cancel()
        return results
    for item in data["results"]:
        op, size = item["op"], item["size_bytes"]
        factor = bus_factor(op, world_size)
        summary = summarize(item["samples_s"], "best") if item["samples_s"] else None
        ok = summary is not None and item["validation_error"] == 0.0
        record = {
            **base_record,
            "name": f"collective {op} {size} B x{world_size}",
            "parameters": {
                "op": op,
                "backend": backend,
                "world_size": world_size,
                "size_bytes": size,
                "iters_per_sample": item["iters"],
                "dtype": "fp32",
                "reduce_op": "max while timing; sum validated" if op == "allreduce" else None,
            },
            "bytes_": size,
        }
        result = measurement_record(
            statistic="best",
            status="ok" if ok else "failed",
            error=None if ok else f"validation failed: error {item['validation_error']:.3g}",
            timing={
                "samples_s": item["samples_s"],
                "warmup_samples_s": item["warmup_samples_s"],
                "inner_reps": item["iters"],
                "clock": "perf_counter (slowest rank)",
            },
            summary=summary if ok else None,
            validation_error=item["validation_error"],
            validation_tolerance=0.0,
            **record,
        )
        if ok:
            result["algbw_bytes_per_s"] = result["bytes_per_s"]
            result["busbw_bytes_per_s"] = result["bytes_per_s"] * factor
            result["bus_factor"] = factor
        result["versions"] = ctx.versions
        result["telemetry_before"], result["telemetry_after"] = before, after
        result["telemetry_during"] = {"available": False, "reason": "collectives run in worker processes"}
        emit(result)
        results.append(result)
    if failure:
        ctx.log(failure)
    ctx.check_cancel()
    return results


def _loopback_interface() -> str:
    try:
        names = [name for _, name in socket_if_nameindex()]
    except OSError:
        return "lo"
    return "lo" if "lo" in names or not names else names[0]


def socket_if_nameindex() -> list[tuple[int, str]]:
    import socket

    return socket.if_nameindex()


def _wait(processes: list[subprocess.Popen[str]], ctx: Any, cancel_file: Path, timeout_s: float) -> str | None:
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
        if cancelled_at is not None and time.monotonic() - cancelled_at > 0.5:
            _end(processes)
            break
        if any(code not in (None, 0) for code in codes) or time.monotonic() > deadline:
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpuscope.probing.collective")
    parser.add_argument("--backend", required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--ops", required=True)
    parser.add_argument("--sizes", required=True)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--target-sample-s", type=float, default=0.05)
    parser.add_argument("--output", required=True)
    parser.add_argument("--cancel-file", required=True)
    parser.add_argument("--timeout-s", type=int, default=300)
    return _worker(parser.parse_args(argv))


if __name__ == "__main__":
    import warnings

    warnings.filterwarnings("ignore")
    raise SystemExit(main())
