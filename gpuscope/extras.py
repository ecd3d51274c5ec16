"""What the optional ``probes`` extra adds, and the one word said where it is missing.

``pip install gpuscope`` is the monitoring install (TUI, log, serve, snapshot, doctor, report,
roofline, compare, replay); ``pip install 'gpuscope[probes]'`` adds torch (probes, measure,
profile) and numba (the compiled CPU kernels). The check finds the packages without importing
them, so a command that only asks costs nothing. Imports nothing of gpuscope but errors.
"""

from __future__ import annotations

import importlib.util

from gpuscope.errors import ResourceError

__all__ = [
    "PROBES_INSTALL_COMMAND",
    "MissingExtraError",
    "is_installed",
    "missing_probes_reason",
    "require_probes",
]

#: The command that adds what ``probe``, ``measure`` and ``profile`` need.
PROBES_INSTALL_COMMAND = "pip install 'gpuscope[probes]'"


class MissingExtraError(ResourceError):
    """Something an optional extra provides is not installed (exit 4, nothing written)."""


def is_installed(module: str) -> bool:
    """True when ``module`` can be imported, found without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_probes_reason() -> str | None:
    """None when torch is installed, else one sentence naming it and the command that adds it."""
    if is_installed("torch"):
        return None
    return f"torch is not installed; {PROBES_INSTALL_COMMAND} adds it"


def require_probes(command: str) -> None:
    """Raise :class:`MissingExtraError` naming ``command`` when torch is missing."""
    reason = missing_probes_reason()
    if reason is not None:
        raise MissingExtraError(f"{command} needs torch, which {reason.removeprefix('torch ')}")
