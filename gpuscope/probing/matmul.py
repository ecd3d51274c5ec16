"""GEMM probes: any batch, M, N, K, dtype and transpose, in torch (CPU or GPU) or numpy (CPU).

FLOPs = 2 x batch x M x N x K (multiply and add; dense, no sparsity). Bytes follow the
*minimum traffic* rule: A and B read once, C written once. fp8 (e4m3) runs through
``torch._scaled_mm`` with unit scales and a bf16 output on GPUs of compute capability 8.9+.
tf32 is fp32 storage with TF32 tensor-core math (GPU only).

:func:`matmul_ceiling` searches the given shapes (and, on CPU, every GEMM library reachable
in this process) and keeps the best; :func:`matmul_workload` times one shape for the roofline.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from gpuscope.probing.context import ProbeContext
from gpuscope.probing.environment import numpy_blas, oom_guard
from gpuscope.probing.errors import ProbeSkipped
from gpuscope.probing.validation import check_close, matmul_tolerance
from gpuscope.schema.results import Measurement
from gpuscope.schema.suites import MATMUL_DTYPES, MatmulShape

if TYPE_CHECKING:  # the types only: numpy and torch load when a probe runs
    import numpy as np
    import numpy.typing as npt
    import torch

    Array: TypeAlias = npt.NDArray[np.float64 | np.float32]

__all__ = [
    "MATMUL_DTYPES",
    "MatmulShape",
    "matmul_flops",
    "matmul_bytes",
    "BYTES_RULE",
    "FLOPS_RULE",
    "dtype_support",
    "build_matmul",
    "matmul_ceiling",
    "matmul_workload",
]

FLOPS_RULE = "2*batch*M*N*K (one multiply and one add per term; dense)"
BYTES_RULE = "minimum traffic: A and B read once, C written once = batch*((M*K + K*N)*input_bytes + M*N*output_bytes)"

_INPUT_BYTES = {"fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
_OUTPUT_BYTES = {"fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 2}  # fp8 writes bf16


def matmul_flops(batch: int, m: int, n: int, k: int) -> int:
    """FLOPs of a (batched) GEMM: 2·batch·M·N·K (:attr:`MatmulShape.flops`)."""
    return MatmulShape(m, n, k, batch).flops


def matmul_bytes(batch: int, m: int, n: int, k: int, dtype: str) -> int:
    """Minimum bytes moved: A and B read once, C written once (see :data:`BYTES_RULE`)."""
    return batch * ((m * k + k * n) * _INPUT_BYTES[dtype] + m * n * _OUTPUT_BYTES[dtype])


def dtype_support(dtype: str, ctx: ProbeContext, library: str = "torch") -> str | None:
    """None when ``dtype`` can run on this device with ``library``, else why not."""
    if dtype not in MATMUL_DTYPES:
        return f"unknown dtype {dtype}"
    if library == "numpy":
        if ctx.device.is_gpu:
            return "numpy runs on the CPU only"
        if dtype not in ("fp32", "fp64"):
            return f"numpy has no BLAS GEMM for {dtype}"
        return None
    import torch

    if dtype == "tf32" and not ctx.device.is_gpu:
        return "tf32 is a GPU tensor-core mode"
    if dtype == "fp8":
        if not ctx.device.is_gpu:
            return "fp8 scaled matmul needs a GPU with fp8 tensor cores"
        if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
            return f"torch {torch.__version__} has no fp8 scaled matmul"
        major, minor = torch.cuda.get_device_capability(ctx.device.index or 0)
        if (major, minor) < (8, 9):
            return f"fp8 tensor cores need compute capability 8.9 or newer (this GPU is {major}.{minor})"
    if dtype == "fp64" and ctx.device.is_gpu:
        return None
    if dtype == "bf16" and ctx.device.is_gpu and not torch.cuda.is_bf16_supported():
        return "this GPU has no bf16 support"
    return None


def _torch_dtype(dtype: str) -> torch.dtype:
    import torch

    if dtype == "fp8":  # only asked for once dtype_support found it in this torch
        return torch.float8_e4m3fn
    return {
        "fp64": torch.float64,
        "fp32": torch.float32,
        "tf32": torch.float32,
        "bf16": torch.bfloat16,
        "fp16": torch.float16,
    }[dtype]


@contextlib.contextmanager
def _math_mode(dtype: str, ctx: ProbeContext) -> Iterator[None]:
    """tf32 on for tf32, off for fp32 (GPU); restored afterwards."""
    if not ctx.device.is_gpu or dtype not in ("fp32", "tf32"):
        yield
        return
    import torch

    matmul_backend = torch.backends.cuda.matmul
    if hasattr(matmul_backend, "fp32_precision"):  # torch 2.9+ API
        previous = matmul_backend.fp32_precision
        matmul_backend.fp32_precision = "tf32" if dtype == "tf32" else "ieee"
        try:
            yield
        finally:
            matmul_backend.fp32_precision = previous
        return
    previous_allow = matmul_backend.allow_tf32
    matmul_backend.allow_tf32 = dtype == "tf32"
    try:
        yield
    finally:
        matmul_backend.allow_tf32 = previous_allow


def _random_operand_torch(
    shape: tuple[int, ...], dtype: torch.dtype, device: torch.device | str, generator: torch.Generator
) -> torch.Tensor:
    """Uniform magnitudes in [0.5, 1.5) with random signs: never zero, representable in fp8."""
    import torch

    values = torch.rand(shape, generator=generator, dtype=torch.float32, device="cpu").add_(0.5)
    signs = torch.randint(0, 2, shape, generator=generator, device="cpu").mul_(2).sub_(1)
    values.mul_(signs)
    return values.to(device=device).to(dtype)


@dataclass
class MatmulCase:
    """A ready-to-time GEMM: ``run()`` computes C once; ``validate()`` returns (error, tolerance)."""

    run: Callable[[], object]
    validate: Callable[[], tuple[float, float]]
    library: str
    implementation: str
    nbytes: int


def _sample_indices(size: int, count: int = 24) -> list[int]:
    if size <= count:
        return list(range(size))
    step = size / count
    return sorted({min(size - 1, int(i * step)) for i in range(count)} | {size - 1})


def _validate_gemm(
    shape: MatmulShape, dtype: str, a: Any, b: Any, c: Any, to64: Callable[[Any], Any]
) -> tuple[float, float]:
    """(error, tolerance) of sampled rows and columns of C (first and last batch) against the
    float64 product of A and B; ``to64`` turns a slice into a float64 numpy array."""
    tolerance = matmul_tolerance(dtype, shape.k)
    rows, cols = _sample_indices(shape.m), _sample_indices(shape.n)
    error = 0.0
    for bi in sorted({0, shape.batch - 1}):
        a3, b3, c3 = (x if shape.batch == 1 else x[bi] for x in (a, b, c))
        expected = to64(a3[rows, :]) @ to64(b3[:, cols])
        error = max(error, check_close(to64(c3[rows][:, cols]), expected, tolerance, f"matmul {dtype}"))
    return error, tolerance


def build_matmul(shape: MatmulShape, dtype: str, library: str, ctx: ProbeContext) -> MatmulCase:
    """Allocate random non-zero operands on the context's device and return the case.
    Raises :class:`ProbeSkipped` when unsupported or over the memory budget."""
    why = dtype_support(dtype, ctx, library)
    if why:
        raise ProbeSkipped(why)
    nbytes = matmul_bytes(shape.batch, shape.m, shape.n, shape.k, dtype)
    ctx.budget.check(nbytes, f"matmul {shape.describe()} {dtype}")
    with oom_guard(f"matmul {shape.describe()} {dtype}", ctx.device):
        if library == "numpy":
            return _build_numpy(shape, dtype, nbytes)
        return _build_torch(shape, dtype, ctx, nbytes)


def _build_numpy(shape: MatmulShape, dtype: str, nbytes: int) -> MatmulCase:
    import numpy as np

    np_dtype = np.float64 if dtype == "fp64" else np.float32
    rng = np.random.default_rng(1234)

    def operand(rows: int, cols: int, transposed: bool) -> Array:
        full = (shape.batch, cols, rows) if transposed else (shape.batch, rows, cols)
        data = (rng.random(full, dtype=np_dtype) + np_dtype(0.5)) * np.where(rng.random(full) < 0.5, -1, 1).astype(
            np_dtype
        )
        data = data.swapaxes(-1, -2) if transposed else data
        first: Array = data[0]  # a 2-D view when there is one batch
        return first if shape.batch == 1 else data

    a = operand(shape.m, shape.k, shape.transpose[0] == "t")
    b = operand(shape.k, shape.n, shape.transpose[1] == "t")
    out_shape = (shape.m, shape.n) if shape.batch == 1 else (shape.batch, shape.m, shape.n)
    c = np.empty(out_shape, dtype=np_dtype)

    def run() -> object:
        return np.matmul(a, b, out=c)

    def validate() -> tuple[float, float]:
        return _validate_gemm(shape, dtype, a, b, c, lambda x: x.astype(np.float64))

    return MatmulCase(run, validate, "numpy", f"numpy.matmul ({numpy_blas() or 'unknown BLAS'})", nbytes)


def _build_torch(shape: MatmulShape, dtype: str, ctx: ProbeContext, nbytes: int) -> MatmulCase:
    import torch

    device = ctx.device.torch_device
    tdtype = _torch_dtype(dtype)
    generator = torch.Generator(device="cpu").manual_seed(1234)
    batch_shape = () if shape.batch == 1 else (shape.batch,)

    def operand(rows: int, cols: int, transposed: bool, storage_dtype: torch.dtype) -> torch.Tensor:
        if transposed:
            return _random_operand_torch((*batch_shape, cols, rows), storage_dtype, device, generator).transpose(-1, -2)
        return _random_operand_torch((*batch_shape, rows, cols), storage_dtype, device, generator)

    if dtype == "fp8":
        if shape.batch != 1:
            raise ProbeSkipped("fp8 scaled matmul is 2-D only (batch must be 1)")
        if shape.m % 16 or shape.n % 16 or shape.k % 16:
            raise ProbeSkipped("fp8 scaled matmul needs M, N and K divisible by 16")
        a = operand(shape.m, shape.k, False, tdtype)  # row-major, as _scaled_mm requires
        b = operand(shape.k, shape.n, True, tdtype)  # column-major, as _scaled_mm requires
        one = torch.ones((), dtype=torch.float32, device=device)
        holder: dict[str, torch.Tensor] = {}

        def run() -> object:
            out: torch.Tensor | tuple[torch.Tensor, torch.Tensor] = torch._scaled_mm(
                a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True
            )
            if isinstance(out, tuple):  # torch < 2.4 returned (out, amax)
                out = out[0]
            holder["c"] = out
            return out

        implementation = "torch._scaled_mm (e4m3, unit scales, bf16 out, fast accumulation)"
        get_c: Callable[[], torch.Tensor] = lambda: holder["c"]  # noqa: E731
    else:
        a = operand(shape.m, shape.k, shape.transpose[0] == "t", tdtype)
        b = operand(shape.k, shape.n, shape.transpose[1] == "t", tdtype)
        c = torch.empty((*batch_shape, shape.m, shape.n), dtype=tdtype, device=device)

        def run() -> object:
            return torch.matmul(a, b, out=c)

        implementation = "torch.matmul" + (
            " (cuBLAS)" if ctx.device.is_gpu else f" ({ctx.versions.get('torch_cpu_blas') or 'CPU BLAS'})"
        )
        get_c = lambda: c  # noqa: E731

    def validate() -> tuple[float, float]:
        # index float8 through float32 (exact): not every op takes fp8
        a_, b_ = (a.to(torch.float32), b.to(torch.float32)) if dtype == "fp8" else (a, b)
        return _validate_gemm(shape, dtype, a_, b_, get_c(), lambda x: x.to(torch.float64).cpu().numpy())

    return MatmulCase(run, validate, "torch", implementation, nbytes)


def _record(
    shape: MatmulShape, dtype: str, case_library: str, implementation: str | None, ctx: ProbeContext, role: str
) -> Measurement:
    return Measurement(
        kind="matmul", name=f"matmul {dtype} {shape.describe()}", device=ctx.device.name,
        parameters={**shape.parameters(), "dtype": dtype, "library": case_library, "role": role},
        flops=shape.flops, bytes=matmul_bytes(shape.batch, shape.m, shape.n, shape.k, dtype),
        counting_rule={"flops": FLOPS_RULE, "bytes": BYTES_RULE}, library=case_library, implementation=implementation,
    )  # fmt: skip


def measure_matmul(
    shape: MatmulShape, dtype: str, library: str, ctx: ProbeContext, statistic: str, role: str
) -> Measurement:
    """One timed GEMM as a measurement (status ok, failed or skipped)."""
    try:
        case = build_matmul(shape, dtype, library, ctx)
    except ProbeSkipped as exc:
        return ctx.skipped(_record(shape, dtype, library, None, ctx, role), str(exc), statistic)
    record = _record(shape, dtype, library, case.implementation, ctx, role)
    try:
        with _math_mode(dtype, ctx):
            return ctx.measure(case.run, statistic=statistic, validate=case.validate, record=record)
    finally:
        del case
        if ctx.device.is_gpu:
            import torch

            torch.cuda.empty_cache()


def _estimate_rate(dtype: str, library: str, ctx: ProbeContext, size: int = 256) -> float | None:
    """FLOP/s of a small GEMM (best of three calls after a warm one), to predict how long big
    shapes take. None when the dtype cannot run."""
    shape = MatmulShape(size, size, size)
    try:
        case = build_matmul(shape, dtype, library, ctx)
    except ProbeSkipped:
        return None
    best = float("inf")
    with _math_mode(dtype, ctx):
        case.run()
        ctx.synchronize()
        for _ in range(3):
            start = time.perf_counter()
            case.run()
            ctx.synchronize()
            best = min(best, time.perf_counter() - start)
    return shape.flops / max(best, 1e-9)


def matmul_ceiling(
    dtype: str,
    shapes: list[MatmulShape],
    libraries: list[str],
    ctx: ProbeContext,
    emit: Callable[[Measurement], None],
) -> Measurement | None:
    """Search ``shapes`` x ``libraries`` for the fastest GEMM in ``dtype`` (best of N each).
    Each measurement is passed to ``emit``; returns the best ok measurement or None.

    Shapes are tried smallest first; a shape whose single call is predicted to take longer than
    ``ctx.max_call_s`` (from the best rate seen so far) is skipped and reported, so a dtype
    without hardware support (fp16 on most CPUs) costs seconds, not minutes.
    """
    best: Measurement | None = None
    ordered = sorted(shapes, key=lambda s: s.flops)
    for library in libraries:
        if dtype_support(dtype, ctx, library):
            continue
        ctx.check_cancel()
        rate = _estimate_rate(dtype, library, ctx)
        if rate is not None and ordered and ordered[-1].flops / rate > ctx.max_call_s:
            # small GEMMs under-use wide machines: ask a mid-size one before skipping anything
            if matmul_flops(1, 512, 512, 512) / rate <= ctx.max_call_s:
                rate = max(rate, _estimate_rate(dtype, library, ctx, 512) or 0.0)
        for shape in ordered:
            ctx.check_cancel()
            flops = shape.flops
            if rate is not None and flops / rate > ctx.max_call_s:
                emit(
                    ctx.skipped(
                        _record(shape, dtype, library, None, ctx, "ceiling"),
                        f"one call would take about {flops / rate:.3g} s at {rate / 1e9:.3g} GFLOP/s "
                        f"(limit {ctx.max_call_s:g} s)",
                    )
                )
                continue
            result = measure_matmul(shape, dtype, library, ctx, "best", "ceiling")
            emit(result)
            if result.status == "ok" and result.flop_per_s is not None:
                rate = max(rate or 0.0, result.flop_per_s)
                if best is None or result.flop_per_s > (best.flop_per_s or 0.0):
                    best = result
    return best


def matmul_workload(shape: MatmulShape, dtype: str, ctx: ProbeContext) -> Measurement:
    """One GEMM timed as a workload (median, p10/p90 over N samples), with torch."""
    return measure_matmul(shape, dtype, "torch", ctx, "median", "workload")
