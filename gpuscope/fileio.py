"""Reading input files with a size limit and writing outputs without destroying anything.

One home for file handling every command shares:

- :func:`read_bytes_bounded` reads a file of a known kind (results, report, suite, theme,
  settings, telemetry log) in bounded chunks, refusing more than :data:`LIMITS_BYTES` allows,
  so ``/dev/zero`` or a 2 GB sparse file costs one chunk of memory, not a ``MemoryError``.
- :func:`check_output` refuses an ``--output`` that is a FIFO, a device, a symlink to one, or
  one of the command's own input files (same inode); ``-`` means standard output.
- :func:`write_text_atomic` / :func:`write_json_atomic` write through a temporary file whose name
  fits the file system's name limit and a rename, keeping an existing file's permission bits.
- :class:`OutputLock` is an exclusive ``flock`` per output path, held in gpuscope's lock folder
  (``$XDG_RUNTIME_DIR/gpuscope/locks`` or the data folder), so a second writer refuses in one
  line (:class:`~gpuscope.errors.ResourceError`, exit 4) or, for read-modify-write, waits.

Inputs read while a command runs (:func:`command_scope`, entered by ``gpuscope.cli.main``) are
remembered, so an output naming one of them is refused even when the command did not say so.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
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
    "write_text_atomic",
    "write_json_atomic",
    "OutputLock",
    "command_scope",
    "remember_input",
]

_MIB = 1024 * 1024
#: The largest file gpuscope reads, per kind, bytes. A results file is kilobytes to a few MB
#: (a 64-rank cluster run is about 20 MB); a telemetry log is streamed line by line (each line
#: at most 16 MiB) so its limit only stops a runaway file.
LIMITS_BYTES: dict[str, int] = {
    "results": 64 * _MIB,
    "report": 64 * _MIB,
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


def check_output(
    path: str | os.PathLike[str],
    inputs: Iterable[str | os.PathLike[str] | None] = (),
    option: str = "--output",
    *,
    allow_inputs: bool = False,
) -> None:
    """Raise a one-line :class:`UsageError` when ``path`` must not be written: what it names
    (after following symlinks) is a FIFO, a device or a socket, or (unless
    ``allow_inputs``) it is the same file (inode) as one of ``inputs`` or an input already read
    by the running command. ``-`` (standard output) always passes."""
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
    for test, what in _KINDS:
        if test(info.st_mode):
            target = os.path.realpath(label)
            via = f" ({target})" if target != os.path.abspath(label) else ""
            raise UsageError(
                f"{option} {label}{via} is {what}; gpuscope writes regular files only "
                f"(use {option} - for standard output)"
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
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
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


def lock_dir() -> Path:
    """Where output locks live: ``$XDG_RUNTIME_DIR/gpuscope/locks``, else ``<data dir>/locks``."""
    from gpuscope.paths import data_dir

    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK):
        return Path(runtime) / "gpuscope" / "locks"
    return data_dir() / "locks"


#: Locks this process holds: lock file path -> [OutputLock, depth]. flock is per open file, so
#: a second acquire in the same process must reuse the first.
_HELD: dict[str, list[Any]] = {}
_HELD_LOCK = threading.RLock()


class OutputLock:
    """An exclusive lock on an output path, shared by every gpuscope process of this user.

    ``wait_s`` 0 refuses at once when another process holds it (one-line
    :class:`ResourceError`, exit 4); more waits up to that long (read-modify-write of a results
    file). Re-entrant within one process. When the lock folder cannot be created the lock is
    skipped (the write itself reports real problems).
    """

    def __init__(self, path: str | os.PathLike[str], wait_s: float = 0.0) -> None:
        self.path = os.path.realpath(os.fspath(path))
        self.wait_s = wait_s
        digest = hashlib.sha256(os.fsencode(self.path)).hexdigest()[:40]
        self._lock_path = str(lock_dir() / f"{digest}.lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        with _HELD_LOCK:
            held = _HELD.get(self._lock_path)
            if held is not None:
                held[1] += 1
                return
            deadline = time.monotonic() + self.wait_s
            while True:
                fd = self._open()
                if fd is None:
                    return
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = _read_pid(fd)
                    os.close(fd)
                    if time.monotonic() >= deadline:
                        who = f"process {holder}" if holder else "another process"
                        raise ResourceError(
                            f"{self.path}: {who} is writing this file; wait for it to finish or choose another output"
                        ) from None
                    time.sleep(0.02)
                    continue
                except OSError:
                    os.close(fd)
                    return  # flock unsupported here: go on without
                if not _same_file(fd, self._lock_path):
                    os.close(fd)  # removed by its previous holder while we waited: take the new one
                    continue
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()} {self.path}\n".encode("utf-8", "surrogateescape"), 0)
                self._fd = fd
                _HELD[self._lock_path] = [self, 1]
                return

    def _open(self) -> int | None:
        try:
            os.makedirs(os.path.dirname(self._lock_path), mode=0o700, exist_ok=True)
            return os.open(self._lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError:
            return None

    def release(self) -> None:
        with _HELD_LOCK:
            held = _HELD.get(self._lock_path)
            if held is None:
                return
            held[1] -= 1
            if held[1] > 0:
                return
            del _HELD[self._lock_path]
            owner: OutputLock = held[0]
            fd, owner._fd = owner._fd, None
            if fd is None:
                return
            with contextlib.suppress(OSError):
                os.unlink(self._lock_path)  # while still locked: a waiter sees a new file and retries
            os.close(fd)

    def __enter__(self) -> OutputLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _same_file(fd: int, path: str) -> bool:
    try:
        mine, now = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").split()
        return int(text[0]) if text else None
    except (OSError, ValueError):
        return None
