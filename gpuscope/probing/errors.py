"""Outcomes of a probe that are not a number: failed validation, skipped sizes, cancellation."""

from __future__ import annotations

__all__ = ["ProbeCancelled", "ProbeSkipped", "ValidationFailed", "ProbeFailed"]


class ProbeCancelled(Exception):
    """The cancel event was set; the run stops and keeps what it measured so far."""


class ProbeSkipped(Exception):
    """This measurement cannot run here (over the memory budget, out of memory, unsupported
    dtype, too slow). The message says why; it is reported, not fatal."""


class ProbeFailed(Exception):
    """The measurement ran but produced no trustworthy number (the message says why)."""

    #: A failed validation's relative error and tolerance (None: not a validation).
    error: float | None = None
    tolerance: float | None = None


class ValidationFailed(ProbeFailed):
    """The kernel's output differs from the float64 reference by more than the tolerance."""

    def __init__(self, error: float, tolerance: float, what: str = "") -> None:
        self.error = error
        self.tolerance = tolerance
        super().__init__(
            f"validation failed{' for ' + what if what else ''}: "
            f"relative error {error:.3g} exceeds tolerance {tolerance:.3g}"
        )
