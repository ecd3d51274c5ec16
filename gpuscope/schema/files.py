"""The bytes of an input file with one-line errors, through :func:`gpuscope.fileio.read_bytes_bounded`
(bounded chunks, a size limit per file kind); the decoders in :mod:`gpuscope.schema` take bytes."""

from __future__ import annotations

import os

from gpuscope.errors import BadInputError
from gpuscope.fileio import FileTooLargeError, read_bytes_bounded

__all__ = ["read_bytes"]


def read_bytes(path: str | os.PathLike[str], expected: str, kind: str = "results") -> bytes:
    """The bytes of ``path`` (``kind`` is a key of ``gpuscope.fileio.LIMITS_BYTES``). Raises
    :class:`BadInputError`: missing, a directory, unreadable, too large, empty."""
    source = os.fspath(path)
    try:
        raw = read_bytes_bounded(source, kind)
    except FileNotFoundError:
        raise BadInputError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise BadInputError(f"{source}: is a directory, expected {expected}") from None
    except PermissionError:
        raise BadInputError(f"{source}: permission denied") from None
    except FileTooLargeError as exc:
        raise BadInputError(str(exc)) from None
    except OSError as exc:
        raise BadInputError(f"{source}: cannot read ({exc.strerror or exc})") from None
    if not raw.strip():
        raise BadInputError(f"{source}: file is empty")
    return raw
