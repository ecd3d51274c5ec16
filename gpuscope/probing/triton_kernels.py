"""GPU ceilings from Triton kernels: CUDA-core FMA peaks, and L2 and DRAM bandwidth, each with the
repetition inside the kernel (one launch runs ``reps`` passes, so launch cost vanishes).
Tensor-core peaks stay GEMM (gpuscope.probing.matmul).

- :func:`gpu_fma_peak`: every program runs :data:`ACCUMULATORS` independent chains of
  :data:`CHAIN` dependent ``x = x * a + b`` per lane (contracted to FMA; fp16/bf16 as half FMA),
  ``reps`` times; FLOPs = 2 x lanes x accumulators x chain x reps. Validated against the closed
  form (gpuscope.probing.fma_math.fma_expected).
- :func:`gpu_bandwidth`: ``read`` (a sum), ``copy`` and ``triad`` over a working set sized for the
  level: ``l2`` a quarter of the L2 (passes after the first hit L2), ``dram`` at least 4x the L2.
  Bytes counted as STREAM does (the arrays named in the kernel; write-allocate aside) x reps. The
  measurement carries the GPU's DRAM counter during it (``dram_check``, as the memory probe's).

Triton (``pip install triton``; the CUDA builds of torch ship it) is imported only here, and this
module only when a GPU probe runs. The kernels are plain functions made into Triton kernels on
first use (:func:`kernels`), so ``TRITON_INTERPRET=1`` (Triton's interpreter, numpy on the CPU)
runs the same code on CPU tensors: the tests check the kernels' logic that way.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from gpuscope.probing.context import ProbeContext
from gpuscope.probing.environment import first_line, oom_guard
from gpuscope.probing.errors import ProbeSkipped
from gpuscope.probing.fma_math import FLOPS_RULE, fma_constants, fma_expected
from gpuscope.probing.validation import check_close, elementwise_tolerance
from gpuscope.schema.core import as_detail
from gpuscope.schema.results import Measurement

if TYPE_CHECKING:
    import torch

import triton  # type: ignore[import-untyped,import-not-found,unused-ignore]
import triton.language as tl  # type: ignore[import-untyped,import-not-found,unused-ignore]

__all__ = [
    "CHAIN",
    "ACCUMULATORS",
    "BANDWIDTH_KERNELS",
    "BYTES_RULE",
    "interpreting",
    "kernels",
    "triton_version",
    "launch_fma",
    "launch_bandwidth",
    "stream_bytes",
    "partial_elements",
    "fma_lanes",
    "gpu_fma_peak",
    "gpu_bandwidth",
    "gpu_bandwidth_probe",
]

#: Dependent FMAs per accumulator per repetition, and independent accumulators per lane.
CHAIN = 16
ACCUMULATORS = 4
BANDWIDTH_KERNELS = ("read", "copy", "triad")
BYTES_RULE = "STREAM: the arrays named in the kernel (read 1, copy 2, triad 3) x elements x element bytes x reps"
_ARRAYS = {"read": 1, "copy": 2, "triad": 3}
_FMA_BLOCK = 1024
_MEM_BLOCK = 4096
_MEM_WARPS = 8  # 16 fp32 elements per thread per block: four 16-byte loads in flight
_TOLERANCE = {"fp64": 1e-10, "fp32": 1e-3, "fp16": 5e-2, "bf16": 5e-2}


def interpreting() -> bool:
    """True when ``TRITON_INTERPRET=1``: kernels run in Triton's interpreter on CPU tensors."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def triton_version() -> str:
    return str(triton.__version__)


def _fma_chains(out_ptr, ab_ptr, reps, BLOCK: tl.constexpr, CHAIN: tl.constexpr):  # type: ignore[no-untyped-def]
    pid = tl.program_id(0)
    lanes = pid * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(ab_ptr)
    b = tl.load(ab_ptr + 1)
    start = tl.load(out_ptr + lanes)
    x0 = start
    x1 = start + 0.125
    x2 = start + 0.25
    x3 = start + 0.375
    for _ in range(reps):
        for _c in tl.static_range(CHAIN):
            x0 = x0 * a + b
            x1 = x1 * a + b
            x2 = x2 * a + b
            x3 = x3 * a + b
    total = BLOCK * tl.num_programs(0)
    tl.store(out_ptr + lanes, x0)
    tl.store(out_ptr + total + lanes, x1)
    tl.store(out_ptr + 2 * total + lanes, x2)
    tl.store(out_ptr + 3 * total + lanes, x3)


