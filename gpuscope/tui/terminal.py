"""Running the dashboard in the user's terminal, and leaving that terminal as it was found.

Textual reads keys from standard input and draws on standard error; gpuscope also wants standard
output to be the terminal (a dashboard whose output is redirected is a script's mistake: it
would wait for keys nobody sees). :func:`run_in_terminal` refuses, in one line, when any of the
three is not a terminal, before anything is drawn.

Every way the dashboard ends restores the terminal (normal screen, mouse reporting off, cursor
shown, line discipline back): ``q``, the command palette's quit, and SIGTERM, SIGHUP, SIGINT,
SIGQUIT and the other signals that would kill it (:data:`ENDING_SIGNALS`), which end it as ``q``
does (exit 0, like ``gpuscope log`` ended by a signal) through asyncio's signal handlers,
installed before Textual starts and kept until it has put the terminal back (a signal the parent
set to be ignored, as ``nohup`` does, stays ignored). A terminal that goes away without a SIGHUP
reaching gpuscope (its parent traps it) ends the dashboard too: the hang-up is watched on
standard input (an epoll that reports only hang-ups and errors, so no key is taken from Textual
and nothing wakes while the terminal is there), where Textual's input thread would otherwise
read end-of-file in a busy loop. An exception in the app or a worker is Textual's to report: it
restores the terminal, then prints the error (exit 1).
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import sys
from collections.abc import Callable
from typing import TypeVar

from textual.app import App

from gpuscope.errors import ResourceError

__all__ = ["ENDING_SIGNALS", "require_terminal", "run_in_terminal"]

#: Signals that end the dashboard as ``q`` does: every signal whose default action ends the
#: process (with the terminal still in the alternate screen, reporting mouse moves to the shell),
#: except the faults a program cannot return from (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT,
#: SIGSYS, SIGTRAP) and the real-time signals (libraries may use them).
ENDING_SIGNALS = tuple(
    getattr(signal, name)
    for name in (
        "SIGTERM",
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGUSR1",
        "SIGUSR2",
        "SIGALRM",
        "SIGVTALRM",
        "SIGPROF",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGIO",
        "SIGPWR",
    )
    if hasattr(signal, name)
)

#: What the app returns from ``run`` (run_in_terminal reports only its exit code).
AppResult = TypeVar("AppResult")

_STREAMS = (("input", 0), ("output", 1), ("error", 2))


def require_terminal() -> None:
    """Raise :class:`ResourceError` (exit 4, one line) unless standard input, output and error
    are all terminals: the dashboard reads keys from one and draws on the others."""
    python_streams = (sys.__stdin__, sys.__stdout__, sys.__stderr__)
    for (name, fd), stream in zip(_STREAMS, python_streams):
        if stream is None or not os.isatty(fd):
            raise ResourceError(
                f"the dashboard needs a terminal: standard {name} is not one (scripts: gpuscope snapshot, gpuscope log)"
            )


def run_in_terminal(app: App[AppResult]) -> int:
    """Run ``app`` full screen in this terminal; returns its exit code (0 when ended by ``q`` or
    one of :data:`ENDING_SIGNALS`, 1 after an error Textual reported). Raises
    :class:`ResourceError` when there is no terminal (:func:`require_terminal`)."""
    require_terminal()

    async def run() -> None:
        loop = asyncio.get_running_loop()
        handled = [signum for signum in ENDING_SIGNALS if signal.getsignal(signum) is not signal.SIG_IGN]
        for signum in handled:
            # App.exit from the loop: the app closes its screens and its driver restores the
            # terminal; a second signal while it does so asks again, harmlessly.
            loop.add_signal_handler(signum, app.exit)
        hangup = _watch_hangup(loop, app.exit)
        try:
            await app.run_async()
        finally:
            for signum in handled:
                loop.remove_signal_handler(signum)
            if hangup is not None:
                loop.remove_reader(hangup.fileno())
                hangup.close()

    asyncio.run(run())
    return int(app.return_code or 0)


def _watch_hangup(loop: asyncio.AbstractEventLoop, ended: Callable[[], object]) -> select.epoll | None:
    """Call ``ended`` (once) in ``loop`` when the terminal on standard input hangs up; returns the
    epoll to close afterwards, or None where it cannot be watched (no epoll)."""
    if not hasattr(select, "epoll"):
        return None
    watch = select.epoll()
    try:
        watch.register(0, 0)  # no events asked: epoll still reports EPOLLHUP and EPOLLERR
    except OSError:
        watch.close()
        return None

    def hung_up() -> None:
        loop.remove_reader(watch.fileno())  # a hang-up stays pending (level-triggered): once is enough
        ended()

    loop.add_reader(watch.fileno(), hung_up)
    return watch
