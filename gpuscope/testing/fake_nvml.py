"""A fake NVML library at the C-symbol level, so the real ``pynvml`` bindings run unchanged.

``pynvml`` calls C functions through ``pynvml.nvmlLib`` (``getattr(nvmlLib, "nvmlDeviceGetName")``).
:class:`FakeNvml` provides those symbols: each receives the ctypes arguments the real wrapper
passes (``byref(...)`` objects, string buffers, structures) and returns an NVML return code.
A symbol the fake does not offer (or one removed with :meth:`FakeNvml.remove_symbols`) raises
``AttributeError``, which pynvml turns into ``NVMLError_FunctionNotFound``, as with an old driver.

Typical use::

    clock = FakeClock()                                   # manual; advance() moves it
    fake = FakeNvml.with_gpus([FakeGpu.h200(), FakeGpu.h200()], clock=clock)
    fake.set_load(0, dram_bytes_per_s=2.4e12, nvlink_tx_bytes_per_s=10 * 2**30)
    with install_fake_nvml(fake):
        collector = NvmlCollector(clock=clock)
        collector.open()
        clock.advance(1.0)
        side = collector.sample()

Clocks: without ``clock=`` the fake follows real time (``FakeClock(real=True)``), which suits
benchmarks and demos with a default ``NvmlCollector()``. For exact values use a manual
``FakeClock()`` and give the same clock to the collector (GPM windows, retries and slow
re-reads follow it).

GPUs: ``FakeGpu.h100()``/``h200()`` (Hopper, GPM, 18 NVLink 4 links), ``a100()`` (Ampere, no
GPM, 12 NVLink 3 links), ``l4()`` (PCIe, no NVLink); any field by keyword, e.g.
``FakeGpu.h100(nvlink_links=4, mig=["3g.40gb", "4g.40gb"], processes=[FakeProcess(pid)])``.
An old driver: ``FakeNvml(..., missing_symbols=OLD_DRIVER_MISSING_SYMBOLS)``.

It disagrees with gpuscope the way real drivers do: each model answers NotSupported where the
real board does (``MODEL_NOT_SUPPORTED``: no fan, no L4 memory sensor; nvml.h's 1 s power
average field only from compute capability 8.6, so not on the A100/GA100); PCIe byte counters count
since boot and may be 32-bit (``pcie_counter_bits=32``: unsigned int wrapping at 2**32;
``"ull32"``: typed 64-bit but wrapping) or unknown to the driver (``pcie_counters=False,
pcie_counters_error="InvalidArgument"``, driver 550); ``nvmlGpmMetricsGet`` refuses samples
100 ms or less apart; process lists are written in nvml.h's own entry layout whatever struct
the binding passed; ``pci_bus_id`` can put NVML's numbering out of CUDA's order. It uses no
pynvml name that nvidia-ml-py 12.535.77 (the declared minimum) lacks: see
:mod:`gpuscope.telemetry.nvml.compat`.

Values move with the clock: counters (energy, PCIe, NVLink, DRAM bytes, GPM activity
integrals) integrate the scripted :class:`FakeLoad` rates exactly, so a rate read over any
window equals the scripted rate. Gauges (utilization, power, clocks, temperatures) read the
scripted value, optionally wobbled by ``FakeGpu.wobble`` with a seeded, clock-driven generator.
Change loads with :meth:`FakeNvml.set_load` (it settles the counters first).

Faults: :meth:`FakeNvml.inject` (one symbol, after N calls, for M calls, optionally one GPU),
:meth:`FakeNvml.inject_random` (seeded), :meth:`FakeNvml.lose_gpu` / :meth:`FakeNvml.restore_gpu`
(``GpuIsLost`` on every call that targets that GPU, from a call count or a clock time),
``FakeGpu.errors`` (symbol -> code, permanent), ``FakeGpu.field_errors`` and
``FakeGpu.gpm_metric_errors`` (one field or GPM metric), ``FakeGpu.gpm_no_permission``
(``nvmlGpmSampleGet`` answers NoPermission, as with RmProfilingAdminOnly=1), an error
scripted for ``nvmlDeviceGetPowerUsage`` (``errors`` or :meth:`FakeNvml.inject`) also answers
the power fields of ``nvmlDeviceGetFieldValues`` (the same sensor; not counted as a call),
:meth:`~gpuscope.testing._fake_nvml_events.EventSymbols.inject_xid` (Xid events, now or later, one or a flood),
``FakeNvml(init_error=...)`` (DriverNotLoaded, LibRmVersionMismatch) and
:func:`no_nvml_library` (LibraryNotFound: no libnvidia-ml on the host).

Counts: ``fake.calls[symbol]`` and ``fake.device_calls[(symbol, gpu_index)]`` (snapshots, built
when read; :meth:`FakeNvml.reset_calls` zeroes them).

Cost: the fake is Python standing in for the driver; its cost is not gpuscope's (benchmarks
subtract it: ``benchmarks/bench_telemetry_cost.py``), so it is written to be obviously right, not fast.
Test helpers: :func:`opened_collector`, :func:`reason_of`.
"""

