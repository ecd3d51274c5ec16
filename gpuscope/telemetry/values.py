"""A metric is either a value or ``Unavailable`` with the reason: never a fake zero."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeAlias, TypeVar

__all__ = ["Reason", "Unavailable", "Metric", "is_available"]


class Reason(str, enum.Enum):
    """Why a metric has no value. The string value is what logs and reports carry."""

    NOT_SUPPORTED = "not_supported"  # the hardware or driver does not offer it
    NO_PERMISSION = "no_permission"  # e.g. profiling counters with RmProfilingAdminOnly=1
    GPU_LOST = "gpu_lost"  # the GPU fell off the bus or stopped answering
    NO_DRIVER = "no_driver"  # no NVML library or driver not loaded
    DRIVER_TOO_OLD = "driver_too_old"  # the NVML symbol is missing (FunctionNotFound)
    DRIVER_MISMATCH = "driver_mismatch"  # kernel module and user library differ
    WARMING_UP = "warming_up"  # a rate needs two reads; the first sample has only one
    NOT_APPLICABLE = "not_applicable"  # e.g. NVLink on a GPU without links
    ERROR = "error"  # any other failure; the detail says which


@dataclass(frozen=True, slots=True)
class Unavailable:
    """A metric without a value. ``detail`` is one human sentence (what and why)."""

    reason: Reason
    detail: str = ""

    def __str__(self) -> str:
        return f"unavailable ({self.reason.value}{': ' + self.detail if self.detail else ''})"

    def to_json(self) -> str:
        """The compact form stored in logs: ``reason`` or ``reason: detail``."""
        return self.reason.value + (f": {self.detail}" if self.detail else "")

    @classmethod
    def from_json(cls, text: str) -> Unavailable:
        code, _, detail = text.partition(": ")
        try:
            reason = Reason(code)
        except ValueError:
            reason, detail = Reason.ERROR, text
        return cls(reason, detail)


T = TypeVar("T")
Metric: TypeAlias = T | Unavailable


def is_available(value: object) -> bool:
    """True when ``value`` is a real reading."""
    return not isinstance(value, Unavailable)
