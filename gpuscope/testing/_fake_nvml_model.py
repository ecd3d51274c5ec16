"""The scripted hardware behind :class:`gpuscope.testing.fake_nvml.FakeNvml`: GPUs, MIG
devices, processes, loads and the clock. Import these from ``gpuscope.testing.fake_nvml``."""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pynvml

from gpuscope.telemetry.nvml import compat

__all__ = [
    "GIB",
    "MIB",
    "OLD_DRIVER_MISSING_SYMBOLS",
    "ACTIVITY_ATTRS",
    "METER_RATES",
    "DRAM_BYTES",
    "ACTIVITY",
    "ENERGY_MJ",
    "PCIE_TX_BYTES",
    "PCIE_RX_BYTES",
    "MIG_TOTALS",
    "link_bytes",
    "add_link_bytes",
    "MODEL_NOT_SUPPORTED",
    "ErrorSpec",
    "error_code",
    "FakeClock",
    "FakeLoad",
    "FakeProcess",
    "FakeMig",
    "FakeGpu",
]

GIB = 1 << 30
MIB = 1 << 20

#: Symbols an old (r470-era) driver lacks: GPM, v3 process lists, clocks-event reasons,
#: versioned temperature, CUDA driver version v2.
OLD_DRIVER_MISSING_SYMBOLS: frozenset[str] = frozenset(
    {
        "nvmlGpmQueryDeviceSupport",
        "nvmlGpmSampleAlloc",
        "nvmlGpmSampleFree",
        "nvmlGpmSampleGet",
        "nvmlGpmMigSampleGet",
        "nvmlGpmMetricsGet",
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetTemperatureV",
        "nvmlSystemGetCudaDriverVersion_v2",
        "nvmlDeviceGetMemoryInfo_v2",
    }
)

#: An NVML error as the fake takes it: a return code, a name ("NotSupported") or a pynvml class.
ErrorSpec = int | str | type

#: What each model answers NotSupported, as the real boards do: model -> (C symbols, field ids).
#: Data-center boards have no fan (fan speed); the L4 (GDDR6, passive) has no fan and no memory
#: temperature sensor. The builders apply these; override ``errors``/``field_errors`` to change.
MODEL_NOT_SUPPORTED: dict[str, tuple[frozenset[str], frozenset[int]]] = {
    "h100": (frozenset({"nvmlDeviceGetFanSpeed"}), frozenset()),
    "h200": (frozenset({"nvmlDeviceGetFanSpeed"}), frozenset()),
    "a100": (frozenset({"nvmlDeviceGetFanSpeed"}), frozenset()),
    "l4": (frozenset({"nvmlDeviceGetFanSpeed"}), frozenset({int(pynvml.NVML_FI_DEV_MEMORY_TEMP)})),
}


def _symbol_errors(model: str) -> dict[str, ErrorSpec]:
    """Builder default: the model's NotSupported symbols (:data:`MODEL_NOT_SUPPORTED`)."""
    return {symbol: pynvml.NVML_ERROR_NOT_SUPPORTED for symbol in MODEL_NOT_SUPPORTED[model][0]}


def _field_errors(model: str) -> dict[int, ErrorSpec]:
    """Builder default: the model's NotSupported field ids (:data:`MODEL_NOT_SUPPORTED`)."""
    return {field_id: pynvml.NVML_ERROR_NOT_SUPPORTED for field_id in MODEL_NOT_SUPPORTED[model][1]}


#: FakeLoad attributes that GPM reports as averages over a window (percent).
ACTIVITY_ATTRS: tuple[str, ...] = (
    "gpu_util_percent",
    "sm_activity_percent",
    "sm_occupancy_percent",
    "tensor_activity_percent",
    "hmma_tensor_activity_percent",
    "imma_tensor_activity_percent",
    "dfma_tensor_activity_percent",
    "fp64_activity_percent",
    "fp32_activity_percent",
    "fp16_activity_percent",
)


def error_code(error: ErrorSpec) -> int:
    """An NVML return code from ``3``, ``"NotSupported"``, ``"GPU_IS_LOST"`` or ``NVMLError_GpuIsLost``."""
    if isinstance(error, bool):
        raise TypeError("an NVML error code, name or class is needed")
    if isinstance(error, int):
        return error
    if isinstance(error, type) and issubclass(error, pynvml.NVMLError):
        for code, cls in pynvml.NVMLError._valClassMapping.items():
            if cls is error:
                return int(code)
        raise ValueError(f"unknown NVML error class {error!r}")
    wanted = re.sub(r"[^a-z0-9]", "", str(error).lower().removeprefix("nvml_error_").removeprefix("nvmlerror_"))
    for name in dir(pynvml):
        if name.startswith("NVML_ERROR_") and re.sub(r"[^a-z0-9]", "", name[11:].lower()) == wanted:
            return int(getattr(pynvml, name))
    raise ValueError(f"unknown NVML error {error!r}")


