"""The device a probe runs on, its memory budget, and the software versions that shape a number.

torch is imported only inside functions, when a probe actually runs.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import re
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuscope.errors import ResourceError, UsageError
from gpuscope.probing.errors import ProbeSkipped
from gpuscope.roofline.datasheet import CpuDatasheet, cpu_datasheet
from gpuscope.schema.core import DetailMap
from gpuscope.schema.results import CacheLevel, Device, System
from gpuscope.telemetry.cpuinfo import CpuInfo, cpu_info
from gpuscope.telemetry.nvml import mapping, session
from gpuscope.telemetry.values import Reason, Unavailable
from gpuscope.version import __version__

if TYPE_CHECKING:  # the types only: torch loads when a probe runs
    import torch

    from gpuscope.probing.clock import ClockEstimate

__all__ = [
    "DeviceSpec",
    "parse_device",
    "resolve_device",
    "MemoryBudget",
    "oom_guard",
    "is_out_of_memory",
    "first_line",
    "versions",
    "system_info",
    "device_info",
    "measured_clock",
    "cpu_datasheet_of",
    "gpu_uuid",
    "tensor_device",
    "torch_device",
    "torch_device_name",
]

_DEVICE_RE = re.compile(r"^(cpu|cuda)(?::(\d+))?$")


@dataclass(frozen=True)
class DeviceSpec:
    """``name`` is what results carry: ``cpu`` or ``cuda:N``."""

    name: str
    type: str  # "cpu" or "gpu"
    index: int | None = None

    @property
    def is_gpu(self) -> bool:
        return self.type == "gpu"

    @property
    def torch_device(self) -> str:
        return self.name


def parse_device(text: str) -> DeviceSpec:
    """``cpu``, ``cuda`` (= ``cuda:0``) or ``cuda:N``; raises :class:`UsageError` otherwise."""
    match = _DEVICE_RE.match(text.strip().lower())
    if not match:
        raise UsageError(f"--device {text!r}: expected cpu, cuda or cuda:N")
    if match.group(1) == "cpu":
        if match.group(2) is not None:
            raise UsageError(f"--device {text!r}: the CPU has no index; use cpu")
        return DeviceSpec("cpu", "cpu", None)
    index = int(match.group(2) or 0)
    return DeviceSpec(f"cuda:{index}", "gpu", index)


def resolve_device(text: str) -> DeviceSpec:
    """Parse ``text`` and check the device exists. Raises :class:`ResourceError` (one line)
    when CUDA is asked for and torch cannot see that GPU, or torch is missing."""
    spec = parse_device(text)
    if not spec.is_gpu:
        return spec
    try:
        import torch
    except ImportError:
        raise ResourceError(f"--device {text}: torch is not installed, so gpuscope cannot run GPU probes") from None
    if not torch.cuda.is_available():
        built = torch.version.cuda
        why = f"torch {torch.__version__} was built without CUDA" if not built else "no NVIDIA GPU or driver is visible"
        raise ResourceError(f"--device {text}: CUDA is not available ({why}); use --device cpu")
    count = torch.cuda.device_count()
    if spec.index is not None and spec.index >= count:
        raise ResourceError(f"--device {text}: only {count} CUDA device(s) visible (cuda:0..cuda:{count - 1})")
    return spec


def tensor_device(values: object) -> torch.device | None:
    """The ``torch.device`` of the first tensor in ``values`` (any nesting), else None."""
    import torch
    from torch.utils._pytree import tree_leaves

    return next((leaf.device for leaf in tree_leaves(values) if isinstance(leaf, torch.Tensor)), None)


def torch_device(device: str | torch.device | None, values: object = ()) -> torch.device:
    """``device`` (``"cuda:1"``, a ``torch.device``; None: the device of the first tensor in
    ``values``, else the CPU) as a ``torch.device``, CUDA with an index. Raises
    :class:`UsageError` / :class:`ResourceError` (one line) for a device that cannot be used."""
    import torch

    if device is None:
        resolved = tensor_device(values) or torch.device("cpu")
    else:
        try:
            resolved = torch.device(device)
        except (RuntimeError, TypeError) as exc:
            raise UsageError(f"device {device!r} is not a torch device ({exc})") from None
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ResourceError(f"device {device or resolved} requested but CUDA is not available to torch")
        index = resolved.index if resolved.index is not None else torch.cuda.current_device()
        if index >= torch.cuda.device_count():
            raise ResourceError(f"device cuda:{index} does not exist ({torch.cuda.device_count()} CUDA devices)")
        resolved = torch.device("cuda", index)
    elif resolved.type != "cpu":
        raise UsageError(f"device {resolved} is not supported (cpu or cuda[:N])")
    return resolved


def torch_device_name(device: torch.device) -> str | None:
    """The GPU's name or the CPU model of a ``torch.device``; None when it cannot be read."""
    try:
        if device.type == "cuda":
            import torch

            return str(torch.cuda.get_device_name(device))
        return cpu_info().model
    except Exception:  # noqa: BLE001 - a name is a label, never a failure
        return None


