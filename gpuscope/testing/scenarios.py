"""Fake-NVML scenarios chosen from the environment, for fault and load tests of whole commands.

The fake NVML's one door from the environment: when ``GPUSCOPE_FAKE_NVML`` is set,
:class:`gpuscope.telemetry.collector.TelemetryCollector` (and ``gpuscope doctor``) call
:func:`install_from_environment` when they open the GPU side; it installs a
:class:`~gpuscope.testing.fake_nvml.FakeNvml` once per process, and the real NVML bindings then
talk to it instead of libnvidia-ml. So ``gpuscope log``, ``gpuscope serve`` and the TUI
(``gpuscope``) run unchanged against scripted GPUs and faults (what everything then shows says
"simulated"). The scenario's collector setting (``lost_retry_s``) reaches the collector as an
option of its constructor, passed by the caller. Nothing is read from the environment on the
sampling path.

The value is comma-separated ``key=value`` items (all optional)::

    GPUSCOPE_FAKE_NVML="gpus=8xh200,random=0.05,seed=3,lose=1@1.0:2.0,lost_retry_s=0.5"

- ``gpus``: ``+``-separated models, each optionally ``Nx``-prefixed: ``8xh200``, ``h100+a100``,
  ``2xh200+l4`` (models: h100, h200, a100, l4). Default ``2xh200``.
- ``links``: NVLink links per GPU (overrides the model's count; ``0``: none).
- ``random``: probability that any NVML call fails (``inject_random``). Default 0.
- ``errors``: ``+``-separated NVML error names for ``random`` (default ``Unknown+Timeout+NotSupported+NoPermission``).
- ``seed``: seed for ``random`` (default 0).
- ``lose``: ``GPU@START:END`` (seconds after the fake is installed): that GPU answers GpuIsLost
  from START, and again from END (``END`` may be left out: lost for good). Repeat with ``;``.
- ``lost_retry_s``: how often the collector retries a lost GPU (default: the collector's own;
  passed to ``NvmlCollector(lost_retry_interval_s=...)``).
- ``busy``: ``1`` gives every GPU a steady, non-zero load at its boost SM clock, with no
  throttle reason (default 1); ``0`` leaves it idle (low clock, ``gpu_idle``).
- ``init_error``: an NVML error name that ``nvmlInit`` returns (e.g. ``DriverNotLoaded``).
- ``pci_order``: ``+``-separated NVML indices in PCI bus order, e.g. ``2+0+1``: NVML index 2 sits
  on the lowest bus, so NVML's numbering differs from CUDA's (which follows the bus for identical
  GPUs). Use :func:`cuda_uuids` for what torch would report per CUDA device.
- ``pcie_bits``: ``64`` (default), ``32`` (unsigned-int PCIe byte counters wrapping at 2**32) or
  ``ull32`` (typed 64-bit, wrapping at 2**32).
- ``gpm``: ``noperm``: GPM samples answer NoPermission (RmProfilingAdminOnly=1).
- ``driver``: ``550``: a driver-550 system (versions 550.127.05 / CUDA 12.4) that does not know
  the PCIe byte-counter fields (InvalidArgument per field). ``gpm=noperm,driver=550`` is the
  case where neither GPM nor the counters give PCIe rates.

- ``xid``: ``XID[*COUNT]@SECONDS[:GPU]``: Xid ``XID`` happens ``COUNT`` times (default 1) on GPU
  ``GPU`` (default 0) that many seconds after the fake is installed, e.g. ``xid=79@2.0:1`` (GPU 1
  falls off the bus at 2 s; add ``lose=1@2.5`` to lose it too) or ``xid=13*500@1:0`` (a flood).
  Repeat with ``;``.
- ``events_error``: ``NAME[@GPU]``: ``nvmlDeviceRegisterEvents`` answers the NVML error ``NAME``
  (e.g. ``NotSupported``, ``NoPermission``) on every GPU, or on GPU ``GPU`` only: no Xid events there.

- ``slow``: ``GPU[;GPU]``: with ``busy=1``, those GPUs run at a quarter of the others' SM
  activity, tensor activity and DRAM traffic and at half their power (a straggler).

- ``topology``: ``hgx8`` (8 x H200 on NVSwitch, two NUMA nodes, GPU 5's link 3 counting CRC
  errors) or ``pcie4`` (4 x H100 PCIe in NVLink-bridged pairs under two PCIe switches on two
  NUMA nodes, GPU 1 at x8 Gen4 under x16 Gen5, one bridge link down): these GPUs instead of
  ``gpus`` (:mod:`gpuscope.testing._fake_nvml_topology`).

- ``sick``: an NVML error name (e.g. ``Unknown``) that every per-sample metric call answers
  (:data:`METRIC_SYMBOLS`) while init, the GPU count and identity still work: a GPU whose every
  metric is an error.

Every model answers NotSupported where the real one does (:data:`MODEL_NOT_SUPPORTED`).

A malformed value raises :class:`gpuscope.errors.UsageError` (one line, exit 2).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from gpuscope.errors import UsageError
from gpuscope.telemetry.nvml.mapping import normalize_uuid, parse_visible_devices
from gpuscope.testing._fake_nvml_topology import TOPOLOGIES
from gpuscope.testing.fake_nvml import GIB, FakeClock, FakeGpu, FakeNvml, error_code, install_fake_nvml

__all__ = [
    "ENV_VAR",
    "Scenario",
    "parse_scenario",
    "build_fake",
    "install_from_environment",
    "cuda_uuids",
]

ENV_VAR = "GPUSCOPE_FAKE_NVML"
_MODELS = ("h100", "h200", "a100", "l4")
_DEFAULT_ERRORS = ("Unknown", "Timeout", "NotSupported", "NoPermission")

#: The scenario installed by :func:`install_from_environment` (one per process), and the
#: context that installed its fake (kept referenced: a collected context manager would restore pynvml).
_installed: Scenario | None = None
_context: contextlib.AbstractContextManager[FakeNvml] | None = None


@dataclass
class Scenario:
    """A parsed ``GPUSCOPE_FAKE_NVML`` value (see the module docstring)."""

    gpus: list[str] = field(default_factory=lambda: ["h200", "h200"])
    links: int | None = None
    random: float = 0.0
    errors: tuple[str, ...] = _DEFAULT_ERRORS
    seed: int = 0
    lose: list[tuple[int, float, float | None]] = field(default_factory=list)
    lost_retry_s: float | None = None
    busy: bool = True
    init_error: str | None = None
    pci_order: list[int] | None = None
    pcie_bits: int | str = 64
    gpm_no_permission: bool = False
    driver: str | None = None
    sick: str | None = None
    xids: list[tuple[int, int, float, int]] = field(default_factory=list)  # (xid, count, seconds, GPU)
    events_error: tuple[str, int | None] | None = None
    slow: list[int] = field(default_factory=list)  # straggler GPUs (busy=1)
    topology: str | None = None  # a scripted node (TOPOLOGIES) instead of ``gpus``


def _number(key: str, text: str, low: float, high: float) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{ENV_VAR}: {key}={text!r} is not a number") from None
    if not low <= value <= high:
        raise UsageError(f"{ENV_VAR}: {key}={text!r} must be between {low:g} and {high:g}")
    return value


def _gpus(text: str) -> list[str]:
    gpus: list[str] = []
    for part in text.split("+"):
        match = re.fullmatch(r"(?:(\d+)x)?([a-z0-9]+)", part.strip().lower())
        if match is None or match.group(2) not in _MODELS:
            raise UsageError(f"{ENV_VAR}: gpus item {part!r} is not [Nx]MODEL with MODEL one of {', '.join(_MODELS)}")
        count = int(match.group(1) or 1)
        if not 1 <= count <= 64:
            raise UsageError(f"{ENV_VAR}: gpus item {part!r}: between 1 and 64 GPUs of a model")
        gpus.extend([match.group(2)] * count)
    return gpus


def parse_scenario(text: str) -> Scenario:
    """Parse a ``GPUSCOPE_FAKE_NVML`` value. Raises :class:`UsageError` naming the bad item."""
    scenario = Scenario()
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            raise UsageError(f"{ENV_VAR}: item {item!r} is not key=value")
        if key == "gpus":
            scenario.gpus = _gpus(value)
        elif key == "links":
            scenario.links = int(_number(key, value, 0, 18))
        elif key == "random":
            scenario.random = _number(key, value, 0.0, 1.0)
        elif key == "errors":
            scenario.errors = tuple(name.strip() for name in value.split("+") if name.strip())
        elif key == "seed":
            scenario.seed = int(_number(key, value, 0, 2**31))
        elif key == "lose":
            for spec in value.split(";"):
                match = re.fullmatch(r"\s*(\d+)@([0-9.]+)(?::([0-9.]+))?\s*", spec)
                if match is None:
                    raise UsageError(f"{ENV_VAR}: lose={spec!r} is not GPU@START[:END]")
                end = None if match.group(3) is None else _number("lose end", match.group(3), 0, 1e9)
                scenario.lose.append((int(match.group(1)), _number("lose start", match.group(2), 0, 1e9), end))
        elif key == "lost_retry_s":
            scenario.lost_retry_s = _number(key, value, 0.01, 3600)
        elif key == "busy":
            scenario.busy = value.strip() not in ("0", "false", "no")
        elif key == "init_error":
            scenario.init_error = value.strip()
        elif key == "pci_order":
            try:
                scenario.pci_order = [int(part) for part in value.split("+")]
            except ValueError:
                raise UsageError(f"{ENV_VAR}: pci_order={value!r} is not +-separated GPU indices") from None
        elif key == "pcie_bits":
            if value.strip() not in ("64", "32", "ull32"):
                raise UsageError(f"{ENV_VAR}: pcie_bits={value!r} must be 64, 32 or ull32")
            scenario.pcie_bits = value.strip() if value.strip() == "ull32" else int(value)
        elif key == "gpm":
            if value.strip() != "noperm":
                raise UsageError(f"{ENV_VAR}: gpm={value!r}: only gpm=noperm is known")
            scenario.gpm_no_permission = True
        elif key == "sick":
            scenario.sick = value.strip()
        elif key == "xid":
            for spec in value.split(";"):
                match = re.fullmatch(r"\s*(\d+)(?:\*(\d+))?@([0-9.]+)(?::(\d+))?\s*", spec)
                if match is None:
                    raise UsageError(f"{ENV_VAR}: xid={spec!r} is not XID[*COUNT]@SECONDS[:GPU]")
                xid, count = int(match.group(1)), int(_number("xid count", match.group(2) or "1", 1, 1e6))
                at_s = _number("xid time", match.group(3), 0, 1e9)
                scenario.xids.append((xid, count, at_s, int(match.group(4) or 0)))
        elif key == "events_error":
            name, _, gpu = value.strip().partition("@")
            if gpu and not gpu.isdigit():
                raise UsageError(f"{ENV_VAR}: events_error={value!r} is not NAME[@GPU]")
            scenario.events_error = (name, int(gpu) if gpu else None)
        elif key == "slow":
            try:
                scenario.slow = [int(part) for part in value.split(";")]
            except ValueError:
                raise UsageError(f"{ENV_VAR}: slow={value!r} is not ;-separated GPU indices") from None
        elif key == "topology":
            if value.strip() not in TOPOLOGIES:
                raise UsageError(f"{ENV_VAR}: topology={value!r} must be one of {', '.join(TOPOLOGIES)}")
            scenario.topology = value.strip()
        elif key == "driver":
            if value.strip() != "550":
                raise UsageError(f"{ENV_VAR}: driver={value!r}: only driver=550 is known")
            scenario.driver = "550"
        else:
            raise UsageError(f"{ENV_VAR}: unknown key {key!r}")
    if scenario.topology is not None:  # the scripted node's GPUs, whatever ``gpus`` said
        scenario.gpus = ["h200"] * len(TOPOLOGIES[scenario.topology]())
    for index, _, _ in scenario.lose:
        if index >= len(scenario.gpus):
            raise UsageError(f"{ENV_VAR}: lose names GPU {index}, but there are {len(scenario.gpus)} GPUs")
    for index in scenario.slow:
        if index >= len(scenario.gpus):
            raise UsageError(f"{ENV_VAR}: slow names GPU {index}, but there are {len(scenario.gpus)} GPUs")
    for _, _, _, index in scenario.xids:
        if index >= len(scenario.gpus):
            raise UsageError(f"{ENV_VAR}: xid names GPU {index}, but there are {len(scenario.gpus)} GPUs")
    if scenario.pci_order is not None and sorted(scenario.pci_order) != list(range(len(scenario.gpus))):
        raise UsageError(f"{ENV_VAR}: pci_order must list each of the {len(scenario.gpus)} GPU indices once")
    return scenario


#: The per-sample metric calls ``sick=`` breaks (identity, init and counts keep working).
METRIC_SYMBOLS = frozenset(
    {
        "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetClockInfo",
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetTemperatureV",
        "nvmlDeviceGetFanSpeed",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        "nvmlDeviceGetFieldValues",
        "nvmlDeviceGetEnforcedPowerLimit",
        "nvmlDeviceGetCurrPcieLinkGeneration",
        "nvmlDeviceGetCurrPcieLinkWidth",
        "nvmlGpmSampleGet",
        "nvmlGpmMetricsGet",
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
        "nvmlDeviceGetProcessUtilization",
    }
)

#: Driver 550 versions for ``driver=550``: driver, NVML, CUDA driver.
_DRIVER_550 = ("550.127.05", "12.550.127.05", 12040)


_BUILDERS: dict[str, Callable[..., FakeGpu]] = {
    "h100": FakeGpu.h100,
    "h200": FakeGpu.h200,
    "a100": FakeGpu.a100,
    "l4": FakeGpu.l4,
}


def build_fake(scenario: Scenario, clock: Callable[[], float] | None = None) -> FakeNvml:
    """The :class:`FakeNvml` of ``scenario`` on ``clock`` (default: a real-time clock); loss
    times count from the clock's time now."""
    clock = clock if clock is not None else FakeClock(real=True)
    gpus = []
    scripted = TOPOLOGIES[scenario.topology]() if scenario.topology else None
    for position, model in enumerate(scenario.gpus):
        gpu = _BUILDERS[model](wobble=0.02, seed=position, pcie_counter_bits=scenario.pcie_bits)
        if scripted is not None:
            gpu = scripted[position]
            gpu.wobble, gpu.seed, gpu.pcie_counter_bits = 0.02, position, scenario.pcie_bits
        if scenario.links is not None:
            gpu.nvlink_links = scenario.links
        gpu.gpm_no_permission = scenario.gpm_no_permission
        if scenario.driver == "550":
            gpu.pcie_counters, gpu.pcie_counters_error = False, "InvalidArgument"
        if scenario.pci_order is not None:
            bus = scenario.pci_order.index(position)
            gpu.pci_bus_id = f"00000000:{0x18 + 0x10 * bus:02X}:00.0"
        gpus.append(gpu)
    init_error = None
    if scenario.init_error:
        try:
            init_error = error_code(scenario.init_error)
        except ValueError:
            raise UsageError(f"{ENV_VAR}: init_error {scenario.init_error!r} is not an NVML error name") from None
    fake = FakeNvml.with_gpus(gpus, clock=clock, init_error=init_error)
    if scenario.driver == "550":
        fake.driver_version, fake.nvml_version, fake.cuda_driver_version = _DRIVER_550
    if scenario.busy:
        for index, gpu in enumerate(gpus):
            fake.set_load(
                index,
                gpu_util_percent=80.0,
                # a busy GPU runs at its boost clock and is not held back as idle
                sm_clock_mhz=float(gpu.max_sm_clock_mhz),
                throttle_reasons=0,
                memory_busy_percent=40.0,
                sm_activity_percent=70.0,
                tensor_activity_percent=50.0,
                dram_bytes_per_s=1.5e12,
                pcie_tx_bytes_per_s=2e9,
                pcie_rx_bytes_per_s=6e9,
                nvlink_tx_bytes_per_s=5e9,
                nvlink_rx_bytes_per_s=5e9,
                power_w=450.0,
                memory_used_bytes=40 * GIB,
            )
        for index in scenario.slow:
            fake.set_load(
                index, sm_activity_percent=17.5, tensor_activity_percent=12.5, dram_bytes_per_s=0.375e12, power_w=225.0
            )
    if scenario.random > 0 and scenario.sick:
        raise UsageError(f"{ENV_VAR}: random and sick cannot be combined")
    if scenario.random > 0:
        try:
            fake.inject_random(scenario.random, seed=scenario.seed, errors=scenario.errors)
        except ValueError as exc:
            raise UsageError(f"{ENV_VAR}: errors: {exc}") from None
    if scenario.sick:
        try:
            fake.inject_random(1.0, seed=scenario.seed, errors=(scenario.sick,), symbols=METRIC_SYMBOLS)
        except ValueError as exc:
            raise UsageError(f"{ENV_VAR}: sick: {exc}") from None
    now = clock()
    for xid, count, at_s, index in scenario.xids:
        fake.inject_xid(index, xid, count=count, at_time_s=now + at_s)
    if scenario.events_error is not None:
        name, only = scenario.events_error
        try:
            code = error_code(name)
        except ValueError:
            raise UsageError(f"{ENV_VAR}: events_error {name!r} is not an NVML error name") from None
        for index, gpu in enumerate(gpus):
            if only is None or only == index:
                gpu.errors["nvmlDeviceRegisterEvents"] = code
    for index, start_s, end_s in scenario.lose:
        fake.lose_gpu(index, at_time_s=now + start_s, until_time_s=None if end_s is None else now + end_s)
    return fake


