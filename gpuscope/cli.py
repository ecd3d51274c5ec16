"""The ``gpuscope`` command line.

Every subcommand's options are declared in :mod:`gpuscope.commands.parsers`, which imports no
command; the command itself, ``gpuscope/commands/<name>.py`` with ``run(args) -> int``, imports its
engine at its top and is loaded by :func:`main` only for the command being run (the one lazy import
of the command line). So ``gpuscope --help`` stays fast and ``log``, ``probe``, ``doctor`` and
``serve`` never import Textual.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import io
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any

from gpuscope.commands.parsers import CONFIGURE
from gpuscope.errors import (
    DOCUMENTED_EXIT_CODES,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    GpuscopeError,
    StdoutError,
    StdoutReaderLeft,
    exception_text,
)
from gpuscope.fileio import command_scope
from gpuscope.schema.kinds import reading_as
from gpuscope.textsafe import install_ascii_fallback, safe_text, terminal_streams
from gpuscope.version import __version__
from gpuscope.workdir import leave_if_deleted

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

__all__ = ["main", "build_parser", "COMMANDS"]

#: name -> one-line help. Order is the order shown in ``--help``.
COMMANDS: dict[str, str] = {
    "tui": "open the interactive dashboard (the default with no command)",
    "log": "log telemetry headless as JSON lines or CSV",
    "snapshot": "print one line per GPU and one for the host, then exit (--json for scripts)",
    "doctor": "show what gpuscope can see on this machine, and why not",
    "topo": "show how GPUs, CPUs, NUMA nodes and NICs are wired (nvidia-smi topo -m), --json",
    "probe": "measure compute, memory, transfer and collective ceilings",
    "roofline": "print the roofline chart of one or more results files",
    "measure": "time a Python function and add it to a results file as a roofline point",
    "profile": "show where a model step's time goes, op by op, against the roofline",
    "report": "write a snapshot report (HTML, Markdown or JSON)",
    "compare": "compare the ceilings and workloads of two or more results files",
    "replay": "play a recorded telemetry log through the dashboard",
    "serve": "expose telemetry to Prometheus (same as log --prometheus)",
    "fleet": "every node and GPU of a cluster, from Prometheus or gpuscope exporters",
}


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as one line without the usage block, ``gpuscope: error:``
    first for every subcommand too (the README's promise)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"gpuscope: error: {safe_text(message)}\n")

    def print_help(self, file: SupportsWrite[str] | None = None) -> None:
        # argparse drops write errors, so `--help >/dev/full` would exit 0 having printed nothing:
        # a failure of standard output reaches main (exit 1).
        (file or sys.stdout).write(self.format_help())


class _Version(argparse.Action):
    """``--version``, written so that a failure of standard output reaches main (exit 1); argparse's
    own version action drops it."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        sys.stdout.write(f"gpuscope {__version__}\n")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """Every command's options (no command module is imported)."""
    parser = _Parser(prog="gpuscope", description="Terminal hardware monitor and roofline analyzer for GPUs and CPUs.")
    parser.add_argument("--version", action=_Version, help="show gpuscope's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, help_text in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        CONFIGURE[name](command_parser)
    return parser


def _run_command(args: argparse.Namespace) -> int:
    """Import the command named by ``args`` (its engine with it) and run it."""
    command = importlib.import_module(f"gpuscope.commands.{args.command}")
    return int(command.run(args) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Run gpuscope; returns the process exit code (see :mod:`gpuscope.errors`).

    The one place that turns what escapes a command into one line on stderr: gpuscope errors
    (their exit code; what the user's code raised is one of them, exit 1), Ctrl-C (130), standard
    output closed, full or failing (exit 1, ``--help`` and ``--version`` too), and the reader of a
    pipe leaving (``| head``: exit 0, no traceback); an exception ignored in a ``__del__`` or
    raised in a thread is one warning line. A deleted working directory is left first
    (:mod:`gpuscope.workdir`)."""
    leave_if_deleted()  # a deleted working directory: absolute paths and torch keep working
    _guard_standard_streams()
    # The process's own command line keeps the hooks to its end (a __del__ runs at exit); a call
    # from Python (a test) gives them back.
    restore_hooks = _install_one_line_hooks()
    try:
        return _run(argv)
    finally:
        if argv is not None:
            restore_hooks()


def _run(argv: Sequence[str] | None) -> int:
    _tag_stdout()
    install_ascii_fallback(sys.stdout, sys.stderr)
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv or argv[0].split("=", 1)[0] in ("--theme", "--demo", "--interval", "--probes", "--suite"):
        argv = ["tui", *argv]
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as done:  # --help, --version, a usage error: flush now, never at exit
            try:
                _flush_stdout()
            except OSError:
                if done.code in (None, EXIT_OK):
                    raise  # --help or --version printed nothing: exit 1 with one line, below
                _silence_stdout()
            raise
        if args.command is None:
            parser.print_help()
            _flush_stdout()
            return 2
        # reading_as: "x.json is a report file; <command> reads ..."; terminal_streams: what it prints is escaped
        with command_scope(), reading_as(str(args.command)), terminal_streams():
            code = _run_command(args)
        _flush_stdout()
        return code
    except StdoutReaderLeft:
        _silence_stdout()
        return 0
    except StdoutError as exc:
        _silence_stdout()
        _error(_error_text(exc))
        return exc.exit_code
    except GpuscopeError as exc:
        _error(_error_text(exc))
        # the user's code can raise a GpuscopeError of its own, with any exit code
        return exc.exit_code if exc.exit_code in DOCUMENTED_EXIT_CODES else EXIT_FAILURE
    except KeyboardInterrupt:
        _error("interrupted", prefix="gpuscope: ")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `gpuscope log | head`: the reader left; not an error worth a traceback.
        _silence_stdout()
        return 0
    except OSError as exc:
        if _stdout_failed(exc):
            _silence_stdout()
            _error(f"cannot write standard output: {exc.strerror or exc}")
        else:
            where = f"{safe_text(exc.filename)}: " if exc.filename else ""
            _error(f"{where}{exc.strerror or safe_text(exc)}")
        return EXIT_FAILURE


def _error_text(exc: GpuscopeError) -> str:
    """The escaped message of a gpuscope error; never raises (the user's code can raise a
    GpuscopeError subclass whose ``__str__`` fails)."""
    try:
        return safe_text(str.__str__(str(exc)))
    except BaseException:  # noqa: BLE001 - fall back to the one rule for any exception
        return exception_text(exc)


#: Warning lines the hooks below print at most (then one saying more are not shown).
_HOOK_WARNINGS_MAX = 5


def _install_one_line_hooks() -> Callable[[], None]:
    """What Python would print as a traceback outside ``main``'s reach, an exception ignored in a
    ``__del__`` or raised in a thread (the user's code can do both), becomes one warning line."""
    shown: set[str] = set()  # a __del__ or thread failing on every call of a timed loop: a few lines

    def warn(key: str, message: str, error: Callable[..., None] = _error, limit: int = _HOOK_WARNINGS_MAX) -> None:
        # defaults bind what is needed: at interpreter exit the module's globals may be gone
        if key in shown or len(shown) > limit:
            return
        shown.add(key)
        if len(shown) > limit:
            message = "more exceptions in __del__ methods or threads are not shown"
        error(message, prefix="gpuscope: warning: ")

    def unraisable(event: sys.UnraisableHookArgs, describe: Callable[[BaseException], str] = exception_text) -> None:
        try:
            where = str(getattr(event.object, "__qualname__", None) or type(event.object).__name__)
            text = describe(event.exc_value) if event.exc_value is not None else "an exception"
            warn(f"{where} {text}", f"ignored {text} (in {where}; repeats not shown)")
        except BaseException:  # noqa: BLE001 - at interpreter exit, say nothing rather than a traceback
            pass

    def thread_failed(
        event: threading.ExceptHookArgs, describe: Callable[[BaseException], str] = exception_text
    ) -> None:
        if event.exc_type is SystemExit:
            return  # what threading itself ignores
        try:
            name = event.thread.name if event.thread is not None else "a thread"
            text = describe(event.exc_value) if event.exc_value is not None else "an exception"
            warn(f"thread {text}", f"thread {name} raised {text} (repeats not shown)")
        except BaseException:  # noqa: BLE001
            pass

    saved = sys.unraisablehook, threading.excepthook

    def restore() -> None:
        sys.unraisablehook, threading.excepthook = saved

    sys.unraisablehook = unraisable
    threading.excepthook = thread_failed
    return restore


class StdoutWriteError(OSError):
    """Writing standard output failed (full, I/O error, closed); not a broken pipe."""


class _StdoutRaw(io.FileIO):
    """fd 1, with write failures tagged as :class:`StdoutWriteError`."""

    def write(self, data: bytes | bytearray | memoryview) -> int | None:  # type: ignore[override]
        try:
            return super().write(data)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise StdoutWriteError(exc.errno, exc.strerror) from None


def _tag_stdout() -> None:
    """Replace the interpreter's own stdout (only that: a test's capture stays) by the same
    stream over :class:`_StdoutRaw`, so a failing write is known to be stdout's."""
    stream = sys.stdout
    if stream is None or stream is not sys.__stdout__ or not isinstance(stream, io.TextIOWrapper):
        return
    try:
        stream.flush()
        raw = _StdoutRaw(stream.fileno(), "w", closefd=False)
        sys.stdout = io.TextIOWrapper(
            io.BufferedWriter(raw),
            encoding=stream.encoding,
            errors=stream.errors,
            line_buffering=stream.line_buffering,
            write_through=stream.write_through,
        )
    except (OSError, ValueError, AttributeError):
        pass


class _ClosedStream(io.TextIOBase):
    """Standard output when the process started with it closed (``>&-``): writing fails."""

    encoding = "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed")

    def flush(self) -> None:
        pass


def _guard_standard_streams() -> None:
    """A closed fd 0, 1 or 2 would be taken by the next file gpuscope opens (an output file
    would receive what was meant for stdout): occupy each with /dev/null. A closed stdout then
    fails on the first write; a closed stderr is silent."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                null = os.open(os.devnull, os.O_RDWR)
                if null != fd:
                    os.dup2(null, fd)
                    os.close(null)
            except OSError:
                continue
            if fd == 1 and sys.stdout is None:
                sys.stdout = _ClosedStream()
            elif fd == 2 and sys.stderr is None:
                sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    if sys.stdout is None:
        sys.stdout = _ClosedStream()


def _flush_stdout() -> None:
    if sys.stdout is not None:
        sys.stdout.flush()


def _stdout_failed(exc: OSError) -> bool:
    """True when ``exc`` came from standard output (closed, full, I/O error)."""
    if isinstance(sys.stdout, _ClosedStream):
        return exc.errno == errno.EBADF
    return isinstance(exc, StdoutWriteError)


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null and drop what is buffered, so the interpreter's final flush
    neither fails nor prints a second error."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 1)
        finally:
            os.close(null)
    except OSError:
        pass
    stream = sys.stdout
    if stream is not None and _is_fd1(stream):
        try:
            sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - replaces the broken one for the rest of the run
            stream.flush()
        except (OSError, ValueError):
            pass


def _is_fd1(stream: IO[str]) -> bool:
    try:
        return bool(stream.fileno() == 1)
    except (OSError, ValueError, AttributeError):
        return False


def _error(message: str, prefix: str = "gpuscope: error: ", escape: Callable[[object], str] = safe_text) -> None:
    """One line on stderr; ``escape`` is bound at definition, since at interpreter exit (an
    exception in a ``__del__``) the module's globals may be gone. Names can come from the user's
    code: escaped again."""
    try:
        print(f"{prefix}{escape(message)}", file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError, TypeError):
        pass


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
