"""``gpuscope doctor``'s AMD rows: the amdsmi package and library, the amdgpu driver, the ROCm
version, device permissions, and one section per AMD GPU with what it gives and what it cannot."""

from __future__ import annotations

import glob
import os
from pathlib import Path

from gpuscope.telemetry.amdsmi.collector import AMD_INSTALL_HINT, AmdSmiCollector
from gpuscope.telemetry.nvml.capabilities import Check
from gpuscope.telemetry.values import Reason, Unavailable

__all__ = ["amd_sections", "rocm_version"]

_GROUPS_FIX = "add the user to the render and video groups (sudo usermod -aG render,video $USER), then log in again"


def rocm_version(rocm_path: str | None = None) -> str | None:
    """ROCm's version from ``$ROCM_PATH/.info/version`` (default /opt/rocm), or None."""
    root = Path(rocm_path or os.environ.get("ROCM_PATH") or "/opt/rocm")
    try:
        return (root / ".info" / "version").read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def _permission_checks() -> list[Check]:
    """/dev/kfd and the render nodes: present (an amdgpu driver), and usable by this user."""
    nodes = ["/dev/kfd", *sorted(glob.glob("/dev/dri/renderD*"))]
    present = [node for node in nodes if os.path.exists(node)]
    if "/dev/kfd" not in present:
        return [Check("devices", "unavailable", "no /dev/kfd: the amdgpu driver with compute (KFD) is not loaded")]
    denied = [node for node in present if not os.access(node, os.R_OK | os.W_OK)]
    if denied:
        return [Check("devices", "problem", f"no read/write access to {', '.join(denied[:3])}", _GROUPS_FIX)]
    return [Check("devices", "ok", f"/dev/kfd and {len(present) - 1} render node(s) usable")]


def amd_sections() -> list[tuple[str, list[Check]]]:
    """The "AMD (AMD SMI)" section, then one section per AMD GPU. A machine without AMD GPUs gets
    one section of findings (not problems), as a machine without NVIDIA GPUs does."""
    collector = AmdSmiCollector(processes=False)
    why = collector.open()
    rocm = rocm_version()
    checks = [Check("ROCm", "ok" if rocm else "unavailable", rocm or "no ROCm install found (/opt/rocm/.info/version)")]
    if why is not None:
        fix = AMD_INSTALL_HINT if why.reason in (Reason.NO_DRIVER, Reason.DRIVER_TOO_OLD) else ""
        if why.reason is Reason.NO_PERMISSION:
            fix = _GROUPS_FIX
        status = "problem" if why.reason in (Reason.NO_PERMISSION, Reason.DRIVER_TOO_OLD) else "unavailable"
        checks.insert(0, Check("library", status, str(why.detail or why.reason.value), fix))
        if why.reason is not Reason.NO_DRIVER or os.path.exists("/dev/kfd"):
            checks += _permission_checks()
        return [("AMD (AMD SMI)", checks)]
    try:
        side = collector.sample()
    finally:
        collector.close()
    checks.insert(0, Check("library", "ok", f"libamd_smi {side.library_version}"))
    driver = side.driver_version
    checks.insert(1, Check("amdgpu driver", "ok" if isinstance(driver, str) else "unavailable", str(driver)))
    checks += _permission_checks()
    sections: list[tuple[str, list[Check]]] = [("AMD (AMD SMI)", checks)]
    for gpu in side.gpus:
        title = f"GPU {gpu.index}  {gpu.name}  {gpu.architecture}  {gpu.pci_bus_id}" + (
            "" if gpu.state == "ok" else f"  [{gpu.state}]"
        )
        rows: list[Check] = []
        for label, field, unit in (("GFX activity", "utilization_percent", "%"), ("power", "power_w", " W"),
                                   ("energy", "energy_j", " J"), ("hotspot", "temperature_hotspot_c", " °C"),
                                   ("edge sensor", "temperature_gpu_c", " °C"),
                                   ("PCIe rx+tx", "pcie_bytes_per_s", " GB/s"),
                                   ("XGMI links", "xgmi_active_links", "")):  # fmt: skip
            value = getattr(gpu, field)
            if isinstance(value, int | float):
                shown = value / 1e9 if unit == " GB/s" else value
                rows.append(Check(label, "ok", f"{shown:.4g}{unit}"))
            else:
                reason = value if isinstance(value, Unavailable) else Unavailable(Reason.ERROR, "not a number")
                rows.append(Check(label, "unavailable", reason.detail or reason.reason.value))
        sections.append((title, rows))
    return sections
