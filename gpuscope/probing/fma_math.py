"""The arithmetic of the FMA-chain peak kernels, shared by the CPU (numba) and GPU (Triton)
versions: the FLOP count, the chain's constants and its closed form for validation. Pure: it
imports no kernel and no device."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["FLOPS_RULE", "fma_constants", "fma_expected", "fma_flops"]

FLOPS_RULE = "2 FLOP per FMA: threads x lanes x chain x reps x 2 (register/L1-resident, no memory traffic)"


def fma_flops(threads: int, lanes: int, chain: int, reps: int) -> int:
    """FLOPs of one call: ``threads x lanes x chain x reps`` FMAs, 2 FLOP each."""
    return 2 * threads * lanes * chain * reps


def fma_constants(steps: int) -> tuple[float, float]:
    """``(a, b)`` of ``x = a*x + b`` with ``a**steps = 1/2`` and fixed point ``b / (1 - a) = 1``."""
    a = 0.5 ** (1.0 / steps)
    return a, 1.0 - a


def fma_expected(x0: npt.NDArray[np.float64], a: float, b: float, steps: int) -> npt.NDArray[np.float64]:
    """``steps`` applications of ``x = a*x + b`` to ``x0``, in closed form (float64)."""
    fixed = b / (1.0 - a)
    out: npt.NDArray[np.float64] = fixed + (x0 - fixed) * a**steps
    return out
