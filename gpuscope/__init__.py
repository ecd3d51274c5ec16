"""gpuscope: a terminal hardware monitor and roofline analyzer for GPU and CPU machines.

Importing the package is cheap: nothing heavy (torch, Textual, NVML) loads until used.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "measure", "profile"]


def measure(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Time ``fn(*args)`` with the probe timing rules and place it on the roofline.

    See :func:`gpuscope.roofline.measure.measure` for the keyword arguments.
    """
    from gpuscope.roofline.measure import measure as _measure

    return _measure(fn, *args, **kwargs)


def profile(*args: Any, **kwargs: Any) -> Any:
    """Where a step's time goes, op by op, against the roofline: ``with gpuscope.profile() as p``
    per step, or ``gpuscope.profile(fn, *args, steps=N)``.

    See :func:`gpuscope.profiling.api.profile` for the keyword arguments.
    """
    from gpuscope.profiling.api import profile as _profile

    return _profile(*args, **kwargs)
