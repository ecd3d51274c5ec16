"""numba, the JIT behind gpuscope's compiled CPU kernels (memory streams, FMA peaks).

numba is imported lazily, only here: :func:`load_numba` points numba's on-disk cache at
``<gpuscope cache>/numba`` (see :func:`gpuscope.paths.cache_dir`) before the first import, so
compiled kernels are reused between runs and nothing is written beside the installed source.
A user's own ``NUMBA_CACHE_DIR`` wins. When numba cannot be used the answer is a value,
:class:`~gpuscope.telemetry.values.Unavailable` ("numba is not installed", ...), never a crash;
:func:`require_numba` turns it into :class:`~gpuscope.probing.errors.ProbeSkipped` with the text
"unavailable, because <reason>" for probes that need the kernels.

Kernel modules (``gpuscope.probing.cpu_kernels``) call :func:`require_numba` at their top, so
importing one sets the cache folder first whoever imports it.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

from gpuscope.paths import cache_dir
from gpuscope.probing.errors import ProbeSkipped
from gpuscope.telemetry.values import Reason, Unavailable

__all__ = [
    "NUMBA_MISSING",
    "numba_cache_dir",
    "load_numba",
    "require_numba",
    "unavailable_text",
    "jit_versions",
]

#: the reason given when ``import numba`` fails because it is not there
NUMBA_MISSING = "numba is not installed"


def numba_cache_dir() -> Path:
    """Where numba keeps compiled kernels: ``$NUMBA_CACHE_DIR`` when the user set it, else
    ``<gpuscope cache>/numba``."""
    own = os.environ.get("NUMBA_CACHE_DIR")
    return Path(own) if own else cache_dir() / "numba"


def load_numba() -> ModuleType | Unavailable:
    """The numba module with its cache folder set, or why it cannot be used (not installed,
    broken install, ``NUMBA_DISABLE_JIT`` set: the kernels would run as slow Python)."""
    if os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
        return Unavailable(Reason.NOT_SUPPORTED, "NUMBA_DISABLE_JIT is set")
    os.environ.setdefault("NUMBA_CACHE_DIR", str(numba_cache_dir()))
    try:
        import numba
    except ImportError as exc:
        missing = isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] in ("numba", "llvmlite")
        return Unavailable(Reason.NOT_SUPPORTED, NUMBA_MISSING if missing else f"numba does not import ({exc})")
    except Exception as exc:  # noqa: BLE001  # a broken llvmlite raises OSError, RuntimeError, ...
        return Unavailable(Reason.ERROR, f"numba does not import ({type(exc).__name__}: {exc})")
    # numba reads NUMBA_CACHE_DIR at its first import, which may have happened elsewhere before
    # ours; its decorators read config.CACHE_DIR when they run
    setattr(numba.config, "CACHE_DIR", os.environ["NUMBA_CACHE_DIR"])  # noqa: B010  # not in numba's stubs
    return numba


def unavailable_text(reason: Unavailable) -> str:
    """``unavailable, because <reason>``: the text probes and reports show."""
    return f"unavailable, because {reason.detail or reason.reason.value}"


def require_numba() -> ModuleType:
    """numba (cache folder set), or :class:`ProbeSkipped` saying why it is unavailable."""
    numba = load_numba()
    if isinstance(numba, Unavailable):
        raise ProbeSkipped(unavailable_text(numba))
    return numba


def jit_versions() -> dict[str, str]:
    """numba's and llvmlite's versions, the cache folder and the CPU numba compiles for; one
    entry ``numba`` = the unavailable text when numba cannot be used."""
    numba = load_numba()
    if isinstance(numba, Unavailable):
        return {"numba": unavailable_text(numba)}
    import llvmlite  # type: ignore[import-untyped]

    out = {
        "numba": str(numba.__version__),
        "llvmlite": str(llvmlite.__version__),
        "numba_cache_dir": str(getattr(numba.config, "CACHE_DIR", "")),
    }
    try:
        import llvmlite.binding as llvm  # type: ignore[import-untyped]

        out["jit_target_cpu"] = str(llvm.get_host_cpu_name())
    except Exception:  # noqa: BLE001  # informative only
        pass
    return out
