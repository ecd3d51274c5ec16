"""Reading input files with a size limit and writing outputs without destroying anything.

One home for file handling every command shares:

- :func:`read_bytes_bounded` reads a file of a known kind (results, report, suite, theme,
  settings, telemetry log) in bounded chunks, refusing more than :data:`LIMITS_BYTES` allows,
  so ``/dev/zero`` or a 2 GB sparse file costs one chunk of memory, not a ``MemoryError``.
- :func:`check_output` refuses an ``--output`` that is a FIFO, a device, a symlink to one, or
  one of the command's own input files (same inode); ``-`` means standard output. A stream
  writer (``gpuscope log``) passes ``streams=True`` to accept FIFOs, sockets and character devices.
- :func:`write_text_atomic` / :func:`write_json_atomic` write through a temporary file whose name
  fits the file system's name limit and a rename, keeping an existing file's permission bits.
- :class:`OutputLock` is an exclusive ``flock`` on the output file itself (it moves with the
  atomic rename), so a second writer reaching the file by any name refuses in one line
  (:class:`~gpuscope.errors.ResourceError`, exit 4) or, for read-modify-write, waits.

Inputs read while a command runs (:func:`command_scope`, entered by ``gpuscope.cli.main``) are
remembered, so an output naming one of them is refused even when the command did not say so.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import os
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from gpuscope.errors import ResourceError, StdoutError, StdoutReaderLeft, UsageError

__all__ = [
    "LIMITS_BYTES",
    "FileTooLargeError",
    "read_bytes_bounded",
    "check_input_size",
    "check_output",
    "is_stdout",
    "is_stream",
    "write_text_atomic",
    "write_json_atomic",
    "OutputLock",
    "command_scope",
    "remember_input",
]

_MIB = 1024 * 1024
#: The largest file gpuscope reads, per kind, bytes: what gpuscope itself writes must read back.
#: A results file is kilobytes to a few MB for one node; a 625-node (5,000-GPU) burn-in written by
#: ``probe --distributed`` is about 160 MB, and its report.json, which embeds it, about 375 MB. A
#: telemetry log is streamed line by line (each line at most 16 MiB) so its limit only stops a
#: runaway file.
LIMITS_BYTES: dict[str, int] = {
    "results": 256 * _MIB,
    "report": 512 * _MIB,
    "suite": 1 * _MIB,
    "theme": 256 * 1024,
    "settings": 256 * 1024,
    "telemetry log": 16 * 1024 * _MIB,
}
#: What a kind is called in messages.
_EXPECTED = {
    "results": "a results JSON file",
    "report": "a results or report JSON file",
    "suite": "a suite TOML file",
    "theme": "a theme TOML file",
    "settings": "a settings TOML file",
    "telemetry log": "a telemetry log",
}
_CHUNK_BYTES = 1 * _MIB


class FileTooLargeError(OSError):
    """An input is larger than its kind's limit (an ``OSError`` with ``errno.EFBIG``, so readers
    that report ``cannot read (<strerror>)`` say why in one line)."""

    def __init__(self, label: str, kind: str, size: int | None) -> None:
        limit = LIMITS_BYTES[kind]
        seen = f"{size} bytes" if size is not None else f"more than {limit} bytes"
        super().__init__(errno.EFBIG, f"{seen} is too large for {_EXPECTED.get(kind, kind)} (limit {_human(limit)})")
        self.filename = label

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def _human(size: int) -> str:
    if size >= _MIB and size % _MIB == 0:
        return f"{size // _MIB} MiB"
    if size >= 1024 and size % 1024 == 0:
        return f"{size // 1024} KiB"
    return f"{size} bytes"


# --- inputs ----------------------------------------------------------------------------------


#: Kinds gpuscope reads and later rewrites itself (the TUI saves its settings): not "inputs".
_OWN_FILES = frozenset({"settings", "theme"})


def check_input_size(fd: int, label: str, kind: str) -> None:
    """Raise :class:`FileTooLargeError` when the regular file open as ``fd`` exceeds the limit of
    ``kind``, and remember it as an input of the running command (not gpuscope's own settings
    and themes). Other file types (pipes, devices) are bounded by the reader instead."""
    info = os.fstat(fd)
    if kind not in _OWN_FILES:
        remember_input(info)
    if stat.S_ISREG(info.st_mode) and info.st_size > LIMITS_BYTES[kind]:
        raise FileTooLargeError(label, kind, info.st_size)


def read_bytes_bounded(path: str | os.PathLike[str], kind: str) -> bytes:
    """The bytes of ``path``, read in 1 MiB chunks and never more than ``LIMITS_BYTES[kind]``.

    Raises ``OSError`` like ``open`` (``FileNotFoundError``, ``IsADirectoryError``, ...) and
    :class:`FileTooLargeError` (an ``OSError``) past the limit, for a sparse file before reading.
    """
    label = os.fspath(path)
    limit = LIMITS_BYTES[kind]
    with open(label, "rb", buffering=0) as handle:
        check_input_size(handle.fileno(), label, kind)
        buffer = bytearray()
        while True:
            chunk = handle.read(min(_CHUNK_BYTES, limit + 1 - len(buffer)))
            if not chunk:
                return bytes(buffer)
            buffer += chunk
            if len(buffer) > limit:
                raise FileTooLargeError(label, kind, None)


# --- the inputs of the running command ---------------------------------------------------------

_scope_lock = threading.Lock()
_SCOPE_INPUTS: set[tuple[int, int]] | None = None


@contextlib.contextmanager
def command_scope() -> Iterator[None]:
    """While active, every input read through this module is remembered, and
    :func:`write_text_atomic` refuses to replace one of them (``gpuscope.cli.main`` enters it)."""
    global _SCOPE_INPUTS
    with _scope_lock:
        previous, _SCOPE_INPUTS = _SCOPE_INPUTS, set()
    try:
        yield
    finally:
        with _scope_lock:
            _SCOPE_INPUTS = previous


def remember_input(info: os.stat_result | str | os.PathLike[str]) -> None:
    """Note a file (its ``stat`` or path) as an input of the running command (no-op outside
    :func:`command_scope`)."""
    inputs = _SCOPE_INPUTS
    if inputs is None:
        return
    if not isinstance(info, os.stat_result):
        try:
            info = os.stat(info)
        except (OSError, ValueError):
            return
    if stat.S_ISREG(info.st_mode):
        inputs.add((info.st_dev, info.st_ino))


# --- outputs ---------------------------------------------------------------------------------

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)  # a folder is left to the write, which fails with the usual "Is a directory"


def is_stdout(path: str | os.PathLike[str] | None) -> bool:
    """True for ``-`` (standard output)."""
    return path is not None and os.fspath(path) == "-"


def is_stream(info: os.stat_result) -> bool:
    """True for what is written as a stream, never replaced or continued: a FIFO or pipe, a
    socket, a character device (a terminal, ``/dev/null``)."""
    return stat.S_ISFIFO(info.st_mode) or stat.S_ISSOCK(info.st_mode) or stat.S_ISCHR(info.st_mode)


def check_output(
    path: str | os.PathLike[str],
    inputs: Iterable[str | os.PathLike[str] | None] = (),
    option: str = "--output",
    *,
    allow_inputs: bool = False,
    streams: bool = False,
) -> None:
    """Raise a one-line :class:`UsageError` when ``path`` must not be written: what it names
    (after following symlinks) is a FIFO, a device or a socket (with ``streams``, a writer of a
    stream such as a log: only a block device), or (unless ``allow_inputs``) it is the same file
    (inode) as one of ``inputs`` or an input already read by the running command. ``-`` (standard
    output) always passes."""
    if is_stdout(path):
        return
    label = os.fspath(path)
    try:
        info = os.stat(label)  # follows symlinks: what the final path resolves to
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ENAMETOOLONG, errno.ELOOP):
            raise UsageError(f"{option} {label}: {exc.strerror}") from None
        return  # e.g. no permission to look: the write reports it
    if streams and is_stream(info):
        return
    for test, what in _KINDS:
        if test(info.st_mode):
            target = os.path.realpath(label)
            via = f" ({target})" if target != os.path.abspath(label) else ""
            accepted = "regular files and streams (FIFOs, pipes, terminals)" if streams else "regular files"
            raise UsageError(
                f"{option} {label}{via} is {what}; gpuscope writes {accepted} only (use {option} - for standard output)"
            )
    if allow_inputs:
        return
    key = (info.st_dev, info.st_ino)
    named: set[tuple[int, int]] = set()
    for item in inputs:
        if item is None or is_stdout(item):
            continue
        try:
            other = os.stat(item)
        except (OSError, ValueError):
            continue
        named.add((other.st_dev, other.st_ino))
    if key in named or (_SCOPE_INPUTS is not None and key in _SCOPE_INPUTS):
        raise UsageError(
            f"{option} {label} is also an input of this command; refusing to overwrite it (choose another output)"
        )


def _name_max(folder: str) -> int:
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def _short_name(name: str, room: int) -> str:
    """``name`` cut to at most ``room`` bytes (file system encoding), never mid-character."""
    raw = os.fsencode(name)
    if len(raw) <= room:
        return name
    cut = raw[: max(room, 0)]
    while cut:
        try:
            cut.decode("utf-8")
            break
        except UnicodeDecodeError:
            cut = cut[:-1]
    return os.fsdecode(cut)


def _write_stdout(text: str) -> None:
    """Write ``text`` to standard output; failures are not ``OSError`` (callers turn those into
    "cannot write <file>"), but :class:`StdoutReaderLeft` or :class:`StdoutError`."""
    stream = sys.stdout
    try:
        if stream is None:
            raise OSError(errno.EBADF, "standard output is closed")
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        raise StdoutReaderLeft("the reader of standard output left") from None
    except OSError as exc:
        raise StdoutError(f"cannot write standard output: {exc.strerror or exc}") from None


def write_text_atomic(
    path: str | os.PathLike[str],
    text: str,
    *,
    inputs: Iterable[str | os.PathLike[str] | None] = (),
    replace_input: bool = False,
    lock: bool = True,
) -> None:
    """Write UTF-8 text to ``path`` through a temporary file in the same folder and a rename, so
    a reader never sees a half-written file and a crash leaves the previous file intact.

    ``-`` writes to standard output. A symlink is kept and its target replaced. An existing
    file keeps its permission bits (and owner, when allowed); a new one gets ``0666 & ~umask``.
    Raises :class:`UsageError` for a special file or one of the command's inputs (unless
    ``replace_input``), :class:`ResourceError` when another process holds the output's lock,
    ``OSError`` when the write fails.
    """
    if is_stdout(path):
        _write_stdout(text)
        return
    check_output(path, inputs, option="output", allow_inputs=replace_input)
    target = Path(os.path.realpath(os.fspath(path)))
    with OutputLock(target) if lock else contextlib.nullcontext():
        _replace(target, text)


def _replace(target: Path, text: str) -> None:
    folder = str(target.parent)
    try:
        previous: os.stat_result | None = os.stat(target)
    except OSError:
        previous = None
    prefix = "." + _short_name(target.name, _name_max(folder) - len(".") - len(".") - 8 - len(".tmp")) + "."
    descriptor, temporary = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=folder)
    moving: tuple[_Held, int] | None = None  # the output's lock, moving to the new file
    try:
        # mkstemp makes the file 0600: give it the old file's mode, or what open() would give.
        if previous is not None and stat.S_ISREG(previous.st_mode):
            os.fchmod(descriptor, stat.S_IMODE(previous.st_mode))
            if (previous.st_uid, previous.st_gid) != (os.geteuid(), os.getegid()):
                with contextlib.suppress(OSError):
                    os.fchown(descriptor, previous.st_uid, previous.st_gid)
        else:
            os.fchmod(descriptor, 0o666 & ~_umask())
        with os.fdopen(descriptor, "w", encoding="utf-8", errors="replace", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
            moving = _lock_new_file(handle.fileno(), str(target))
        os.replace(temporary, target)
    except BaseException:
        if moving is not None:
            os.close(moving[1])
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    if moving is not None:
        _lock_moved(*moving)
    with contextlib.suppress(OSError):  # make the rename itself durable
        folder_fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(folder_fd)
        finally:
            os.close(folder_fd)


def write_json_atomic(
    path: str | os.PathLike[str],
    data: Any,
    indent: int | None = 2,
    *,
    inputs: Iterable[str | os.PathLike[str] | None] = (),
    replace_input: bool = False,
    lock: bool = True,
) -> None:
    """Write ``data`` as JSON atomically (see :func:`write_text_atomic`); NaN and infinity become null."""
    from gpuscope.schema.core import encode_json  # the package's one JSON writer

    text = encode_json(data, indent=indent).decode("utf-8") + "\n"
    write_text_atomic(path, text, inputs=inputs, replace_input=replace_input, lock=lock)


def _umask() -> int:
    """The process umask, read without changing it (os.umask would race other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


# --- locks -----------------------------------------------------------------------------------

_FileKey = tuple[int, int]  # (st_dev, st_ino): a file, whatever name reaches it


class _Held:
    """A file this process has locked: the descriptor whose ``flock`` holds it, shared by every
    :class:`OutputLock` of that file here (flock belongs to an open file, so a second flock in the
    same process would wait for itself)."""

    __slots__ = ("created", "depth", "fd", "key", "path", "pid")

    def __init__(self, fd: int, key: _FileKey, path: str, created: bool) -> None:
        self.fd, self.key, self.path, self.created, self.depth = fd, key, path, created, 1
        self.pid = os.getpid()  # a forked child inherits the record, not the right to remove the file


_HELD: dict[_FileKey, _Held] = {}
_HELD_LOCK = threading.Lock()
_LOCK_OPEN = os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)