from __future__ import annotations

import contextlib
import random
import threading
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence

import pynvml

from gpuscope.telemetry.nvml.collector import NvmlCollector
from gpuscope.telemetry.values import Reason, Unavailable
from gpuscope.testing._fake_nvml_events import EventState, EventSymbols
from gpuscope.testing._fake_nvml_faults import NO_INIT_NEEDED, FaultsMixin, Injection
from gpuscope.testing._fake_nvml_gpm import GpmMigProcessSymbols, GpmSample
from gpuscope.testing._fake_nvml_model import (
    ENERGY_MJ,
    GIB,
    METER_RATES,
    MIB,
    MIG_TOTALS,
    OLD_DRIVER_MISSING_SYMBOLS,
    ErrorSpec,
    FakeClock,
    FakeGpu,
    FakeLoad,
    FakeMig,
    FakeProcess,
    _Meter,
    add_link_bytes,
    error_code,
)
from gpuscope.testing._fake_nvml_symbols import FakeReturn, SymbolsMixin, handle_address
from gpuscope.testing._fake_nvml_topology import TopologySymbols

__all__ = [
    "FakeClock",
    "FakeLoad",
    "FakeProcess",
    "FakeMig",
    "FakeGpu",
    "FakeNvml",
    "install_fake_nvml",
    "no_nvml_library",
    "opened_collector",
    "reason_of",
    "error_code",
    "OLD_DRIVER_MISSING_SYMBOLS",
    "GIB",
    "MIB",
]


class _Symbol:
    """One C symbol. A plain object so pynvml may set ``restype``/``argtypes`` on it."""

    def __init__(self, fake: FakeNvml, name: str, impl: Callable[..., int | bytes]) -> None:
        self.fake = fake
        self.name = name
        self.impl = impl

    def __call__(self, *args: object) -> int | bytes:
        return self.fake._dispatch(self, args)


