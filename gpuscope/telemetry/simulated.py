"""Whether this process's GPUs are simulated: the fakes' environment doors, named once.

``GPUSCOPE_FAKE_NVML`` and ``GPUSCOPE_FAKE_AMDSMI`` put scripted GPUs behind the real bindings
(``gpuscope.testing``); every output that shows GPU values says so with :func:`simulation_note`.
"""

from __future__ import annotations

import os

__all__ = ["FAKE_VARIABLES", "simulation_note"]

FAKE_VARIABLES = ("GPUSCOPE_FAKE_NVML", "GPUSCOPE_FAKE_AMDSMI")


def simulation_note() -> str | None:
    """``"GPUSCOPE_FAKE_NVML=gpus=2xh200"`` (both variables joined by ``; `` when both are set), or None."""
    parts = [f"{name}={os.environ[name]}" for name in FAKE_VARIABLES if os.environ.get(name)]
    return "; ".join(parts) or None