class OutputLock:
    """An exclusive ``flock`` on the output file itself, so it holds for every process that reaches
    the file, by any name (a bind mount, a symlink) and in any environment.

    A file that does not exist yet is created empty to be locked (gpuscope treats an empty output
    as holding nothing) and removed at release if still empty. :func:`write_text_atomic` locks its
    new file before renaming it over the old one, so the lock moves with the name. ``wait_s`` 0
    refuses at once when another process holds the file (one-line :class:`ResourceError`, exit 4);
    more waits up to that long (read-modify-write of a results file). Re-entrant within one process.
    A lock that cannot be taken is a :class:`ResourceError`; only a path where nothing can be
    created (its folder missing or read-only), or that is not a regular file, gets no lock, and the
    write itself says why.
    """

    def __init__(self, path: str | os.PathLike[str], wait_s: float = 0.0) -> None:
        self.path = os.path.realpath(os.fspath(path))
        self.wait_s = wait_s
        self._held: _Held | None = None

    @property
    def file_key(self) -> _FileKey | None:
        """``(st_dev, st_ino)`` of the file locked now (None when not held or nothing to lock)."""
        held = self._held
        return held.key if held is not None else None

    def acquire(self) -> None:
        deadline = time.monotonic() + self.wait_s
        while True:
            with _HELD_LOCK:
                held = _held_at(self.path)
                if held is not None:
                    held.depth += 1
                    self._held = held
                    return
                outcome, holder = self._try_lock()
            if outcome != "busy":
                return
            if time.monotonic() >= deadline:
                who = f"process {holder}" if holder else "another process"
                raise ResourceError(
                    f"{self.path}: {who} is writing this file; wait for it to finish or choose another output"
                )
            time.sleep(0.02)

    def _try_lock(self) -> tuple[str, int | None]:
        """("locked" | "none" | "busy", the holder's pid when busy and known)."""
        for _ in range(100):  # the file replaced or removed between open and lock: try the new one
            opened = _open_to_lock(self.path)
            if opened is None:
                return "none", None
            fd, created = opened
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _lock_holder(os.fstat(fd))
                os.close(fd)
                return "busy", holder
            except OSError as exc:
                os.close(fd)
                raise ResourceError(f"{self.path}: cannot lock this file ({exc.strerror or exc})") from None
            info = os.fstat(fd)
            if not _names(self.path, info):
                os.close(fd)
                continue
            held = _Held(fd, (info.st_dev, info.st_ino), self.path, created)
            _HELD[held.key] = self._held = held
            return "locked", None
        raise ResourceError(f"{self.path}: cannot lock this file (it keeps being replaced)")

    def release(self) -> None:
        with _HELD_LOCK:
            held, self._held = self._held, None
            if held is None:
                return
            held.depth -= 1
            if held.depth == 0:
                _let_go(held)

    def __enter__(self) -> OutputLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _let_go(held: _Held) -> None:
    """Unlock ``held`` (call with ``_HELD_LOCK`` held); a file its lock created and nobody wrote is
    removed first, while still locked, so a waiter sees it gone and retries."""
    _HELD.pop(held.key, None)
    if held.created:
        with contextlib.suppress(OSError):
            info = os.fstat(held.fd)
            if info.st_size == 0 and _names(held.path, info):
                os.unlink(held.path)
    with contextlib.suppress(OSError):
        os.close(held.fd)


