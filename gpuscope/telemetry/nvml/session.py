"""The NVML session: init and shutdown, system versions, and NVML errors as ``Unavailable``.

Every NVML call in gpuscope goes through :func:`call` (pynvml's public wrappers), which
returns the value or an :class:`Unavailable` naming the reason, except ``GpuIsLost``, which it
raises as :class:`GpuLostError` so the caller can mark the whole GPU lost; :func:`failed` is
the same mapping for an error raised elsewhere (a per-field or per-metric return code).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from gpuscope.telemetry.values import Metric, Reason, Unavailable

try:  # nvidia-ml-py is a dependency, but a broken install must not stop the host side
    import pynvml
except ImportError:  # pragma: no cover - exercised only without nvidia-ml-py
    pynvml = None  # type: ignore[assignment]

__all__ = [
    "pynvml",
    "GpuLostError",
    "PROFILING_FIX",
    "PROFILING_CAUSE",
    "PROFILING_REMEDY",
    "DRIVER_TOO_OLD_FIX",
    "MISMATCH_FIX",
    "unavailable_from_error",
    "call",
    "c_function",
    "failed",
    "init",
    "shutdown",
    "system_versions",
    "format_cuda_version",
]

T = TypeVar("T")

#: Why profiling counters (GPM) answer NoPermission, and what to do about it.
PROFILING_CAUSE = "profiling counters are admin-only (RmProfilingAdminOnly=1)"
PROFILING_REMEDY = "run as root, or load the nvidia module with NVreg_RestrictProfilingToAdminUsers=0"
PROFILING_FIX = f"{PROFILING_CAUSE}: {PROFILING_REMEDY}"
DRIVER_TOO_OLD_FIX = "update the NVIDIA driver"
MISMATCH_FIX = "reboot, or reload the nvidia kernel module"


#: pynvml's "the library lacks this unversioned function" (nvidia-ml-py 12.550 and newer only).
_MISMATCH_ERRORS: tuple[type[BaseException], ...] = tuple(
    cls for cls in (getattr(pynvml, "NVMLLibraryMismatchError", None),) if isinstance(cls, type)
)


class GpuLostError(Exception):
    """NVML answered GpuIsLost: the GPU fell off the bus or stopped answering."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what}: GPU is lost")
        self.what = what


def _code(exc: BaseException) -> int | None:
    if pynvml is not None and isinstance(exc, pynvml.NVMLError):
        return int(getattr(exc, "value", -1))
    return None


def unavailable_from_error(exc: BaseException, what: str = "", *, profiling: bool = False) -> Unavailable:
    """The reason an NVML call failed, as an :class:`Unavailable` with a one-line detail.

    ``what`` names the call or metric; ``profiling`` adds the RmProfilingAdminOnly fix to a
    NoPermission (GPM and other profiling counters).
    """
    prefix = f"{what}: " if what else ""
    if _MISMATCH_ERRORS and isinstance(exc, _MISMATCH_ERRORS):
        return Unavailable(Reason.DRIVER_TOO_OLD, f"{prefix}the NVML library lacks this function; {DRIVER_TOO_OLD_FIX}")
    code = _code(exc)
    if code is None:
        return Unavailable(Reason.ERROR, f"{prefix}{type(exc).__name__}: {exc}")
    if code == pynvml.NVML_ERROR_NOT_SUPPORTED:
        return Unavailable(Reason.NOT_SUPPORTED, f"{prefix}not supported by this GPU or driver")
    if code == pynvml.NVML_ERROR_NO_PERMISSION:
        return Unavailable(Reason.NO_PERMISSION, prefix + (PROFILING_FIX if profiling else "insufficient permissions"))
    if code == pynvml.NVML_ERROR_GPU_IS_LOST:
        return Unavailable(Reason.GPU_LOST, f"{prefix}the GPU fell off the bus or stopped answering")
    if code == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND:
        return Unavailable(
            Reason.DRIVER_TOO_OLD, f"{prefix}the driver's NVML lacks this function; {DRIVER_TOO_OLD_FIX}"
        )
    if code == pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return Unavailable(
            Reason.DRIVER_MISMATCH, f"{prefix}the NVML library and the loaded kernel module differ; {MISMATCH_FIX}"
        )
    if code == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
        return Unavailable(Reason.NO_DRIVER, f"{prefix}libnvidia-ml.so.1 not found: no NVIDIA driver on this host")
    if code == pynvml.NVML_ERROR_DRIVER_NOT_LOADED:
        return Unavailable(Reason.NO_DRIVER, f"{prefix}the NVIDIA kernel driver is not loaded")
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - str() of an NVMLError may call into the library
        message = f"NVML error {code}"
    return Unavailable(Reason.ERROR, f"{prefix}{message}")


