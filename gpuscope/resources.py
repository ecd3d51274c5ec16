"""Where the shipped probe suites and themes are, installed or run from a checkout."""

from __future__ import annotations

from pathlib import Path

__all__ = ["shipped_dir", "suites_dir", "themes_dir"]

_PACKAGE_DIR = Path(__file__).resolve().parent


def shipped_dir(name: str) -> Path:
    """The folder ``name`` (``probes`` or ``themes``): inside the wheel under ``gpuscope/_shipped``,
    or at the top of the source checkout for an editable install."""
    installed = _PACKAGE_DIR / "_shipped" / name
    if installed.is_dir():
        return installed
    return _PACKAGE_DIR.parent / name


def suites_dir() -> Path:
    return shipped_dir("probes")


def themes_dir() -> Path:
    return shipped_dir("themes")
