"""What several commands share: their common options, declared once, and the one way a command
reports that the user's own code raised. Imports nothing heavy."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TypeVar

from gpuscope.errors import GpuscopeError

__all__ = [
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
    parser.add_argument("--probes", metavar="RESULTS.json", action="extend", nargs="+", required=required,
                        default=None if required else [], help=help)  # fmt: skip


def add_function_target(parser: argparse.ArgumentParser, what: str, args_help: str = ARGS_JSON_HELP) -> None:
    """``MODULE:FUNCTION`` (``what`` it is) and ``--args-json`` of a command that calls a function."""
    parser.add_argument("target", metavar="MODULE:FUNCTION",
                        help=f"{what}: a module (dotted name or path/to/file.py) and a function in it")  # fmt: skip
    parser.add_argument("--args-json", metavar="JSON", help=args_help)


def call_user(target: str, work: Callable[[], T]) -> T:
    """``work()``; an exception from the user's code (``target``) becomes one line, "``target``
    raised ``Type``: first line of the message"; gpuscope's own errors pass through."""
    try:
        return work()
    except GpuscopeError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's function failed
        message = str(exc).splitlines()[0] if str(exc) else ""
        raise GpuscopeError(f"{target} raised {type(exc).__name__}: {message}") from None
