"""Memory bandwidth probes: STREAM's copy, scale, add and triad plus a read-only reduction, over
working sets from inside L1 to several times the last-level cache.

Byte counting follows STREAM (:data:`BYTES_RULE`): only the arrays named in the kernel count,
once each; write-allocate traffic does not. A working set is the bytes all of a kernel's arrays
occupy together (its footprint); it is classified into a level (``l1``, ``l2``, ``llc``/``l2`` on
GPU, ``dram``) by :func:`classify`; sizes between levels are measured but make no ceiling.

CPU: one worker thread per physical core, each with its own arrays (first-touched by that
thread), runs the kernel over its arrays; the time is that of the whole team. Each kernel has a
few implementations (glibc memcpy through ``numpy.copyto``, numpy ufuncs with ``out=``, torch ops
with one intra-op thread, repeated either as a Python loop of calls or as one call over a
zero-stride 2-D view); a short trial picks the fastest, and the record names it. Small working
sets are dominated by per-call dispatch (about 0.3-1 us per call from Python), so L1 figures are
lower bounds. GPU: one torch op per call on the probe stream, arrays of the requested size.

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

from gpuscope.probing.context import ProbeContext
from gpuscope.probing.environment import oom_guard
from gpuscope.probing.errors import ProbeSkipped
from gpuscope.probing.validation import check_close, elementwise_tolerance
from gpuscope.schema.core import Detail, DetailMap, as_detail, detail_map
from gpuscope.schema.results import DramCheck, Measurement
from gpuscope.schema.suites import KERNELS
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

#: GPU ``auto`` L2 working set, as a fraction of the reported L2 (Hopper: two partitions, so
#: about half of L2 is effective for data all SMs touch; a quarter leaves room).
GPU_L2_FRACTION = 0.25
#: A GPU footprint counts as ``l2`` up to this fraction of the reported L2.
GPU_L2_CLASSIFY_FRACTION = 0.3
#: ``l2.*``: DRAM traffic is "near zero" below this fraction of the probe's B/s.
L2_DRAM_NEAR_ZERO_FRACTION = 0.1
#: ``dram.*``: the GPU's DRAM counter and the probe's B/s agree within this fraction.
DRAM_AGREEMENT_FRACTION = 0.10

SCALAR = 3.0
#: CPU: each worker repeats passes over its arrays until a call moves about target_sample_s times
#: this many bytes (1 GB for a 20 ms sample): one call then lasts about one sample
PASS_BYTES_PER_S = 50e9

#: kernel -> (arrays named in the kernel, arrays read, arrays written)
KERNEL_ARRAYS: dict[str, tuple[int, int, int]] = {
    "copy": (2, 1, 1),  # c = a
    "scale": (2, 1, 1),  # b = s*c
    "add": (3, 2, 1),  # c = a + b
    "triad": (3, 2, 1),  # a = b + s*c
    "read": (1, 1, 0),  # sum(a)
}
assert tuple(KERNEL_ARRAYS) == KERNELS  # one entry per kernel a suite may name
BYTES_RULE = (
    "STREAM: bytes = arrays named in the kernel x elements x element size, each array counted once; "
    "write-allocate traffic is not counted. copy c=a and scale b=s*c: 2 arrays (1 read, 1 write); "
    "add c=a+b and triad a=b+s*c: 3 arrays (2 read, 1 write); read sum(a): 1 array (read only)"
)
_DTYPE_BYTES = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2}


def stream_bytes(kernel: str, elements: int, element_bytes: int) -> int:
    """Bytes one pass of ``kernel`` over ``elements`` elements moves, by STREAM's rule."""
    return KERNEL_ARRAYS[kernel][0] * elements * element_bytes


@dataclass(frozen=True)
class WorkingSet:
    """``footprint_bytes``: all of the kernel's arrays together (every thread)."""

    kernel: str
    footprint_bytes: int
    level: str | None

    @property
    def array_bytes(self) -> int:
        return self.footprint_bytes // KERNEL_ARRAYS[self.kernel][0]


@dataclass(frozen=True)
class CacheSizes:
    """Per-core L1 and L2, the shared last level, and the worker count (GPU: ``l2`` only)."""

    l1_bytes: int | None
    l2_bytes: int | None
    llc_bytes: int | None
    threads: int
    gpu: bool = False


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


def classify(ws: WorkingSet, caches: CacheSizes) -> str | None:
    """The level ``ws`` measures, or None for a size between levels. DRAM needs every array at
    least 4x the last-level cache; a cache level needs the footprint within 60 % of it (per core
    for private caches) and beyond the level below."""
    llc = caches.llc_bytes
    if llc and ws.array_bytes >= 4 * llc:
        return "dram"
    per_thread = ws.footprint_bytes / max(1, caches.threads)
    if caches.gpu:
        return "l2" if llc and ws.footprint_bytes <= GPU_L2_CLASSIFY_FRACTION * llc else None
    if caches.l1_bytes and per_thread <= 0.6 * caches.l1_bytes:
        return "l1"
    if caches.l2_bytes and caches.l1_bytes and caches.l1_bytes < per_thread <= 0.6 * caches.l2_bytes:
        return "l2"
    if llc and caches.l2_bytes and per_thread > caches.l2_bytes and ws.footprint_bytes <= 0.6 * llc:
        return "llc"
    return None