def install_from_environment() -> Scenario | None:
    """When ``GPUSCOPE_FAKE_NVML`` is set, make pynvml use its fake for the rest of the process
    (once) and return its scenario (whose collector options the caller passes on); else None.
    Raises :class:`UsageError` for a malformed value."""
    global _installed, _context
    text = os.environ.get(ENV_VAR)
    if not text:
        return None
    if _installed is not None:
        return _installed
    scenario = parse_scenario(text)
    context = install_fake_nvml(build_fake(scenario))
    context.__enter__()  # for the rest of the process: these GPUs are simulated
    _installed, _context = scenario, context
    return scenario


def cuda_uuids(fake: FakeNvml, visible_devices: str | None = None) -> list[str]:
    """The UUIDs torch would report for CUDA devices 0, 1, ... on ``fake`` (bare, lower case,
    as ``torch.cuda.get_device_properties(i).uuid``): identical GPUs in PCI bus order, then
    filtered and reordered by ``visible_devices`` (``CUDA_VISIBLE_DEVICES``: indices into that
    order or ``GPU-`` UUIDs). For tests that replace
    :func:`gpuscope.telemetry.nvml.mapping.cuda_device_uuid`."""
    ordered = [normalize_uuid(gpu.uuid) for gpu in sorted(fake.gpus, key=lambda gpu: str(gpu.pci_bus_id))]
    entries = parse_visible_devices(visible_devices)
    if entries is None:
        return ordered
    out: list[str] = []
    for entry in entries:
        if entry.isdigit():
            if int(entry) >= len(ordered):
                break
            out.append(ordered[int(entry)])
        else:
            wanted = normalize_uuid(entry)
            match = [uuid for uuid in ordered if uuid.startswith(wanted)]
            if len(match) != 1:
                break
            out.append(match[0])
    return out
