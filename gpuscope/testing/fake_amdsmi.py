"""A fake ``libamd_smi.so`` at the C-symbol level, so the real ``amdsmi`` Python package runs unchanged.

``amdsmi`` (AMD's binding, ``amdsmi_wrapper.py``) loads the library with ``ctypes.CDLL`` when it
is imported and binds every C symbol there (``_libraries['libamd_smi.so'].amdsmi_get_gpu_activity``).
So the lowest level a fake can stand in is that load: :func:`install_fake_amdsmi` imports
``amdsmi`` afresh while ``ctypes.CDLL`` answers :class:`FakeAmdSmi` for ``libamd_smi.so`` (every
other library loads as usual), and the package's own wrappers (``amdsmi_get_gpu_metrics_info``...)
then fill their ctypes structures from the fake. A symbol the fake leaves out
(``missing_symbols``) fails the import the way an older ``libamd_smi.so`` fails a newer package.

Scripted like the fake NVML (:mod:`gpuscope.testing.fake_nvml`): :class:`FakeAmdGpu` models
(``mi300x``, ``mi325x``, ``mi250x`` with two dies per card), loads that counters integrate over a
:class:`~gpuscope.testing.fake_nvml.FakeClock`, a lost GPU, no permission. What the real driver
marks unsupported in its metrics table (all bits set) the fake marks the same way, e.g. no edge
sensor on MI300X and no power reading on the second die of an MI250X.

Selected from the environment with ``GPUSCOPE_FAKE_AMDSMI`` (:func:`install_from_environment`)::

    GPUSCOPE_FAKE_AMDSMI="gpus=8xmi300x"        # also 4xmi250x (8 dies), mi325x; default 8xmi300x
    GPUSCOPE_FAKE_AMDSMI="gpus=8xmi300x,lose=3@2.0,busy=0"
    GPUSCOPE_FAKE_AMDSMI="noperm=1"             # amdsmi_init answers AMDSMI_STATUS_NO_PERM
    GPUSCOPE_FAKE_AMDSMI="old=1"                # a libamd_smi.so older than the package
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import io
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from gpuscope.errors import UsageError
from gpuscope.testing._fake_nvml_model import GIB, FakeClock

__all__ = [
    "ENV_VAR",
    "FakeAmdGpu",
    "FakeAmdProcess",
    "FakeAmdSmi",
    "install_fake_amdsmi",
    "install_from_environment",
    "parse_amd_scenario",
    "build_fake_amdsmi",
    "OLD_ROCM_MISSING_SYMBOLS",
]

ENV_VAR = "GPUSCOPE_FAKE_AMDSMI"

# amdsmi_status_t (amdsmi.h)
_OK = 0
_NOT_SUPPORTED = 2
_NO_PERM = 10
_NOT_FOUND = 31
_DRIVER_NOT_LOADED = 34

#: Symbols a ROCm 6.1 library lacks that every supported amdsmi package (6.2.4 on) binds at import.
OLD_ROCM_MISSING_SYMBOLS = frozenset({"amdsmi_get_soc_pstate", "amdsmi_set_soc_pstate", "amdsmi_clean_gpu_local_data"})

_KIB = 1024


@dataclass
class FakeAmdProcess:
    pid: int
    name: str = "python"
    vram_bytes: int = 4 * GIB


@dataclass
class FakeAmdGpu:
    """One AMD GPU as AMD SMI sees it (one die of an MI250X is one GPU). Rates in bytes/s."""

    market_name: str
    uuid: str
    bus: int
    socket: int  # the card (OAM) this die sits on
    vram_total_bytes: int
    gfx_clock_max_mhz: int
    memory_clock_max_mhz: int
    power_limit_w: int
    xgmi_links: int
    xgmi_link_speed_gbit_per_s: int  # per lane
    xgmi_link_width: int
    pcie_max_generation: int = 5
    pcie_max_width: int = 16
    pcie_generation: int = 5
    pcie_width: int = 16
    has_edge_sensor: bool = True
    reports_power: bool = True  # False: the second die of an MI250X (its card reports on die 0)
    # the load
    gfx_activity_percent: float = 0.0
    umc_activity_percent: float = 0.0
    vram_used_bytes: int = 512 * 1024 * 1024
    gfx_clock_mhz: int = 150
    memory_clock_mhz: int = 900
    power_w: float = 140.0
    temperature_edge_c: int = 35
    temperature_hotspot_c: int = 42
    temperature_hbm_c: int = 38
    pcie_bytes_per_s: float = 0.0
    xgmi_tx_bytes_per_s_per_link: float = 0.0
    xgmi_rx_bytes_per_s_per_link: float = 0.0
    throttle_status: int = 0  # indep_throttle_status bits
    ecc_correctable: int = 0
    ecc_uncorrectable: int = 0
    processes: list[FakeAmdProcess] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)  # symbol -> amdsmi_status_t, permanent
    # counters, integrated by FakeAmdSmi
    energy_uj: float = 0.0
    xgmi_tx_kib: float = 0.0
    xgmi_rx_kib: float = 0.0
    lost_from_s: float | None = None

    @classmethod
    def mi300x(cls, index: int, **changes: Any) -> FakeAmdGpu:
        gpu = cls(
            market_name="AMD Instinct MI300X", uuid=f"{index:02x}ff74a1-0000-1000-80d4-5b1c2e3a{index:04x}",
            bus=0x0C + 0x10 * index, socket=index, vram_total_bytes=192 * GIB, gfx_clock_max_mhz=2100,
            memory_clock_max_mhz=1300, power_limit_w=750, xgmi_links=7, xgmi_link_speed_gbit_per_s=32,
            xgmi_link_width=16, has_edge_sensor=False,
        )  # fmt: skip
        return dataclasses.replace(gpu, **changes)

    @classmethod
    def mi325x(cls, index: int, **changes: Any) -> FakeAmdGpu:
        return cls.mi300x(index, market_name="AMD Instinct MI325X", vram_total_bytes=256 * GIB, power_limit_w=1000,
                          **changes)  # fmt: skip

    @classmethod
    def mi250x(cls, card: int, die: int, **changes: Any) -> FakeAmdGpu:
        index = 2 * card + die
        gpu = cls(
            market_name="AMD Instinct MI250X", uuid=f"{index:02x}ff740c-0000-1000-80a9-7d1e{card:04x}{die:04x}",
            bus=0x29 + 0x20 * card + die * 3, socket=card, vram_total_bytes=64 * GIB, gfx_clock_max_mhz=1700,
            memory_clock_max_mhz=1600, power_limit_w=560, xgmi_links=4, xgmi_link_speed_gbit_per_s=25,
            xgmi_link_width=16, pcie_max_generation=4, pcie_generation=4, reports_power=die == 0,
        )  # fmt: skip
        return dataclasses.replace(gpu, **changes)

    def make_busy(self) -> None:
        """A steady training-like load."""
        self.gfx_activity_percent, self.umc_activity_percent = 92.0, 61.0
        self.gfx_clock_mhz, self.memory_clock_mhz = self.gfx_clock_max_mhz - 100, self.memory_clock_max_mhz
        self.power_w = 0.8 * self.power_limit_w
        self.temperature_edge_c, self.temperature_hotspot_c, self.temperature_hbm_c = 58, 79, 66
        self.vram_used_bytes = int(0.7 * self.vram_total_bytes)
        self.pcie_bytes_per_s = 6e9
        self.xgmi_tx_bytes_per_s_per_link = self.xgmi_rx_bytes_per_s_per_link = 20e9


class _Symbol:
    """One C symbol; a plain object so ``amdsmi_wrapper`` may set ``restype``/``argtypes`` on it."""

    def __init__(self, fake: FakeAmdSmi, name: str, impl: Callable[..., int] | None) -> None:
        self.fake = fake
        self.name = name
        self.impl = impl

    def __call__(self, *args: Any) -> int:
        return self.fake._dispatch(self, args)


def _handle_value(handle: Any) -> int:
    return int(getattr(handle, "value", handle) or 0)


class FakeAmdSmi:
    """The fake library: scripted GPUs behind AMD SMI's C symbols. Thread-safe."""

    def __init__(
        self,
        gpus: list[FakeAmdGpu],
        *,
        clock: FakeClock | None = None,
        init_error: int | None = None,
        missing_symbols: frozenset[str] = frozenset(),
        driver_version: str = "6.10.5",
        library_version: tuple[int, int, int] = (25, 3, 0),
    ) -> None:
        self.gpus = gpus
        self.clock = clock or FakeClock()
        self.init_error = init_error
        self.missing_symbols = missing_symbols
        self.driver_version = driver_version
        self.library_version = library_version
        self.initialized = False
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()
        self._settled_s = self.clock()
        self._build = ctypes.create_string_buffer(b"fake")

    # -- the library surface ------------------------------------------------------------------

    def __getattr__(self, name: str) -> _Symbol:
        if name.startswith("__") or not name.startswith("amdsmi_"):
            raise AttributeError(name)
        if name in self.missing_symbols:
            raise AttributeError(f"libamd_smi.so: undefined symbol: {name}")
        symbol = _Symbol(self, name, getattr(self, "_" + name, None))
        self.__dict__[name] = symbol  # bound once, as the wrapper binds it once
        return symbol

    def _dispatch(self, symbol: _Symbol, args: tuple[Any, ...]) -> int:
        with self._lock:
            self.calls[symbol.name] = self.calls.get(symbol.name, 0) + 1
            if symbol.impl is None:
                return _NOT_SUPPORTED
            if symbol.name not in ("amdsmi_init", "amdsmi_get_lib_version") and not self.initialized:
                return 32  # AMDSMI_STATUS_NOT_INIT
            self._settle()
            gpu = self._gpu_of(args[0]) if args and symbol.name.startswith("amdsmi_get_gpu") else None
            if gpu is not None:
                if gpu.lost_from_s is not None and self.clock() >= gpu.lost_from_s:
                    return _NOT_FOUND
                if symbol.name in gpu.errors:
                    return gpu.errors[symbol.name]
            return symbol.impl(*args)

    @contextlib.contextmanager
    def settled(self) -> Iterator[None]:
        """Change loads inside the block: the counters integrate the old rates up to now first."""
        with self._lock:
            self._settle()
            yield

    def _settle(self) -> None:
        """Integrate the scripted rates into the counters up to now."""
        now = self.clock()
        seconds = max(0.0, now - self._settled_s)
        if seconds == 0.0:
            return
        self._settled_s = now
        for gpu in self.gpus:
            gpu.energy_uj += gpu.power_w * seconds * 1e6
            gpu.xgmi_tx_kib += gpu.xgmi_tx_bytes_per_s_per_link * seconds / _KIB
            gpu.xgmi_rx_kib += gpu.xgmi_rx_bytes_per_s_per_link * seconds / _KIB

    def _gpu_of(self, handle: Any) -> FakeAmdGpu | None:
        index = _handle_value(handle) - 0x1000
        return self.gpus[index] if 0 <= index < len(self.gpus) else None

    def _sockets(self) -> list[int]:
        return sorted({gpu.socket for gpu in self.gpus})

    # -- symbols (names as in amdsmi.h; ``ref._obj`` is what ``ctypes.byref(x)`` points at) -----

    def _amdsmi_init(self, flags: Any) -> int:
        if self.init_error is not None:
            return self.init_error
        self.initialized = True
        return _OK

    def _amdsmi_shut_down(self) -> int:
        self.initialized = False
        return _OK

    def _amdsmi_get_lib_version(self, ref: Any) -> int:
        version = ref._obj
        version.major, version.minor, version.release = self.library_version
        version.build = ctypes.cast(self._build, ctypes.POINTER(ctypes.c_char))
        return _OK

    def _amdsmi_get_socket_handles(self, count_ref: Any, handles: Any) -> int:
        sockets = self._sockets()
        count_ref._obj.value = len(sockets)
        if handles:
            for position, socket in enumerate(sockets):
                handles[position] = 0x100 + socket
        return _OK

    def _amdsmi_get_processor_handles(self, socket: Any, count_ref: Any, handles: Any) -> int:
        socket_index = _handle_value(socket) - 0x100
        mine = [index for index, gpu in enumerate(self.gpus) if gpu.socket == socket_index]
        count_ref._obj.value = len(mine)
        if handles:
            for position, index in enumerate(mine):
                handles[position] = 0x1000 + index
        return _OK

    def _amdsmi_get_gpu_asic_info(self, handle: Any, ref: Any) -> int:
        gpu = self._gpu_of(handle)
        assert gpu is not None
        info = ref._obj
        info.market_name = gpu.market_name.encode()
        info.vendor_id, info.device_id = 0x1002, 0x74A1
        info.vendor_name = b"Advanced Micro Devices Inc. [AMD/ATI]"
        info.asic_serial = f"{gpu.bus:016X}".encode()
        info.num_of_compute_units = 304 if "MI3" in gpu.market_name else 110
        info.target_graphics_version = 0x942 if "MI3" in gpu.market_name else 0x90A
        return _OK

    def _amdsmi_get_gpu_device_uuid(self, handle: Any, length_ref: Any, buffer: Any) -> int:
        gpu = self._gpu_of(handle)
        assert gpu is not None
        ctypes.memmove(buffer, gpu.uuid.encode() + b"\0", len(gpu.uuid) + 1)
        return _OK

    def _amdsmi_get_gpu_device_bdf(self, handle: Any, ref: Any) -> int:
        gpu = self._gpu_of(handle)
        assert gpu is not None
        bdf = ref._obj.struct_amdsmi_bdf_t
        bdf.domain_number, bdf.bus_number, bdf.device_number, bdf.function_number = 0, gpu.bus, 0, 0
        return _OK

    def _amdsmi_get_gpu_driver_info(self, handle: Any, ref: Any) -> int:
        info = ref._obj
        info.driver_name, info.driver_version, info.driver_date = b"amdgpu", self.driver_version.encode(), b"2015/01/01"
        return _OK

    def _amdsmi_get_gpu_activity(self, handle: Any, ref: Any) -> int:
        gpu = self._gpu_of(handle)
        assert gpu is not None
        usage = ref._obj
        usage.gfx_activity, usage.umc_activity, usage.mm_activity = (
            round(gpu.gfx_activity_percent), round(gpu.umc_activity_percent), 0xFFFF)  # fmt: skip
        return _OK

    def _amdsmi_get_gpu_vram_usage(self, handle: Any, ref: Any) -> int:
        gpu = self._gpu_of(handle)
        assert gpu is not None
        ref._obj.vram_total, ref._obj.vram_used = gpu.vram_total_bytes // 2**20, gpu.vram_used_bytes // 2**20  # MB
        return _OK

    def _amdsmi_get_clock_info(self, handle: Any, clock_type: Any, ref: Any) -> int:
        gpu = self._gpu_of(handle)
        assert gpu is not None
        kind = int(getattr(clock_type, "value", clock_type))
        info = ref._obj
        if kind == 0:  # AMDSMI_CLK_TYPE_GFX
            info.clk, info.min_clk, info.max_clk = gpu.gfx_clock_mhz, 150, gpu.gfx_clock_max_mhz
        elif kind == 4:  # AMDSMI_CLK_TYPE_MEM
            info.clk, info.min_clk, info.max_clk = gpu.memory_clock_mhz, 900, gpu.memory_clock_max_mhz
        else:
            return _NOT_SUPPORTED
        return _OK

    def _amdsmi_get_power_info(self, handle: Any, ref: Any) -> int:
        gpu = self._gpu_of(handle)
        assert gpu is not None
        info = ref._obj
        watts = round(gpu.power_w) if gpu.reports_power else 0xFFFF
        info.socket_power = info.current_socket_power = info.average_socket_power = watts
        info.power_limit = gpu.power_limit_w  # watts, as amdsmi.h says
        return _OK

    def _amdsmi_get_power_info_v2(self, handle: Any, sensor: Any, ref: Any) -> int:
        """ROCm 6.4's form (a sensor index first); amdsmi 6.4 calls this one."""
        return self._amdsmi_get_power_info(handle, ref)

    def _amdsmi_get_energy_count(self, handle: Any, energy_ref: Any, resolution_ref: Any, stamp_ref: Any) -> int:
        gpu = self._gpu_of(handle)
        assert gpu is not None
        if not gpu.reports_power:
            return _NOT_SUPPORTED
        resolution_uj = 15.259
        energy_ref._obj.value = int(gpu.energy_uj / resolution_uj)
        resolution_ref._obj.value = resolution_uj
        stamp_ref._obj.value = int(self.clock() * 1e9)
        return _OK

    def _amdsmi_get_gpu_metrics_info(self, handle: Any, ref: Any) -> int:
        gpu = self._gpu_of(handle)
        assert gpu is not None
        metrics = ref._obj
        ctypes.memset(ctypes.addressof(metrics), 0xFF, ctypes.sizeof(metrics))  # unsupported: all bits set
        metrics.system_clock_counter = int(self.clock() * 1e9)  # ns, the time the table was read
        metrics.temperature_hotspot = gpu.temperature_hotspot_c
        metrics.temperature_mem = gpu.temperature_hbm_c
        if gpu.has_edge_sensor:
            metrics.temperature_edge = gpu.temperature_edge_c
        metrics.average_gfx_activity = round(gpu.gfx_activity_percent)
        metrics.average_umc_activity = round(gpu.umc_activity_percent)
        if gpu.reports_power:
            metrics.current_socket_power = round(gpu.power_w)
        metrics.throttle_status = metrics.indep_throttle_status = gpu.throttle_status
        if "MI3" in gpu.market_name:  # one GFX clock per XCD (current_gfxclk itself is unsupported there)
            for xcd in range(8):
                metrics.current_gfxclks[xcd] = gpu.gfx_clock_mhz
        else:
            metrics.current_gfxclk = gpu.gfx_clock_mhz
        metrics.current_uclk = gpu.memory_clock_mhz
        metrics.pcie_link_width = gpu.pcie_width
        metrics.pcie_link_speed = {3: 80, 4: 160, 5: 320}.get(gpu.pcie_generation, 0xFFFF)  # 0.1 GT/s
        metrics.pcie_bandwidth_inst = round(gpu.pcie_bytes_per_s / 1e9)  # GB/s
        metrics.xgmi_link_width = gpu.xgmi_link_width
        metrics.xgmi_link_speed = gpu.xgmi_link_speed_gbit_per_s
        for link in range(len(metrics.xgmi_read_data_acc)):
            if link < gpu.xgmi_links:
                metrics.xgmi_read_data_acc[link] = int(gpu.xgmi_rx_kib)
                metrics.xgmi_write_data_acc[link] = int(gpu.xgmi_tx_kib)
        return _OK

    def _amdsmi_get_pcie_info(self, handle: Any, ref: Any) -> int:
        gpu = self._gpu_of(handle)
        assert gpu is not None
        info = ref._obj
        speeds = {3: 8000, 4: 16000, 5: 32000}  # MT/s, as amdsmi.h gives max_pcie_speed and pcie_speed
        info.pcie_static.max_pcie_width, info.pcie_static.max_pcie_speed = (
            gpu.pcie_max_width,
            speeds[gpu.pcie_max_generation],
        )
        info.pcie_static.pcie_interface_version = gpu.pcie_max_generation
        info.pcie_metric.pcie_width, info.pcie_metric.pcie_speed = gpu.pcie_width, speeds[gpu.pcie_generation]
        return _OK

    def _amdsmi_get_gpu_total_ecc_count(self, handle: Any, ref: Any) -> int:
        gpu = self._gpu_of(handle)
        assert gpu is not None
        ref._obj.correctable_count, ref._obj.uncorrectable_count = gpu.ecc_correctable, gpu.ecc_uncorrectable
        return _OK

    def _amdsmi_get_gpu_process_list(self, handle: Any, count_ref: Any, entries: Any) -> int:
        gpu = self._gpu_of(handle)
        assert gpu is not None
        room = count_ref._obj.value
        count_ref._obj.value = len(gpu.processes)
        for position, process in enumerate(gpu.processes[:room]):
            entry = entries[position]
            entry.name, entry.pid, entry.mem = process.name.encode(), process.pid, process.vram_bytes
            entry.memory_usage.vram_mem = process.vram_bytes
        return _OK if len(gpu.processes) <= room else 41  # AMDSMI_STATUS_INSUFFICIENT_SIZE


