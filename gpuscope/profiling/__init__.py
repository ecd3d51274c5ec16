"""Where a model's time goes: every aten op and nn.Module of a step on the roofline, ranked by the
time it loses to its roof, with the step's energy.

:func:`profile` (also ``gpuscope.profile``) is the entry point; nothing here imports torch
until a profile runs.
"""

from __future__ import annotations

from typing import Any

__all__ = ["profile"]


def profile(*args: Any, **kwargs: Any) -> Any:
    """See :func:`gpuscope.profiling.api.profile`."""
    from gpuscope.profiling.api import profile as _profile

    return _profile(*args, **kwargs)