def _cpu_available_bytes() -> int:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # noqa: BLE001 - psutil missing or /proc unreadable
        pages = os.sysconf("SC_AVPHYS_PAGES") if hasattr(os, "sysconf") else 0
        return int(pages * os.sysconf("SC_PAGE_SIZE")) if pages else 0


def _gpu_free_bytes(index: int) -> int:
    import torch

    free, _total = torch.cuda.mem_get_info(index)
    return int(free)


class MemoryBudget:
    """Never allocate more than ``fraction`` of the memory free on the device (CPU: of the
    available RAM) at the moment of asking. ``free_bytes`` is injectable for tests."""

    def __init__(self, device: DeviceSpec, fraction: float = 0.5, free_bytes: Callable[[], int] | None = None) -> None:
        if not 0.0 < fraction <= 1.0:
            raise UsageError(f"--memory-fraction {fraction}: expected a number in (0, 1]")
        self.device = device
        self.fraction = fraction
        if free_bytes is None:
            if device.is_gpu:
                index = device.index or 0
                free_bytes = functools.partial(_gpu_free_bytes, index)
            else:
                free_bytes = _cpu_available_bytes
        self._free_bytes = free_bytes

    def allowance_bytes(self) -> int:
        """How many more bytes a probe may allocate now."""
        return int(self._free_bytes() * self.fraction)

    def check(self, nbytes: int, what: str) -> None:
        """Raise :class:`ProbeSkipped` when ``nbytes`` is over the allowance."""
        allowance = self.allowance_bytes()
        if nbytes > allowance:
            raise ProbeSkipped(
                f"{what} needs {nbytes / 1e9:.3g} GB, over the budget of {allowance / 1e9:.3g} GB "
                f"({self.fraction:g} of free {self.device.name} memory; see --memory-fraction)"
            )


#: Messages of allocation failures that arrive as RuntimeError (torch CPU and CUDA, cuBLAS).
_OOM_MARKERS = (
    "out of memory",
    "can't allocate memory",  # torch DefaultCPUAllocator
    "cannot allocate memory",  # ENOMEM
    "cublas_status_alloc_failed",
    "cudaerrormemoryallocation",
)


def is_out_of_memory(exc: BaseException) -> bool:
    """True for host ``MemoryError`` and torch's CUDA/CPU out-of-memory errors."""
    if isinstance(exc, MemoryError):
        return True
    if type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and any(marker in text for marker in _OOM_MARKERS)


@contextlib.contextmanager
def oom_guard(what: str, device: DeviceSpec | None = None) -> Iterator[None]:
    """Turn an out-of-memory error inside the block into :class:`ProbeSkipped` (and release
    torch's cached GPU memory), so one size that does not fit is reported, not fatal."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - filtered just below
        if not is_out_of_memory(exc):
            raise
        if device is not None and device.is_gpu:
            with contextlib.suppress(Exception):
                import torch

                torch.cuda.empty_cache()
        raise ProbeSkipped(f"out of memory at {what}: {first_line(exc)}") from None


def first_line(exc: BaseException, limit: int = 200) -> str:
    """The first line of an exception's message (its type name when the message is empty)."""
    lines = str(exc).strip().splitlines()
    return lines[0][:limit] if lines else type(exc).__name__