_IMPORT_LOCK = threading.Lock()


def _drop_amdsmi_modules() -> dict[str, ModuleType]:
    dropped = {name: module for name, module in sys.modules.items() if name == "amdsmi" or name.startswith("amdsmi.")}
    for name in dropped:
        del sys.modules[name]
    return dropped


@contextlib.contextmanager
def install_fake_amdsmi(fake: FakeAmdSmi) -> Iterator[FakeAmdSmi]:
    """Import ``amdsmi`` afresh against ``fake`` for the ``with`` block (then forget that import).

    A fake with ``missing_symbols`` makes the import fail inside the block, as an old library does:
    code in the block sees what gpuscope's loader sees."""
    with _IMPORT_LOCK:
        saved = _drop_amdsmi_modules()
        real_cdll = ctypes.CDLL

        def load(name: Any, *args: Any, **kwargs: Any) -> Any:
            if str(name).endswith("libamd_smi.so"):
                return fake
            return real_cdll(name, *args, **kwargs)

        ctypes.CDLL = load  # type: ignore[misc,assignment]
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                import amdsmi  # noqa: F401 - binds every symbol of ``fake`` now
        except AttributeError:
            pass  # an old library: gpuscope's loader reports it when it imports amdsmi in the block
        finally:
            ctypes.CDLL = real_cdll  # type: ignore[misc]
    missing = bool(fake.missing_symbols)
    try:
        if missing:
            with _fake_still_missing(fake, real_cdll):
                yield fake
        else:
            yield fake
    finally:
        with _IMPORT_LOCK:
            _drop_amdsmi_modules()
            sys.modules.update(saved)


