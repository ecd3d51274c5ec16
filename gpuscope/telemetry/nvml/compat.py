"""Names that not every supported nvidia-ml-py release has, with the values nvml.h gives them.

gpuscope declares ``nvidia-ml-py>=12.535.77`` (the oldest release tested: ``tests/test_nvml_versions.py``
runs ``gpuscope log``, ``gpuscope doctor`` and the NVML collector tests against it and against the
newest). Releases before 12.570 lack ``NVML_VALUE_TYPE_UNSIGNED_SHORT``, ``nvmlDeviceGetTemperatureV``
and ``nvmlTemperature_v1``; before 12.560 the PCIe byte-counter field ids; before 12.550
``NVMLLibraryMismatchError``; and none of the 12.5xx releases name the ``nvmlNvlinkVersion_t``
enum. Code in gpuscope and in its fake NVML uses the names below instead of ``pynvml.<name>``
for exactly these; everything else it uses exists in 12.535.77.
"""

from __future__ import annotations

from typing import Any

from gpuscope.telemetry.nvml.session import _MISMATCH_ERRORS, pynvml

__all__ = [
    "VALUE_TYPE_UNSIGNED_SHORT",
    "VALUE_TYPE_SIGNED_INT",
    "FI_PCIE_COUNT_TX_BYTES",
    "FI_PCIE_COUNT_RX_BYTES",
    "NVLINK_VERSION_3_0",
    "NVLINK_VERSION_4_0",
    "NVLINK_VERSION_5_0",
    "TEMPERATURE_V1",
    "LIBRARY_MISMATCH_ERRORS",
    "has",
    "function",
]


def _name(name: str, default: int) -> int:
    return int(getattr(pynvml, name, default)) if pynvml is not None else default


#: nvmlValueType_t (nvml.h): 5 signed int, 6 unsigned short.
VALUE_TYPE_SIGNED_INT = _name("NVML_VALUE_TYPE_SIGNED_INT", 5)
VALUE_TYPE_UNSIGNED_SHORT = _name("NVML_VALUE_TYPE_UNSIGNED_SHORT", 6)
#: NVML_FI_DEV_PCIE_COUNT_TX/RX_BYTES (nvml.h, drivers 560 and newer).
FI_PCIE_COUNT_TX_BYTES = _name("NVML_FI_DEV_PCIE_COUNT_TX_BYTES", 197)
FI_PCIE_COUNT_RX_BYTES = _name("NVML_FI_DEV_PCIE_COUNT_RX_BYTES", 198)
#: nvmlNvlinkVersion_t: 4 = NVLink 3.0 (A100), 6 = 4.0 (H100), 7 = 5.0 (B200).
NVLINK_VERSION_3_0 = _name("NVML_NVLINK_VERSION_3_0", 4)
NVLINK_VERSION_4_0 = _name("NVML_NVLINK_VERSION_4_0", 6)
NVLINK_VERSION_5_0 = _name("NVML_NVLINK_VERSION_5_0", 7)
#: nvmlTemperature_v1: sizeof(nvmlTemperature_t) = 12 | 1 << 24.
TEMPERATURE_V1 = _name("nvmlTemperature_v1", 12 | (1 << 24))

#: Exceptions pynvml raises when the driver's library lacks an unversioned function.
LIBRARY_MISMATCH_ERRORS = _MISMATCH_ERRORS


def has(name: str) -> bool:
    """Whether the installed pynvml has ``name`` (a function or constant)."""
    return pynvml is not None and hasattr(pynvml, name)


def function(name: str) -> Any:
    """``pynvml.<name>``, or None when this nvidia-ml-py release lacks it."""
    return getattr(pynvml, name, None) if pynvml is not None else None