def plan_working_sets(
    kernel: str, sizes: str | list[int], caches: CacheSizes, dram_array_bytes: int | None = None
) -> list[WorkingSet]:
    """``auto``: one size per level (half of each CPU cache, :data:`GPU_L2_FRACTION` of a GPU's L2;
    DRAM arrays ``max(4 x LLC, dram_array_bytes)``).
    ``sweep``: powers of two from 8 KiB per core up to the DRAM size. A list: those footprints."""
    narrays = KERNEL_ARRAYS[kernel][0]
    llc = caches.llc_bytes or 32 * 1024 * 1024
    dram_array = max(4 * llc, dram_array_bytes or 0)
    out: list[WorkingSet] = []
    if isinstance(sizes, list):
        out = [WorkingSet(kernel, int(size), None) for size in sizes]
    elif sizes == "auto":
        if caches.gpu:
            out.append(WorkingSet(kernel, int(llc * GPU_L2_FRACTION), None))
        else:
            for per_core in (caches.l1_bytes, caches.l2_bytes):
                if per_core:
                    out.append(WorkingSet(kernel, per_core // 2 * caches.threads, None))
            out.append(WorkingSet(kernel, llc // 2, None))
        out.append(WorkingSet(kernel, dram_array * narrays, None))
    elif sizes == "sweep":
        footprint = (8 * 1024 if not caches.gpu else 1024 * 1024) * caches.threads
        while footprint < dram_array * narrays:
            out.append(WorkingSet(kernel, footprint, None))
            footprint *= 2
        out.append(WorkingSet(kernel, dram_array * narrays, None))
    else:
        raise ValueError(f"working sets {sizes!r}: expected auto, sweep or a list of byte counts")
    return [WorkingSet(ws.kernel, ws.footprint_bytes, classify(ws, caches)) for ws in out]


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
        self.sums: Array | torch.Tensor | Float | None = None  # the read kernel's result (numpy or torch)


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


def _torch_ops() -> dict[str, tuple[str, Callable[[list[torch.Tensor]], object]]]:
    """kernel -> (name, the torch op on the kernel's arrays), for CPU and GPU alike (not ``read``)."""
    import torch

    return {
        "copy": ("torch.Tensor.copy_", lambda x: x[1].copy_(x[0])),
        "scale": ("torch.mul(out=)", lambda x: torch.mul(x[1], SCALAR, out=x[0])),
        "add": ("torch.add(out=)", lambda x: torch.add(x[0], x[1], out=x[2])),
        "triad": ("torch.add(alpha=s, out=)", lambda x: torch.add(x[1], x[2], alpha=SCALAR, out=x[0])),
    }


#: kernel -> (output, its float64 reference) of the sampled float64 arrays (not ``read``)
_REFERENCE: dict[str, Callable[[list[Array]], tuple[Array, Array]]] = {
    "copy": lambda f: (f[1], f[0]),
    "scale": lambda f: (f[0], SCALAR * f[1]),
    "add": lambda f: (f[2], f[0] + f[1]),
    "triad": lambda f: (f[0], f[1] + SCALAR * f[2]),
}


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
    variants: list[_Variant] = []
    if kernel in numpy_ops:
        name, rows_name, numpy_call = numpy_ops[kernel]
        variants.append(_Variant(f"{name}, loop", looped(lambda t: numpy_call(t.operands))))
        if reps > 1:
            rows = strided(lambda t, r: numpy_call([_rows(x, r) for x in t.operands]))
            variants.append(_Variant(f"{rows_name}, zero-stride rows", rows))
        torch_name, torch_op = _torch_ops()[kernel]
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
            got, expected = _REFERENCE[kernel]([a[idx].astype(np.float64) for a in arrays])
        error = max(error, check_close(got, expected, tolerance, kernel))
    return error, tolerance


def _cpu_measure(
    ws: WorkingSet, dtype: str, ctx: ProbeContext, team: ThreadPoolExecutor, threads: int, record: Measurement
) -> Measurement:
    import numpy as np

    np_dtypes: dict[str, type[Float]] = {"fp64": np.float64, "fp32": np.float32}
    np_dtype = np_dtypes.get(dtype)
    if np_dtype is None:
        raise ProbeSkipped(f"CPU memory probes run in fp64 or fp32, not {dtype}")
    element_bytes = _DTYPE_BYTES[dtype]
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
    per_call_bytes = max(50e6, ctx.ceiling_policy.target_sample_s * PASS_BYTES_PER_S)
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
            }
        ),
        implementation=chosen.name,
    )
    return ctx.measure(
        chosen.run, statistic="best", validate=lambda: _validate_cpu(ws.kernel, per_thread, dtype), record=record
    )


# --- GPU ------------------------------------------------------------------------------------


def _gpu_measure(ws: WorkingSet, dtype: str, ctx: ProbeContext, record: Measurement) -> Measurement:
    import torch

    tdtype = {"fp64": torch.float64, "fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    element_bytes = _DTYPE_BYTES[dtype]
    narrays = KERNEL_ARRAYS[ws.kernel][0]
    elements = max(1024, ws.footprint_bytes // (narrays * element_bytes))
    ctx.budget.check(elements * element_bytes * narrays, f"memory {ws.kernel} working set")
    device = ctx.device.torch_device
    with oom_guard(f"memory {ws.kernel} {ws.footprint_bytes} B", ctx.device):
        arrays = [torch.rand(elements, dtype=tdtype, device=device).add_(0.5) for _ in range(narrays)]
        holder: dict[str, torch.Tensor] = {}
        kernel = ws.kernel
        run: Callable[[], object]
        if kernel == "read":
            sums = torch.empty((), dtype=torch.float32 if dtype != "fp64" else torch.float64, device=device)

            def run() -> None:
                torch.sum(arrays[0], dim=0, dtype=sums.dtype, out=sums)
                holder["sum"] = sums

            implementation = "torch.sum(out=)"
        else:
            implementation, op = _torch_ops()[kernel]
            run = lambda: op(arrays)  # noqa: E731

    def validate() -> tuple[float, float]:
        import numpy as np

        if kernel == "read":
            read_tolerance = 1e-10 if dtype == "fp64" else 1e-3
            got, expected = float(holder["sum"].item()), float(arrays[0].double().sum().item())
            return check_close(np.array([got]), np.array([expected]), read_tolerance, "read"), read_tolerance
        tolerance = elementwise_tolerance(dtype)
        idx = torch.linspace(0, elements - 1, steps=min(elements, 257), device=device).long()
        output, reference = _REFERENCE[kernel]([a[idx].double().cpu().numpy() for a in arrays])
        return check_close(output, reference, tolerance, kernel), tolerance

    record = msgspec.structs.replace(
        record,
        bytes=stream_bytes(kernel, elements, element_bytes),
        parameters=as_detail(
            detail_map(record.parameters) | {"elements": elements, "array_bytes": elements * element_bytes}
        ),
        implementation=implementation,
    )
    try:
        result = ctx.measure(run, statistic="best", validate=validate, record=record)
        return msgspec.structs.replace(result, dram_check=dram_check(result))
    finally:
        # empty the list rather than `del arrays`: run/validate close over the name, and the
        # tensors must go before empty_cache can hand their memory back
        arrays.clear()
        torch.cuda.empty_cache()


def dram_check(result: Measurement) -> DramCheck:
    """What the GPU's DRAM counter (telemetry during the measurement, GPM DRAM_BW_UTIL x peak)
    said next to the probe's own B/s: for ``l2`` whether DRAM traffic stayed near zero (below
    :data:`L2_DRAM_NEAR_ZERO_FRACTION` of the probe's B/s), for ``dram`` whether the two agree
    within :data:`DRAM_AGREEMENT_FRACTION`. ``ok`` is None when it could not be checked."""
    level = result.level or detail_map(result.parameters).get("level")
    level = level if isinstance(level, str) else None
    probe = result.bytes_per_s
    during = detail_map(result.telemetry_during)
    reported = during.get("dram_bandwidth_bytes_per_s_mean")
    if not isinstance(reported, (int, float)) or isinstance(reported, bool):
        reported = None
    check = DramCheck(level=level, probe_bytes_per_s=probe, reported_dram_bytes_per_s=reported)
    if probe is None or probe <= 0 or reported is None:
        reason = during.get("reason")
        check.reason = (
            reason
            if isinstance(reason, str) and reason
            else "no DRAM bandwidth in the telemetry during the measurement"
        )
        return check
    check.ratio = ratio = reported / probe
    if level == "l2":
        check.near_zero = ok = ratio < L2_DRAM_NEAR_ZERO_FRACTION
        check.rule = f"l2: DRAM traffic below {L2_DRAM_NEAR_ZERO_FRACTION:.0%} of the probe's B/s"
    elif level == "dram":
        ok = abs(ratio - 1.0) <= DRAM_AGREEMENT_FRACTION
        check.rule = f"dram: the GPU's DRAM counter within {DRAM_AGREEMENT_FRACTION:.0%} of the probe's B/s"
    else:
        check.reason = "between levels: nothing to check"
        return check
    check.ok = bool(ok)
    return check


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
        team = ThreadPoolExecutor(max_workers=caches.threads, thread_name_prefix="gpuscope-stream")
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
                record = Measurement(
                    kind="memory", name=label + (f" ({ws.level})" if ws.level else ""), device=ctx.device.name,
                    parameters=as_detail(parameters), flops=0, bytes=0,
                    counting_rule={"bytes": BYTES_RULE}, level=ws.level,
                )  # fmt: skip
                try:
                    if ctx.device.is_gpu:
                        result = _gpu_measure(ws, dtype, ctx, record)
                    else:
                        assert team is not None
                        result = _cpu_measure(ws, dtype, ctx, team, caches.threads, record)
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
