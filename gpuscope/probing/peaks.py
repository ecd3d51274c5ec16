"""FLOP peaks from FMA chains, and the core clock from a dependent-add chain.

A GEMM ceiling says what a BLAS reaches; the FLOP peak says what the cores can do (ERT's and
likwid-bench's ``peakflops``): on a CPU, :func:`fma_peak` runs the numba kernel
:func:`gpuscope.probing.cpu_kernels.fma.fma_chains` on one thread per physical core, each over its
own L1-resident accumulators, the repetition inside the compiled code; on a GPU, the Triton kernel
of :mod:`gpuscope.probing.triton_kernels`. The measurement's ceiling is the compute roof
``<dtype>.fma`` beside the GEMM roof ``<dtype>`` (gpuscope.probing.derive); the roofline's envelope
takes the higher and names it.

FLOPs = 2 per FMA: threads x lanes x :data:`~gpuscope.probing.cpu_kernels.fma.CHAIN` x reps x 2.
Validation: from fresh accumulators ``x0``, ``n`` steps of ``x = a*x + b`` give the closed form
``f + (x0 - f) * a**n`` with ``f = b / (1 - a)``; ``a`` is chosen so that ``a**n = 1/2``, so a
kernel that skipped or repeated FMAs is off by far more than the tolerance.

bf16 on a CPU with AVX512_BF16: numba has no bf16 type, so the kernel
(:func:`~gpuscope.probing.cpu_kernels.fma.bf16_dot_chains`) calls LLVM's intrinsic for VDPBF16PS
(16 fp32 lanes += 2 bf16 products each: 64 FLOP per instruction), 12 accumulators x 16 dependent
instructions per repetition; validated exactly (every instruction adds 2^-7 to each lane). AMX
tiles are not used (numba cannot drive them): on a CPU with AMX the bf16 roof of the datasheet is
AMX's, far above this peak. Without AVX512_BF16 bf16 is skipped: it runs as fp32 there.

The clock (:func:`measure_clock`): where the kernel does not expose cpufreq (most VMs), the
datasheet peak needs the clock the cores really run at; /proc/cpuinfo shows the TSC's. One
dependent chain of integer adds and xors per physical core, 1 cycle of latency per op (every x86
and Arm core), timed best of N by each thread's own CPU time (time another process took is not
counted): MHz = iterations x ops per iteration / seconds / 1e6.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from gpuscope.probing.clock import (
    CLOCK_RULE,
    ClockEstimate,
    CorePinner,
    clock_mhz_from_chain,
    measure_clock,
    peak_threads,
)
from gpuscope.probing.context import ProbeContext
from gpuscope.probing.fma_math import FLOPS_RULE, fma_constants, fma_expected, fma_flops
from gpuscope.probing.jit import load_numba, unavailable_text
from gpuscope.schema.results import Measurement
from gpuscope.telemetry.cpuinfo import cpu_info
from gpuscope.telemetry.values import Unavailable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "PEAK_DTYPES",
    "FLOPS_RULE",
    "CLOCK_RULE",
    "LANES",
    "ClockEstimate",
    "fma_flops",
    "clock_mhz_from_chain",
    "fma_constants",
    "fma_expected",
    "peak_threads",
    "measure_clock",
    "fma_peak",
    "bandwidth_peak",
]

#: dtypes a peak probe takes (CPU: fp64, fp32, and bf16 with AVX512_BF16; GPU: all four).
PEAK_DTYPES = ("fp64", "fp32", "bf16", "fp16")
#: Accumulator elements per thread (2 KiB: in L1, 4x the registers AVX-512 has).
LANES = {"fp32": 512, "fp64": 256}
#: FMAs per element in the validation run (a**VALIDATION_STEPS = 1/2).
VALIDATION_REPS = 64
_TOLERANCE = {"fp32": 1e-3, "fp64": 1e-10}


def _team_call(team: ThreadPoolExecutor, calls: list[Callable[[], object]]) -> None:
    for future in [team.submit(call) for call in calls]:
        future.result()


# --- the peak probe ------------------------------------------------------------------------------


def _record(
    dtype: str, ctx: ProbeContext, parameters: dict[str, object], flops: int, implementation: str | None
) -> Measurement:
    return Measurement(
        kind="peak", name=f"peak {dtype} fma", device=ctx.device.name,
        parameters={"dtype": dtype, "kernel": "fma", "role": "ceiling", **parameters},  # type: ignore[dict-item]
        flops=flops, bytes=0, counting_rule={"flops": FLOPS_RULE},
        library="triton" if ctx.device.is_gpu else "numba",
        implementation=implementation,
    )  # fmt: skip


def fma_peak(dtype: str, ctx: ProbeContext, emit: Callable[[Measurement], None]) -> Measurement:
    """The FMA peak of ``dtype`` on the context's device, best of N (emitted and returned)."""
    if ctx.device.is_gpu:
        try:
            from gpuscope.probing.triton_kernels import gpu_fma_peak
        except ImportError as exc:
            why = f"Triton is not installed ({exc.name or exc}): pip install triton"
            result = ctx.skipped(_record(dtype, ctx, {}, 0, None), why)
        else:
            result = gpu_fma_peak(dtype, ctx)
    else:
        result = _cpu_fma_peak(dtype, ctx)
    emit(result)
    return result