@atexit.register
def _let_go_at_exit() -> None:
    """A command that ended by an exception without releasing its lock leaves no empty file."""
    with _HELD_LOCK:
        for held in list(_HELD.values()):
            if held.pid == os.getpid():
                _let_go(held)


def _held_at(path: str) -> _Held | None:
    """The lock this process holds on the file at ``path`` (call with ``_HELD_LOCK`` held)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return _HELD.get((info.st_dev, info.st_ino))


def _open_to_lock(path: str) -> tuple[int, bool] | None:
    """A descriptor of the regular file ``path`` (created empty when absent) and whether this
    call created it; None when ``path`` is not a regular file or cannot be created."""
    for _ in range(100):
        try:
            info: os.stat_result | None = os.stat(path)
        except FileNotFoundError:
            info = None
        except OSError:
            return None  # ENOTDIR, ELOOP, ...: the write reports it
        if info is not None and not stat.S_ISREG(info.st_mode):
            return None
        if info is None:
            try:
                return os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL | _LOCK_OPEN, 0o666), True
            except FileExistsError:
                continue
            except OSError:
                return None  # folder missing, read-only or not ours: no write can happen there either
        try:
            fd = _open_existing(path)
        except FileNotFoundError:
            continue
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd, False
        os.close(fd)
        return None
    return None


def _open_existing(path: str) -> int:
    """``path`` opened without changing it; flock needs a descriptor, not a permission to read."""
    try:
        return os.open(path, os.O_RDONLY | _LOCK_OPEN)
    except PermissionError:
        try:
            return os.open(path, os.O_WRONLY | _LOCK_OPEN)
        except PermissionError as exc:
            raise ResourceError(f"{path}: cannot lock this file ({exc.strerror})") from None


def _names(path: str, info: os.stat_result) -> bool:
    """True when ``path`` still names the file ``info`` describes."""
    try:
        now = os.stat(path)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino)


def _lock_holder(info: os.stat_result) -> int | None:
    """The pid holding a flock on the file ``info`` describes, from /proc/locks (None if unknown)."""
    wanted = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    try:
        with open("/proc/locks", "rb") as handle:
            text = handle.read(4 * _MIB).decode("ascii", "replace")
    except OSError:
        return None
    for line in text.splitlines():
        fields = line.split()  # "1: FLOCK  ADVISORY  WRITE 9962 fe:00:2146759 0 EOF"; waiters have "->"
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted and fields[4].isdigit():
            pid = int(fields[4])
            if pid > 0 and pid != os.getpid():
                return pid
    return None


def _lock_new_file(descriptor: int, target: str) -> tuple[_Held, int] | None:
    """When this process holds ``target``'s lock: a locked duplicate of ``descriptor`` (the file
    about to replace it), so the lock moves with the rename (see :func:`_lock_moved`)."""
    with _HELD_LOCK:
        held = _held_at(target)
        if held is None:
            return None
        duplicate = os.dup(descriptor)
        try:
            fcntl.flock(duplicate, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else has it
        except OSError:
            os.close(duplicate)
            raise
        return held, duplicate


def _lock_moved(held: _Held, duplicate: int) -> None:
    """The rename is done: the lock is now the new file's; the old one (gone) is let go."""
    with _HELD_LOCK:
        info = os.fstat(duplicate)
        _HELD.pop(held.key, None)
        os.close(held.fd)
        held.fd, held.key, held.created = duplicate, (info.st_dev, info.st_ino), False
        _HELD[held.key] = held