def _read(x_ptr, out_ptr, n, reps, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    acc = tl.full((BLOCK,), 0.0, dtype=tl.float32)
    for _ in range(reps):
        for start in range(pid * BLOCK, n, step):
            offsets = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + offsets, mask=offsets < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), acc)  # summed on the host (no tl.sum: see kernels())


def _copy(src_ptr, dst_ptr, n, reps, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    for _ in range(reps):
        for start in range(pid * BLOCK, n, step):
            offsets = start + tl.arange(0, BLOCK)
            mask = offsets < n
            tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def _triad(a_ptr, b_ptr, c_ptr, s, n, reps, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    for _ in range(reps):
        for start in range(pid * BLOCK, n, step):
            offsets = start + tl.arange(0, BLOCK)
            mask = offsets < n
            b = tl.load(b_ptr + offsets, mask=mask)
            c = tl.load(c_ptr + offsets, mask=mask)
            tl.store(a_ptr + offsets, b + s * c, mask=mask)


@functools.lru_cache(maxsize=2)
def _jitted(interpret: bool) -> dict[str, Any]:
    del interpret  # the cache key: triton.jit reads TRITON_INTERPRET when it wraps a function
    return {
        name: triton.jit(fn) for name, fn in (("fma", _fma_chains), ("read", _read), ("copy", _copy), ("triad", _triad))
    }


def kernels() -> dict[str, Any]:
    """The Triton kernels ``fma``, ``read``, ``copy``, ``triad`` (interpreted under ``TRITON_INTERPRET=1``,
    read when they are first asked for). They call no ``@triton.jit`` helper of triton.language
    (``tl.sum``, ``tl.zeros`` are): those are made when triton is imported, so under an interpreter turned on
    later they could not run."""
    return _jitted(interpreting())


def _torch_dtype(dtype: str) -> torch.dtype:
    import torch

    return {"fp64": torch.float64, "fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]


def launch_fma(out: torch.Tensor, ab: torch.Tensor, reps: int, programs: int) -> None:
    """One launch of the FMA chains: ``out`` holds ``ACCUMULATORS x programs x block`` lanes (the
    first ``programs x block`` are the start values), ``ab`` the two constants ``a, b``."""
    kernels()["fma"][(programs,)](out, ab, reps, BLOCK=_block(out, programs), CHAIN=CHAIN)


def _block(out: torch.Tensor, programs: int) -> int:
    return out.numel() // (ACCUMULATORS * programs)


def fma_lanes(programs: int, block: int = _FMA_BLOCK) -> int:
    """Lanes of one launch (each runs :data:`ACCUMULATORS` chains)."""
    return programs * block


def launch_bandwidth(
    kernel: str, arrays: list[torch.Tensor], reps: int, programs: int, partial: torch.Tensor | None = None
) -> None:
    """One launch of ``kernel`` (``read``: ``arrays[0]`` summed into ``partial``, float32, one
    block of partial sums per program: ``partial_elements(programs)``; ``copy``: ``arrays[1] =
    arrays[0]``; ``triad``: ``arrays[0] = arrays[1] + 3 * arrays[2]``)."""
    n = arrays[0].numel()
    fn = kernels()[kernel]
    if kernel == "read":
        assert partial is not None
        fn[(programs,)](arrays[0], partial, n, reps, BLOCK=_MEM_BLOCK, num_warps=_MEM_WARPS)
    elif kernel == "copy":
        fn[(programs,)](arrays[0], arrays[1], n, reps, BLOCK=_MEM_BLOCK, num_warps=_MEM_WARPS)
    else:
        fn[(programs,)](arrays[0], arrays[1], arrays[2], 3.0, n, reps, BLOCK=_MEM_BLOCK, num_warps=_MEM_WARPS)


def partial_elements(programs: int) -> int:
    """The size of the ``read`` kernel's ``partial`` (float32 partial sums, one block per program)."""
    return programs * _MEM_BLOCK


def stream_bytes(kernel: str, elements: int, element_bytes: int, reps: int) -> int:
    """Bytes of one launch by :data:`BYTES_RULE`."""
    return _ARRAYS[kernel] * elements * element_bytes * reps


# --- measurements --------------------------------------------------------------------------------


def _programs(ctx: ProbeContext, per_sm: int) -> int:
    if interpreting() or not ctx.device.is_gpu:
        return 2
    import torch

    return int(torch.cuda.get_device_properties(ctx.device.index or 0).multi_processor_count) * per_sm


def _calibrated_reps(launch: Callable[[int], None], ctx: ProbeContext, start: int = 1) -> int:
    """Repetitions that make one launch last about the policy's sample length (at least 2 ms)."""
    import time

    target_s = max(ctx.ceiling_policy.target_sample_s, 0.002)
    reps = start
    while True:
        ctx.check_cancel()
        ctx.synchronize()
        started = time.perf_counter()
        launch(reps)
        ctx.synchronize()
        elapsed = time.perf_counter() - started
        if elapsed >= target_s / 2 or reps >= 1 << 24:
            return max(1, int(reps * target_s / max(elapsed, 1e-9)))
        reps *= max(2, math.ceil(target_s / max(elapsed, 1e-6) / 2))


def gpu_fma_peak(dtype: str, ctx: ProbeContext) -> Measurement:
    """The CUDA-core FMA peak of ``dtype`` (best of N), a finished ``kind: peak`` measurement."""
    import torch

    programs = _programs(ctx, 8)
    lanes = fma_lanes(programs)
    record = Measurement(
        kind="peak", name=f"peak {dtype} fma", device=ctx.device.name,
        parameters={"dtype": dtype, "kernel": "fma", "role": "ceiling", "programs": programs, "lanes": lanes,
                    "accumulators": ACCUMULATORS, "chain": CHAIN},
        flops=0, bytes=0, counting_rule={"flops": FLOPS_RULE}, library="triton",
    )  # fmt: skip
    if dtype not in _TOLERANCE:
        return ctx.skipped(record, f"no {dtype} FMA kernel")
    if dtype == "bf16" and ctx.device.is_gpu and not torch.cuda.is_bf16_supported():
        return ctx.skipped(record, "this GPU has no bf16 arithmetic")
    device = ctx.device.torch_device
    tdtype = _torch_dtype(dtype)
    steps = CHAIN if dtype in ("fp16", "bf16") else 64 * CHAIN
    a, b = fma_constants(steps)
    ab = torch.tensor([a, b], dtype=tdtype, device=device)
    start = torch.linspace(0.0, 0.5, lanes, dtype=torch.float64)
    out = torch.zeros(ACCUMULATORS * lanes, dtype=tdtype, device=device)
    try:
        with oom_guard(f"fma {dtype}", ctx.device):
            out[:lanes] = start.to(tdtype)
            launch_fma(out, ab, 1, programs)  # compile before timing
            reps = _calibrated_reps(lambda r: launch_fma(out, ab, r, programs), ctx)
    except ProbeSkipped as exc:
        return ctx.skipped(record, str(exc))
    except Exception as exc:  # noqa: BLE001 - a Triton compile error is one failed measurement
        return ctx.skipped(record, f"Triton {triton_version()} could not run the kernel: {first_line(exc)}")
    record = msgspec.structs.replace(
        record, flops=2 * lanes * ACCUMULATORS * CHAIN * reps,
        parameters=as_detail({**(record.parameters or {}), "reps": reps}),  # type: ignore[dict-item]
        implementation=f"triton {triton_version()} FMA chains ({ACCUMULATORS} x {CHAIN} dependent FMAs per lane, "
        f"{lanes} lanes, {programs} programs)",
    )  # fmt: skip

    def validate() -> tuple[float, float]:
        fresh = torch.zeros_like(out)
        fresh[:lanes] = start.to(tdtype)
        launch_fma(fresh, ab, steps // CHAIN, programs)
        a_s, b_s = (float(v) for v in ab.double().cpu())
        x0 = start.to(tdtype).double().numpy()
        expected = [fma_expected(x0 + 0.125 * i, a_s, b_s, steps) for i in range(ACCUMULATORS)]
        import numpy as np

        got = fresh.double().cpu().numpy().reshape(ACCUMULATORS, lanes)
        tolerance = _TOLERANCE[dtype]
        return check_close(got, np.stack(expected), tolerance, f"{dtype} FMA chains"), tolerance

    return ctx.measure(
        lambda: launch_fma(out, ab, reps, programs), statistic="best", validate=validate, record=record, graphable=False
    )


def _working_set_elements(level: str, ctx: ProbeContext, element_bytes: int, arrays: int) -> int:
    """Elements per array: ``l2`` a quarter of the L2 in all, ``dram`` 4x the L2 (at least 256 MiB) per array."""
    l2 = 50 * 2**20
    if ctx.device.is_gpu and not interpreting():
        import torch

        l2 = int(getattr(torch.cuda.get_device_properties(ctx.device.index or 0), "L2_cache_size", 0)) or l2
    elif interpreting():
        l2 = 4 * 2**20 // 64  # the interpreter: a small array is enough to check the logic
    if level == "l2":
        return max(_MEM_BLOCK, l2 // 4 // (arrays * element_bytes))
    return max(_MEM_BLOCK, max(4 * l2, 256 * 2**20 if not interpreting() else 0) // element_bytes)


def gpu_bandwidth(kernel: str, level: str, ctx: ProbeContext, dtype: str = "fp32") -> Measurement:
    """``kernel`` (``read``, ``copy``, ``triad``) at ``level`` (``l2``, ``dram``), best of N, a
    finished ``kind: memory`` measurement with the GPU's DRAM counter check."""
    import numpy as np
    import torch

    from gpuscope.probing.memory import dram_check

    element_bytes = torch.tensor([], dtype=_torch_dtype(dtype)).element_size()
    narrays = _ARRAYS[kernel]
    elements = _working_set_elements(level, ctx, element_bytes, narrays)
    footprint = elements * element_bytes * narrays
    record = Measurement(
        kind="memory", name=f"memory {level} {kernel} (triton)", device=ctx.device.name, level=level,
        parameters={"kernel": kernel, "dtype": dtype, "level": level, "footprint_bytes": footprint,
                    "elements": elements, "implementation": "triton"},
        flops=0, bytes=0, counting_rule={"bytes": BYTES_RULE}, library="triton",
    )  # fmt: skip
    try:
        ctx.budget.check(footprint, f"triton {kernel} {level} working set")
    except ProbeSkipped as exc:
        return ctx.skipped(record, str(exc))
    device = ctx.device.torch_device
    # at most 4 programs per SM, and none without a block: every program gets the same share
    programs = max(1, min(_programs(ctx, 4), elements // _MEM_BLOCK))
    generator = torch.Generator(device="cpu").manual_seed(7)
    with oom_guard(f"triton {kernel} {level}", ctx.device):
        arrays = [
            (torch.rand(elements, generator=generator, dtype=torch.float32) + 0.5).to(_torch_dtype(dtype)).to(device)
            for _ in range(narrays)
        ]
        partial = torch.zeros(partial_elements(programs), dtype=torch.float32, device=device)
    try:
        launch_bandwidth(kernel, arrays, 1, programs, partial)  # compile, and the first touch
        # passes inside the kernel at both levels: one DRAM pass over 256 MiB lasts ~60 us on an H200,
        # about a Python launch; 4x the L2 per array keeps every pass in DRAM
        reps = _calibrated_reps(lambda r: launch_bandwidth(kernel, arrays, r, programs, partial), ctx)
    except Exception as exc:  # noqa: BLE001
        arrays.clear()
        return ctx.skipped(record, f"Triton {triton_version()} could not run the kernel: {first_line(exc)}")
    record = msgspec.structs.replace(
        record, bytes=stream_bytes(kernel, elements, element_bytes, reps),
        parameters=as_detail({**(record.parameters or {}), "reps": reps, "programs": programs}),  # type: ignore[dict-item]
        implementation=f"triton {triton_version()} {kernel} ({programs} programs, {reps} passes per launch)",
    )  # fmt: skip

    def run() -> None:
        launch_bandwidth(kernel, arrays, reps, programs, partial)

    def validate() -> tuple[float, float]:
        idx = torch.linspace(0, elements - 1, steps=min(elements, 257)).long().to(device)
        if kernel == "read":
            partial.zero_()
            launch_bandwidth(kernel, arrays, 1, programs, partial)
            total = float(partial.double().sum().item())
            reference = float(arrays[0].double().sum().item())
            return check_close(np.array([total]), np.array([reference]), 1e-3, "read"), 1e-3
        tolerance = elementwise_tolerance(dtype)
        if kernel == "copy":
            got, want = arrays[1][idx].double().cpu().numpy(), arrays[0][idx].double().cpu().numpy()
        else:
            got = arrays[0][idx].double().cpu().numpy()
            want = (arrays[1][idx].double() + 3.0 * arrays[2][idx].double()).cpu().numpy()
        return check_close(got, want, tolerance, kernel), tolerance

    try:
        result = ctx.measure(run, statistic="best", validate=validate, record=record, graphable=False)
        return msgspec.structs.replace(result, dram_check=dram_check(result)) if ctx.device.is_gpu else result
    finally:
        arrays.clear()
        if ctx.device.is_gpu:
            torch.cuda.empty_cache()


def gpu_bandwidth_probe(
    levels: list[str],
    ctx: ProbeContext,
    emit: Callable[[Measurement], None],
    kernels_: tuple[str, ...] = BANDWIDTH_KERNELS,
) -> None:
    """Every Triton bandwidth kernel at every level (``l2``, ``dram``); each measurement to ``emit``."""
    for level in levels:
        for kernel in kernels_:
            ctx.check_cancel()
            emit(gpu_bandwidth(kernel, level, ctx))