def bandwidth_peak(level: str, ctx: ProbeContext, emit: Callable[[Measurement], None]) -> None:
    """A GPU's ``level`` (``l2``, ``dram``) bandwidth from the Triton kernels (read, copy, triad);
    each measurement to ``emit`` (one skipped measurement when Triton is not installed)."""
    try:
        from gpuscope.probing.triton_kernels import gpu_bandwidth_probe
    except ImportError as exc:
        record = Measurement(kind="memory", name=f"memory {level} (triton)", device=ctx.device.name, level=level,
                             parameters={"level": level, "implementation": "triton"}, flops=0, bytes=0)  # fmt: skip
        emit(ctx.skipped(record, f"Triton is not installed ({exc.name or exc}): pip install triton"))
        return
    gpu_bandwidth_probe([level], ctx, emit)


def _cpu_fma_peak(dtype: str, ctx: ProbeContext) -> Measurement:
    threads = peak_threads()
    lanes = LANES.get(dtype, 0)
    why = None
    if dtype == "bf16":
        if "avx512_bf16" not in cpu_info().flags:
            why = "no bf16 dot-product instructions on this CPU (AVX512_BF16 absent): bf16 runs as fp32"
    elif dtype not in LANES:
        why = f"no {dtype} FMA kernel on the CPU"
    if why is not None:
        return ctx.skipped(_record(dtype, ctx, {"threads": threads}, 0, None), why)
    numba = load_numba()
    if isinstance(numba, Unavailable):
        return ctx.skipped(_record(dtype, ctx, {"threads": threads}, 0, None), unavailable_text(numba))
    if dtype == "bf16":
        return _cpu_bf16_peak(ctx, threads, str(numba.__version__))
    import numpy as np

    from gpuscope.probing.cpu_kernels.fma import CHAIN, fma_chains

    np_dtype = np.float32 if dtype == "fp32" else np.float64
    a, b = (np_dtype(value) for value in fma_constants(VALIDATION_REPS * CHAIN))
    team = ThreadPoolExecutor(
        max_workers=threads, thread_name_prefix="gpuscope-fma", initializer=CorePinner(threads)
    )  # each worker on its own core: two unpinned chains can share one and halve the peak
    try:

        def first_touch(index: int) -> npt.NDArray[Any]:
            """The thread's own accumulators, written by the thread that will use them."""
            acc: npt.NDArray[Any] = np.linspace(0.0, 0.5, lanes, dtype=np_dtype) + np_dtype(index * 1e-3)
            return acc

        accs = [future.result() for future in [team.submit(first_touch, i) for i in range(threads)]]
        fma_chains(accs[0][:16].copy(), a, b, 1)  # compile (or load from the cache) before timing

        def call(reps: int) -> None:
            _team_call(team, [functools.partial(fma_chains, acc, a, b, reps) for acc in accs])

        reps = _calibrate(call, ctx)
        implementation = (
            f"numba {numba.__version__} FMA chains ({CHAIN} dependent FMAs x {lanes} {dtype} lanes per thread, "
            f"{threads} threads, one per physical core)"
        )
        parameters: dict[str, object] = {"threads": threads, "lanes": lanes, "chain": CHAIN, "reps": reps}
        record = _record(dtype, ctx, parameters, fma_flops(threads, lanes, CHAIN, reps), implementation)

        def run() -> object:
            call(reps)
            return None

        def validate() -> tuple[float, float]:
            return _validate(fma_chains, np_dtype, a, b, lanes, dtype)

        return ctx.measure(run, statistic="best", validate=validate, record=record)
    finally:
        team.shutdown(wait=True)