class FakeNvml(SymbolsMixin, GpmMigProcessSymbols, EventSymbols, TopologySymbols, FaultsMixin):
    """The fake library: scripted GPUs behind NVML's C symbols. Thread-safe."""

    def __init__(
        self,
        gpus: Iterable[FakeGpu] = (),
        *,
        clock: Callable[[], float] | None = None,
        driver_version: str = "560.35.03",
        nvml_version: str = "12.560.35.03",
        cuda_driver_version: int = 12060,
        init_error: ErrorSpec | None = None,
        missing_symbols: Iterable[str] = (),
    ) -> None:
        self.gpus: list[FakeGpu] = list(gpus)
        self.clock: Callable[[], float] = clock if clock is not None else FakeClock(real=True)
        self.driver_version = driver_version
        self.nvml_version = nvml_version
        self.cuda_driver_version = cuda_driver_version
        self.init_error = None if init_error is None else error_code(init_error)
        self.missing_symbols: set[str] = set(missing_symbols)
        self.initialized = 0
        self._lock = threading.RLock()
        self._calls: Counter[tuple[str, int | None]] = Counter()  # (symbol, GPU index or None) -> calls
        self._injections: list[Injection] = []
        self._random: tuple[float, random.Random, tuple[int, ...], frozenset[str] | None] | None = None
        self._symbols: dict[str, _Symbol] = {}
        self._gpm_samples: dict[int, GpmSample | None] = {}
        self._next_gpm_sample = 0
        #: the event sets (``sets``: open ones, ``created``, ``freed``) and the injected events
        self.events = EventState()
        for index, gpu in enumerate(self.gpus):
            if gpu.uuid is None:
                gpu.uuid = f"GPU-{index:08x}-fake-4e56-8d4f-{zlib.crc32(gpu.name.encode()):012x}"
            if gpu.pci_bus_id is None:
                gpu.pci_bus_id = f"00000000:{0x18 + 0x10 * index:02X}:00.0"
            for mig in gpu.mig:
                if mig.uuid is None:
                    mig.uuid = f"MIG-{index:04x}{mig.gpu_instance_id:04x}-fake-{mig.compute_instance_id:04x}"
                if mig.name is None:
                    mig.name = f"{gpu.name} MIG {mig.profile}"

    @classmethod
    def with_gpus(
        cls,
        gpus: Sequence[FakeGpu],
        *,
        clock: Callable[[], float] | None = None,
        driver_version: str = "560.35.03",
        nvml_version: str = "12.560.35.03",
        cuda_driver_version: int = 12060,
        init_error: ErrorSpec | None = None,
        missing_symbols: Iterable[str] = (),
    ) -> FakeNvml:
        """A fake with these GPUs (index = position). Options as for the constructor."""
        return cls(
            gpus,
            clock=clock,
            driver_version=driver_version,
            nvml_version=nvml_version,
            cuda_driver_version=cuda_driver_version,
            init_error=init_error,
            missing_symbols=missing_symbols,
        )

    # --- time and load ----------------------------------------------------------------------

    def now(self) -> float:
        """The fake's clock, in seconds."""
        return float(self.clock())

    def advance(self, seconds: float) -> None:
        """Advance a manual :class:`FakeClock`."""
        if not isinstance(self.clock, FakeClock):
            raise RuntimeError("this fake's clock cannot be advanced")
        self.clock.advance(seconds)

    def set_load(self, gpu: int, mig: int | None = None, **values: float | int | list[float]) -> None:
        """Change what GPU ``gpu`` (or its MIG device number ``mig``) does, from now on."""
        with self._lock:
            target = self.gpus[gpu] if mig is None else self.gpus[gpu].mig[mig]
            self._settle(self.gpus[gpu], target, self.now())
            for name, value in values.items():
                if not hasattr(target.load, name):
                    raise AttributeError(f"FakeLoad has no field {name!r}")
                setattr(target.load, name, value)

    def _settle(self, gpu: FakeGpu, target: FakeGpu | FakeMig, now: float) -> _Meter:
        """Integrate ``target``'s load up to ``now`` (the clock, as the call read it)."""
        meter = target._meter
        if meter.t is None:
            meter.t = now
            return meter
        dt = now - meter.t
        if dt <= 0:
            return meter
        load = target.load
        counted = METER_RATES if target is gpu else METER_RATES[:MIG_TOTALS]  # a MIG device: DRAM, activities
        for position, name in enumerate(counted):
            rate = float(getattr(load, name))
            if position == ENERGY_MJ:
                rate *= 1000.0  # W -> mJ/s
            meter.totals[position] += rate * dt
        if target is gpu and gpu.nvlink_links:
            add_link_bytes(meter.nvlink_tx_bytes, load.nvlink_tx_bytes_per_s, gpu.nvlink_links, gpu.nvlink_inactive, dt)
            add_link_bytes(meter.nvlink_rx_bytes, load.nvlink_rx_bytes_per_s, gpu.nvlink_links, gpu.nvlink_inactive, dt)
        meter.t = now
        return meter

    def _gauge(self, gpu_index: int, target: FakeGpu | FakeMig, name: str, now: float | None = None) -> float:
        """A load value as a gauge reads it: wobbled by the GPU's seeded generator (at ``now``,
        the clock as the call read it, or read here)."""
        value = float(getattr(target.load, name))
        gpu = self.gpus[gpu_index]
        if gpu.wobble:
            bucket = int((self.now() if now is None else now) * 10)  # a new draw every 0.1 s of fake time
            unit = zlib.crc32(f"{gpu.seed}:{gpu_index}:{name}:{bucket}".encode()) / 0xFFFFFFFF * 2.0 - 1.0
            value *= 1.0 + gpu.wobble * unit
            if name.endswith("_percent"):
                value = min(100.0, max(0.0, value))
        return value

    def remove_symbols(self, *names: str) -> None:
        """Remove C symbols (an older driver); the next lookup raises FunctionNotFound."""
        with self._lock:
            self.missing_symbols.update(names)
            for name in names:
                self._symbols.pop(name, None)
                if pynvml.nvmlLib is self:
                    pynvml._nvmlGetFunctionPointer_cache.pop(name, None)

    @property
    def calls(self) -> Counter[str]:
        """Calls so far by symbol name (a snapshot)."""
        with self._lock:
            totals: Counter[str] = Counter()
            for (name, _), count in self._calls.items():
                totals[name] += count
            return totals

    @property
    def device_calls(self) -> Counter[tuple[str, int | None]]:
        """Calls so far by (symbol name, GPU index or None) (a snapshot)."""
        with self._lock:
            return Counter(self._calls)

    def reset_calls(self) -> None:
        with self._lock:
            self._calls.clear()

    # --- symbol lookup and dispatch ------------------------------------------------------------

    def __getattr__(self, name: str) -> _Symbol:
        """The C symbol ``name`` (one object per fake, so pynvml's ``restype`` sticks), as
        pynvml looks it up with ``getattr(nvmlLib, name)``; AttributeError when it is missing."""
        if not name.startswith("nvml") or name in self.missing_symbols:
            raise AttributeError(name)
        impl = getattr(self, f"_sym_{name}", None)
        if impl is None:
            raise AttributeError(name)
        symbol = self._symbols.get(name)
        if symbol is None:
            symbol = self._symbols[name] = _Symbol(self, name, impl)
        return symbol

    def _dispatch(self, symbol: _Symbol, args: tuple[object, ...]) -> int | bytes:
        """One call of ``symbol``: counted, then answered by a scripted fault or the symbol."""
        name = symbol.name
        with self._lock:
            gpu_index = self._gpu_index_of(name, args)
            self._calls[(name, gpu_index)] += 1
            if self.initialized <= 0 and name not in NO_INIT_NEEDED:
                return pynvml.NVML_ERROR_UNINITIALIZED
            gpu = None if gpu_index is None else self.gpus[gpu_index]
            if gpu is not None:
                self._update_lost(gpu)
                if gpu.lost:
                    return pynvml.NVML_ERROR_GPU_IS_LOST
            code = self._injected(name, gpu_index)
            if code != pynvml.NVML_SUCCESS:
                return code
            if gpu is not None and name in gpu.errors:
                return error_code(gpu.errors[name])
            try:
                return symbol.impl(*args)
            except FakeReturn as early:
                return early.code

    def _gpu_index_of(self, name: str, args: tuple[object, ...]) -> int | None:
        """The GPU a call targets (None: none)."""
        if not args:
            return None
        first = args[0]
        if isinstance(first, pynvml.c_nvmlDevice_t):
            index = (handle_address(first) >> 16) - 1
        elif name == "nvmlDeviceGetHandleByIndex_v2" and isinstance(first, int | pynvml.c_uint):
            index = first if isinstance(first, int) else int(first.value)
        else:
            return None
        return index if 0 <= index < len(self.gpus) else None


