"""Memory bandwidth probes: STREAM's copy, scale, add and triad plus a read-only reduction, over
working sets from inside L1 to several times the last-level cache.

Byte counting follows STREAM (:data:`BYTES_RULE`): only the arrays named in the kernel count,
once each; write-allocate traffic does not. A working set is the bytes all of a kernel's arrays
occupy together (its footprint); it is classified into a level (``l1``, ``l2``, ``llc``/``l2`` on
GPU, ``dram``) by :func:`classify`; sizes between levels are measured but make no ceiling.

CPU: one worker thread per physical core (pinned to it where the OS allows), each with its own
arrays (first-touched by that thread), runs the kernel over its arrays; the time is that of the
whole team. The main implementation is compiled (numba, :mod:`gpuscope.probing.cpu_kernels.stream`):
the passes are repeated inside the compiled loop, so call overhead vanishes even at L1 size. The
numpy and torch implementations (glibc memcpy through ``numpy.copyto``, ufuncs with ``out=``,
torch ops with one intra-op thread, as a Python loop of calls or one call over a zero-stride 2-D
view) stay in a short trial and are kept only where they win on the same working set (glibc's
memcpy uses non-temporal stores for DRAM-sized copies); the record names the winner and says
which JIT ran (``parameters.jit``: the numba version, or "unavailable, because ...").
GPU: one torch op per call on the probe stream, arrays of the requested size
(:mod:`gpuscope.probing.memory_gpu`). The kernels, byte counts, levels and size plans are in
:mod:`gpuscope.probing.memory_plan` (re-exported here).

GPU L2: Hopper's 50 MB L2 is two partitions; data that every SM touches is effectively cached in
about half of it, so a working set of half the reported L2 already streams partly from DRAM. The
``auto`` L2 working set is :data:`GPU_L2_FRACTION` (a quarter) of the reported L2, and each GPU
memory result records what the GPU's own DRAM counter said meanwhile (``dram_check``:
``l2.*`` must show DRAM traffic near zero, ``dram.*`` must agree with the probe's B/s).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

import msgspec

from gpuscope.probing.clock import CorePinner
from gpuscope.probing.context import ProbeContext
from gpuscope.probing.environment import oom_guard
from gpuscope.probing.errors import ProbeSkipped
from gpuscope.probing.memory_gpu import dram_check, gpu_measure
from gpuscope.probing.memory_plan import (
    BYTES_RULE,
    DTYPE_BYTES,
    FLOAT64_REFERENCE,
    GPU_L2_FRACTION,
    KERNEL_ARRAYS,
    SCALAR,
    CacheSizes,
    WorkingSet,
    classify,
    plan_working_sets,
    stream_bytes,
    torch_ops,
)
from gpuscope.probing.validation import check_close, elementwise_tolerance
from gpuscope.schema.core import Detail, DetailMap, as_detail, detail_map
from gpuscope.schema.results import Measurement
from gpuscope.telemetry.cpuinfo import cpu_info

if TYPE_CHECKING:  # the types only: numpy and torch load when a probe runs
    import numpy as np
    import numpy.typing as npt
    import torch

    Float: TypeAlias = np.float64 | np.float32
    Array: TypeAlias = npt.NDArray[Float]

__all__ = [
    "KERNEL_ARRAYS",
    "BYTES_RULE",
    "stream_bytes",
    "WorkingSet",
    "classify",
    "plan_working_sets",
    "memory_probe",
    "GPU_L2_FRACTION",
    "dram_check",
]

#: CPU: each worker repeats passes over its arrays until a call moves about target_sample_s times
#: this many bytes (1 GB for a 20 ms sample): one call then lasts about one sample
PASS_BYTES_PER_S = 50e9
#: ... and this many when the working set is beyond the last-level cache (DRAM runs at 5-20 GB/s
#: per core, so 1 GB calls would last 50-200 ms and a DRAM measurement many seconds)
DRAM_PASS_BYTES_PER_S = 10e9


def cache_sizes(ctx: ProbeContext) -> CacheSizes:
    """This device's cache sizes (CPU from /sys via cpuinfo; GPU L2 from torch)."""
    if ctx.device.is_gpu:
        import torch

        props = torch.cuda.get_device_properties(ctx.device.index or 0)
        l2 = int(getattr(props, "L2_cache_size", 0)) or 50 * 1024 * 1024
        return CacheSizes(None, None, l2, 1, gpu=True)
    info = cpu_info()
    threads = info.physical_cores or info.logical_cores or 1
    return CacheSizes(info.cache_bytes(1), info.cache_bytes(2), info.last_level_cache_bytes, threads)