@functools.lru_cache(maxsize=1)
def _torch_blas() -> DetailMap:
    import torch

    config = torch.__config__.show()
    out: DetailMap = {}
    mkl = re.search(r"Math Kernel Library Version ([\w.\-]+)", config)
    if mkl:
        out["torch_cpu_blas"] = f"MKL {mkl.group(1)}"
    elif "OpenBLAS" in config or "BLAS_INFO=open" in config:
        out["torch_cpu_blas"] = "OpenBLAS"
    else:
        blas = re.search(r"BLAS_INFO=(\w+)", config)
        out["torch_cpu_blas"] = blas.group(1) if blas else None
    dnn = re.search(r"MKL-DNN v([\w.]+)", config)
    out["onednn"] = dnn.group(1) if dnn else None
    return out


@functools.lru_cache(maxsize=1)
def numpy_blas() -> str | None:
    """numpy's BLAS library and version, e.g. ``scipy-openblas 0.3.31``, or None."""
    try:
        import numpy

        config = numpy.show_config(mode="dicts")
        blas = config.get("Build Dependencies", {}).get("blas", {})
        name = blas.get("name")
        return f"{name} {blas.get('version', '')}".strip() if name else None
    except Exception:  # noqa: BLE001 - older numpy without mode="dicts"
        return None


def versions(device: DeviceSpec | None = None, driver: str | None = None) -> DetailMap:
    """Versions of everything that shapes a number: python, numpy (and its BLAS), torch (its
    CPU BLAS, oneDNN, CUDA, cuDNN), and the NVIDIA driver when known."""
    out: DetailMap = {"python": platform.python_version(), "gpuscope": __version__}
    try:
        import numpy

        out["numpy"] = numpy.__version__
        out["numpy_blas"] = numpy_blas()
    except ImportError:
        out["numpy"] = None
    try:
        import torch

        out["torch"] = str(torch.__version__)  # a TorchVersion, a str subclass msgspec does not take
        out.update(_torch_blas())
        out["cuda"] = torch.version.cuda
        out["torch_num_threads"] = torch.get_num_threads()
        if device is not None and device.is_gpu:
            out["cudnn"] = torch.backends.cudnn.version()
            out["gpu_blas"] = f"cuBLAS (CUDA {torch.version.cuda})"
    except ImportError:
        out["torch"] = None
    out["driver"] = driver
    return out


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def system_info(device: DeviceSpec, driver: str | None = None) -> System:
    """The ``system`` object of a results file."""
    info = cpu_info()
    v = versions(device, driver)
    return System(
        hostname=socket.gethostname(),
        cpu_model=info.model,
        logical_cores=info.logical_cores,
        physical_cores=info.physical_cores,
        simd=info.simd,
        os=platform.platform(),
        python=_text(v.get("python")),
        torch=_text(v.get("torch")),
        cuda=_text(v.get("cuda")),
        driver=driver,
        blas=_text(v.get("torch_cpu_blas")),
        numpy_blas=_text(v.get("numpy_blas")),
        argv=sys.argv[1:],
    )


@functools.lru_cache(maxsize=1)
def measured_clock() -> ClockEstimate | Unavailable:
    """This machine's core clock from a dependent-add chain (:func:`gpuscope.probing.clock.measure_clock`;
    about half a second, once per process), or why it cannot be measured (numba unavailable)."""
    from gpuscope.probing.clock import measure_clock

    try:
        return measure_clock()
    except Exception as exc:  # noqa: BLE001 - a datasheet clock is optional
        return Unavailable(Reason.ERROR, f"clock chain failed: {type(exc).__name__}: {exc}")


def cpu_datasheet_of(info: CpuInfo, measure_clock: bool = False) -> CpuDatasheet:
    """The CPU datasheet roofs (:func:`gpuscope.roofline.datasheet.cpu_datasheet`); with
    ``measure_clock`` and no cpufreq maximum, the clock is measured (:func:`measured_clock`)."""
    measured = None
    if measure_clock and not info.max_frequency_source.startswith("cpufreq"):
        estimate = measured_clock()
        measured = None if isinstance(estimate, Unavailable) else estimate.mhz
    return cpu_datasheet(info, measured)


