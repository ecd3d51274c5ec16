"""Checking a kernel's output against a float64 reference computed on a sample of it.

The error is normwise: ``max |actual - expected| / max |expected|`` over the sampled elements
(NaN or infinity in the output is an infinite error). The reference is computed from the
inputs *as stored* in the kernel's dtype, so only the kernel's own rounding counts, and each
dtype has a tolerance a few times its unit roundoff (scaled for long dot products). Above the
tolerance the probe fails and reports no number.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from gpuscope.probing.errors import ValidationFailed

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["TOLERANCES", "matmul_tolerance", "elementwise_tolerance", "relative_error", "check_close"]

#: Normwise relative tolerance per dtype for a GEMM with K up to 4096 (scaled by sqrt(K/4096) above).
TOLERANCES: dict[str, float] = {"fp64": 1e-9, "fp32": 1e-4, "tf32": 5e-3, "bf16": 2e-2, "fp16": 5e-3, "fp8": 5e-2}

#: Elementwise kernels (copy, scale, add, triad): a couple of unit roundoffs.
_ELEMENTWISE: dict[str, float] = {"fp64": 1e-14, "fp32": 1e-6, "bf16": 1e-2, "fp16": 2e-3}


def matmul_tolerance(dtype: str, k: int) -> float:
    """Tolerance for a GEMM of inner dimension ``k`` in ``dtype``."""
    return TOLERANCES[dtype] * max(1.0, math.sqrt(k / 4096))


def elementwise_tolerance(dtype: str) -> float:
    """Tolerance for a streaming kernel in ``dtype``."""
    return _ELEMENTWISE.get(dtype, 1e-2)


def relative_error(actual: npt.ArrayLike, expected: npt.ArrayLike) -> float:
    """Normwise relative error of two float64 numpy arrays of one shape."""
    import numpy as np

    got = np.asarray(actual, dtype=np.float64)
    want = np.asarray(expected, dtype=np.float64)
    if got.shape != want.shape:
        return math.inf
    if not np.all(np.isfinite(got)):
        return math.inf
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    difference = float(np.max(np.abs(got - want))) if want.size else 0.0
    if scale == 0.0:
        return 0.0 if difference == 0.0 else math.inf
    return difference / scale


def check_close(actual: npt.ArrayLike, expected: npt.ArrayLike, tolerance: float, what: str = "") -> float:
    """Return the relative error, or raise :class:`ValidationFailed` when it exceeds ``tolerance``."""
    error = relative_error(actual, expected)
    if not error <= tolerance:
        raise ValidationFailed(error, tolerance, what)
    return error
