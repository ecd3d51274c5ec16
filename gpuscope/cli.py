"""The ``gpuscope`` command line.

Each subcommand lives in ``gpuscope/commands/<name>.py`` with two functions:
``configure(parser)`` adds its options (importing nothing heavy) and ``run(args) -> int``
does the work (importing what it needs). So ``gpuscope --help`` stays fast and
``log``, ``probe`` and ``doctor`` never import Textual.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from gpuscope import __version__
from gpuscope.errors import EXIT_INTERRUPTED, GpuscopeError

__all__ = ["main", "build_parser", "COMMANDS"]

#: name -> one-line help. Order is the order shown in ``--help``.
COMMANDS: dict[str, str] = {
    "tui": "open the interactive dashboard (the default with no command)",
    "log": "log telemetry headless as JSON lines or CSV",
    "doctor": "show what gpuscope can see on this machine, and why not",
    "probe": "measure compute, memory, transfer and collective ceilings",
    "roofline": "print the roofline chart of one or more results files",
    "measure": "time a Python function and add it to a results file as a roofline point",
    "report": "write a snapshot report (HTML, Markdown or JSON)",
    "compare": "compare the ceilings and workloads of two or more results files",
    "replay": "play a recorded telemetry log through the dashboard",
    "serve": "expose telemetry to Prometheus (same as log --prometheus)",
}


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as one line without the usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _command_module(name: str):  # noqa: ANN202 - returns a module
    return importlib.import_module(f"gpuscope.commands.{name}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gpuscope", description="Terminal hardware monitor and roofline analyzer for GPUs and CPUs.")
    parser.add_argument("--version", action="version", version=f"gpuscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        try:
            module = _command_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != f"gpuscope.commands.{name}":
                raise
            continue  # a command not built yet
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        command_parser.__class__ = _Parser
        module.configure(command_parser)
        command_parser.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run gpuscope; returns the process exit code (see :mod:`gpuscope.errors`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv or argv[0].split("=", 1)[0] in ("--theme", "--demo", "--interval", "--probes", "--suite"):
        argv = ["tui", *argv]
    args = parser.parse_args(argv)
    if getattr(args, "_module", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args._module.run(args) or 0)
    except GpuscopeError as exc:
        print(f"gpuscope: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("gpuscope: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `gpuscope log | head`: the reader left; not an error worth a traceback.
        try:
            sys.stdout = None  # type: ignore[assignment]
        finally:
            return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
