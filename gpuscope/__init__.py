"""gpuscope: a terminal hardware monitor and roofline analyzer for GPU and CPU machines.

The public API: :func:`measure` (:func:`gpuscope.measuring.measure.measure`, returns a
:class:`MeasuredWorkload`) and :func:`profile` (:func:`gpuscope.profiling.api.profile`, returns a
:class:`Profiler` or a :class:`ProfileResult`). Importing the package is cheap: they load on first
use (``gpuscope --help`` must not pay for msgspec, telemetry and the probe environment), and torch
only when they run. Type checkers and editors see the real signatures.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from gpuscope.version import __version__

if TYPE_CHECKING:
    from gpuscope.measuring.measure import MeasuredWorkload, measure
    from gpuscope.profiling.api import IncompleteProfileWarning, Profiler, profile
    from gpuscope.profiling.generation import profile_generation
    from gpuscope.profiling.result import ProfileResult

__all__ = [
    "__version__",
    "measure",
    "profile",
    "profile_generation",
    "MeasuredWorkload",
    "Profiler",
    "ProfileResult",
    "IncompleteProfileWarning",
]

#: Public name -> the module that defines it, loaded on first access (PEP 562).
_LAZY = {
    "measure": "gpuscope.measuring.measure",
    "MeasuredWorkload": "gpuscope.measuring.measure",
    "profile": "gpuscope.profiling.api",
    "Profiler": "gpuscope.profiling.api",
    "profile_generation": "gpuscope.profiling.generation",
    "IncompleteProfileWarning": "gpuscope.profiling.api",
    "ProfileResult": "gpuscope.profiling.result",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gpuscope' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
