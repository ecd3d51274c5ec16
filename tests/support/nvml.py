"""Reaching into a real NvmlCollector in tests (its per-GPU parts)."""

from __future__ import annotations

from gpuscope.telemetry.nvml.collector import NvmlCollector
from gpuscope.telemetry.nvml.fields import FieldSet


def field_set(collector: NvmlCollector, index: int = 0) -> FieldSet:
    """The field-value batch of GPU ``index`` (the collector must be open)."""
    fields = collector._gpus[index].fields
    assert fields is not None
    return fields
