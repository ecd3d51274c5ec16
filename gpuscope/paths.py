"""The folders gpuscope reads and writes on its own (everything else is what the user named).

- config: ``$GPUSCOPE_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/gpuscope`` (default ``~/.config/gpuscope``)
- data: ``$GPUSCOPE_DATA_DIR``, else ``$XDG_DATA_HOME/gpuscope`` (default ``~/.local/share/gpuscope``)
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["config_dir", "data_dir", "use_private_matplotlib_dir"]


def config_dir() -> Path:
    """The gpuscope config folder (it may not exist yet)."""
    override = os.environ.get("GPUSCOPE_CONFIG_DIR")
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "gpuscope"


def data_dir() -> Path:
    """The gpuscope data folder (it may not exist yet)."""
    override = os.environ.get("GPUSCOPE_DATA_DIR")
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "gpuscope"


def use_private_matplotlib_dir() -> None:
    """Point matplotlib's config and font cache into gpuscope's data folder, so that drawing a
    report writes nothing under ~/.config or ~/.cache. Call before importing matplotlib; a
    user's own MPLCONFIGDIR wins."""
    os.environ.setdefault("MPLCONFIGDIR", str(data_dir() / "matplotlib"))
