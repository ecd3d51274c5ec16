"""What a painter draws: the roofline picture as positioned primitives in data coordinates (x:
FLOP/byte, y: FLOP/s), the device colours and the short names of roofs. Built by
:func:`gpuscope.roofline.layout.layout_roofline`, labels placed by
:func:`gpuscope.roofline.layout_cells.place_labels`, painted by plotext (terminal, TUI) and matplotlib
(report SVG). No Textual, plotext or matplotlib import here.

Every text here is what a painter shows, so names from a results file (devices, roofs,
workloads) are made safe here, once, by the one rule (:func:`gpuscope.textsafe.safe_text`): both
painters then place text whose width is the width shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from gpuscope.roofline.model import DATASHEET, Placement, Roof
from gpuscope.textsafe import safe_text

__all__ = [
    "Style",
    "Segment",
    "RidgeMark",
    "RoofLabel",
    "PointMark",
    "LegendEntry",
    "RooflineLayout",
    "roof_title",
    "DEVICE_COLOURS_DARK",
    "DEVICE_COLOURS_LIGHT",
    "device_colour",
]

#: Colour-blind-safe device colours (Okabe and Ito), CPU devices take the blue family and GPUs
#: the others in order. One list for dark backgrounds, one for light ones.
DEVICE_COLOURS_DARK = ("#56b4e9", "#e69f00", "#009e73", "#cc79a7", "#f0e442", "#d55e00")
DEVICE_COLOURS_LIGHT = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#b08800", "#e69f00")

Style = Literal["envelope", "dtype", "level", "datasheet"]

_LEVEL_TITLES = {"l1": "L1", "l2": "L2", "llc": "LLC", "dram": "DRAM"}


def device_colour(index: int, dark: bool = True) -> str:
    """The ``#rrggbb`` colour of device slot ``index`` (from :attr:`LegendEntry.colour_index`)."""
    colours = DEVICE_COLOURS_DARK if dark else DEVICE_COLOURS_LIGHT
    return colours[index % len(colours)]


def roof_title(roof: Roof, memory_kind: str | None = None) -> str:
    """Short name of a roof: ``"bf16"``, ``"DRAM triad"``, ``"HBM3e"``, ``"PCIe h2d"``."""
    if roof.kind == "memory":
        level = roof.level or roof.name
        title = _LEVEL_TITLES.get(level, level.upper())
        if level == "dram" and roof.source == DATASHEET and memory_kind:
            title = memory_kind
        rest = roof.name.split(".", 1)[1] if "." in roof.name else ""
        return f"{title} {rest}".strip()
    if roof.kind == "transfer":
        head, _, rest = roof.name.partition(".")
        names = {"pcie": "PCIe", "nvlink": "NVLink", "xgmi": "XGMI", "h2d": "H2D", "d2h": "D2H", "d2d": "D2D"}
        nice = names.get(head, head)
        return f"{nice} {rest}".strip()
    if roof.kind == "collective":
        return roof.name.replace(".", " ")
    return roof.name


@dataclass(frozen=True)
class Segment:
    """One straight line in data coordinates (straight on log-log axes too)."""

    x0: float
    y0: float
    x1: float
    y1: float
    device: int  # index into RooflineLayout.legend
    style: Style
    roof: Roof


@dataclass(frozen=True)
class RidgeMark:
    """Where a compute roof meets the DRAM roof: x in FLOP/byte, y in FLOP/s."""

    x: float
    y: float
    device: int
    text: str  # "ridge 5.51 FLOP/B"
    envelope: bool


@dataclass(frozen=True)
class RoofLabel:
    """A roof's label, anchored on its line: a compute roof at its right end, a bandwidth roof
    near its lower-left start. ``slope`` tells the painter how the line runs."""

    text: str
    x: float
    y: float
    device: int
    slope: bool
    priority: int  # lower is placed first
    style: Style
    roof: Roof | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", safe_text(self.text))


@dataclass(frozen=True)
class PointMark:
    """A workload point: ``number`` is its tag (1-based), ``name`` what the table shows."""

    x: float
    y: float
    number: int
    tag: str
    name: str
    device: int
    placement: Placement
    estimated: bool = False
    above_roof: bool = False
    highlighted: bool = False
    dram: bool = False  # the twin at FLOP per DRAM byte measured

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", safe_text(self.name))


@dataclass(frozen=True)
class LegendEntry:
    """One device: its label, hardware name, whether its envelope is measured, its colour slot."""

    label: str
    name: str | None
    device_type: str
    colour_index: int
    envelope_text: str  # "fp32 162 GFLOP/s · DRAM triad 21.2 GB/s (measured)"
    flags: tuple[str, ...] = ()  # "fp32 103% of datasheet fp32: above datasheet: ..."

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", safe_text(self.label))
        object.__setattr__(self, "name", None if self.name is None else safe_text(self.name))
        object.__setattr__(self, "device_type", safe_text(self.device_type))
        object.__setattr__(self, "envelope_text", safe_text(self.envelope_text))
        object.__setattr__(self, "flags", tuple(safe_text(flag) for flag in self.flags))

    @property
    def text(self) -> str:
        who = f"{self.device_type.upper()} {self.name or self.label}"
        return f"{who}: {self.envelope_text}"


@dataclass
class RooflineLayout:
    """Everything a painter draws, in data coordinates; axes are log10 ranges."""

    x_range: tuple[float, float]
    y_range: tuple[float, float]
    segments: list[Segment] = field(default_factory=list)
    ridges: list[RidgeMark] = field(default_factory=list)
    labels: list[RoofLabel] = field(default_factory=list)
    points: list[PointMark] = field(default_factory=list)
    legend: list[LegendEntry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # hidden roofs, above-datasheet flags

    @property
    def empty(self) -> bool:
        return not self.segments and not self.points
