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

Cost: the fake runs inside the process it serves (the TUI's idle benchmark measures it too), so
it keeps per-call work small, as a C library would: symbols are class attributes, not a
``__getattr__`` (which would put every ``self.x`` in the fake on CPython's slow attribute path);
each symbol counts its own calls in a list (no Counter update per call); a call's device handle
is decoded once (as the call arrives); the fault and loss machinery is skipped while nothing is
injected or scheduled; a meter integrates its rates in one ``map`` pass and keeps one NVLink
total for all links while they count alike (:class:`~gpuscope.testing._fake_nvml_model.LinkBytes`);
field-value and GPM entries and the utilization, memory and temperature structures are read and
written with ``struct`` or memoryview in nvml.h's layout (not through pynvml's Python-level structure
attributes); ``nvmlGpmMetricsGet`` follows a plan cached per list of metric ids (and the GPU's links
and metric errors); a symbol whose answer needs the time more than once reads the clock once (a C
call is one instant); calling a symbol object is its whole dispatch. None of this changes a value:
the same clock and seed give the same answers.
Test helpers: :func:`opened_collector`, :func:`reason_of`.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import repeat
from operator import add, attrgetter, mul
from typing import TYPE_CHECKING, Any

import pynvml

from gpuscope.telemetry.values import Reason, Unavailable
from gpuscope.testing._fake_nvml_events import EventSymbols
from gpuscope.testing._fake_nvml_faults import NO_INIT_NEEDED, FaultsMixin, Injection
from gpuscope.testing._fake_nvml_gpm import GpmMigProcessSymbols
from gpuscope.testing._fake_nvml_model import (
    ENERGY_MJ,
    GIB,
    METER_RATES,
    MIB,
    MIG_TOTALS,
    OLD_DRIVER_MISSING_SYMBOLS,
    FakeClock,
    FakeGpu,
    FakeLoad,
    FakeMig,
    FakeProcess,
    _Meter,
    error_code,
)
from gpuscope.testing._fake_nvml_symbols import (
    FakeReturn,
    SymbolsMixin,
    handle_address,
    unpack_pointer,
)

if TYPE_CHECKING:
    from gpuscope.telemetry.nvml.collector import NvmlCollector

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
    """One C symbol. A plain object so pynvml may set ``restype``/``argtypes`` on it. Calling
    it is the whole dispatch (no further Python call before the implementation: each costs about
    as much as a short symbol's own work); :meth:`FakeNvml.measure_cpu` makes the symbols
    :class:`_TimedSymbol`."""

    def __init__(self, fake: FakeNvml, name: str, impl: Callable[..., int], counts: list[int]) -> None:
        self.fake = fake
        self.name = name
        self.impl = impl
        #: calls so far with no GPU, on GPU 0, GPU 1, ... (:attr:`FakeNvml.calls` adds them up)
        self.counts = counts

    def __call__(self, *args: Any) -> Any:
        fake, name = self.fake, self.name
        with fake._lock:
            gpu_index = fake._gpu_index_of(name, args)  # the handle, decoded once for the call
            counts = self.counts
            slot = 0 if gpu_index is None else gpu_index + 1
            if slot >= len(counts):  # a GPU added after the symbol was first looked up
                counts.extend([0] * (slot + 1 - len(counts)))
            counts[slot] += 1
            if fake.initialized <= 0 and name not in NO_INIT_NEEDED:
                return pynvml.NVML_ERROR_UNINITIALIZED
            gpu = None if gpu_index is None else fake.gpus[gpu_index]
            if gpu is not None:
                if gpu._lose_after_calls is not None or gpu._lose_at_s is not None or gpu._restore_at_s is not None:
                    fake._update_lost(gpu)
                if gpu.lost:
                    return pynvml.NVML_ERROR_GPU_IS_LOST
            if fake._injections or fake._random is not None:
                code = fake._injected(name, gpu_index)
                if code != _SUCCESS:
                    return code
            if gpu is not None and name in gpu.errors:
                return error_code(gpu.errors[name])
            try:
                return self.impl(*args)
            except FakeReturn as early:
                return early.code
            finally:
                fake._handle = None


class _TimedSymbol(_Symbol):
    """A symbol whose calls add their time to :attr:`FakeNvml.cpu_ns` (after :meth:`FakeNvml.measure_cpu`)."""

    def __call__(self, *args: Any) -> Any:
        return self.fake._timed_dispatch(self, args)


#: a meter's rates from a load, in METER_RATES order (one C call)
_GPU_RATES = attrgetter(*METER_RATES)
_MIG_RATES = attrgetter(*METER_RATES[:MIG_TOTALS])


_DEVICE = pynvml.c_nvmlDevice_t
_SUCCESS = pynvml.NVML_SUCCESS


class FakeNvml(SymbolsMixin, GpmMigProcessSymbols, EventSymbols, FaultsMixin):
    """The fake library: scripted GPUs behind NVML's C symbols. Thread-safe."""

    def __init__(
        self,
        gpus: Iterable[FakeGpu] = (),
        *,
        clock: Callable[[], float] | None = None,
        driver_version: str = "560.35.03",
        nvml_version: str = "12.560.35.03",
        cuda_driver_version: int = 12060,
        init_error: int | str | type | None = None,
        missing_symbols: Iterable[str] = (),
    ) -> None:
        self.gpus: list[FakeGpu] = list(gpus)
        self.clock: Callable[[], float] = clock if clock is not None else FakeClock(real=True)
        self.driver_version = driver_version
        self.nvml_version = nvml_version
        self.cuda_driver_version = cuda_driver_version
        self.init_error = None if init_error is None else error_code(init_error)
        self.missing_symbols: set[str] = set(missing_symbols)
        #: symbol -> calls with no GPU, on GPU 0, GPU 1, ... (kept by the symbols themselves:
        #: two Counter updates a call cost more than the rest of a short call)
        self._call_counts: dict[str, list[int]] = {}
        self.initialized = 0
        #: Time (ns) spent inside the fake's symbols, by whichever thread called them; None until
        #: :meth:`measure_cpu` (benchmarks: the simulation's share of gpuscope's cost)
        self.cpu_ns: int | None = None
        self._cpu_file: str | None = None
        self._cpu_file_due_ns = 0
        self._lock = threading.RLock()
        self._injections: list[Injection] = []
        self._random: tuple[float, random.Random, tuple[int, ...], frozenset[str] | None] | None = None
        self._symbols: dict[str, _Symbol] = {}
        #: the device handle of the call in progress and its address (decoded once per call)
        self._handle: Any = None
        self._address = 0
        self._wobble_crc: dict[tuple[int, int, str], int] = {}
        self._wobble_bucket: int | None = None
        self._wobble_bucket_text = b""
        self._gpm_samples: dict[int, Any] = {}
        self._next_gpm_sample = 0
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
    def with_gpus(cls, gpus: Sequence[FakeGpu], **options: Any) -> FakeNvml:
        """A fake with these GPUs (index = position). Options as for the constructor."""
        return cls(gpus, **options)

    # --- time and load ----------------------------------------------------------------------

    def now(self) -> float:
        """The fake's clock, in seconds."""
        return float(self.clock())

    def advance(self, seconds: float) -> None:
        """Advance a manual :class:`FakeClock`."""
        advance = getattr(self.clock, "advance", None)
        if advance is None:
            raise RuntimeError("this fake's clock cannot be advanced")
        advance(seconds)

    def set_load(self, gpu: int, mig: int | None = None, **values: Any) -> None:
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
        if target is gpu:
            rates = list(_GPU_RATES(load))
            rates[ENERGY_MJ] *= 1000.0  # W -> mJ/s
            meter.totals = list(map(add, meter.totals, map(mul, rates, repeat(dt))))
            links = gpu.nvlink_links
            if links:
                inactive = gpu.nvlink_inactive
                meter.nvlink_tx_bytes.add(load.nvlink_tx_bytes_per_s, links, inactive, dt)
                meter.nvlink_rx_bytes.add(load.nvlink_rx_bytes_per_s, links, inactive, dt)
        else:  # a MIG device: DRAM and activities only
            meter.totals[:MIG_TOTALS] = map(add, meter.totals, map(mul, _MIG_RATES(load), repeat(dt)))
        meter.t = now
        return meter

    def _gauge(self, gpu_index: int, target: FakeGpu | FakeMig, name: str, now: float | None = None) -> float:
        """A load value as a gauge reads it: wobbled by the GPU's seeded generator (at ``now``,
        the clock as the call read it, or read here)."""
        value = float(getattr(target.load, name))
        gpu = self.gpus[gpu_index]
        if gpu.wobble:
            bucket = int((self.now() if now is None else now) * 10)  # a new draw every 0.1 s of fake time
            if bucket != self._wobble_bucket:  # every gauge of a sample draws from the same bucket
                self._wobble_bucket, self._wobble_bucket_text = bucket, str(bucket).encode()
            # crc32 of "seed:index:name:bucket", continued from the crc of its constant start
            start = self._wobble_crc.get((gpu.seed, gpu_index, name))
            if start is None:
                start = self._wobble_crc[(gpu.seed, gpu_index, name)] = zlib.crc32(
                    f"{gpu.seed}:{gpu_index}:{name}:".encode()
                )
            unit = zlib.crc32(self._wobble_bucket_text, start) / 0xFFFFFFFF * 2.0 - 1.0
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
            return Counter({name: sum(counts) for name, counts in self._call_counts.items() if any(counts)})

    @property
    def device_calls(self) -> Counter[tuple[str, int | None]]:
        """Calls so far by (symbol name, GPU index or None) (a snapshot)."""
        with self._lock:
            return Counter(
                {
                    (name, None if slot == 0 else slot - 1): count
                    for name, counts in self._call_counts.items()
                    for slot, count in enumerate(counts)
                    if count
                }
            )

    def reset_calls(self) -> None:
        with self._lock:
            for counts in self._call_counts.values():
                counts[:] = [0] * len(counts)

    # --- symbol lookup and dispatch ------------------------------------------------------------

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _add_symbol_slots(cls)

    def _symbol(self, name: str) -> _Symbol:
        """The C symbol ``name`` (one object per fake), or AttributeError when it is missing."""
        if name in self.missing_symbols:
            raise AttributeError(name)
        symbol = self._symbols.get(name)
        if symbol is None:
            counts = self._call_counts.setdefault(name, [0] * (len(self.gpus) + 1))
            kind = _Symbol if self.cpu_ns is None else _TimedSymbol
            symbol = self._symbols[name] = kind(self, name, getattr(self, "_sym_" + name), counts)
        return symbol

    def _gpu_index_of(self, name: str, args: tuple[Any, ...]) -> int | None:
        """The GPU a call targets (None: none); a device handle's address is kept in
        ``_address`` for :meth:`_target` during the call."""
        if not args:
            return None
        first = args[0]
        if type(first) is _DEVICE or isinstance(first, _DEVICE):
            # the usual call: a device handle's own bytes, one unpack (handle_address for a subclass)
            address = unpack_pointer(first)[0] if type(first) is _DEVICE else handle_address(first)
            self._handle, self._address = first, address
            index = (address >> 16) - 1
            return index if 0 <= index < len(self.gpus) else None
        if name == "nvmlDeviceGetHandleByIndex_v2":
            index = int(getattr(first, "value", first))
            return index if 0 <= index < len(self.gpus) else None
        return None

    # --- the simulation's own cost (benchmarks) -------------------------------------------------

    def measure_cpu(self, path: str | os.PathLike[str] | None = None) -> None:
        """Count the time spent inside the fake's symbols from now on (:attr:`cpu_ns`), and when
        ``path`` is given, write it there (``<ns>``, replaced whole) at most twice a second, so a
        benchmark of the whole process can subtract what the simulation costs: the fake is Python
        standing in for the driver, and its cost is not gpuscope's.

        The symbols neither sleep nor wait on I/O, so the time inside them is CPU time unless the
        thread is preempted mid-call; it is read with the monotonic clock because a thread CPU
        clock is a system call per read on VMs (two per NVML call cost 0.15 % of a core with 8
        GPUs, inflating what it measured)."""
        with self._lock:
            self.cpu_ns = 0
            for symbol in self._symbols.values():
                symbol.__class__ = _TimedSymbol
            self._cpu_file = None if path is None else os.fspath(path)
            self._cpu_file_due_ns = 0

    def _timed_dispatch(self, symbol: _Symbol, args: tuple[Any, ...]) -> Any:
        started_ns = time.perf_counter_ns()
        try:
            return _Symbol.__call__(symbol, *args)
        finally:
            ended_ns = time.perf_counter_ns()
            with self._lock:
                self.cpu_ns = (self.cpu_ns or 0) + ended_ns - started_ns
                if self._cpu_file is not None and ended_ns >= self._cpu_file_due_ns:
                    self._cpu_file_due_ns = ended_ns + 500_000_000
                    self._write_cpu_file(self._cpu_file, self.cpu_ns)

    @staticmethod
    def _write_cpu_file(path: str, cpu_ns: int) -> None:
        partial = f"{path}.partial"
        try:
            with open(partial, "w") as handle:
                handle.write(f"{cpu_ns}\n")
            os.replace(partial, path)  # a reader never sees half a number
        except OSError:
            pass  # a benchmark aid: never a reason for a sample to fail


class _SymbolSlot:
    """Class attribute ``nvml<Name>``: the fake's symbol object, looked up by ``getattr`` as
    pynvml does. Class attributes rather than ``__getattr__``: a class with ``__getattr__`` has
    every ``self.x`` inside the fake take CPython's slow, unspecialized attribute path."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, fake: FakeNvml | None, owner: type | None = None) -> Any:
        return self if fake is None else fake._symbol(self.name)


def _add_symbol_slots(cls: type) -> None:
    """A :class:`_SymbolSlot` for each ``_sym_nvml<Name>`` method of ``cls`` without one."""
    for attr in dir(cls):
        if attr.startswith("_sym_nvml") and not hasattr(cls, attr[5:]):
            setattr(cls, attr[5:], _SymbolSlot(attr[5:]))


_add_symbol_slots(FakeNvml)


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
    from gpuscope.telemetry.nvml.collector import NvmlCollector

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
