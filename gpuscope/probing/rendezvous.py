"""The pieces of ``gpuscope probe --distributed`` that talk to torchrun: the launch environment,
a JSON mailbox in the job's rendezvous store, heartbeats and rank liveness, and signal handling.

No torch import: the store object comes from ``torch.distributed`` in
:mod:`gpuscope.probing.distributed`; anything with ``set/get/check/add`` (and optionally
``clone``) works, so tests can use a dict-backed fake.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Protocol, TypeVar

from gpuscope.errors import UsageError
from gpuscope.schema.core import decode_json, encode_json

__all__ = ["HEARTBEAT_S", "Launch", "Store", "Mailbox", "Heartbeat", "Liveness", "StopSignals"]

T = TypeVar("T")

#: Seconds between heartbeats (a counter in the store, read on the reader's own monotonic clock).
HEARTBEAT_S = 0.5


@dataclasses.dataclass(frozen=True)
class Launch:
    """What torchrun tells each process (environment variables)."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    restart: int

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Launch:
        """Read RANK, WORLD_SIZE, LOCAL_RANK ...; a one-line :class:`UsageError` when not under torchrun."""
        env = dict(os.environ if env is None else env)
        missing = [name for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if not env.get(name)]
        if missing:
            raise UsageError(
                f"--distributed needs torchrun ({', '.join(missing)} not set); launch with "
                "torchrun --nproc-per-node G -m gpuscope probe --distributed ... (see docs/cluster.md)"
            )
        try:
            rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
            local = int(env.get("LOCAL_RANK", rank))
            local_world = int(env.get("LOCAL_WORLD_SIZE", world))
            restart = int(env.get("TORCHELASTIC_RESTART_COUNT", "0"))
        except ValueError:
            raise UsageError("--distributed: RANK, WORLD_SIZE and LOCAL_RANK must be integers") from None
        if not 0 <= rank < world:
            raise UsageError(f"--distributed: RANK {rank} is outside 0..{world - 1}")
        return cls(rank, world, local, local_world, restart)


class Store(Protocol):
    """What the mailbox needs of torch.distributed's key-value store (``clone`` is optional)."""

    def set(self, key: str, value: str) -> None: ...

    def get(self, key: str) -> bytes: ...

    def check(self, keys: list[str]) -> bool: ...

    def add(self, key: str, amount: int) -> int: ...


class Mailbox:
    """JSON values in the rendezvous store under a per-job prefix, read back as declared types."""

    def __init__(self, store: Store, prefix: str) -> None:
        self._store = store
        self._prefix = prefix

    def clone(self) -> Mailbox:
        """A mailbox on its own connection (for the heartbeat thread) when the store can clone."""
        try:
            return Mailbox(self._store.clone(), self._prefix)  # type: ignore[attr-defined]  # optional
        except Exception:  # noqa: BLE001 - older stores: share the connection (it locks)
            return self

    def put(self, key: str, value: object) -> None:
        """Store ``value`` (structs, numbers, lists: what :func:`encode_json` writes) under ``key``."""
        self._store.set(self._prefix + key, encode_json(value).decode())

    def get(self, key: str, type: type[T]) -> T | None:
        """The value as ``type``, or None when the key is not there yet (never blocks). Raises
        :class:`~gpuscope.errors.BadInputError` when another rank sent something else."""
        if not self._store.check([self._prefix + key]):
            return None
        return decode_json(self._store.get(self._prefix + key), type, f"the rendezvous store's {key}")

    def bump(self, key: str, amount: int = 1) -> int:
        return int(self._store.add(self._prefix + key, amount))


class Heartbeat:
    """Adds 1 to ``hb/<rank>`` every ``HEARTBEAT_S`` from a daemon thread."""

    def __init__(self, mailbox: Mailbox, rank: int) -> None:
        self._mailbox = mailbox.clone()
        self._key = f"hb/{rank}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpuscope-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._mailbox.bump(self._key)
            except Exception:  # noqa: BLE001 - the store went away: the job is ending
                return
            self._stop.wait(HEARTBEAT_S)

    def stop(self) -> None:
        self._stop.set()


class Liveness:
    """Another rank's heartbeats as seen on this rank's monotonic clock (no clock skew)."""

    def __init__(self, mailbox: Mailbox, ranks: list[int]) -> None:
        self._mailbox = mailbox
        now = time.monotonic()
        self._seen: dict[int, tuple[int, float]] = {rank: (-1, now) for rank in ranks}
        self._polled = 0.0

    def poll(self, every_s: float = 0.5, ranks: Iterable[int] | None = None) -> None:
        """Read the heartbeats of ``ranks`` (default: all), at most once per ``every_s`` seconds.
        Only ask :meth:`silent_s` about ranks you poll."""
        now = time.monotonic()
        if now - self._polled < every_s:
            return
        self._polled = now
        for rank in list(self._seen) if ranks is None else sorted(ranks):
            value = self._seen[rank][0]
            current = self._mailbox.bump(f"hb/{rank}", 0)
            if current != value:
                self._seen[rank] = (current, now)

    def silent_s(self, rank: int) -> float:
        return time.monotonic() - self._seen[rank][1]

    def ever_beat(self, rank: int) -> bool:
        return self._seen[rank][0] > 0


class StopSignals:
    """SIGINT/SIGTERM set an event (the probes cancel within about a second) instead of killing."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.name: str | None = None
        self._previous: dict[int, Callable[[int, FrameType | None], object] | int | signal.Handlers | None] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.name = signal.Signals(signum).name
        self.event.set()

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