# --- CPU ------------------------------------------------------------------------------------


@dataclass
class _Variant:
    name: str
    run: Callable[[], object]  # one team call


class _ThreadArrays:
    """One worker's arrays for one working set."""

    def __init__(self, kernel: str, elements: int, np_dtype: type[Float], seed: int) -> None:
        import numpy as np

        rng = np.random.default_rng(seed)
        narrays = KERNEL_ARRAYS[kernel][0]
        self.arrays = [_aligned_empty(elements, np_dtype, index) for index in range(narrays)]
        for array in self.arrays:
            # in the array's own dtype: numpy refuses a float32 `out` for its default float64
            rng.random(dtype=np_dtype, out=array)  # type: ignore[arg-type]  # one overload per dtype
            array += np_dtype(0.5)  # non-zero, in [0.5, 1.5)
        #: the arrays and, for numpy's two-pass triad, its temporary
        self.operands = [*self.arrays, *([_aligned_empty(elements, np_dtype, narrays)] if kernel == "triad" else [])]
        self.sums: Array | torch.Tensor | Float | float | None = None  # the read kernel's result (numpy or torch)


#: below this many bytes per pass per thread the numpy and torch variants are not tried when the
#: compiled kernel is there: a call costs them 1-3 us from Python (and the GIL, for the loops),
#: a pass over 4 MiB about 100 us, so only LLC- and DRAM-sized passes give them a chance
LIBRARY_MIN_PASS_BYTES = 4 * 1024 * 1024

#: CPU arrays start on a page boundary plus this many bytes times their index, whatever address
#: the allocator returned: where arrays sit relative to 4 KiB pages changes L1 bandwidth by
#: about 13 % here (72 vs 63 GB/s for an L1 scale), and malloc's placement can differ between
#: processes, so an unpinned layout can make two runs disagree
ARRAY_STAGGER_BYTES = 1024
_PAGE_BYTES = 4096


def _aligned_empty(elements: int, np_dtype: type[Float], index: int) -> Array:
    """An uninitialised 1-D array of ``elements`` that starts ``index * ARRAY_STAGGER_BYTES``
    (mod one page) past a page boundary: the same layout in every run."""
    import numpy as np

    itemsize = np.dtype(np_dtype).itemsize
    pad = (2 * _PAGE_BYTES) // itemsize
    buffer = np.empty(elements + pad, dtype=np_dtype)
    offset_bytes = (-buffer.ctypes.data) % _PAGE_BYTES + (index * ARRAY_STAGGER_BYTES) % _PAGE_BYTES
    start = offset_bytes // itemsize
    return buffer[start : start + elements]  # a view keeps the buffer alive


def _rows(array: Array, rows: int) -> Array:
    from numpy.lib.stride_tricks import as_strided

    return as_strided(array, shape=(rows, array.size), strides=(0, array.itemsize), writeable=True)