@contextlib.contextmanager
def install_fake_nvml(fake: FakeNvml) -> Iterator[FakeNvml]:
    """Make pynvml talk to ``fake`` inside the ``with`` block; restores pynvml afterwards."""
    with pynvml.libLoadLock:
        saved = (pynvml.nvmlLib, dict(pynvml._nvmlGetFunctionPointer_cache), pynvml._nvmlLib_refcount)
        pynvml.nvmlLib = fake
        pynvml._nvmlGetFunctionPointer_cache.clear()
        pynvml._nvmlLib_refcount = 0
    try:
        yield fake
    finally:
        with pynvml.libLoadLock:
            pynvml.nvmlLib, cache, pynvml._nvmlLib_refcount = saved
            pynvml._nvmlGetFunctionPointer_cache.clear()
            pynvml._nvmlGetFunctionPointer_cache.update(cache)


@contextlib.contextmanager
def opened_collector(
    fake: FakeNvml, clock: Callable[[], float] | None = None, *, check_open: bool = True, **options: bool
) -> Iterator[NvmlCollector]:
    """A real NvmlCollector on ``fake`` (installed for the block) with ``fake``'s clock unless
    ``clock`` is given, opened (``check_open``: asserting that NVML opened) and closed after."""
    with install_fake_nvml(fake):
        collector = NvmlCollector(clock=clock or fake.clock, **options)
        opened = collector.open()
        assert opened is None or not check_open, f"the collector did not open: {opened}"
        try:
            yield collector
        finally:
            collector.close()


def reason_of(value: object) -> Reason:
    """The reason of an ``Unavailable`` (an AssertionError naming ``value`` for anything else)."""
    assert isinstance(value, Unavailable), f"expected unavailable, got {value!r}"
    return value.reason


@contextlib.contextmanager
def no_nvml_library() -> Iterator[None]:
    """Inside the block, loading libnvidia-ml fails: ``nvmlInit`` raises LibraryNotFound."""

    def _not_found() -> None:
        if pynvml.nvmlLib is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    with pynvml.libLoadLock:
        saved = (pynvml.nvmlLib, dict(pynvml._nvmlGetFunctionPointer_cache), pynvml._nvmlLib_refcount)
        saved_loader = pynvml._LoadNvmlLibrary
        pynvml.nvmlLib = None
        pynvml._nvmlGetFunctionPointer_cache.clear()
        pynvml._nvmlLib_refcount = 0
        pynvml._LoadNvmlLibrary = _not_found
    try:
        yield None
    finally:
        with pynvml.libLoadLock:
            pynvml._LoadNvmlLibrary = saved_loader
            pynvml.nvmlLib, cache, pynvml._nvmlLib_refcount = saved
            pynvml._nvmlGetFunctionPointer_cache.clear()
            pynvml._nvmlGetFunctionPointer_cache.update(cache)
