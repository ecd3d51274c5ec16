"""One TOML parser for suites, themes and settings: data only, never executed, and every
failure (syntax, nesting too deep) reported as one line with its line number."""

from __future__ import annotations

import re
import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["TomlSyntaxError", "parse_toml"]

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