def _cpu_variants(kernel: str, per_thread: list[_ThreadArrays], reps: int, team: ThreadPoolExecutor) -> list[_Variant]:
    """Implementations of ``kernel``; each variant's team call makes every thread do ``reps`` passes."""
    import numpy as np
    import torch

    def team_call(per_thread_fns: list[Callable[[], object]]) -> Callable[[], object]:
        if len(per_thread_fns) == 1:
            return per_thread_fns[0]

        def run() -> None:
            for future in [team.submit(fn) for fn in per_thread_fns]:
                future.result()

        return run

    def looped(body: Callable[[_ThreadArrays], Callable[[], object]]) -> Callable[[], object]:
        fns: list[Callable[[], object]] = []
        for arrays in per_thread:
            one = body(arrays)

            def fn(one: Callable[[], object] = one) -> None:
                for _ in range(reps):
                    one()

            fns.append(fn)
        return team_call(fns)

    def strided(body: Callable[[_ThreadArrays, int], Callable[[], object]]) -> Callable[[], object]:
        return team_call([body(arrays, reps) for arrays in per_thread])

    # (loop name, rows name, numpy call bound to the arrays and, for triad, tmp). numpy's triad
    # needs two passes (tmp = s*c; a = b + tmp), which moves more bytes than STREAM counts, so it
    # only wins where dispatch cost dominates.
    two_pass = "numpy two passes (tmp = s*c; a = b + tmp)"
    numpy_ops: dict[str, tuple[str, str, Callable[[list[Array]], Callable[[], object]]]] = {
        "copy": ("numpy.copyto (memcpy)", "numpy.copyto", lambda x: lambda: np.copyto(x[1], x[0])),
        "scale": ("numpy.multiply(out=)",) * 2 + (lambda x: lambda: np.multiply(x[1], SCALAR, out=x[0]),),
        "add": ("numpy.add(out=)",) * 2 + (lambda x: lambda: np.add(x[0], x[1], out=x[2]),),
        "triad": (two_pass, two_pass,
                  lambda x: lambda: (np.multiply(x[2], SCALAR, out=x[3]), np.add(x[1], x[3], out=x[0]))),
    }  # fmt: skip
    variants: list[_Variant] = _compiled_variants(kernel, per_thread, reps, team_call)
    pass_bytes = sum(array.nbytes for array in per_thread[0].arrays)
    if variants and pass_bytes < LIBRARY_MIN_PASS_BYTES:
        return variants  # numpy and torch cannot win here: their call overhead is most of a pass
    if kernel in numpy_ops:
        name, rows_name, numpy_call = numpy_ops[kernel]
        variants.append(_Variant(f"{name}, loop", looped(lambda t: numpy_call(t.operands))))
        if reps > 1:
            rows = strided(lambda t, r: numpy_call([_rows(x, r) for x in t.operands]))
            variants.append(_Variant(f"{rows_name}, zero-stride rows", rows))
        torch_name, torch_op = torch_ops()[kernel]
        variants.append(_Variant(f"{torch_name}, loop", looped(lambda t: _on_tensors(t, torch_op))))
    elif kernel == "read":

        def torch_rows(t: _ThreadArrays, r: int) -> Callable[[], object]:
            view = torch.from_numpy(t.arrays[0]).expand(r, t.arrays[0].size)
            out = torch.empty(r, dtype=view.dtype)

            def fn() -> None:
                torch.sum(view, dim=1, out=out)
                t.sums = out

            return fn

        variants.append(_Variant("torch.sum over zero-stride rows", strided(torch_rows)))

        def numpy_sum(t: _ThreadArrays) -> Callable[[], object]:
            def fn() -> None:
                t.sums = np.add.reduce(t.arrays[0])

            return fn

        variants.append(_Variant("numpy.add.reduce, loop", looped(numpy_sum)))
    return variants


def _compiled_variants(
    kernel: str,
    per_thread: list[_ThreadArrays],
    reps: int,
    team_call: Callable[[list[Callable[[], object]]], Callable[[], object]],
) -> list[_Variant]:
    """The numba kernel (repetition inside the compiled loop), or nothing when numba is
    unavailable (the numpy and torch variants remain; the record's ``jit`` says why)."""
    from gpuscope.probing.jit import load_numba
    from gpuscope.telemetry.values import Unavailable

    if isinstance(load_numba(), Unavailable):
        return []
    scaled = kernel in ("scale", "triad")
    first = per_thread[0].arrays
    try:
        from gpuscope.probing.cpu_kernels.stream import KERNELS as COMPILED

        compiled = COMPILED[kernel]
        # compile now, for these arrays' types: zero passes over a one-element view change nothing
        views = [array[:1] for array in first]
        compiled(*views, *((first[0].dtype.type(SCALAR),) if scaled else ()), 0)
    except Exception as exc:  # noqa: BLE001  # an LLVM or typing error: the libraries still measure
        _COMPILE_FAILURES[kernel] = f"unavailable, because numba could not compile {kernel} ({exc})"[:300]
        return []

    def body(t: _ThreadArrays) -> Callable[[], object]:
        arrays = t.arrays
        args = (*arrays, arrays[0].dtype.type(SCALAR)) if scaled else tuple(arrays)

        def fn() -> None:
            total = compiled(*args, reps)
            if kernel == "read":
                t.sums = total / reps

        return fn

    return [_Variant(COMPILED_NAME, team_call([body(t) for t in per_thread]))]