_NO_DEFAULT: Any = object()


def call(
    what: str, fn: Callable[..., T], *args: Any, profiling: bool = False, not_found: Metric[T] = _NO_DEFAULT
) -> Metric[T]:
    """``fn(*args)``, or an :class:`Unavailable` when it fails (``not_found`` instead, when
    given and NVML answers NotFound). Raises only :class:`GpuLostError` (on GpuIsLost)."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - one failing metric never spoils the rest
        return failed(what, exc, profiling=profiling, not_found=not_found)


# pynvml private name relied on (nvidia-ml-py has no public way to get a C function):
# ``_nvmlGetFunctionPointer(name)``, the lookup its own wrappers use. Only the process lists
# need it (see :mod:`.processes`: the wrappers of some releases pass the wrong struct).
def c_function(symbol: str) -> Callable[..., int]:
    """The C function ``symbol`` of libnvidia-ml, as pynvml's wrappers look it up (it returns
    an NVML return code). Raises pynvml.NVMLError (FunctionNotFound, Uninitialized)."""
    return pynvml._nvmlGetFunctionPointer(symbol)  # type: ignore[no-any-return]


def failed(what: str, exc: BaseException, *, profiling: bool = False, not_found: Metric[T] = _NO_DEFAULT) -> Metric[T]:
    """What :func:`call` returns when ``fn`` raised ``exc`` (for callers that inline the call on
    their hot path). Raises :class:`GpuLostError` on GpuIsLost."""
    code = _code(exc)
    if code is not None and code == pynvml.NVML_ERROR_GPU_IS_LOST:
        raise GpuLostError(what) from None
    if code is not None and code == pynvml.NVML_ERROR_NOT_FOUND and not_found is not _NO_DEFAULT:
        return not_found
    return unavailable_from_error(exc, what, profiling=profiling)


def init() -> Unavailable | None:
    """Load libnvidia-ml and initialise NVML. None on success, else why not."""
    if pynvml is None:
        return Unavailable(Reason.NO_DRIVER, "nvidia-ml-py (module pynvml) is not installed")
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001
        return unavailable_from_error(exc, "nvmlInit")
    return None


def shutdown() -> None:
    """Shut NVML down; errors are ignored."""
    if pynvml is None:
        return
    try:
        pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001
        pass


def format_cuda_version(version: int) -> str:
    """12040 -> "12.4" (NVML's CUDA driver version encoding)."""
    return f"{version // 1000}.{(version % 1000) // 10}"


def _cuda_driver_version() -> Metric[str]:
    value = call("nvmlSystemGetCudaDriverVersion_v2", pynvml.nvmlSystemGetCudaDriverVersion_v2)
    if isinstance(value, Unavailable) and value.reason is Reason.DRIVER_TOO_OLD:
        value = call("nvmlSystemGetCudaDriverVersion", pynvml.nvmlSystemGetCudaDriverVersion)
    return value if isinstance(value, Unavailable) else format_cuda_version(int(value))


def system_versions() -> tuple[Metric[str], Metric[str], Metric[str]]:
    """(driver version, NVML version, CUDA driver version) after a successful :func:`init`."""
    try:
        driver = call("nvmlSystemGetDriverVersion", pynvml.nvmlSystemGetDriverVersion)
        nvml = call("nvmlSystemGetNVMLVersion", pynvml.nvmlSystemGetNVMLVersion)
        cuda = _cuda_driver_version()
    except GpuLostError as exc:  # not a per-GPU call; report it as an error
        lost = Unavailable(Reason.ERROR, str(exc))
        return lost, lost, lost
    return driver, nvml, cuda
