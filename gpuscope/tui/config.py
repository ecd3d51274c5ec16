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
from pathlib import Path
from typing import Any

import msgspec

from gpuscope.fileio import read_bytes_bounded, write_text_atomic
from gpuscope.paths import config_dir, data_dir
from gpuscope.schema.core import problem_of
from gpuscope.schema.themes import Name
from gpuscope.tomlfile import TomlSyntaxError, parse_toml

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


def read_toml(path: Path, kind: str) -> dict[str, Any]:
    """The parsed TOML of a ``kind`` file (bounded: never /dev/zero into memory). Raises
    ``FileNotFoundError``, or ``ValueError`` with one line naming the file (and line)."""
    try:
        return parse_toml(read_bytes_bounded(path, kind).decode("utf-8"))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except TomlSyntaxError as exc:
        raise ValueError(f"{f'{path}:{exc.line}' if exc.line else path}: not valid TOML ({exc.message})") from None


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


def _toml_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def save_settings(settings: Settings, path: Path | None = None) -> None:
    """Write the settings file atomically (temporary file + rename). Raises OSError."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# gpuscope TUI settings (written by gpuscope; safe to edit)"]
    if settings.theme:
        lines.append(f"theme = {_toml_string(settings.theme)}")
    lines.append("hidden_panels = [" + ", ".join(_toml_string(p) for p in settings.hidden_panels) + "]")
    write_text_atomic(path, "\n".join(lines) + "\n")