def bf16_bits(values: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    """The bf16 bit patterns (as uint16) of ``values`` (truncated from float32: exact for the
    powers of two the kernel uses)."""
    import numpy as np

    bits: npt.NDArray[np.uint16] = (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return bits


#: The bf16 kernel's operands: every VDPBF16PS adds 2 x 2^-8 x 1 = 2^-7 to each lane (exact).
BF16_A, BF16_B = 2.0**-8, 1.0
BF16_VALIDATION_REPS = 8


def _cpu_bf16_peak(ctx: ProbeContext, threads: int, numba_version: str) -> Measurement:
    """bf16 dot products (VDPBF16PS through its LLVM intrinsic), one thread per physical core."""
    import numpy as np

    from gpuscope.probing.cpu_kernels.fma import (
        BF16_ACCUMULATORS,
        BF16_CHAIN,
        BF16_FLOP_PER_INSTRUCTION,
        bf16_dot_chains,
    )

    lanes = 16 * BF16_ACCUMULATORS
    a, b = bf16_bits(np.full(32, BF16_A)), bf16_bits(np.full(32, BF16_B))
    team = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="gpuscope-bf16", initializer=CorePinner(threads))
    try:

        def first_touch(index: int) -> npt.NDArray[Any]:
            acc: npt.NDArray[Any] = np.linspace(0.0, 0.5, lanes, dtype=np.float32)
            return acc

        accs = [future.result() for future in [team.submit(first_touch, i) for i in range(threads)]]
        bf16_dot_chains(np.zeros(lanes, dtype=np.float32), a, b, 1)  # compile (or load from the cache)

        def call(reps: int) -> None:
            _team_call(team, [functools.partial(bf16_dot_chains, acc, a, b, reps) for acc in accs])

        reps = _calibrate(call, ctx)
        per_rep = BF16_ACCUMULATORS * BF16_CHAIN * BF16_FLOP_PER_INSTRUCTION
        implementation = (
            f"numba {numba_version} + LLVM's VDPBF16PS (AVX512_BF16) dot-product chains "
            f"({BF16_ACCUMULATORS} x {BF16_CHAIN} dependent, 64 FLOP each, per thread; {threads} threads, "
            "one per physical core)"
        )
        parameters: dict[str, object] = {"threads": threads, "lanes": lanes, "chain": BF16_CHAIN, "reps": reps,
                                         "accumulators": BF16_ACCUMULATORS, "instruction": "vdpbf16ps"}  # fmt: skip
        record = _record("bf16", ctx, parameters, threads * per_rep * reps, implementation)

        def run() -> object:
            call(reps)
            return None

        def validate() -> tuple[float, float]:
            from gpuscope.probing.validation import check_close

            acc = np.linspace(0.0, 0.5, lanes, dtype=np.float32)
            expected = acc.astype(np.float64) + BF16_VALIDATION_REPS * BF16_CHAIN * 2 * BF16_A * BF16_B
            bf16_dot_chains(acc, a, b, BF16_VALIDATION_REPS)
            tolerance = 1e-5
            return check_close(acc.astype(np.float64), expected, tolerance, "bf16 dot-product chains"), tolerance

        return ctx.measure(run, statistic="best", validate=validate, record=record)
    finally:
        team.shutdown(wait=True)


def _calibrate(call: Callable[[int], object], ctx: ProbeContext) -> int:
    """Repetitions that make one call last about the policy's sample length."""
    target_s = max(ctx.ceiling_policy.target_sample_s, 0.005)
    reps = 16
    call(reps)
    while True:
        ctx.check_cancel()
        started = time.perf_counter()
        call(reps)
        elapsed = time.perf_counter() - started
        if elapsed >= target_s / 2 or reps >= 1 << 30:
            return max(1, int(reps * target_s / max(elapsed, 1e-9))) if elapsed >= target_s / 2 else reps
        reps *= max(2, int(math.ceil(target_s / max(elapsed, 1e-6) / 2)))


def _validate(
    kernel: Callable[..., object], np_dtype: type, a: object, b: object, lanes: int, dtype: str
) -> tuple[float, float]:
    """Run :data:`VALIDATION_REPS` repetitions on fresh accumulators and hold them against the
    closed form (computed from ``a`` and ``b`` as stored in ``dtype``)."""
    import numpy as np

    from gpuscope.probing.cpu_kernels.fma import CHAIN
    from gpuscope.probing.validation import check_close

    acc: npt.NDArray[np.floating[Any]] = np.linspace(0.0, 0.5, lanes, dtype=np_dtype)
    x0 = acc.astype(np.float64)
    kernel(acc, a, b, VALIDATION_REPS)
    expected = fma_expected(x0, float(a), float(b), VALIDATION_REPS * CHAIN)  # type: ignore[arg-type]  # numpy scalars
    tolerance = _TOLERANCE[dtype]
    error = check_close(acc.astype(np.float64), expected, tolerance, f"{dtype} FMA chains")
    return error, tolerance