#: the implementation name of the compiled kernels in records
COMPILED_NAME = "numba loop, passes inside the kernel"
#: kernel -> why its compiled version could not be built in this process (the record's ``jit``)
_COMPILE_FAILURES: dict[str, str] = {}


def _on_tensors(t: _ThreadArrays, op: Callable[[list[torch.Tensor]], object]) -> Callable[[], object]:
    """``op(tensors)`` on torch views of the thread's arrays."""
    import torch

    tensors = [torch.from_numpy(x) for x in t.arrays]
    return lambda: op(tensors)


def _validate_cpu(kernel: str, per_thread: list[_ThreadArrays], dtype: str) -> tuple[float, float]:
    import numpy as np

    tolerance = elementwise_tolerance(dtype) if kernel != "read" else 1e-10 if dtype == "fp64" else 1e-4
    error = 0.0
    for t in per_thread:
        arrays = t.arrays
        n = arrays[0].size
        idx = np.unique(np.linspace(0, n - 1, num=min(n, 257)).astype(np.int64))
        got: Array
        expected: Array
        if kernel == "read":
            sums = np.atleast_1d(np.asarray(t.sums, dtype=np.float64))
            got, expected = sums[-1:], np.array([math.fsum(arrays[0].astype(np.float64))], dtype=np.float64)
        else:
            got, expected = FLOAT64_REFERENCE[kernel]([a[idx].astype(np.float64) for a in arrays])
        error = max(error, check_close(got, expected, tolerance, kernel))
    return error, tolerance


