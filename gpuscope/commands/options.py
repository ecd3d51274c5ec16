"""What several commands share: their common options, declared once, and the one way a command
reports that the user's own code raised. Imports nothing heavy."""

from __future__ import annotations

import argparse
import io
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeVar

from gpuscope.errors import GpuscopeError, UserCodeError
from gpuscope.workdir import check_path

__all__ = [
    "path_option",
    "add_value",
    "add_interval",
    "add_host_only",
    "add_sampling",
    "add_repeatable",
    "add_results_inputs",
    "add_function_target",
    "call_user",
]

T = TypeVar("T")

#: ``--args-json``'s help, the same for every command that calls a function.
ARGS_JSON_HELP = (
    'positional arguments as a JSON list, or {"args": [...], "kwargs": {...}}; '
    '{"tensor": [shape], "dtype": "float32"} makes a random tensor'
)


def path_option(text: str) -> str:
    """The ``type`` of every option that names a file: a relative path when the working directory
    is gone is one line, exit 4, before the command starts (:mod:`gpuscope.workdir`)."""
    check_path(text)
    return text


def add_value(parser: argparse.ArgumentParser, flag: str, default: Any, metavar: str, help: str, **more: Any) -> None:
    """An option with one value of ``default``'s type (``type=`` in ``more`` overrides it)."""
    more.setdefault("type", type(default))
    parser.add_argument(flag, default=default, metavar=metavar, help=help, **more)


def add_interval(parser: argparse.ArgumentParser) -> None:
    """``--interval SECONDS`` between telemetry samples."""
    add_value(parser, "--interval", 1.0, "SECONDS", "seconds between samples (default 1, minimum 0.1)")


def add_host_only(
    parser: argparse.ArgumentParser, processes_help: str = "do not list the processes on each GPU"
) -> None:
    """``--no-gpu`` and ``--no-processes``."""
    parser.add_argument("--no-gpu", action="store_true", help="host only: do not load NVML")
    parser.add_argument("--no-processes", action="store_true", help=processes_help)


def add_sampling(
    parser: argparse.ArgumentParser, processes_help: str = "do not list the processes on each GPU"
) -> None:
    """``--interval``, ``--duration``, ``--no-gpu`` and ``--no-processes`` of a command that samples telemetry."""
    add_interval(parser)
    add_value(
        parser,
        "--duration",
        None,
        "SECONDS",
        "stop after this many seconds (default: until Ctrl-C or SIGTERM)",
        type=float,
    )
    add_host_only(parser, processes_help)


def add_repeatable(parser: argparse.ArgumentParser, flag: str, metavar: str, help: str) -> None:
    """An option given once per value (``--probes A --probes B``), collected in a list."""
    parser.add_argument(flag, metavar=metavar, action="append", default=[], help=help)


def add_results_inputs(parser: argparse.ArgumentParser, help: str, *, required: bool = False) -> None:
    """``--probes RESULTS.json ...`` (repeatable, several after one flag): results files to read."""
    parser.add_argument("--probes", metavar="RESULTS.json", type=path_option, action="extend", nargs="+",
                        required=required, default=None if required else [], help=help)  # fmt: skip


def add_function_target(parser: argparse.ArgumentParser, what: str, args_help: str = ARGS_JSON_HELP) -> None:
    """``MODULE:FUNCTION`` (``what`` it is) and ``--args-json`` of a command that calls a function."""
    parser.add_argument("target", metavar="MODULE:FUNCTION",
                        help=f"{what}: a module (dotted name or path/to/file.py) and a function in it")  # fmt: skip
    parser.add_argument("--args-json", metavar="JSON", help=args_help)


def call_user(what: str, work: Callable[[], T]) -> T:
    """``work()``, which runs the user's own code (``what`` names it: ``bench.py:step``): anything
    that code raises or exits with, ``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit`` and
    other ``BaseException`` included, becomes one :class:`UserCodeError` line, "``what`` raised
    ``Type: first line of the message``" (escaped), exit 1. gpuscope's own errors pass through,
    and so does a real Ctrl-C (a SIGINT that arrived while the code ran: exit 130)."""
    saved = sys.stdout, sys.stderr
    # The user's code gets streams it can replace or close without silencing what gpuscope says next.
    sys.stdout, sys.stderr = (None if stream is None else _LentStream(stream) for stream in saved)
    try:
        with _sigint_watch() as interrupted:
            try:
                return work()
            except GpuscopeError:
                raise
            except BaseException as exc:  # noqa: BLE001 - whatever the user's code did, one line
                if interrupted() or (isinstance(exc, KeyboardInterrupt) and interrupted() is None):
                    raise KeyboardInterrupt from None  # a real Ctrl-C, whatever the code made of it
                raise UserCodeError(what, exc) from None
    finally:
        sys.stdout, sys.stderr = saved


class _LentStream:
    """Standard output or error as lent to the user's code: writes go through; ``close()`` only
    flushes and ``detach()`` is refused, so the stream still works when the code returns."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def close(self) -> None:
        self._stream.flush()

    @property
    def closed(self) -> bool:
        return False

    def detach(self) -> Any:
        raise io.UnsupportedOperation("gpuscope lends this stream; it cannot be detached")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def _sigint_watch() -> Iterator[Callable[[], bool | None]]:
    """Yields a function that says whether a SIGINT arrived within the block (None: cannot tell,
    off the main thread). Python's own handler keeps raising ``KeyboardInterrupt``."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:  # ignored (nohup, `&`) or someone else's handler
        yield lambda: False
        return
    seen: list[bool] = []

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        seen.append(True)
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield lambda: bool(seen)
    finally:
        signal.signal(signal.SIGINT, previous)
