"""Which device a profile runs on and its name. Imports torch (called only once a profile runs).
The NVML GPU of a CUDA device comes from the one mapping, gpuscope.telemetry.nvml.mapping
(the energy meter uses it)."""

from __future__ import annotations

from typing import Any

__all__ = ["device_name", "resolve_device", "tensor_device"]


def tensor_device(values: Any) -> Any:
    """The device of the first tensor in ``values`` (any nesting), else None."""
    from gpuscope.roofline.measure import _first_tensor_device

    return _first_tensor_device(values)


def resolve_device(device: Any) -> Any:
    """A ``torch.device`` (CUDA with an index). None: CUDA's current device when CUDA is available,
    else the CPU. Raises UsageError / ResourceError for a device that cannot be used."""
    import torch

    from gpuscope.roofline.measure import _resolve_device

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return _resolve_device(device, (), {})


def device_name(device: Any) -> str | None:
    """The GPU's name or the CPU model."""
    from gpuscope.roofline.measure import _device_name

    try:
        return _device_name(device)
    except Exception:  # noqa: BLE001 - a name is a label, never a failure
        return None
