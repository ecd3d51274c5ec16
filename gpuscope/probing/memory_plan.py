"""What the memory probes measure, before anything runs: STREAM's kernels and their byte count,
working sets, the cache level each one measures and the plan of sizes (``auto``, ``sweep``, a
list). Pure data and arithmetic; :mod:`gpuscope.probing.memory` runs the plan.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from gpuscope.schema.suites import KERNELS

if TYPE_CHECKING:  # the types only: numpy and torch load when a probe runs
    import numpy as np
    import numpy.typing as npt
    import torch

    Float: TypeAlias = np.float64 | np.float32
    Array: TypeAlias = npt.NDArray[Float]

__all__ = [
    "GPU_L2_FRACTION",
    "GPU_L2_CLASSIFY_FRACTION",
    "SCALAR",
    "SWEEP_FIRST_BYTES",
    "KERNEL_ARRAYS",
    "BYTES_RULE",
    "DTYPE_BYTES",
    "stream_bytes",
    "WorkingSet",
    "CacheSizes",
    "classify",
    "plan_working_sets",
    "torch_ops",
    "FLOAT64_REFERENCE",
]

#: GPU ``auto`` L2 working set, as a fraction of the reported L2 (Hopper: two partitions, so
#: about half of L2 is effective for data all SMs touch; a quarter leaves room).
GPU_L2_FRACTION = 0.25
#: A GPU footprint counts as ``l2`` up to this fraction of the reported L2.
GPU_L2_CLASSIFY_FRACTION = 0.3
SCALAR = 3.0
#: a sweep's first working set, per core (CPU)
SWEEP_FIRST_BYTES = 2 * 1024
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
DTYPE_BYTES = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2}


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
    ``sweep``: two sizes per octave from :data:`SWEEP_FIRST_BYTES` per core up to the DRAM size
    (at least 8x the LLC in all). A list: those footprints."""
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
        # two sizes per octave, from SWEEP_FIRST_BYTES per core to at least 8x the LLC in all
        first = (SWEEP_FIRST_BYTES if not caches.gpu else 1024 * 1024) * caches.threads
        last = max(8 * llc, dram_array * narrays)
        steps = math.ceil(2 * math.log2(last / first))
        footprints = sorted({int(first * 2 ** (step / 2)) // 64 * 64 for step in range(steps)} | {last})
        out = [WorkingSet(kernel, footprint, None) for footprint in footprints]
    else:
        raise ValueError(f"working sets {sizes!r}: expected auto, sweep or a list of byte counts")
    return [WorkingSet(ws.kernel, ws.footprint_bytes, classify(ws, caches)) for ws in out]


def torch_ops() -> dict[str, tuple[str, Callable[[list[torch.Tensor]], object]]]:
    """kernel -> (name, the torch op on the kernel's arrays), for CPU and GPU alike (not ``read``)."""
    import torch

    return {
        "copy": ("torch.Tensor.copy_", lambda x: x[1].copy_(x[0])),
        "scale": ("torch.mul(out=)", lambda x: torch.mul(x[1], SCALAR, out=x[0])),
        "add": ("torch.add(out=)", lambda x: torch.add(x[0], x[1], out=x[2])),
        "triad": ("torch.add(alpha=s, out=)", lambda x: torch.add(x[1], x[2], alpha=SCALAR, out=x[0])),
    }


#: kernel -> (output, its float64 reference) of the sampled float64 arrays (not ``read``)
FLOAT64_REFERENCE: dict[str, Callable[[list[Array]], tuple[Array, Array]]] = {
    "copy": lambda f: (f[1], f[0]),
    "scale": lambda f: (f[0], SCALAR * f[1]),
    "add": lambda f: (f[2], f[0] + f[1]),
    "triad": lambda f: (f[0], f[1] + SCALAR * f[2]),
}
