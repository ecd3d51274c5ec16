"""The roofline model: roofs per device, workload points, and where each point sits.

Pure functions and frozen records, no I/O (loading lives in :mod:`gpuscope.roofline.loading`).
Units are in the names: FLOP/s, bytes/s, FLOP/byte. A device's roofs are:

- compute roofs per dtype (``fp64``, ``fp64.tensor``, ``fp32``, ``tf32``, ``bf16``, ``fp16``, ``fp8``);
- memory roofs per level (``l1``, ``l2``, ``llc``, ``dram``; HBM and GDDR count as ``dram``);
- transfer roofs (PCIe each way, NVLink, peer copies) and collective roofs (bus bandwidth).

Attainable FLOP/s at arithmetic intensity I against compute roof C and memory roof M is
``min(C, I * M)``; the ridge point is ``C / M``. A point is memory-bound left of the ridge of the
roofs that bound it and compute-bound right of it; its efficiency is achieved / attainable.
A point more than :data:`ABOVE_ROOF_TOLERANCE` above its roof is flagged: FLOPs or bytes were
miscounted (or, for a warm run, data came from a cache rather than DRAM).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeGuard

from gpuscope.telemetry.values import Unavailable

__all__ = [
    "ABOVE_ROOF_TOLERANCE",
    "MEASURED",
    "DATASHEET",
    "UNIT_FOR_KIND",
    "DeviceKey",
    "Roof",
    "DeviceRoofs",
    "PerCallRates",
    "Point",
    "Placement",
    "Ridge",
    "BandwidthPoint",
    "RooflineModel",
    "attainable_flop_per_s",
    "ridge_point_flop_per_byte",
    "memory_level",
    "dtype_roof_names",
    "roof_serves_dtype",
    "holds_against",
    "best_roof",
    "dtype_roof",
    "compute_roof_for",
    "memory_roof_for",
    "ridge_points",
    "place_point",
    "is_finite_positive",
    "DRAM_ROOF_RULE",
    "ABOVE_DATASHEET_TOLERANCE",
    "ABOVE_DATASHEET_TEXT",
    "is_above_datasheet",
    "AboveDatasheet",
    "datasheet_twin",
    "above_datasheet",
]

#: The one rule that picks a device's default DRAM roof (the one points are judged against and
#: ridge points use).
DRAM_ROOF_RULE = (
    "default DRAM roof: the measured STREAM triad (2 reads + 1 write, the mix of most streaming ops "
    "and the figure STREAM and vendors quote), else the best other DRAM kernel measured, else the datasheet"
)

#: A measured ceiling more than this fraction above its datasheet roof is flagged.
ABOVE_DATASHEET_TOLERANCE = 0.02
ABOVE_DATASHEET_TEXT = "above datasheet: the datasheet entry or the measurement is wrong"


def is_above_datasheet(percent_of_spec: object) -> bool:
    """Whether a measured ceiling at ``percent_of_spec`` % of its datasheet value is flagged."""
    return (
        isinstance(percent_of_spec, (int, float))
        and not isinstance(percent_of_spec, bool)
        and percent_of_spec > 100.0 * (1.0 + ABOVE_DATASHEET_TOLERANCE)
    )


MEASURED = "measured"
DATASHEET = "datasheet"
#: The unit of a roof of each kind.
UNIT_FOR_KIND = {"compute": "FLOP/s", "memory": "B/s", "transfer": "B/s", "collective": "B/s"}

#: A point may sit this fraction above its roof before it is flagged (timing noise: measured
#: roofs are best-of-N, workload times are medians).
ABOVE_ROOF_TOLERANCE = 0.05

Bound = Literal["memory", "compute", "unknown"]


@dataclass(frozen=True, order=True)
class DeviceKey:
    """Which device a roof or point belongs to. Multi-node results carry host and rank."""

    host: str | None
    rank: int | None
    device: str  # "cpu", "cuda:0"

    def label(self, with_host: bool = False) -> str:
        """``"cuda:0"``, or ``"node1:cuda:0"`` / ``"node1/r3:cuda:0"`` when hosts must be told apart."""
        prefix = ""
        if with_host:
            prefix = self.host or ""
            if self.rank is not None:
                prefix = f"{prefix}/r{self.rank}" if prefix else f"r{self.rank}"
        return f"{prefix}:{self.device}" if prefix else self.device

    @property
    def is_cpu(self) -> bool:
        return self.device == "cpu" or self.device.startswith("cpu:")


_LEVEL_ALIASES = {"hbm": "dram", "gddr": "dram", "mem": "dram", "memory": "dram", "l3": "llc"}
_LEVEL_ORDER = ("l1", "l2", "llc", "dram")


def memory_level(name: str) -> str:
    """Memory level of a roof name: ``"dram.triad"`` -> ``"dram"``, ``"l2.copy"`` -> ``"l2"``,
    ``"hbm"`` -> ``"dram"``. Unknown prefixes are returned as they are."""
    head = name.split(".", 1)[0].lower()
    return _LEVEL_ALIASES.get(head, head)


def dtype_roof_names(dtype: str) -> tuple[str, ...]:
    """Compute roof names that can serve ``dtype``: ``"fp64"`` -> ``("fp64.tensor", "fp64")``."""
    if dtype == "fp64":
        return ("fp64.tensor", "fp64")
    return (dtype,)


def roof_serves_dtype(roof_name: str, dtype: str) -> bool:
    """True when a compute roof named ``roof_name`` bounds work of ``dtype``: the same name or a
    variant of it (``"fp64.tensor"`` and ``"fp64"`` for fp64; ``"bf16.mma"`` for bf16)."""
    return roof_name == dtype or roof_name.startswith(dtype + ".")


#: The datasheet transfer roof that measured copies starting with these names are held against.
_TRANSFER_TWINS = {
    "pcie.h2d": ("h2d", "pcie.h2d"),
    "pcie.d2h": ("d2h", "pcie.d2h"),
    "nvlink": ("nvlink", "p2p", "d2d.peer"),
    "xgmi": ("xgmi", "p2p", "d2d.peer"),  # AMD's GPU link: peer copies on an AMD GPU
}


def holds_against(kind: str, measured: str, sheet: str) -> bool:
    """True when a measured ceiling (``kind``, name ``measured``) is held against the datasheet roof
    ``sheet`` of the same kind; the highest such roof is its twin. The one rule for the roofline's
    "above datasheet" and the report's "% of spec": compute the same dtype (any variant:
    ``fp64.tensor`` and ``fp64`` both serve ``fp64``), memory the same level (``dram.triad`` ->
    ``dram``), pinned host copies against PCIe each way, NVLink, P2P and peer copies against
    NVLink; pageable copies and collectives against nothing."""
    if kind == "compute":
        return roof_serves_dtype(sheet, measured.split(".", 1)[0])
    if kind == "memory":
        return memory_level(sheet) == memory_level(measured)
    head = measured.lower()
    if kind != "transfer" or "pageable" in head:
        return False
    return head.startswith(_TRANSFER_TWINS.get(sheet, ()))


@dataclass(frozen=True)
class Roof:
    """One ceiling of one device. ``value`` is FLOP/s for compute roofs, bytes/s otherwise."""

    key: DeviceKey
    kind: str  # compute | memory | transfer | collective
    name: str  # "bf16", "dram.triad", "h2d.pinned", "allreduce.busbw", "pcie.h2d"
    value: float
    unit: str  # "FLOP/s" | "B/s"
    source: str  # MEASURED | DATASHEET
    note: str = ""
    origin: str | None = None  # the results file a measured roof came from
    straggler: bool = False  # a multi-rank run flagged it: more than the margin below the median
    median_value: float | None = None  # median of this ceiling across ranks (same unit), when compared
    size_bytes: float | None = None  # transfer/collective: the message size that reached this rate

    @property
    def below_median_percent(self) -> float | None:
        """How far this roof is below the median across ranks, in percent; None if not compared."""
        if self.median_value is None or self.median_value <= 0:
            return None
        return (1.0 - self.value / self.median_value) * 100.0

    @property
    def level(self) -> str | None:
        """Memory level (``l1``, ``l2``, ``llc``, ``dram``) of a memory roof, else None."""
        return memory_level(self.name) if self.kind == "memory" else None


@dataclass
class DeviceRoofs:
    """All roofs of one device (measured and datasheet), with what is known about the device."""

    key: DeviceKey
    device_type: str  # "gpu" | "cpu" | "unknown"
    name: str | None = None  # NVML device name or CPU model
    datasheet: str | None = None  # label of the matched datasheet entry
    roofs: list[Roof] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: memory ceilings slower than a level farther from the core (gpuscope.roofline.hierarchy):
    #: roof name -> flag text; they are flagged beside "above datasheet" and not drawn as roofs
    out_of_order: dict[str, str] = field(default_factory=dict)

    def of_kind(self, kind: str, source: str | None = None) -> list[Roof]:
        """Roofs of one kind (optionally one source), highest first."""
        found = [roof for roof in self.roofs if roof.kind == kind and (source is None or roof.source == source)]
        return sorted(found, key=lambda roof: -roof.value)

    @property
    def compute(self) -> list[Roof]:
        return self.of_kind("compute")

    @property
    def memory(self) -> list[Roof]:
        return self.of_kind("memory")

    @property
    def transfer(self) -> list[Roof]:
        return self.of_kind("transfer")

    @property
    def collective(self) -> list[Roof]:
        return self.of_kind("collective")

    @property
    def stragglers(self) -> list[Roof]:
        """Roofs a multi-rank run flagged as stragglers (more than the margin below the median)."""
        return [roof for roof in self.roofs if roof.straggler]

    @property
    def straggler(self) -> bool:
        """True when this device (rank) has a straggler roof."""
        return any(roof.straggler for roof in self.roofs)


class PerCallRates:
    """FLOP/s and FLOP/byte of one call, for records with ``flops``, ``bytes``, ``time_s`` (s) and
    ``dram_bytes_measured`` (bytes; None or Unavailable when not measured)."""

    flops: float
    bytes: float
    dram_bytes_measured: float | Unavailable | None

    if TYPE_CHECKING:  # a field of Point, a property of MeasuredWorkload

        @property
        def time_s(self) -> float: ...

    @property
    def flop_per_s(self) -> float | None:
        """Achieved FLOP/s; None without a time."""
        return self.flops / self.time_s if self.time_s > 0 else None

    @property
    def intensity_flop_per_byte(self) -> float | None:
        """FLOP per counted byte; None without bytes."""
        return self.flops / self.bytes if self.bytes > 0 else None

    @property
    def dram_intensity_flop_per_byte(self) -> float | None:
        """FLOP per DRAM byte actually moved (GPM), when measured."""
        dram = self.dram_bytes_measured
        if dram is None or isinstance(dram, Unavailable) or dram <= 0:
            return None
        return self.flops / dram


@dataclass(frozen=True)
class Point(PerCallRates):
    """A workload placed on the chart: FLOPs and bytes of one call, and how long it took."""

    name: str
    key: DeviceKey
    flops: float
    bytes: float  # counted bytes (a lower bound for gpuscope.measure)
    time_s: float
    dtype: str | None = None
    dram_bytes_measured: float | None = None  # GPM-integrated DRAM bytes per call, when known
    bytes_rule: str | None = None
    source: str = "measure"
    warm: bool | None = None
    estimated: bool = False  # a live estimate from activity counters, not a measurement
    note: str = ""
    origin: str | None = None
    straggler: bool = False  # the workload or probe measurement is a straggler's (multi-rank run)


@dataclass(frozen=True)
class BandwidthPoint:
    """One interconnect measurement: a transfer or collective ``link`` (``"h2d.pinned"``,
    ``"allreduce.busbw"``) at one message size, in bytes per second."""

    key: DeviceKey
    link: str
    size_bytes: float
    bytes_per_s: float


@dataclass(frozen=True)
class Ridge:
    """Where a memory roof meets a compute roof."""

    compute: Roof
    memory: Roof
    intensity_flop_per_byte: float


@dataclass(frozen=True)
class Placement:
    """Where a point sits against the roofs of its device."""

    point: Point
    intensity_flop_per_byte: float | None  # the x used for classification
    intensity_basis: str  # "counted bytes" | "DRAM bytes measured"
    compute_roof: Roof | None
    memory_roof: Roof | None
    ridge_flop_per_byte: float | None
    attainable_flop_per_s: float | None
    bound: Bound
    efficiency: float | None  # achieved / attainable, 0..1 (above 1 when above the roof)
    above_roof: bool
    note: str = ""

    @property
    def bounding_roof(self) -> Roof | None:
        """The roof that limits this point: the memory roof left of the ridge, else the compute roof."""
        if self.bound == "memory":
            return self.memory_roof
        if self.bound == "compute":
            return self.compute_roof
        return None


@dataclass
class RooflineModel:
    """Roofs of every device in one or more results files, and every workload placed on them."""

    devices: list[DeviceRoofs] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)
    placements: list[Placement] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    straggler_margin: float | None = None  # the margin a multi-rank run flagged stragglers with
    bandwidths: list[BandwidthPoint] = field(default_factory=list)  # transfers and collectives by message size
    #: The results files' contention warnings ("source: the CPU was 51% busy ..."), also in ``warnings``:
    #: every chart, table and report made from the model repeats them.
    contention: list[str] = field(default_factory=list)
    # Lookups by device key, built once per list (a fleet has thousands of devices and points:
    # a scan per lookup made loading and every table quadratic). Rebuilt when the list is replaced
    # or grows; the list is kept so its id cannot be reused by another.
    _by_key: tuple[list[DeviceRoofs], int, dict[DeviceKey, DeviceRoofs], bool] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _placed: tuple[list[Placement], int, dict[DeviceKey, list[Placement]]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def _device_index(self) -> tuple[dict[DeviceKey, DeviceRoofs], bool]:
        """key -> the first device with that key, and :attr:`multi_host`, for the current list."""
        cached = self._by_key
        if cached is None or cached[0] is not self.devices or cached[1] != len(self.devices):
            index: dict[DeviceKey, DeviceRoofs] = {}
            for device in self.devices:
                index.setdefault(device.key, device)
            multi = len({(key.host, key.rank) for key in index}) > 1
            cached = self._by_key = (self.devices, len(self.devices), index, multi)
        return cached[2], cached[3]

    def placements_of(self, key: DeviceKey) -> list[Placement]:
        """The placements of the points of device ``key``, in model order."""
        cached = self._placed
        if cached is None or cached[0] is not self.placements or cached[1] != len(self.placements):
            grouped: dict[DeviceKey, list[Placement]] = {}
            for placement in self.placements:
                grouped.setdefault(placement.point.key, []).append(placement)
            cached = self._placed = (self.placements, len(self.placements), grouped)
        return cached[2].get(key, [])

    @property
    def stragglers(self) -> list[tuple[DeviceRoofs, Roof]]:
        """Every straggler roof with its device, in device order."""
        return [
            (device, roof)
            for device in self.devices
            for roof in sorted(device.stragglers, key=lambda r: (r.kind, r.name))
        ]

    def device(self, key: DeviceKey) -> DeviceRoofs | None:
        """The first device with ``key``, or None."""
        return self._device_index()[0].get(key)

    @property
    def above_datasheet(self) -> list[AboveDatasheet]:
        """Every measured ceiling above its datasheet roof, in device order."""
        return [item for device in self.devices for item in above_datasheet(device)]

    @property
    def multi_host(self) -> bool:
        """True when devices come from more than one host or rank (labels then name the host)."""
        return self._device_index()[1]

    def device_label(self, key: DeviceKey) -> str:
        return key.label(with_host=self.multi_host)

    def replace_points(self, points: Iterable[Point]) -> RooflineModel:
        """A copy with these points (placed again); the roofs are shared."""
        new_points = list(points)
        return RooflineModel(
            devices=self.devices,
            points=new_points,
            placements=[place_point(point, self.device(point.key)) for point in new_points],
            sources=list(self.sources),
            warnings=list(self.warnings),
            straggler_margin=self.straggler_margin,
            bandwidths=list(self.bandwidths),
            contention=list(self.contention),
        )


# --- pure functions ----------------------------------------------------------------------------


def attainable_flop_per_s(
    intensity_flop_per_byte: float, compute_flop_per_s: float, memory_bytes_per_s: float
) -> float:
    """``min(compute, intensity * memory)``: the roofline at this intensity (FLOP/s)."""
    if intensity_flop_per_byte < 0 or compute_flop_per_s <= 0 or memory_bytes_per_s <= 0:
        raise ValueError("intensity must be >= 0 and roofs > 0")
    return min(compute_flop_per_s, intensity_flop_per_byte * memory_bytes_per_s)


def ridge_point_flop_per_byte(compute_flop_per_s: float, memory_bytes_per_s: float) -> float:
    """Intensity (FLOP/byte) where the memory roof meets the compute roof: ``compute / memory``."""
    if compute_flop_per_s <= 0 or memory_bytes_per_s <= 0:
        raise ValueError("roofs must be > 0")
    return compute_flop_per_s / memory_bytes_per_s


def best_roof(roofs: Iterable[Roof]) -> Roof | None:
    """The highest of ``roofs`` (ties: by name); None when there is none."""
    ranked = sorted(roofs, key=lambda roof: (-roof.value, roof.name))
    return ranked[0] if ranked else None


def dtype_roof(device: DeviceRoofs, dtype: str) -> Roof | None:
    """The measured compute roof of ``dtype`` on ``device``, else its datasheet roof, else None."""
    for source in (MEASURED, DATASHEET):
        found = best_roof(r for r in device.compute if r.source == source and roof_serves_dtype(r.name, dtype))
        if found is not None:
            return found
    return None


def compute_roof_for(device: DeviceRoofs, dtype: str | None) -> Roof | None:
    """The compute roof that bounds a point of ``dtype`` on ``device``.

    The dtype's measured roof when there is one, else its datasheet roof; with no dtype (or no
    roof for it) the highest compute roof of any source, since that is the only safe bound."""
    return (dtype_roof(device, dtype) if dtype else None) or best_roof(device.compute)


def memory_roof_for(device: DeviceRoofs, level: str = "dram") -> Roof | None:
    """The memory roof of ``level`` (default DRAM/HBM) by :data:`DRAM_ROOF_RULE`: the measured
    triad, else the best measured kernel of the level, else the datasheet."""
    memory = [roof for roof in device.memory if roof.level == level]
    measured = [roof for roof in memory if roof.source == MEASURED]
    triad = [roof for roof in measured if roof.name.split(".", 1)[-1] == "triad"]
    return best_roof(triad) or best_roof(measured) or best_roof(memory)


@dataclass(frozen=True)
class AboveDatasheet:
    """A measured ceiling above its datasheet roof: ``ratio`` = measured / datasheet (> 1)."""

    device: DeviceRoofs
    measured: Roof
    datasheet: Roof
    ratio: float

    @property
    def text(self) -> str:
        return (
            f"{self.measured.name} {self.ratio * 100:.0f}% of datasheet {self.datasheet.name}: {ABOVE_DATASHEET_TEXT}"
        )


def datasheet_twin(device: DeviceRoofs, roof: Roof) -> Roof | None:
    """The datasheet roof a measured ``roof`` is held against (the highest one
    :func:`holds_against` accepts); None when there is none."""
    sheets = (other for other in device.roofs if other.source == DATASHEET and other.kind == roof.kind)
    return best_roof(other for other in sheets if holds_against(roof.kind, roof.name, other.name))


def above_datasheet(device: DeviceRoofs) -> list[AboveDatasheet]:
    """Every measured ceiling of ``device`` more than :data:`ABOVE_DATASHEET_TOLERANCE` above its
    datasheet roof (the datasheet entry, its clock, or the measurement is wrong)."""
    found = []
    for roof in device.roofs:
        if roof.source != MEASURED:
            continue
        twin = datasheet_twin(device, roof)
        if twin is not None and twin.value > 0 and roof.value > twin.value * (1 + ABOVE_DATASHEET_TOLERANCE):
            found.append(AboveDatasheet(device, roof, twin, roof.value / twin.value))
    return sorted(found, key=lambda item: (item.measured.kind, item.measured.name))


def ridge_points(device: DeviceRoofs) -> list[Ridge]:
    """Every (compute roof, memory roof) pair's ridge point on one device."""
    ridges = []
    for compute in device.compute:
        for memory in device.memory:
            ridges.append(Ridge(compute, memory, ridge_point_flop_per_byte(compute.value, memory.value)))
    return ridges


