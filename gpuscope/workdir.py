"""A working directory that was deleted under gpuscope (a shell left in a folder someone removed).

Relative paths cannot name anything then, and torch cannot even load (MKL calls ``getcwd()``
when ``libtorch_cpu.so`` loads and aborts the process when it fails; torch's own config calls
``os.getcwd()``). :func:`leave_if_deleted`, called once at the command line's entry, moves the
process to ``/`` so that absolute paths and torch keep working, and from then on refuses
relative paths with one line (:class:`~gpuscope.errors.WorkingDirectoryGone`, exit 4) instead
of letting them resolve against ``/``: the command line's path options (:func:`check_path`), the
user's module (``measure``/``profile``), and, as a backstop, any relative path written, created,
renamed or removed (an audit hook).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from gpuscope.errors import WorkingDirectoryGone

__all__ = ["leave_if_deleted", "working_directory_gone", "check_path"]

_gone = False
#: Audit events that write, create, rename or remove a path: event -> indexes of (path, dir_fd) pairs.
_WRITING_EVENTS: dict[str, tuple[tuple[int, int | None], ...]] = {
    "os.rename": ((0, 2), (1, 3)),
    "os.remove": ((0, 1),),
    "os.mkdir": ((0, 2),),
    "os.rmdir": ((0, 1),),
    "os.truncate": ((0, None),),
    "os.link": ((0, 2), (1, 3)),
    "os.symlink": ((1, 2),),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def working_directory_gone() -> bool:
    """True when gpuscope started in a working directory that no longer existed."""
    return _gone


def leave_if_deleted() -> bool:
    """When the working directory no longer exists: move to ``/``, drop the relative entries of
    ``sys.path`` (``''`` meant the folder that is gone) and refuse relative paths from now on.
    Returns True when it was gone. Idempotent."""
    global _gone
    if _gone:
        return True
    try:
        os.getcwd()
        return False
    except FileNotFoundError:
        pass
    except OSError:
        return False  # exists but unreadable (EACCES): relative paths may still work
    os.chdir("/")
    _gone = True
    sys.path[:] = [entry for entry in sys.path if isinstance(entry, str) and os.path.isabs(entry)]
    sys.addaudithook(_refuse_relative_writes)
    return True


def _relative(path: Any) -> bool:
    if isinstance(path, (str, bytes, os.PathLike)):
        return not os.path.isabs(os.fspath(path))
    return False  # a file descriptor


def check_path(path: str | os.PathLike[str] | None) -> None:
    """Raise :class:`WorkingDirectoryGone` (exit 4) when ``path`` is relative and the working
    directory is gone; ``-`` (standard output) and None pass."""
    if _gone and path is not None and os.fspath(path) != "-" and _relative(path):
        raise WorkingDirectoryGone(os.fsdecode(os.fspath(path)))


def _refuse_relative_writes(event: str, args: tuple[Any, ...]) -> None:
    """Audit hook: no relative path is written, created, renamed or removed in ``/`` by mistake."""
    if event == "open":
        path, flags = args[0], args[2]
        if isinstance(flags, int) and flags & _WRITE_FLAGS and _relative(path):
            raise WorkingDirectoryGone(os.fsdecode(os.fspath(path)))
        return
    pairs = _WRITING_EVENTS.get(event)
    if pairs is None:
        return
    for path_index, dir_fd_index in pairs:
        dir_fd = args[dir_fd_index] if dir_fd_index is not None and dir_fd_index < len(args) else None
        if path_index < len(args) and dir_fd in (None, -1) and _relative(args[path_index]):
            raise WorkingDirectoryGone(os.fsdecode(os.fspath(args[path_index])))
