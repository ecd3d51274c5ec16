"""Faults of :class:`gpuscope.testing.fake_nvml.FakeNvml`: injected errors (one symbol, after N
calls, for M calls, optionally one GPU; or random and seeded) and GPUs that fall off the bus and
come back. The dispatcher consults them only while something is injected or scheduled."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pynvml

from gpuscope.testing._fake_nvml_model import ErrorSpec, FakeGpu, error_code

__all__ = ["FaultsMixin", "Injection", "NO_INIT_NEEDED"]

_SUCCESS = pynvml.NVML_SUCCESS
_POWER_SYMBOL = "nvmlDeviceGetPowerUsage"
#: symbols that answer before nvmlInit (and that random faults spare)
NO_INIT_NEEDED = frozenset({"nvmlInitWithFlags", "nvmlInit_v2", "nvmlInit", "nvmlErrorString"})


@dataclass
class Injection:
    """One scripted error: :meth:`FaultsMixin.inject`'s arguments and what is left of them."""

    symbol: str
    code: int
    gpu: int | None
    skip: int
    remaining: int | None  # None: forever

    def targets(self, symbol: str, gpu_index: int | None) -> bool:
        """Whether a call of ``symbol`` on GPU ``gpu_index`` is one this injection counts."""
        return self.symbol == symbol and (self.gpu is None or self.gpu == gpu_index)


class FaultsMixin:
    """Error injection and lost GPUs (mixed into FakeNvml)."""

    # set by FakeNvml.__init__
    gpus: list[FakeGpu]
    _lock: threading.RLock
    _injections: list[Injection]
    _random: tuple[float, random.Random, tuple[int, ...], frozenset[str] | None] | None

    if TYPE_CHECKING:  # defined by FakeNvml

        def now(self) -> float: ...

    def inject(
        self,
        symbol: str,
        error: ErrorSpec,
        *,
        gpu: int | None = None,
        after_calls: int = 0,
        count: int | None = 1,
    ) -> None:
        """Make ``symbol`` return ``error``: skip ``after_calls`` matching calls, then fail
        ``count`` calls (``None``: every call). ``gpu`` limits it to calls on that GPU."""
        with self._lock:
            self._injections.append(Injection(symbol, error_code(error), gpu, after_calls, count))

    def inject_random(
        self,
        probability: float,
        *,
        seed: int = 0,
        errors: Sequence[ErrorSpec] = ("Unknown", "Timeout"),
        symbols: Iterable[str] | None = None,
    ) -> None:
        """Fail each call (init, shutdown and error strings excepted) with ``probability``,
        with an error drawn from ``errors``; deterministic for a given seed and call order."""
        with self._lock:
            codes = tuple(error_code(error) for error in errors)
            self._random = (probability, random.Random(seed), codes, None if symbols is None else frozenset(symbols))

    def _power_fault(self, gpu_index: int, gpu: FakeGpu) -> int:
        """The error scripted for ``nvmlDeviceGetPowerUsage`` on this GPU (``FakeGpu.errors``, or
        an injection its next call would meet, not counted as a call), else success: the power
        fields of a field-values batch answer it too, as readings of the same sensor would."""
        error = gpu.errors.get(_POWER_SYMBOL)
        if error is not None:
            return error_code(error)
        for injection in self._injections:
            if (
                injection.targets(_POWER_SYMBOL, gpu_index)
                and injection.skip <= 0
                and (injection.remaining is None or injection.remaining > 0)
            ):
                return injection.code
        return _SUCCESS

    def clear_injections(self) -> None:
        with self._lock:
            self._injections.clear()
            self._random = None

    def lose_gpu(
        self,
        index: int,
        *,
        after_calls: int | None = None,
        at_time_s: float | None = None,
        until_time_s: float | None = None,
    ) -> None:
        """GPU ``index`` falls off the bus: now, after ``after_calls`` more calls on it, or when
        the clock reaches ``at_time_s``. Every call on it (and its MIG devices) then answers
        GpuIsLost, until the clock reaches ``until_time_s`` (None: until :meth:`restore_gpu`)."""
        with self._lock:
            gpu = self.gpus[index]
            if after_calls is None and at_time_s is None:
                gpu.lost = True
            gpu._lose_after_calls = after_calls
            gpu._lose_at_s = at_time_s
            gpu._restore_at_s = until_time_s

    def restore_gpu(self, index: int, *, at_time_s: float | None = None) -> None:
        """GPU ``index`` answers again (now, or when the clock reaches ``at_time_s``)."""
        with self._lock:
            gpu = self.gpus[index]
            gpu._lose_after_calls = None
            gpu._lose_at_s = None
            if at_time_s is None:
                gpu.lost = False
                gpu._restore_at_s = None
            else:
                gpu._restore_at_s = at_time_s

    def _update_lost(self, gpu: FakeGpu) -> None:
        """Apply a loss or a restore scheduled by :meth:`lose_gpu` / :meth:`restore_gpu`."""
        if gpu._lose_after_calls is None and gpu._lose_at_s is None and gpu._restore_at_s is None:
            return
        now = self.now()
        if gpu._restore_at_s is not None and now >= gpu._restore_at_s:
            gpu.lost = False
            gpu._restore_at_s = None
        if gpu._lose_at_s is not None and now >= gpu._lose_at_s:
            gpu.lost = True
            gpu._lose_at_s = None
        if gpu._lose_after_calls is not None:
            if gpu._lose_after_calls <= 0:
                gpu.lost = True
                gpu._lose_after_calls = None
            else:
                gpu._lose_after_calls -= 1

    def _injected(self, name: str, gpu_index: int | None) -> int:
        for injection in self._injections:
            if not injection.targets(name, gpu_index):
                continue
            if injection.skip > 0:
                injection.skip -= 1
                continue
            if injection.remaining is None:
                return injection.code
            if injection.remaining > 0:
                injection.remaining -= 1
                return injection.code
        if self._random is not None and name not in NO_INIT_NEEDED and name != "nvmlShutdown":
            probability, rng, codes, symbols = self._random
            if (symbols is None or name in symbols) and rng.random() < probability:
                return rng.choice(codes)
        return _SUCCESS