def _cache_explains(device: DeviceRoofs, point: Point, intensity: float, achieved: float, compute: Roof) -> Roof | None:
    """A cache-level memory roof under which ``achieved`` fits (a warm run can beat DRAM)."""
    for roof in sorted(device.memory, key=lambda r: _LEVEL_ORDER.index(r.level) if r.level in _LEVEL_ORDER else 99):
        if roof.level == "dram":
            continue
        if achieved <= attainable_flop_per_s(intensity, compute.value, roof.value) * (1 + ABOVE_ROOF_TOLERANCE):
            return roof
    return None


def place_point(point: Point, device: DeviceRoofs | None) -> Placement:
    """Classify ``point`` against the roofs of ``device`` (None: its device has no roofs).

    The x used is FLOP per DRAM byte measured when the point has it, else FLOP per counted byte.
    """
    achieved = point.flop_per_s
    intensity: float | None
    efficiency: float | None
    if point.dram_intensity_flop_per_byte is not None:
        intensity, basis = point.dram_intensity_flop_per_byte, "DRAM bytes measured"
    else:
        intensity, basis = point.intensity_flop_per_byte, "counted bytes"

    def unknown(note: str, compute: Roof | None = None, memory: Roof | None = None) -> Placement:
        return Placement(point, intensity, basis, compute, memory, None, None, "unknown", None, False, note)

    if achieved is None:
        return unknown("no time measured")
    if point.flops <= 0 and point.bytes <= 0 and not point.dram_bytes_measured:
        return unknown("nothing counted: no FLOPs and no bytes")  # a rate of 0 FLOP/s is no verdict
    if device is None:
        return unknown(f"no roofs for {point.key.device}")
    compute = compute_roof_for(device, point.dtype)
    memory = memory_roof_for(device)
    if compute is None and memory is None:
        return unknown(f"no roofs for {point.key.device}")
    if intensity is None:
        # No bytes counted: only the compute roof applies.
        if compute is None:
            return unknown("no bytes counted and no compute roof", compute, memory)
        efficiency = achieved / compute.value
        above = efficiency > 1 + ABOVE_ROOF_TOLERANCE
        note = _above_note(compute, efficiency) if above else "no bytes counted: placed against the compute roof only"
        return Placement(point, None, basis, compute, memory, None, compute.value, "compute", efficiency, above, note)
    if memory is None:
        return unknown(
            "no DRAM roof for this device: bound unknown (run `gpuscope probe` to measure one)", compute, None
        )
    if compute is None:
        attainable = intensity * memory.value
        efficiency = achieved / attainable if attainable > 0 else None
        above = efficiency is not None and efficiency > 1 + ABOVE_ROOF_TOLERANCE
        note = _above_note(memory, efficiency) if above and efficiency is not None else "no compute roof"
        return Placement(point, intensity, basis, None, memory, None, attainable, "memory", efficiency, above, note)
    ridge = ridge_point_flop_per_byte(compute.value, memory.value)
    if intensity <= 0:
        return unknown("zero FLOPs counted", compute, memory)
    attainable = attainable_flop_per_s(intensity, compute.value, memory.value)
    bound: Bound = "memory" if intensity < ridge else "compute"
    efficiency = achieved / attainable
    above = efficiency > 1 + ABOVE_ROOF_TOLERANCE
    note = ""
    if above:
        roof = memory if bound == "memory" else compute
        note = _above_note(roof, efficiency)
        if bound == "memory":
            cache = _cache_explains(device, point, intensity, achieved, compute)
            if cache is not None:
                warm = " (warm run)" if point.warm else ""
                note += f"; fits under the {cache.name} roof: data likely served from cache{warm}"
    return Placement(point, intensity, basis, compute, memory, ridge, attainable, bound, efficiency, above, note)


def _above_note(roof: Roof, efficiency: float) -> str:
    return (
        f"above the {roof.source} {roof.name} roof ({efficiency * 100:.0f}%): "
        "a counting error (FLOPs over-counted or bytes under-counted), not a result"
    )


def is_finite_positive(value: float | None) -> TypeGuard[float]:
    """True for a finite number > 0 (plot-able on a log axis)."""
    return value is not None and math.isfinite(value) and value > 0