@contextlib.contextmanager
def _fake_still_missing(fake: FakeAmdSmi, real_cdll: Any) -> Iterator[None]:
    """Keep answering loads of ``libamd_smi.so`` with ``fake`` (so each later import fails as it would)."""

    def load(name: Any, *args: Any, **kwargs: Any) -> Any:
        if str(name).endswith("libamd_smi.so"):
            return fake
        return real_cdll(name, *args, **kwargs)

    ctypes.CDLL = load  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        ctypes.CDLL = real_cdll  # type: ignore[misc]


# --- scenarios from the environment --------------------------------------------------------


@dataclass
class AmdScenario:
    gpus: str = "8xmi300x"
    busy: bool = True
    lose: list[tuple[int, float]] = field(default_factory=list)  # (GPU, seconds after install)
    no_permission: bool = False
    old: bool = False


def parse_amd_scenario(text: str) -> AmdScenario:
    """``GPUSCOPE_FAKE_AMDSMI``'s value (see the module docstring); UsageError names a bad item."""
    scenario = AmdScenario()
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, _, value = item.partition("=")
        if key == "gpus":
            _models(value)  # checked now, built later
            scenario.gpus = value
        elif key == "busy":
            scenario.busy = value.strip() != "0"
        elif key == "lose":
            for part in value.split(";"):
                gpu, _, start = part.partition("@")
                try:
                    scenario.lose.append((int(gpu), float(start or 0)))
                except ValueError:
                    raise UsageError(f"{ENV_VAR}: lose={value!r} is not GPU@SECONDS") from None
        elif key == "noperm":
            scenario.no_permission = value.strip() != "0"
        elif key == "old":
            scenario.old = value.strip() != "0"
        elif key in ("1", "demo") and not value:
            continue
        else:
            raise UsageError(f"{ENV_VAR}: unknown item {item!r} (gpus, busy, lose, noperm, old)")
    return scenario


