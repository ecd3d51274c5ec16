"""Errors that end a command with one line and a documented exit code.

Exit codes (also in README.md):
  0  success (also: ``gpuscope log`` stopped by SIGINT/SIGTERM)
  1  the run failed (a probe failed validation, an output could not be written, standard output
     is closed or full, ...)
  2  bad command line (unknown option, value out of range)
  3  bad input file (suite, theme, config, results JSON, telemetry log)
  4  a required resource is missing (no such device, port in use, missing dependency, an output
     file another gpuscope process is writing)
  130 interrupted (Ctrl-C during a probe; the partial results are kept)
"""

from __future__ import annotations

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
]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_BAD_INPUT = 3
EXIT_UNAVAILABLE = 4
EXIT_INTERRUPTED = 130


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