def _cpu_measure(
    ws: WorkingSet,
    dtype: str,
    ctx: ProbeContext,
    team: ThreadPoolExecutor,
    threads: int,
    record: Measurement,
    caches_llc_bytes: int | None = None,
) -> Measurement:
    import numpy as np

    np_dtypes: dict[str, type[Float]] = {"fp64": np.float64, "fp32": np.float32}
    np_dtype = np_dtypes.get(dtype)
    if np_dtype is None:
        raise ProbeSkipped(f"CPU memory probes run in fp64 or fp32, not {dtype}")
    element_bytes = DTYPE_BYTES[dtype]
    narrays = KERNEL_ARRAYS[ws.kernel][0]
    elements = max(64, ws.footprint_bytes // (narrays * element_bytes * threads))
    extra = elements * element_bytes * threads if ws.kernel == "triad" else 0
    ctx.budget.check(ws.footprint_bytes + extra, f"memory {ws.kernel} working set")
    with oom_guard(f"memory {ws.kernel} {ws.footprint_bytes} B", ctx.device):
        futures = [team.submit(_ThreadArrays, ws.kernel, elements, np_dtype, 100 + i) for i in range(threads)]
        per_thread = [future.result() for future in futures]
    pass_bytes = stream_bytes(ws.kernel, elements, element_bytes)
    # calls of about one sample (1 GB per thread for 20 ms samples): waking the team (~50 us) and
    # the spread of the threads' start times stay well under 1 % of a call
    beyond_llc = caches_llc_bytes is not None and ws.footprint_bytes > caches_llc_bytes
    rate_guess = DRAM_PASS_BYTES_PER_S if beyond_llc else PASS_BYTES_PER_S
    per_call_bytes = max(50e6, ctx.ceiling_policy.target_sample_s * rate_guess)
    reps = max(1, math.ceil(per_call_bytes / pass_bytes))
    variants = _cpu_variants(ws.kernel, per_thread, reps, team)
    # trial: every implementation in turn, four rounds, so a burst of load hits them all alike
    fastest = {variant.name: math.inf for variant in variants}
    for variant in variants:
        variant.run()
    for _ in range(4):
        for variant in variants:
            ctx.check_cancel()
            start = time.perf_counter()
            variant.run()
            fastest[variant.name] = min(fastest[variant.name], time.perf_counter() - start)
    trial = {name: pass_bytes * reps * threads / seconds for name, seconds in fastest.items()}
    chosen = max(variants, key=lambda v: trial[v.name])
    record = msgspec.structs.replace(
        record,
        bytes=pass_bytes * reps * threads,
        parameters=as_detail(
            detail_map(record.parameters)
            | {
                "elements_per_thread": elements,
                "threads": threads,
                "passes_per_call": reps,
                "array_bytes": elements * element_bytes * threads,
                "trial_bytes_per_s": as_detail(dict[str, Detail](trial)),
                "jit": _jit_text(ws.kernel),
            }
        ),
        implementation=chosen.name,
    )
    return ctx.measure(
        chosen.run, statistic="best", validate=lambda: _validate_cpu(ws.kernel, per_thread, dtype), record=record
    )


def _jit_text(kernel: str) -> str:
    """``numba <version>``, or ``unavailable, because <reason>``."""
    from gpuscope.probing.jit import jit_versions

    version = jit_versions()["numba"]
    if version.startswith("unavailable"):
        return version
    return _COMPILE_FAILURES.get(kernel) or f"numba {version}"


# --- probe ----------------------------------------------------------------------------------


def memory_probe(
    kernels: list[str],
    sizes: str | list[int],
    dtype: str,
    ctx: ProbeContext,
    emit: Callable[[Measurement], None],
    dram_array_bytes: int | None = None,
    on_step: Callable[[str], None] | None = None,
) -> None:
    """Measure every kernel at every working set; ``emit`` each record."""
    caches = cache_sizes(ctx)
    team: ThreadPoolExecutor | None = None
    previous_threads = None
    if not ctx.device.is_gpu:
        import torch

        previous_threads = torch.get_num_threads()
        torch.set_num_threads(1)  # each worker thread runs its own ops; no nested parallelism
        team = ThreadPoolExecutor(
            max_workers=caches.threads, thread_name_prefix="gpuscope-stream", initializer=CorePinner(caches.threads)
        )
    try:
        for kernel in kernels:
            for ws in plan_working_sets(kernel, sizes, caches, dram_array_bytes):
                ctx.check_cancel()
                label = f"memory {kernel} {_human(ws.footprint_bytes)}"
                if on_step is not None:
                    on_step(label)
                reads_writes: list[Detail] = list(KERNEL_ARRAYS[kernel][1:])
                parameters: DetailMap = dict(
                    kernel=kernel, dtype=dtype, footprint_bytes=ws.footprint_bytes, level=ws.level,
                    reads_writes=as_detail(reads_writes),
                )  # fmt: skip
                if sizes == "sweep":
                    parameters["sweep"] = True
                record = Measurement(
                    kind="memory", name=label + (f" ({ws.level})" if ws.level else ""), device=ctx.device.name,
                    parameters=as_detail(parameters), flops=0, bytes=0,
                    counting_rule={"bytes": BYTES_RULE}, level=ws.level,
                )  # fmt: skip
                try:
                    if ctx.device.is_gpu:
                        result = gpu_measure(ws, dtype, ctx, record)
                    else:
                        assert team is not None
                        result = _cpu_measure(ws, dtype, ctx, team, caches.threads, record, caches.llc_bytes)
                except ProbeSkipped as exc:
                    result = ctx.skipped(record, str(exc))
                emit(result)
    finally:
        if team is not None:
            team.shutdown(wait=True)
        if previous_threads is not None:
            import torch

            torch.set_num_threads(previous_threads)


def _human(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) else f"{value:.1f} {unit}"
    return f"{nbytes} B"
