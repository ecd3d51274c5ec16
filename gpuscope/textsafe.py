"""Text that reaches a terminal: names from files shown, never obeyed.

:func:`safe_text` is the one escaping rule for every name gpuscope shows, in a terminal, a
JSON file, an HTML or a Markdown page alike (file names in error and success lines, device,
workload, host and process names): control characters (C0 including newline, tab and ESC) are
shown as ``\\x1b`` (``\\n``, ``\\t``); DEL, C1, the bidirectional controls (U+061C, U+200E,
U+200F, U+202A-U+202E, U+2066-U+2069), the line and paragraph separators and lone surrogates as
``\\u202e`` (so JSON text stays JSON with the same meaning); a byte of a file name that is not
UTF-8 (``os.fsdecode`` keeps it as U+DC80-U+DCFF) as that byte, ``\\xff``. So a name can neither
split a one-line message, set the terminal title or colours, reorder what is displayed, nor fail
to encode.

:func:`install_ascii_fallback` makes a standard stream that cannot encode a character (an
ASCII terminal, ``LC_ALL=C``) print a close ASCII spelling (``·`` -> ``.``, ``µ`` -> ``u``)
instead of raising ``UnicodeEncodeError``.

:func:`terminal_streams` applies the same rule to everything a command writes to standard
output and standard error (a stream that escapes as it writes), so a new message cannot forget
it; the painters of coloured charts and progress bars write their own SGR and erase-line
sequences through :func:`write_styled`, which keeps those and escapes the rest.
"""

from __future__ import annotations

import codecs
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TextIO

__all__ = [
    "safe_text",
    "has_unsafe",
    "write_styled",
    "terminal_streams",
    "TerminalStream",
    "ASCII_FALLBACK_ERRORS",
    "install_ascii_fallback",
    "ascii_fallback",
    "ascii_locale",
]

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
#: Control characters (C0, DEL, C1), bidi controls, the Unicode line and paragraph separators
#: and lone surrogates (which no terminal encoding can print).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f" + _BIDI + "\u2028\u2029\ud800-\udfff]")
#: What :func:`write_styled` keeps: SGR (colours), erase-line, carriage return and newline.
_STYLED = re.compile(r"\x1b\[[0-9;]*[mK]|[\r\n]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code < 0x20:
        return f"\\x{code:02x}"
    if 0xDC80 <= code <= 0xDCFF:  # a byte of a name that is not UTF-8 (os.fsdecode's surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    # \\u for the rest, so that text that is JSON stays JSON that means the same
    return f"\\u{code:04x}"


def safe_text(value: Any) -> str:
    """``value`` as text that is safe to show anywhere (a terminal, a JSON file, a page): control
    characters as ``\\x1b`` (``\\n``, ``\\r``, ``\\t``), DEL, C1, bidi controls and line
    separators as ``\\u202e``, each byte of a name that is not UTF-8 as ``\\xff``. Bytes and paths
    (``os.PathLike``) are decoded as the file system does (undecodable bytes kept as such)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", "surrogateescape")
    text = value if isinstance(value, str) else str(value)
    return _UNSAFE.sub(_escape, text)


def has_unsafe(text: str) -> bool:
    """True when :func:`safe_text` would change ``text`` (a quick test for hot paths)."""
    return _UNSAFE.search(text) is not None


def _styled_text(text: str) -> str:
    """``text`` through :func:`safe_text`, the sequences :data:`_STYLED` names kept."""
    out: list[str] = []
    start = 0
    for match in _STYLED.finditer(text):
        out.append(safe_text(text[start : match.start()]))
        out.append(match.group(0))
        start = match.end()
    out.append(safe_text(text[start:]))
    return "".join(out)


def _terminal_text(text: str) -> str:
    """What a guarded stream writes: :func:`safe_text` with newlines kept."""
    if not has_unsafe(text):
        return text
    return "\n".join(safe_text(line) for line in text.split("\n"))


class TerminalStream:
    """A text stream (standard output or error) that writes everything through the text-safety
    rule, newlines kept; every other attribute is the wrapped stream's."""

    def __init__(self, wrapped: TextIO) -> None:
        self.wrapped = wrapped

    def write(self, text: str) -> int:
        self.wrapped.write(_terminal_text(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def write_styled(self, text: str) -> int:
        """Write ``text`` keeping its SGR, erase-line and carriage-return sequences."""
        self.wrapped.write(_styled_text(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


def write_styled(stream: TextIO | TerminalStream, text: str) -> None:
    """Write a painter's ``text`` (a coloured chart, a progress bar) to ``stream``: its SGR colour,
    erase-line, carriage-return and newline sequences reach the terminal, anything else is
    escaped by :func:`safe_text`."""
    if isinstance(stream, TerminalStream):
        stream.write_styled(text)
    else:
        stream.write(_styled_text(text))


@contextmanager
def terminal_streams() -> Iterator[None]:
    """Within the block, ``sys.stdout`` and ``sys.stderr`` escape what is written to them (see
    :class:`TerminalStream`); the streams are put back after it (a test's capture included)."""
    saved = sys.stdout, sys.stderr
    guards = tuple(
        stream if stream is None or isinstance(stream, TerminalStream) else TerminalStream(stream) for stream in saved
    )
    sys.stdout, sys.stderr = guards  # a TerminalStream writes like the TextIO it wraps
    try:
        yield
    finally:
        # a stream replaced inside the block (stdout silenced after a failed write) stays replaced
        if sys.stdout is guards[0]:
            sys.stdout = saved[0]
        if sys.stderr is guards[1]:
            sys.stderr = saved[1]


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