class FakeClock:
    """Seconds for the fake. Manual by default (:meth:`advance`); ``real=True`` follows
    ``time.monotonic``. Call it to read the time; pass it to ``NvmlCollector(clock=...)``."""

    def __init__(self, start_s: float = 1000.0, *, real: bool = False) -> None:
        self.real = real
        self._t = float(start_s)
        self._origin = time.monotonic() - float(start_s)

    def __call__(self) -> float:
        return time.monotonic() - self._origin if self.real else self._t

    def advance(self, seconds: float) -> None:
        """Move a manual clock forward by ``seconds``."""
        if self.real:
            raise RuntimeError("a real-time FakeClock cannot be advanced")
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        self._t += seconds


@dataclass
class FakeLoad:
    """What a GPU (or MIG instance) is doing. Rates in bytes/s, activities in percent.

    ``nvlink_*_bytes_per_s`` is per active link: one number for every link, or a list indexed
    by link. Change values with :meth:`FakeNvml.set_load` so counters settle first.
    """

    gpu_util_percent: float = 0.0
    memory_busy_percent: float = 0.0
    sm_activity_percent: float = 0.0
    sm_occupancy_percent: float = 0.0
    tensor_activity_percent: float = 0.0
    hmma_tensor_activity_percent: float = 0.0
    imma_tensor_activity_percent: float = 0.0
    dfma_tensor_activity_percent: float = 0.0
    fp64_activity_percent: float = 0.0
    fp32_activity_percent: float = 0.0
    fp16_activity_percent: float = 0.0
    dram_bytes_per_s: float = 0.0
    pcie_tx_bytes_per_s: float = 0.0
    pcie_rx_bytes_per_s: float = 0.0
    nvlink_tx_bytes_per_s: float | list[float] = 0.0
    nvlink_rx_bytes_per_s: float | list[float] = 0.0
    power_w: float = 70.0
    sm_clock_mhz: float = 345.0
    memory_clock_mhz: float = 1593.0
    temperature_gpu_c: float = 33.0
    temperature_memory_c: float = 41.0
    fan_speed_percent: float = 30.0
    throttle_reasons: int = 0x1  # GpuIdle
    memory_used_bytes: int = 512 * MIB


@dataclass
class FakeProcess:
    """A process with a context on the GPU. ``sm_percent=None``: no utilization sample."""

    pid: int
    used_gpu_memory_bytes: int | None = 1 * GIB
    sm_percent: int | None = 0
    kind: str = "compute"  # "compute" or "graphics"


#: The FakeLoad rates a GPU's meter integrates, in the order of :attr:`_Meter.totals`:
#: DRAM bytes/s, the activities (percent), power (W; integrated as mJ), PCIe tx and rx bytes/s.
#: A MIG device's meter integrates the first ``MIG_TOTALS`` of them.
METER_RATES: tuple[str, ...] = (
    "dram_bytes_per_s",
    *ACTIVITY_ATTRS,
    "power_w",
    "pcie_tx_bytes_per_s",
    "pcie_rx_bytes_per_s",
)
#: Positions in :attr:`_Meter.totals`.
DRAM_BYTES = 0
ACTIVITY = {attr: 1 + number for number, attr in enumerate(ACTIVITY_ATTRS)}  # percent-seconds
ENERGY_MJ = METER_RATES.index("power_w")
PCIE_TX_BYTES = METER_RATES.index("pcie_tx_bytes_per_s")
PCIE_RX_BYTES = METER_RATES.index("pcie_rx_bytes_per_s")
MIG_TOTALS = ENERGY_MJ


class _Meter:
    """Integrals of a FakeLoad over the clock: bytes, mJ and percent-seconds."""

    def __init__(self) -> None:
        self.t: float | None = None
        #: by METER_RATES position (DRAM_BYTES, ACTIVITY[attr], ENERGY_MJ, PCIE_TX/RX_BYTES)
        self.totals: list[float] = [0.0] * len(METER_RATES)
        #: NVLink bytes counted on each link (a link not counted yet has no entry)
        self.nvlink_tx_bytes: list[float] = []
        self.nvlink_rx_bytes: list[float] = []


def link_bytes(totals: Sequence[float], link: int) -> float:
    """Link ``link``'s byte total in a :class:`_Meter` list (0.0 before it first counted)."""
    return totals[link] if link < len(totals) else 0.0


def add_link_bytes(
    totals: list[float], rate: float | list[float], links: int, inactive: frozenset[int], dt: float
) -> None:
    """Count ``dt`` seconds at ``rate`` bytes/s (every link, or a list by link) on each of the
    first ``links`` links but the ``inactive`` ones."""
    if len(totals) < links:
        totals.extend([0.0] * (links - len(totals)))
    for link in range(links):
        if link not in inactive:
            totals[link] += _per_link(rate, link) * dt


