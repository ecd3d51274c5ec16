"""``gpuscope doctor``: what gpuscope can see on this machine, and for what it cannot, why
and how to fix it. Plain aligned text (``OK`` works, ``--`` absent here, ``!!`` fixable) or
``--json``. Exits 0 when nothing needs fixing, whether or not there is a GPU (an absent GPU is
a finding, ``--``), and 1 when any check is a problem (``!!``), so scripts can rely on it.
Imports torch only inside :func:`run` (skip with ``--no-torch``) and never imports Textual.
``GPUSCOPE_FAKE_NVML`` (tests only) makes it read the fake NVML, as ``gpuscope log`` does.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import TextIO

from gpuscope.extras import PROBES_INSTALL_COMMAND, is_installed
from gpuscope.schema.core import Detail, DetailMap, as_detail
from gpuscope.telemetry.cpuinfo import cpu_info
from gpuscope.telemetry.nvml import mapping
from gpuscope.telemetry.nvml.capabilities import Check, probe
from gpuscope.telemetry.nvml.mapping import match_cuda_device
from gpuscope.telemetry.topology_doctor import interconnect_checks
from gpuscope.testing.scenarios import install_from_environment
from gpuscope.textsafe import safe_text

__all__ = ["run", "DOCTOR_SCHEMA_VERSION"]

DOCTOR_SCHEMA_VERSION = 1
#: exit code when at least one check is a problem (README: exit codes)
EXIT_PROBLEMS = 1
_NAME_WIDTH = 16


def _version(distribution: str) -> str | None:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def _torch_checks(skip: bool) -> list[Check]:
    if skip:
        return [Check("torch", "unavailable", "not checked (--no-torch)")]
    try:
        import torch  # noqa: PLC0415 - only here, only when doctor runs
    except ImportError as exc:
        return [
            Check(
                "torch",
                "unavailable",
                f"not installed ({exc}): optional, for probe, measure and profile; monitoring works without it",
                PROBES_INSTALL_COMMAND,
            )
        ]
    except Exception as exc:  # noqa: BLE001 - a broken install is reported, not raised
        return [Check("torch", "problem", f"import failed: {type(exc).__name__}: {exc}", "reinstall torch")]
    checks = [Check("torch", "ok", str(getattr(torch, "__version__", "unknown version")))]
    cuda_version = getattr(getattr(torch, "version", None), "cuda", None)
    if not cuda_version:
        checks.append(
            Check(
                "CUDA",
                "unavailable",
                "torch was built without CUDA (CPU wheel)",
                "install a CUDA build of torch to probe GPUs",
            )
        )
        return checks
    try:
        if torch.cuda.is_available():
            count = torch.cuda.device_count()
            name = torch.cuda.get_device_name(0) if count else "no device"
            checks.append(Check("CUDA", "ok", f"CUDA {cuda_version}, {count} device(s), first: {name}"))
        else:
            checks.append(
                Check(
                    "CUDA",
                    "problem",
                    f"torch built for CUDA {cuda_version} but no usable GPU",
                    "check the NVIDIA driver (it must support this CUDA version)",
                )
            )
    except Exception as exc:  # noqa: BLE001
        checks.append(
            Check("CUDA", "problem", f"{type(exc).__name__}: {exc}", "check the NVIDIA driver and CUDA_VISIBLE_DEVICES")
        )
    return checks


def _cuda_uuids(skip: bool) -> list[str | None]:
    """torch's UUID of each CUDA device (empty without torch, CUDA or with ``--no-torch``)."""
    if skip:
        return []
    try:
        import torch  # noqa: PLC0415

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - reported by the torch checks
        return []

    return [mapping.cuda_device_uuid(index) for index in range(count)]


def cuda_order_check(nvml_gpus: Sequence[object], cuda_uuids: list[str | None]) -> Check | None:
    """Which NVML GPU each CUDA device is (by UUID; nvml.h: the two numberings need not agree),
    or None without CUDA devices. Shown so a person can tell "GPU 2" in the monitor from
    ``cuda:0`` in a probe."""

    if not cuda_uuids:
        return None
    parts: list[str] = []
    differs = unmatched = False
    for cuda_index, uuid in enumerate(cuda_uuids):
        match = match_cuda_device(nvml_gpus, cuda_index, cuda_uuid=uuid)
        if match is None:
            parts.append(f"cuda:{cuda_index} = not in NVML")
            unmatched = True
            continue
        gpu = match.gpu
        name = f"NVML {gpu.index}" if gpu.mig_parent_index is None else f"NVML {gpu.mig_parent_index} MIG {gpu.index}"
        parts.append(f"cuda:{cuda_index} = {name}" + ("" if match.certain else " (assumed: PCI order)"))
        differs = differs or gpu.mig_parent_index is not None or gpu.index != cuda_index
    detail = ", ".join(parts)
    if differs:
        detail += "; the numberings differ: gpuscope matches devices by UUID"
    return Check("CUDA order", "unavailable" if unmatched else "ok", detail)


