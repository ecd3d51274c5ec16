"""Test-side launcher that torchrun runs in place of ``-m gpuscope`` to break one rank on purpose.

    python -m torch.distributed.run ... tests/_distributed_faults.py ACTION:RANK probe --distributed ...

Every rank runs the real ``gpuscope`` entry point with the remaining arguments. On rank RANK
(torchrun's ``RANK``), right after it publishes its first measurement to the rendezvous store:
``kill`` SIGKILLs the process; ``hang`` blocks the probe thread for good, as a stuck kernel would
(the cancel event cannot reach it), and lets SIGTERM kill the process, as SIGKILL kills a stuck one.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

from gpuscope.cli import main
from gpuscope.probing import distributed, rendezvous


def _break_after_first_measurement(action: str, rank: int) -> None:
    put = rendezvous.Mailbox.put

    def put_then_fault(self: rendezvous.Mailbox, key: str, value: Any) -> None:
        put(self, key, value)
        if key != f"mcount/{rank}" or value != 1:
            return
        if action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        threading.Event().wait()  # hang: the probe thread never returns

    rendezvous.Mailbox.put = put_then_fault  # type: ignore[method-assign]


class _DieOnSigterm(rendezvous.StopSignals):
    """The hanging rank's signals: SIGINT is handled as usual, SIGTERM kills the process."""

    def __init__(self) -> None:
        super().__init__()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def run(fault: str, argv: list[str]) -> int:
    action, _, target = fault.partition(":")
    if action not in ("kill", "hang") or not target.isdigit():
        raise SystemExit(f"_distributed_faults.py: {fault!r}: expected kill:RANK or hang:RANK")
    if int(target) == int(os.environ.get("RANK", "-1")):
        _break_after_first_measurement(action, int(target))
        if action == "hang":
            distributed.StopSignals = _DieOnSigterm  # type: ignore[attr-defined]
    return main(argv)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2:]))
