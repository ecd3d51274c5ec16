"""One TOML parser for suites, themes and settings: data only, never executed, and every
failure (syntax, nesting too deep) reported as one line with its line number.

Values are read by :func:`parse_toml` (the standard library's parser) only. :func:`update_toml`
writes values into a file's text the user may have edited: tomlkit edits the text in place, so
the keys gpuscope does not know (a newer gpuscope's) and the user's comments and layout stay.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["TomlSyntaxError", "parse_toml", "update_toml"]

_POSITION_RE = re.compile(r"\s*\(at line (\d+), column (\d+)\)")


class TomlSyntaxError(ValueError):
    """``message`` is one line without the position; ``line`` is 1-based or None."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def parse_toml(text: str) -> dict[str, Any]:
    """Parse TOML text. Raises :class:`TomlSyntaxError` for invalid or too deeply nested input."""
    try:
        document: dict[str, Any] = tomllib.loads(text)
        return document
    except tomllib.TOMLDecodeError as exc:
        match = _POSITION_RE.search(str(exc))
        line = int(match.group(1)) if match else None
        raise TomlSyntaxError(_POSITION_RE.sub("", str(exc)), line) from None
    except RecursionError:
        # tomllib recurses per nesting level; a hostile file of nested arrays exhausts the stack.
        raise TomlSyntaxError("nested too deeply", None) from None


def update_toml(text: str, values: Mapping[str, object]) -> str:
    """``text`` with each top-level key of ``values`` set to its value, everything else kept as
    written: other keys and tables, comments, blank lines, the comment after a value that
    changes. Keys whose value is already right, or is None in ``values``, are not touched.

    Raises :class:`TomlSyntaxError` when ``text`` is not valid TOML (checked by
    :func:`parse_toml`, so what is edited is what was read) or cannot be edited in place, and
    ``ValueError`` when a key holds a value of another type (a table where a string goes: a
    newer gpuscope's format, not replaced)."""
    import tomlkit  # only the TUI writes settings: no other command pays for its import
    import tomlkit.exceptions

    current = parse_toml(text)
    for key, value in values.items():
        if value is not None and key in current and not isinstance(current[key], type(value)):
            raise ValueError(f"{key} holds {_kind(current[key])}, not {_kind(value)}; not replaced")
    try:
        document = tomlkit.parse(text)
        for key, value in values.items():
            if value is None or current.get(key) == value:
                continue
            existing = document.get(key)
            if isinstance(existing, list) and isinstance(value, list):
                _edit_array(existing, value)  # the comments on the items that stay, stay
            if document.get(key) != value:
                document[key] = value
        updated = tomlkit.dumps(document)
    except (tomlkit.exceptions.TOMLKitError, RecursionError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TomlSyntaxError(f"cannot be edited in place ({reason})", None) from None
    # What is written must read back as asked, by the one reader (never a file the next run refuses).
    written = parse_toml(updated)
    if any(value is not None and written.get(key) != value for key, value in values.items()):
        raise TomlSyntaxError("cannot be edited in place (the edit did not read back)", None)
    return updated


def _kind(value: object) -> str:
    """``a table``, ``a string``, ... for messages."""
    kinds = {dict: "a table", list: "an array", str: "a string", bool: "a boolean", int: "an integer"}
    return next((name for kind, name in kinds.items() if isinstance(value, kind)), f"a {type(value).__name__}")


def _edit_array(array: list[Any], wanted: list[Any]) -> None:
    """Make tomlkit's ``array`` hold ``wanted`` by removing and appending items, so the items
    that stay keep their comments and layout (the caller replaces it when the order differs)."""
    for index in reversed(range(len(array))):
        if array[index] not in wanted:
            del array[index]
    for item in wanted:
        if item not in array:
            array.append(item)