def _models(text: str) -> list[tuple[int, str]]:
    """``"8xmi300x"`` -> ``[(8, "mi300x")]``; ``+`` joins models (an MI250X counts cards, two dies each)."""
    out: list[tuple[int, str]] = []
    for part in text.split("+"):
        match = re.fullmatch(r"(?:(\d+)x)?(mi300x|mi325x|mi250x)", part.strip().lower())
        if match is None or not 1 <= int(match.group(1) or 1) <= 64:
            raise UsageError(f"{ENV_VAR}: gpus={text!r}: models are mi300x, mi325x, mi250x, e.g. 8xmi300x or 4xmi250x")
        out.append((int(match.group(1) or 1), match.group(2)))
    return out


def build_fake_amdsmi(scenario: AmdScenario, clock: FakeClock | None = None) -> FakeAmdSmi:
    """The fake a scenario describes (``clock`` defaults to real time, for whole commands)."""
    gpus: list[FakeAmdGpu] = []
    for count, model in _models(scenario.gpus):
        for _ in range(count):
            if model == "mi250x":
                card = len({gpu.socket for gpu in gpus})
                gpus += [FakeAmdGpu.mi250x(card, 0), FakeAmdGpu.mi250x(card, 1)]
            else:
                make = FakeAmdGpu.mi325x if model == "mi325x" else FakeAmdGpu.mi300x
                gpus.append(make(len(gpus), socket=len({gpu.socket for gpu in gpus})))
    if scenario.busy:
        for gpu in gpus:
            gpu.make_busy()
    clock = clock or FakeClock(real=True)
    for index, start_s in scenario.lose:
        if not 0 <= index < len(gpus):
            raise UsageError(f"{ENV_VAR}: lose={index}@...: there are {len(gpus)} GPUs")
        gpus[index].lost_from_s = clock() + start_s
    return FakeAmdSmi(
        gpus,
        clock=clock,
        init_error=_NO_PERM if scenario.no_permission else None,
        missing_symbols=OLD_ROCM_MISSING_SYMBOLS if scenario.old else frozenset(),
    )


_installed: AmdScenario | None = None
_context: contextlib.AbstractContextManager[FakeAmdSmi] | None = None


def install_from_environment() -> AmdScenario | None:
    """When ``GPUSCOPE_FAKE_AMDSMI`` is set, make ``amdsmi`` use its fake for the rest of the process
    (once) and return its scenario; else None. Raises :class:`UsageError` for a malformed value."""
    global _installed, _context
    text = os.environ.get(ENV_VAR)
    if not text:
        return None
    if _installed is None:
        scenario = parse_amd_scenario(text)
        context = install_fake_amdsmi(build_fake_amdsmi(scenario))
        context.__enter__()  # for the rest of the process (the reference keeps it from being closed)
        _installed, _context = scenario, context
    return _installed
