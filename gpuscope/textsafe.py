"""Text that reaches a terminal: names from files shown, never obeyed.

:func:`safe_text` is the one escaping rule for every name gpuscope prints to a terminal (file
names in error lines, device, workload, host and process names in ``roofline``, ``compare``,
``doctor`` and ``log`` output): control characters (C0 including newline, tab and ESC, DEL,
C1) and the bidirectional controls (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) are
shown escaped (``\\x1b``, ``\\n``, ``\\u202e``), so a name can neither split a one-line message,
set the terminal title or colours, nor reorder what is displayed. Lone surrogates
(``\\udc80``: valid in JSON, not printable as UTF-8) are escaped the same way.

:func:`install_ascii_fallback` makes a standard stream that cannot encode a character (an
ASCII terminal, ``LC_ALL=C``) print a close ASCII spelling (``·`` -> ``.``, ``µ`` -> ``u``)
instead of raising ``UnicodeEncodeError``.
"""

from __future__ import annotations

import codecs
import os
import re
import sys
from collections.abc import Mapping
from typing import Any, TextIO

__all__ = ["safe_text", "ASCII_FALLBACK_ERRORS", "install_ascii_fallback", "ascii_fallback", "ascii_locale"]

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
#: Control characters, bidi controls and lone surrogates (which no terminal encoding can print).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f" + _BIDI + "\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(value: Any) -> str:
    """``str(value)`` with control and bidi characters shown as escapes (see the module doc)."""
    text = value if isinstance(value, str) else str(value)
    return _UNSAFE.sub(_escape, text)


#: Close ASCII spellings of the non-ASCII characters gpuscope itself prints.
_ASCII = {
    "·": ".", "µ": "u", "μ": "u", "×": "x", "÷": "/", "–": "-", "—": "-", "−": "-", "‒": "-",
    "‘": "'", "’": "'", "“": '"', "”": '"', "…": "...", "≥": ">=", "≤": "<=", "≈": "~", "±": "+-",
    "°": "deg", "→": "->", "←": "<-", "↑": "^", "↓": "v", "•": "*", "▲": "^", "▼": "v", "█": "#",
    "▏": "|", "│": "|", "─": "-", "┼": "+", "⠀": " ", "\u00a0": " ", "²": "2", "³": "3", "∞": "inf",
}  # fmt: skip
ASCII_FALLBACK_ERRORS = "gpuscope-ascii"


def ascii_fallback(error: UnicodeError) -> tuple[str, int]:
    """Codec error handler: a close ASCII spelling, else ``?``."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start : error.end]
    return "".join(_ASCII.get(char, "?") for char in text), error.end


codecs.register_error(ASCII_FALLBACK_ERRORS, ascii_fallback)


def _needs_fallback(stream: TextIO) -> bool:
    encoding = (getattr(stream, "encoding", None) or "ascii").lower().replace("_", "-")
    try:
        return codecs.lookup(encoding).name not in ("utf-8", "utf-16", "utf-32", "gb18030")
    except LookupError:
        return True


def ascii_locale(environ: Mapping[str, str] | None = None) -> bool:
    """True when the locale is C/POSIX (an ASCII terminal) and Python chose UTF-8 on its own
    (PEP 538 coercion or PEP 540 UTF-8 mode), not because the user asked for it."""
    env = os.environ if environ is None else environ
    if env.get("PYTHONUTF8") == "1" or env.get("PYTHONIOENCODING"):
        return False
    if env.get("LC_ALL"):
        return env["LC_ALL"] in ("C", "POSIX")
    ctype, lang = env.get("LC_CTYPE"), env.get("LANG")
    if ctype and ctype not in ("C", "POSIX", "C.UTF-8", "C.utf8"):
        return False
    if ctype in ("C.UTF-8", "C.utf8") and lang not in ("C", "POSIX"):
        return False  # a C.UTF-8 locale the user chose
    return lang in ("C", "POSIX")  # unset: leave Python's choice (containers often set nothing)


def install_ascii_fallback(*streams: TextIO | None) -> None:
    """Reconfigure each stream (default: stdout and stderr) that cannot encode Unicode, or that
    writes to an ASCII (C/POSIX) locale, to spell what ASCII lacks as ASCII instead of raising
    or printing bytes the terminal cannot show."""
    to_ascii = ascii_locale()
    for stream in streams or (sys.stdout, sys.stderr):
        if stream is None or not hasattr(stream, "reconfigure"):
            continue
        try:
            if to_ascii and getattr(stream, "encoding", "").lower() not in ("ascii", "us-ascii"):
                stream.reconfigure(encoding="ascii", errors=ASCII_FALLBACK_ERRORS)
            elif _needs_fallback(stream):
                stream.reconfigure(errors=ASCII_FALLBACK_ERRORS)
        except (ValueError, OSError, AttributeError, LookupError):
            pass
