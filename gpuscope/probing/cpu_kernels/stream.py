"""STREAM's copy, scale, add and triad and a read (sum) kernel, compiled by numba.

Each function runs one thread's share: ``reps`` passes over that thread's own arrays, the
repetition inside the compiled code so that call overhead (about 1 us from Python) vanishes even
when one pass over an L1-sized array takes a few hundred nanoseconds. ``nogil``: the probe's
team of Python threads (one per physical core, each having first-touched its own arrays) calls
them at once. Compiled once per dtype and cached on disk (see :mod:`gpuscope.probing.jit`).

The argument order is that of :data:`gpuscope.probing.memory.KERNEL_ARRAYS`'s arrays: copy
``(a, c)`` c = a; scale ``(b, c, s)`` b = s*c; add ``(a, b, c)`` c = a + b; triad ``(a, b, c, s)``
a = b + s*c; read ``(a,)`` returns the sum of ``a`` over all passes.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuscope.probing.jit import require_numba

numba = require_numba()

__all__ = ["KERNELS", "copy", "scale", "add", "triad", "read"]

# contract: b + s*c as one FMA (gcc does the same for STREAM at -O3); reassoc: the read
# kernel's sum vectorises over several accumulators (a strict left-to-right sum runs at one add
# per FP-add latency, a few GB/s)
_OPTIONS = {"nogil": True, "cache": True, "boundscheck": False, "error_model": "numpy"}
_FAST = {"contract", "reassoc", "nsz"}


@numba.njit(**_OPTIONS)
def copy(a, c, reps):  # type: ignore[no-untyped-def]
    n = a.shape[0]
    for _ in range(reps):
        for i in range(n):
            c[i] = a[i]
    return 0.0


@numba.njit(**_OPTIONS)
def scale(b, c, s, reps):  # type: ignore[no-untyped-def]
    n = b.shape[0]
    for _ in range(reps):
        for i in range(n):
            b[i] = s * c[i]
    return 0.0


@numba.njit(**_OPTIONS)
def add(a, b, c, reps):  # type: ignore[no-untyped-def]
    n = a.shape[0]
    for _ in range(reps):
        for i in range(n):
            c[i] = a[i] + b[i]
    return 0.0


@numba.njit(fastmath=_FAST, **_OPTIONS)
def triad(a, b, c, s, reps):  # type: ignore[no-untyped-def]
    n = a.shape[0]
    for _ in range(reps):
        for i in range(n):
            a[i] = b[i] + s * c[i]
    return 0.0


@numba.njit(fastmath=_FAST, **_OPTIONS)
def read(a, reps):  # type: ignore[no-untyped-def]
    n = a.shape[0]
    total = 0.0
    for _ in range(reps):
        partial = 0.0
        for i in range(n):
            partial += a[i]
        total += partial
    return total


KERNELS: dict[str, Callable[..., float]] = {"copy": copy, "scale": scale, "add": add, "triad": triad, "read": read}
