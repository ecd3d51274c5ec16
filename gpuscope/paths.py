"""The folders gpuscope reads and writes on its own (everything else is what the user named).

- config: ``$GPUSCOPE_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/gpuscope`` (default ``~/.config/gpuscope``)
- data: ``$GPUSCOPE_DATA_DIR``, else ``$XDG_DATA_HOME/gpuscope`` (default ``~/.local/share/gpuscope``)
- cache: ``$GPUSCOPE_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpuscope`` (default ``~/.cache/gpuscope``);
  what is there can be deleted at any time (compiled kernels)
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["config_dir", "data_dir", "cache_dir", "check_output_path", "use_private_matplotlib_dir", "child_env"]


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


def cache_dir() -> Path:
    """The gpuscope cache folder (it may not exist yet): things that are rebuilt when deleted."""
    override = os.environ.get("GPUSCOPE_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpuscope"


def check_output_path(output: Path, where: str = "", inputs: Iterable[str | os.PathLike[str] | None] = ()) -> None:
    """Raise a one-line :class:`~gpuscope.errors.UsageError` now, before any work, when
    ``--output`` cannot be written: its folder is missing or read-only, it is a folder, a FIFO,
    a device (or a symlink to one), or the same file as one of ``inputs``. ``-`` (standard
    output) passes. ``where`` is added to the missing-folder message (e.g. "on rank 0's host")."""
    from gpuscope.errors import UsageError
    from gpuscope.fileio import check_output, is_stdout

    if is_stdout(output):
        return
    check_output(output, inputs)
    folder = output.parent if str(output.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"--output {output}: folder {folder} does not exist" + (f" ({where})" if where else ""))
    if not os.access(folder, os.W_OK):
        raise UsageError(f"--output {output}: folder {folder} is not writable")
    if output.is_dir():
        raise UsageError(f"--output {output}: is a directory")


def use_private_matplotlib_dir() -> None:
    """Point matplotlib's config and font cache into gpuscope's data folder, so that drawing a
    report writes nothing under ~/.config or ~/.cache. Call before importing matplotlib; a
    user's own MPLCONFIGDIR wins."""
    os.environ.setdefault("MPLCONFIGDIR", str(data_dir() / "matplotlib"))


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a ``python -m gpuscope...`` child: the folder holding this
    gpuscope package first on ``PYTHONPATH`` (so the child imports the same copy, installed or
    not), then ``extra``."""
    root = str(Path(__file__).resolve().parents[1])
    inherited = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": root + (os.pathsep + inherited if inherited else ""), **extra}
