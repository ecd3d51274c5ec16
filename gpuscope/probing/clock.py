"""The CPU's cores as the compiled probes use them: one logical CPU per physical core, worker
threads pinned to them, and the core clock measured with a chain of dependent integer ops (for
the datasheet peak when cpufreq does not expose the maximum, as in most VMs). A leaf of probing/:
the environment, the memory kernels and the peaks all read it, it reads none of them.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from gpuscope.probing.errors import ProbeSkipped
from gpuscope.probing.jit import load_numba
from gpuscope.telemetry.cpuinfo import cpu_info
from gpuscope.telemetry.values import Reason, Unavailable

__all__ = [
    "CLOCK_RULE",
    "ClockEstimate",
    "CorePinner",
    "clock_mhz_from_chain",
    "core_cpus",
    "measure_clock",
    "peak_threads",
]

CLOCK_RULE = (
    "dependent integer add/xor chain, 1 cycle latency per op: MHz = iterations x ops per iteration / s / 1e6, "
    "s the thread's own CPU time; one chain per physical core at once, best of N"
)


def clock_mhz_from_chain(iterations: int, ops_per_iteration: int, seconds: float, cycles_per_op: float = 1.0) -> float:
    """The core clock (MHz) a dependent chain of ``iterations x ops_per_iteration`` ops of
    ``cycles_per_op`` latency each implies when it took ``seconds``."""
    if seconds <= 0 or iterations <= 0 or ops_per_iteration <= 0:
        raise ValueError("iterations, ops per iteration and seconds must be > 0")
    return iterations * ops_per_iteration * cycles_per_op / seconds / 1e6


def peak_threads() -> int:
    """One thread per physical core this process may run on."""
    physical = cpu_info().physical_cores or os.cpu_count() or 1
    try:
        allowed = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        allowed = physical
    return max(1, min(physical, allowed))


@dataclass(frozen=True)
class ClockEstimate:
    """The core clock measured by :func:`measure_clock` (MHz), and how."""

    mhz: float
    threads: int
    iterations: int
    ops_per_iteration: int
    samples_s: list[float] = field(default_factory=list)
    rule: str = CLOCK_RULE


def measure_clock(threads: int | None = None, samples: int = 7, sample_s: float = 0.01) -> ClockEstimate | Unavailable:
    """The core clock from :func:`~gpuscope.probing.cpu_kernels.fma.add_xor_chain` run on
    ``threads`` cores at once (default: every physical core), best of ``samples`` timings of about
    ``sample_s`` each; :class:`Unavailable` when numba cannot be used."""
    numba = load_numba()
    if isinstance(numba, Unavailable):
        return numba
    try:
        from gpuscope.probing.cpu_kernels.fma import CHAIN_OPS, add_xor_chain
    except ProbeSkipped as exc:
        return Unavailable(Reason.NOT_SUPPORTED, str(exc))
    count = threads or peak_threads()
    add_xor_chain(10, 3, 5, 1)  # compile (or load from the cache) outside the timing
    iterations = 100_000

    def chain(n: int, salt: int) -> float:
        """The thread's own CPU time (CLOCK_THREAD_CPUTIME_ID): time the scheduler gave other
        processes is not counted, so a busy machine does not slow the clock it reports."""
        started = time.thread_time()
        add_xor_chain(n, 3 + salt, 5, 1)
        return time.thread_time() - started

    with ThreadPoolExecutor(
        max_workers=count, thread_name_prefix="gpuscope-clock", initializer=CorePinner(count)
    ) as team:

        def timed(n: int) -> list[float]:
            """Each thread's own time: a core another process took slows only its thread."""
            return [future.result() for future in [team.submit(chain, n, i) for i in range(count)]]

        elapsed = min(timed(iterations))
        while elapsed < sample_s and iterations < 1 << 34:
            iterations = int(iterations * max(2.0, 1.2 * sample_s / max(elapsed, 1e-6)))
            elapsed = min(timed(iterations))
        times = [time_s for _ in range(samples) for time_s in timed(iterations)]
    best = min(times)  # the clock is one per core: the least disturbed chain tells it
    return ClockEstimate(clock_mhz_from_chain(iterations, CHAIN_OPS, best), count, iterations, CHAIN_OPS, times)


def core_cpus(allowed: set[int] | None = None) -> list[int]:
    """One logical CPU per physical core (the lowest-numbered sibling), among ``allowed`` (default:
    the CPUs this process may run on), from /sys's topology; [] when it cannot be read."""
    import os

    try:
        allowed = set(os.sched_getaffinity(0)) if allowed is None else allowed
    except (AttributeError, OSError):
        return []
    seen: dict[tuple[str, str], int] = {}
    for cpu in sorted(allowed):
        topology = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
        try:
            with open(topology + "physical_package_id") as package, open(topology + "core_id") as core:
                key = (package.read().strip(), core.read().strip())
        except OSError:
            return []
        seen.setdefault(key, cpu)
    return sorted(seen.values())


class CorePinner:
    """A thread-pool initializer that pins each new worker to its own physical core (as
    likwid-bench and OMP_PROC_BIND do), so a worker stays on the core whose caches hold its
    arrays; does nothing where affinity cannot be set or there are fewer cores than workers."""

    def __init__(self, workers: int) -> None:
        import threading

        cpus = core_cpus()
        self.cpus = cpus if len(cpus) >= workers else []
        self._next = 0
        self._lock = threading.Lock()

    def __call__(self) -> None:
        import os

        with self._lock:
            if not self.cpus:
                return
            cpu = self.cpus[self._next % len(self.cpus)]
            self._next += 1
        try:
            os.sched_setaffinity(0, {cpu})  # Linux: 0 is the calling thread
        except (AttributeError, OSError):
            pass