def device_info(
    device: DeviceSpec,
    *,
    gpus: Sequence[object] | None = None,
    cuda_uuid: str | None = None,
    measure_clock: bool = False,
) -> Device:
    """The ``devices`` entry for ``device``: name, memory, cores or SMs, caches; a GPU's ``uuid``
    by :func:`gpu_uuid` (``gpus`` and ``cuda_uuid`` are passed on; None: NVML's and torch's).
    A CPU's datasheet peaks (fp64, fp32, bf16 where the ISA has it) with their clock and its source;
    ``measure_clock``: measure the clock when cpufreq does not expose the maximum (``probe``)."""
    host = socket.gethostname()
    if not device.is_gpu:
        info = cpu_info()
        sheet = cpu_datasheet_of(info, measure_clock)
        peaks = sheet.peaks_flop_per_s
        return Device(
            device=device.name,
            type=device.type,
            host=host,
            rank=0,
            name=info.model,
            logical_cores=info.logical_cores,
            physical_cores=info.physical_cores,
            simd=info.simd,
            caches=[
                CacheLevel(level=c.level, kind=c.kind, size_bytes=c.size_bytes, instances=c.instances)
                for c in info.caches
            ],
            last_level_cache_bytes=info.last_level_cache_bytes,
            memory_total_bytes=_cpu_total_bytes(),
            datasheet_peak_fp32_flop_per_s=peaks.get("fp32"),
            datasheet_peak_fp64_flop_per_s=peaks.get("fp64"),
            datasheet_peak_bf16_flop_per_s=peaks.get("bf16"),
            datasheet_clock_mhz=sheet.clock_mhz,
            datasheet_clock_source=sheet.clock_source,
            datasheet_rule=sheet.rule,
        )
    import torch

    props = torch.cuda.get_device_properties(device.index or 0)
    return Device(
        device=device.name,
        type=device.type,
        host=host,
        rank=0,
        name=props.name,
        memory_total_bytes=int(props.total_memory),
        multiprocessors=int(props.multi_processor_count),
        compute_capability=f"{props.major}.{props.minor}",
        l2_cache_bytes=int(getattr(props, "L2_cache_size", 0)) or None,
        uuid=gpu_uuid(device.index or 0, gpus=gpus, cuda_uuid=cuda_uuid),
    )


def gpu_uuid(cuda_index: int, *, gpus: Sequence[object] | None = None, cuda_uuid: str | None = None) -> str | None:
    """The UUID of CUDA device ``cuda_index`` as NVML spells it (``GPU-...``, ``MIG-...``), found by
    the one NVML <-> CUDA mapping (:func:`gpuscope.telemetry.nvml.mapping.match_cuda_device`)
    with torch's UUID of the device (``cuda_uuid``; None: ask torch). ``gpus``: NVML devices (GPU
    samples or ``NvmlIdentity``; None: list them now). torch's bare UUID when NVML does not list the
    device; None when neither knows it (a PCI-order guess never names a GPU across files)."""
    uuid = cuda_uuid if cuda_uuid is not None else mapping.cuda_device_uuid(cuda_index)
    listed = list(gpus) if gpus is not None else _nvml_devices()
    match = mapping.match_cuda_device(listed, cuda_index, cuda_uuid=uuid)
    if match is not None and match.certain and getattr(match.gpu, "uuid", None):
        return str(match.gpu.uuid)
    return mapping.normalize_uuid(uuid) or None


def _nvml_devices() -> Sequence[object]:
    """Every NVML device as ``NvmlIdentity`` (none when NVML is missing or fails)."""
    if session.init() is not None:
        return []
    try:
        found = mapping.nvml_identities()
    except Exception:  # noqa: BLE001 - a device entry never fails for want of a UUID
        found = []
    finally:
        session.shutdown()
    return [] if isinstance(found, Unavailable) else found


def _cpu_total_bytes() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:  # noqa: BLE001
        return None
