"""Where the TUI keeps its settings, user themes and screenshots; read and write the settings.

No Textual import here. Paths:

- config dir: ``$GPUSCOPE_CONFIG_DIR`` if set, else ``$XDG_CONFIG_HOME/gpuscope``
  (default ``~/.config/gpuscope``). It holds ``config.toml`` (the remembered theme and
  hidden panels) and ``themes/*.toml`` (user themes).
- screenshots and reports saved from the TUI: ``$GPUSCOPE_SCREENSHOT_DIR`` if set, else
  ``$GPUSCOPE_DATA_DIR/screenshots``, else ``$XDG_DATA_HOME/gpuscope/screenshots`` (default
  ``~/.local/share/gpuscope/screenshots``).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import msgspec

from gpuscope.errors import GpuscopeError
from gpuscope.fileio import read_bytes_bounded, write_text_atomic
from gpuscope.paths import config_dir, data_dir
from gpuscope.schema.core import problem_of
from gpuscope.schema.themes import Name
from gpuscope.textsafe import safe_text
from gpuscope.tomlfile import TomlSyntaxError, parse_toml, update_toml

__all__ = [
    "Settings",
    "config_dir",
    "config_path",
    "user_themes_dir",
    "screenshots_dir",
    "load_settings",
    "save_settings",
]


def config_path() -> Path:
    """The settings file, ``<config dir>/config.toml``."""
    return config_dir() / "config.toml"


def user_themes_dir() -> Path:
    """The folder for user theme files, ``<config dir>/themes``."""
    return config_dir() / "themes"


def screenshots_dir() -> Path:
    """Where the TUI saves SVG screenshots and snapshot reports (created on first save)."""
    override = os.environ.get("GPUSCOPE_SCREENSHOT_DIR")
    if override:
        return Path(override).expanduser()
    return data_dir() / "screenshots"


class Settings(msgspec.Struct, kw_only=True):
    """What the TUI remembers across runs (``config.toml``). Unknown keys are ignored (a newer
    gpuscope's file still loads); a key of the wrong type is reported and its default used."""

    theme: Name | None = None
    """Name of the theme chosen last (``--theme`` or the command palette)."""
    hidden_panels: list[Name] = msgspec.field(default_factory=list)
    """Dashboard panels the user hid (``gpus``, ``cpu``, ``memory``, ``network``)."""


_FILE_TYPES = {
    stat.S_IFDIR: "a directory",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
}


def _not_a_regular_file(path: Path) -> str | None:
    """Why ``path`` cannot be one of gpuscope's own files (settings, themes), which it reads and
    replaces: what it names, after links, is not a regular file (a link to /dev/null, a FIFO
    that would block the read). None for a regular file, a link to one, or no file."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # missing or not reachable: the read or the write says why
    if stat.S_ISREG(mode):
        return None
    what = _FILE_TYPES.get(stat.S_IFMT(mode), "not a regular file")
    via = f"a link to {safe_text(os.path.realpath(path))}, " if os.path.islink(path) else ""
    return f"{safe_text(path)}: {via}{what}, not a regular file"


def _read_text(path: Path, kind: str) -> str:
    """The UTF-8 text of gpuscope's own ``kind`` file (bounded: never /dev/zero into memory).
    Raises ``FileNotFoundError``, or ``ValueError`` with one line naming the file."""
    problem = _not_a_regular_file(path)
    if problem:
        raise ValueError(problem)
    try:
        return read_bytes_bounded(path, kind).decode("utf-8")
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ValueError(f"{safe_text(path)}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{safe_text(path)}: not UTF-8 text (byte {exc.start})") from None


def _toml_problem(path: Path, exc: TomlSyntaxError) -> str:
    return f"{safe_text(path)}{f':{exc.line}' if exc.line else ''}: not valid TOML ({exc.message})"


def read_toml(path: Path, kind: str) -> dict[str, Any]:
    """The parsed TOML of a ``kind`` file (bounded; a regular file or a link to one). Raises
    ``FileNotFoundError``, or ``ValueError`` with one line naming the file (and line)."""
    text = _read_text(path, kind)
    try:
        return parse_toml(text)
    except TomlSyntaxError as exc:
        raise ValueError(_toml_problem(path, exc)) from None


def load_settings(path: Path | None = None) -> tuple[Settings, str | None]:
    """Read the settings file. Returns the settings and a one-line problem (or None).

    A missing file gives defaults silently; an unreadable or invalid one gives defaults and a
    message naming the file and the field, so the UI can show it."""
    path = path or config_path()
    try:
        data = read_toml(path, "settings")
    except FileNotFoundError:
        return Settings(), None
    except ValueError as exc:
        return Settings(), f"{exc}; using defaults"
    problem = None
    for _ in range(len(Settings.__struct_fields__) + 1):  # drop each bad key, keep the others
        try:
            return msgspec.convert(data, Settings, strict=True), problem
        except msgspec.ValidationError as exc:
            match = re.search(r"at `\$\.(\w+)", str(exc))
            problem = f"{path}: {problem_of(exc)}; ignored"
            if match is None or match.group(1) not in data:
                break
            data.pop(match.group(1))
    return Settings(), problem


#: What a settings file gpuscope creates starts with.
_HEADER = "# gpuscope TUI settings (written by gpuscope; safe to edit: your comments and other keys are kept)\n"


def save_settings(settings: Settings, path: Path | None = None) -> None:
    """Write ``settings`` into the settings file, keeping everything else the file holds (keys a
    newer gpuscope wrote, the user's comments and layout: :func:`gpuscope.tomlfile.update_toml`),
    atomically (temporary file + rename; a link is kept and its target replaced). Nothing is
    written when nothing changed, nor into a file that is not valid TOML (it would be lost) or
    not a regular file (a link to /dev/null stays one). Raises :class:`GpuscopeError` with one
    line naming the file."""
    path = path or config_path()
    try:
        text = _read_text(path, "settings")
    except FileNotFoundError:
        text = _HEADER
    except ValueError as exc:
        raise GpuscopeError(str(exc)) from None
    try:
        updated = update_toml(text, {"theme": settings.theme, "hidden_panels": list(settings.hidden_panels)})
    except TomlSyntaxError as exc:
        raise GpuscopeError(f"{_toml_problem(path, exc)}; left as it is") from None
    except ValueError as exc:  # a key of another type (a newer gpuscope's table): kept
        raise GpuscopeError(f"{safe_text(path)}: {exc}") from None
    if updated == text:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, updated)
    except OSError as exc:
        raise GpuscopeError(f"{safe_text(path)}: {exc.strerror or safe_text(exc)}") from None