def _per_link(value: float | list[float], link: int) -> float:
    if isinstance(value, (list, tuple)):
        return float(value[link]) if link < len(value) else 0.0
    return float(value)


@dataclass
class FakeMig:
    """One MIG device (GPU instance + compute instance), e.g. ``FakeMig("3g.40gb", 1)``."""

    profile: str
    gpu_instance_id: int
    compute_instance_id: int = 0
    memory_total_bytes: int | None = None  # default: from the profile name ("40gb")
    load: FakeLoad = field(default_factory=FakeLoad)
    processes: list[FakeProcess] = field(default_factory=list)
    uuid: str | None = None
    name: str | None = None
    _meter: _Meter = field(default_factory=_Meter, repr=False)

    def __post_init__(self) -> None:
        if self.memory_total_bytes is None:
            match = re.search(r"(\d+)gb", self.profile)
            self.memory_total_bytes = int(match.group(1)) * 1000 * MIB if match else 10 * GIB


@dataclass
class FakeGpu:
    """One scripted GPU. Use the builders (:meth:`h100`, :meth:`h200`, :meth:`a100`, :meth:`l4`)
    and override any field by keyword. ``uuid`` and ``pci_bus_id`` default from the index."""

    name: str
    architecture: int  # pynvml.NVML_DEVICE_ARCH_*
    memory_total_bytes: int
    memory_bus_width_bits: int
    max_sm_clock_mhz: int
    max_memory_clock_mhz: int
    power_limit_w: float
    compute_capability: tuple[int, int] = (9, 0)
    pcie_generation: int = 5
    pcie_width: int = 16
    nvlink_links: int = 0  # links the GPU has (0: no NVLink)
    nvlink_inactive: frozenset[int] = frozenset()  # present but down
    nvlink_version: int = 0  # nvmlNvlinkVersion_t enum (compat.NVLINK_VERSION_*), as nvmlDeviceGetNvLinkVersion returns
    nvlink_scope_ignored: bool = False  # driver returns the GPU-wide counter for every link
    gpm: bool = False
    gpm_no_permission: bool = False  # nvmlGpmSampleGet -> NoPermission (RmProfilingAdminOnly=1)
    pcie_counters: bool = True  # NVML_FI_DEV_PCIE_COUNT_TX/RX_BYTES supported
    #: when absent, what each field answers: "NotSupported", or "InvalidArgument" (a driver
    #: 550 that does not know the field ids)
    pcie_counters_error: ErrorSpec = "NotSupported"
    #: 64; 32 (unsigned int values that wrap at 2**32); or "ull32" (typed unsigned long long but
    #: wrapping at 2**32, as "Value can be wrapped" allows)
    pcie_counter_bits: int | str = 64
    #: bytes already counted at boot-to-now (so 64-bit counters read above 2**32 from the start)
    pcie_counter_start_bytes: int = 1 << 40
    ecc: bool = True
    ecc_corrected: int = 0
    ecc_uncorrected: int = 0
    mig_capable: bool = False
    mig: list[FakeMig] = field(default_factory=list)  # non-empty: MIG mode on
    accounting: bool = False
    wobble: float = 0.0  # gauges vary by +-wobble (fraction), seeded and clock-driven
    seed: int = 0
    load: FakeLoad = field(default_factory=FakeLoad)
    processes: list[FakeProcess] = field(default_factory=list)
    errors: dict[str, ErrorSpec] = field(default_factory=dict)  # symbol -> error (permanent)
    field_errors: dict[int, ErrorSpec] = field(default_factory=dict)  # field id -> error
    gpm_metric_errors: dict[int, ErrorSpec] = field(default_factory=dict)  # GPM metric id -> error
    uuid: str | None = None
    pci_bus_id: str | None = None
    # topology (gpuscope.testing._fake_nvml_topology): None/empty = not scripted
    pcie_max_generation: int | None = None  # None: as pcie_generation (the link trained at its maximum)
    pcie_max_width: int | None = None  # None: as pcie_width
    pcie_replay_per_s: float = 0.0  # the PCIe replay counter grows this fast with the clock
    numa_node: int | None = None  # nvmlDeviceGetMemoryAffinity; None: NotSupported
    cpu_affinity: tuple[int, ...] = ()  # nvmlDeviceGetCpuAffinity; empty: NotSupported
    pcie_switch: str | None = None  # GPUs naming the same switch share it (common ancestor SINGLE)
    host_bridge: str | None = None  # ... the same host bridge (HOSTBRIDGE); else NUMA node: NODE or SYSTEM
    #: the far end of each NVLink link, an NVML bus id (a GPU's or an NVSwitch's); None: every
    #: link goes to one NVSwitch (NVSWITCH_BUS_ID)
    nvlink_remote: tuple[str, ...] | None = None
    #: link -> CRC flit errors per second (the counter grows with the clock)
    nvlink_crc_per_s: dict[int, float] = field(default_factory=dict)
    # runtime state
    lost: bool = field(default=False, repr=False)
    _lose_after_calls: int | None = field(default=None, repr=False)
    _lose_at_s: float | None = field(default=None, repr=False)
    _restore_at_s: float | None = field(default=None, repr=False)
    _meter: _Meter = field(default_factory=_Meter, repr=False)

    def __post_init__(self) -> None:
        self.mig = [
            item if isinstance(item, FakeMig) else FakeMig(str(item), gpu_instance_id=number + 1)
            for number, item in enumerate(self.mig)
        ]
        if self.mig:
            self.mig_capable = True

    @property
    def dram_peak_bytes_per_s(self) -> float:
        """Bus width x max memory clock x 2 (DDR) / 8."""
        return self.memory_bus_width_bits * self.max_memory_clock_mhz * 1e6 * 2 / 8

    @property
    def active_links(self) -> list[int]:
        return [link for link in range(self.nvlink_links) if link not in self.nvlink_inactive]

    # --- builders -------------------------------------------------------------------------

    @classmethod
    def h100(cls, **overrides: Any) -> FakeGpu:  # any FakeGpu field
        """H100 SXM 80 GB: Hopper, GPM, 18 NVLink 4 links, HBM3 5120-bit at 2619 MHz (3.35 TB/s)."""
        gpu = cls(
            name="NVIDIA H100 80GB HBM3",
            architecture=pynvml.NVML_DEVICE_ARCH_HOPPER,
            memory_total_bytes=81559 * MIB,
            memory_bus_width_bits=5120,
            max_sm_clock_mhz=1980,
            max_memory_clock_mhz=2619,
            power_limit_w=700.0,
            compute_capability=(9, 0),
            pcie_generation=5,
            nvlink_links=18,
            nvlink_version=compat.NVLINK_VERSION_4_0,
            gpm=True,
            mig_capable=True,
            load=FakeLoad(memory_clock_mhz=2619.0),
            errors=_symbol_errors("h100"),
            field_errors=_field_errors("h100"),
        )
        return dataclasses.replace(gpu, **overrides)

    @classmethod
    def h200(cls, **overrides: Any) -> FakeGpu:  # any FakeGpu field
        """H200 SXM 141 GB: as H100 with HBM3e 6144-bit at 3201 MHz (4.9 TB/s)."""
        gpu = cls.h100(
            name="NVIDIA H200",
            memory_total_bytes=143771 * MIB,
            memory_bus_width_bits=6144,
            max_memory_clock_mhz=3201,
            load=FakeLoad(memory_clock_mhz=3201.0),
            errors=_symbol_errors("h200"),
            field_errors=_field_errors("h200"),
        )
        return dataclasses.replace(gpu, **overrides)

    @classmethod
    def a100(cls, **overrides: Any) -> FakeGpu:  # any FakeGpu field
        """A100 SXM4 80 GB: Ampere, no GPM, 12 NVLink 3 links, HBM2e 5120-bit at 1593 MHz."""
        gpu = cls(
            name="NVIDIA A100-SXM4-80GB",
            architecture=pynvml.NVML_DEVICE_ARCH_AMPERE,
            memory_total_bytes=81920 * MIB,
            memory_bus_width_bits=5120,
            max_sm_clock_mhz=1410,
            max_memory_clock_mhz=1593,
            power_limit_w=400.0,
            compute_capability=(8, 0),
            pcie_generation=4,
            nvlink_links=12,
            nvlink_version=compat.NVLINK_VERSION_3_0,
            gpm=False,
            mig_capable=True,
            errors=_symbol_errors("a100"),
            field_errors=_field_errors("a100"),
        )
        return dataclasses.replace(gpu, **overrides)

    @classmethod
    def l4(cls, **overrides: Any) -> FakeGpu:  # any FakeGpu field
        """L4: Ada PCIe card, no NVLink, no GPM, no MIG, 192-bit GDDR6."""
        gpu = cls(
            name="NVIDIA L4",
            architecture=pynvml.NVML_DEVICE_ARCH_ADA,
            memory_total_bytes=23034 * MIB,
            memory_bus_width_bits=192,
            max_sm_clock_mhz=2040,
            max_memory_clock_mhz=6251,
            power_limit_w=72.0,
            compute_capability=(8, 9),
            pcie_generation=4,
            errors=_symbol_errors("l4"),
            field_errors=_field_errors("l4"),
        )
        return dataclasses.replace(gpu, **overrides)
