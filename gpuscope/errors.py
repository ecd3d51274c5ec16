"""Errors that end a command with one line and a documented exit code.

Exit codes (also in README.md):
  0  success (also: ``gpuscope log`` stopped by SIGINT/SIGTERM)
  1  the run failed (a probe failed validation, an output could not be written (disk full, I/O
     error), standard output is closed or full, the user's own code given to ``measure`` or
     ``profile`` raised or exited, ...)
  2  bad command line (unknown option, value out of range)
  3  bad input file (suite, theme, config, results JSON, telemetry log)
  4  a required resource is missing (no such device, port in use, missing dependency, an output
     file another gpuscope process is writing, a relative path given while the working directory
     no longer exists)
  130 interrupted (Ctrl-C during a probe; the partial results are kept)
"""

from __future__ import annotations

from gpuscope.textsafe import safe_text

__all__ = [
    "EXIT_OK",
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "EXIT_BAD_INPUT",
    "EXIT_UNAVAILABLE",
    "EXIT_INTERRUPTED",
    "GpuscopeError",
    "UsageError",
    "BadInputError",
    "ResourceError",
    "StdoutError",
    "StdoutReaderLeft",
    "UserCodeError",
    "WorkingDirectoryGone",
    "DOCUMENTED_EXIT_CODES",
    "exception_text",
    "message_text",
]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_BAD_INPUT = 3
EXIT_UNAVAILABLE = 4
EXIT_INTERRUPTED = 130
DOCUMENTED_EXIT_CODES = frozenset(
    {EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_BAD_INPUT, EXIT_UNAVAILABLE, EXIT_INTERRUPTED}
)
#: Longest exception message shown in an error line (a message can be megabytes).
MESSAGE_MAX_CHARS = 500


class GpuscopeError(Exception):
    """An error reported as one line, ``gpuscope: error: <message>``, with ``exit_code``."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(GpuscopeError):
    """A command-line value is wrong (out of range, unknown choice, unwritable path)."""

    exit_code = EXIT_USAGE


class BadInputError(GpuscopeError):
    """An input file is unreadable or invalid. The message names the file and the field or line."""

    exit_code = EXIT_BAD_INPUT


class ResourceError(GpuscopeError):
    """Something the command needs is not there (device, port, optional package)."""

    exit_code = EXIT_UNAVAILABLE


class StdoutError(GpuscopeError):
    """Standard output is closed, full or failing (``-o -`` or a command's normal output); exit 1."""


class StdoutReaderLeft(GpuscopeError):
    """The reader of standard output went away (``| head``): not an error; the command ends with 0."""

    exit_code = EXIT_OK


class UserCodeError(GpuscopeError):
    """The user's own code (the module or function given to ``measure`` or ``profile``) raised or
    exited: whatever it raised, ``SystemExit`` and ``KeyboardInterrupt`` included; exit 1."""

    def __init__(self, what: str, exc: BaseException) -> None:
        super().__init__(f"{what} raised {exception_text(exc)}")
        self.raised = exc


class WorkingDirectoryGone(ResourceError):
    """A relative path needs the working directory, which was deleted (or moved away); exit 4."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"{safe_text(path)}: a relative path, but the working directory no longer exists "
            "(deleted); cd to a folder that exists or give an absolute path"
        )


def exception_text(exc: BaseException) -> str:
    """``Type: message`` of any exception as one escaped line (see :func:`message_text`)."""
    message = message_text(exc)
    return safe_text(_type_name(exc)) + (f": {message}" if message else "")


def message_text(exc: BaseException | str) -> str:
    """The first non-blank line of an exception's message (a warning's too), escaped and cut to
    about :data:`MESSAGE_MAX_CHARS` characters; never raises, whatever its ``__str__`` does
    (raises, returns a non-string, returns megabytes of control characters)."""
    try:
        message = str.__str__(str(exc))  # a str subclass returned by __str__ becomes plain text
    except BaseException as inner:  # noqa: BLE001 - the user's __str__ failed: say so, do not die
        message = f"<message not printable: its __str__ raised {_type_name(inner)}>"
    first = next((line for line in message.splitlines() if line.strip()), "")  # the first line says what
    shown = safe_text(first[: MESSAGE_MAX_CHARS + 1])
    if len(shown) > MESSAGE_MAX_CHARS:
        cut = shown[:MESSAGE_MAX_CHARS]
        backslash = cut.rfind("\\", len(cut) - 6)
        shown = (cut[:backslash] if backslash >= 0 else cut) + f"... ({len(first)} characters)"
    return shown


def _type_name(exc: BaseException) -> str:
    try:
        return str.__str__(type(exc).__name__)
    except BaseException:  # noqa: BLE001 - a metaclass can make even the name raise
        return "exception"