def _size(num_bytes: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if num_bytes >= scale and num_bytes % scale == 0:
            return f"{num_bytes // scale} {unit}"
    return f"{num_bytes} B"


def _cpu_section() -> tuple[list[Check], DetailMap]:
    try:
        info = cpu_info()
    except Exception as exc:  # noqa: BLE001
        return [Check("CPU", "problem", f"cannot read CPU facts: {exc}")], {}
    cores = f"{info.logical_cores} logical"
    cores += f", {info.physical_cores} physical" if info.physical_cores else ", physical unknown"
    clock = info.max_frequency_mhz or info.base_frequency_mhz
    peak = info.peak_flop_per_s("fp32")
    checks = [
        Check("model", "ok", f"{info.model} ({info.architecture})"),
        Check("cores", "ok", cores + (f", up to {clock:.0f} MHz" if clock else "")),
        Check("SIMD", "ok", f"{info.simd}, {info.fp32_flop_per_cycle_per_core} fp32 FLOP/cycle/core"),
    ]
    if info.caches:
        caches = ", ".join(
            f"L{c.level}{c.kind[0].lower() if c.kind != 'Unified' else ''} {_size(c.size_bytes)} x{c.instances}"
            for c in info.caches
        )
        checks.append(Check("caches", "ok", caches))
    else:
        checks.append(Check("caches", "unavailable", "cache sizes not found in /sys"))
    if peak:
        checks.append(Check("peak (datasheet)", "ok", f"{peak / 1e9:.0f} GFLOP/s fp32"))
    else:
        checks.append(Check("peak (datasheet)", "unavailable", "no CPU clock found"))
    cache_levels: list[Detail] = [
        {"level": c.level, "kind": c.kind, "size_bytes": c.size_bytes, "instances": c.instances} for c in info.caches
    ]
    facts: DetailMap = {
        "model": info.model,
        "vendor": info.vendor,
        "architecture": info.architecture,
        "logical_cores": info.logical_cores,
        "physical_cores": info.physical_cores,
        "max_frequency_mhz": info.max_frequency_mhz,
        "simd": info.simd,
        "fp32_flop_per_cycle_per_core": info.fp32_flop_per_cycle_per_core,
        "caches": as_detail(cache_levels),
        "peak_fp32_flop_per_s": peak,
    }
    return checks, facts


def _package_check(label: str, distribution: str, fix: str, purpose: str, *, optional: bool = False) -> Check:
    """A package's version, or why it matters; a missing optional package is a finding, not a problem."""
    version = _version(distribution) if is_installed(label) else None  # metadata alone is not an importable module
    if version is None:
        return Check(label, "unavailable" if optional else "problem", f"not installed ({purpose})", fix)
    return Check(label, "ok", f"{distribution} {version}")


def _print_checks(checks: list[Check], out: TextIO) -> None:
    for check in checks:
        print(f"  {check.marker}  {check.name:<{_NAME_WIDTH}} {safe_text(check.detail)}", file=out)
        if check.fix:
            print(f"      {'':<{_NAME_WIDTH}} fix: {safe_text(check.fix)}", file=out)


def run(args: argparse.Namespace) -> int:
    """Print the report. 0 when no check is a problem (a missing GPU is a finding, not a
    failure), else :data:`EXIT_PROBLEMS`."""

    install_from_environment()  # test hook: a no-op unless GPUSCOPE_FAKE_NVML is set
    nvml = probe()
    cpu_checks, cpu_facts = _cpu_section()
    torch_checks = _torch_checks(bool(getattr(args, "no_torch", False)))
    order = cuda_order_check(nvml.gpus, _cuda_uuids(bool(getattr(args, "no_torch", False))))
    if order is not None:
        torch_checks.append(order)
    host = [_package_check("psutil", "psutil", "pip install psutil", "no host CPU, memory or network telemetry")]
    tui = [
        _package_check("textual", "textual", "pip install textual", "no dashboard; `gpuscope log` still works"),
        _package_check("plotext", "plotext", "pip install plotext", "no charts in the dashboard"),
    ]
    sections: list[tuple[str, list[Check]]] = [("NVIDIA (NVML)", [nvml.library, *nvml.versions])]
    ordered = sorted(
        nvml.gpus,
        key=lambda g: (
            g.index if g.mig_parent_index is None else g.mig_parent_index,
            g.mig_parent_index is not None,
            g.index,
        ),
    )
    for gpu in ordered:
        if gpu.mig_parent_index is None:
            title = f"GPU {gpu.index}  {gpu.name}  {gpu.architecture}  {gpu.pci_bus_id}"
        else:
            title = f"GPU {gpu.mig_parent_index} MIG {gpu.index}  {gpu.name}"
        if gpu.state != "ok":
            title += f"  [{gpu.state}]"
        sections.append((title, gpu.checks))
    torch_checks.append(
        _package_check(
            "numba",
            "numba",
            PROBES_INSTALL_COMMAND,
            "optional: the CPU memory and FLOP-peak probes' compiled kernels",
            optional=True,
        )
    )
    from gpuscope.telemetry.amdsmi.doctor import amd_sections  # amdsmi only when doctor runs

    sections += amd_sections()
    sections.append(("interconnect", interconnect_checks(getattr(args, "sysfs", "/sys"))))
    sections += [
        ("torch", torch_checks),
        ("CPU", cpu_checks),
        ("host telemetry", host),
        ("dashboard", tui),
    ]

    problems = sum(check.status == "problem" for _title, checks in sections for check in checks)
    code = EXIT_PROBLEMS if problems else 0
    if getattr(args, "json", False):
        report = {
            "schema_version": DOCTOR_SCHEMA_VERSION,
            "problems": problems,
            "nvml": nvml.to_dict(),
            "cpu": cpu_facts,
            "sections": [
                {"title": title, "checks": [check.to_dict() for check in checks]} for title, checks in sections
            ],
        }
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return code

    out = sys.stdout
    print("gpuscope doctor   (OK works, -- not available here, !! can be fixed)", file=out)
    for title, checks in sections:
        print(file=out)
        print(safe_text(title), file=out)
        _print_checks(checks, out)
    print(file=out)
    print(f"{problems} problem(s) found." if problems else "No problems found.", file=out)
    return code
