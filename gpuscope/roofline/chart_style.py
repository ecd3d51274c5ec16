"""Style and selection of the roofline chart: the palette, which roofs to draw, their legend
text, colour and marker. Shared by :mod:`gpuscope.roofline.chart` and the TUI."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, replace
from typing import Any, Literal, Sequence, Union

from gpuscope.roofline.model import (
    DATASHEET,
    MEASURED,
    DeviceRoofs,
    Roof,
    RooflineModel,
    compute_roof_for,
    roof_serves_dtype,
)
from gpuscope.roofline.units import format_si

__all__ = [
    "Color",
    "ChartPalette",
    "DEFAULT_PALETTE",
    "MONOCHROME_PALETTE",
    "ChartRoof",
    "roof_label",
    "NARROW_CHART_WIDTH",
    "select_chart_roofs",
    "chart_footnotes",
    "style_roofs",
    "plotext_color",
]

#: A plotext colour: a name ("green+"), a 256-colour index, an RGB tuple, or "#rrggbb".
Color = Union[str, int, tuple[int, int, int]]


@dataclass(frozen=True)
class ChartPalette:
    """Colours and markers of the roofline chart. The TUI passes its theme's chart colours.

    Roofs of one device type cycle through their tuple; datasheet roofs use the dim colour of
    their device type and the dotted marker."""

    # greens, cyans, blues (256 colours); enough that a GPU's default roofs rarely share one
    gpu_roofs: tuple[Color, ...] = (46, 51, 39, 43, 34, 37, 49, 45, 33, 121, 86, 27)
    cpu_roofs: tuple[Color, ...] = (214, 220, 208, 178, 202, 226, 172, 215, 222, 166, 180)  # oranges and yellows
    gpu_datasheet: Color = 65  # dim green
    cpu_datasheet: Color = 137  # dim tan
    points: Color = "default"
    highlight: Color = 201  # magenta
    estimated: Color = 250  # light grey
    above_roof: Color = 196  # red
    straggler: Color = 203  # light red: a roof a multi-rank run flagged as a straggler
    text: Color = "default"
    canvas: Color = "default"
    axes: Color = "default"
    use_color: bool = True
    gpu_markers: tuple[str, ...] = ("braille",)  # measured GPU roofs cycle through these
    cpu_markers: tuple[str, ...] = ("braille",)
    datasheet_marker: str = "·"
    point_marker: str = "●"
    dram_point_marker: str = "○"
    highlight_marker: str = "◆"
    estimated_marker: str = "◇"
    straggler_marker: str = "braille"  # monochrome: "!"

    def with_colors(self, **colors: Color) -> "ChartPalette":
        """A copy with some colours replaced (``"#rrggbb"`` strings are accepted)."""
        return replace(self, **colors)


DEFAULT_PALETTE = ChartPalette()

#: For a non-TTY or ``NO_COLOR``: no escape codes; roofs told apart by marker (GPU roofs braille,
#: ``x``, ``*``, ...; CPU roofs ``+``, ``o``, ``=``, ...; datasheet roofs ``·``).
MONOCHROME_PALETTE = ChartPalette(
    use_color=False,
    gpu_markers=("braille", "x", "*", "#", "@", "$", "&", "s", "z", "v", "n", "k"),
    cpu_markers=("+", "o", "=", "%", "~", "^", "?", "c", "u", "w", "m", "j"),
    straggler_marker="!",
)


@dataclass(frozen=True)
class ChartRoof:
    """One roof as drawn: the roof, its legend text, and (once styled) its colour and marker."""

    roof: Roof
    device: DeviceRoofs
    legend: str
    color: Color = "default"
    marker: str = "braille"

    @property
    def legend_sample(self) -> str:
        """Two characters that look like the line: ``"──"`` solid, ``"··"`` dotted, or the marker."""
        if self.marker == "braille":
            return "──"
        if self.marker in ("hd", "fhd", "sd", "dot"):
            return "▪▪"
        return self.marker * 2


_LEVEL_TITLES = {"l1": "L1", "l2": "L2", "llc": "LLC", "dram": "DRAM"}


def roof_label(roof: Roof, memory_kind: str | None = None) -> str:
    """Short human name of a roof: ``"bf16"``, ``"DRAM triad"``, ``"HBM3"``, ``"PCIe h2d"``."""
    if roof.kind == "memory":
        level = roof.level or roof.name
        title = _LEVEL_TITLES.get(level, level.upper())
        if level == "dram" and roof.source == DATASHEET and memory_kind:
            title = memory_kind
        rest = roof.name.split(".", 1)[1] if "." in roof.name else ""
        return f"{title} {rest}".strip()
    if roof.kind == "transfer":
        head, _, rest = roof.name.partition(".")
        nice = {"pcie": "PCIe", "nvlink": "NVLink", "h2d": "H2D", "d2h": "D2H", "d2d": "D2D"}.get(head, head)
        return f"{nice} {rest}".strip()
    if roof.kind == "collective":
        return roof.name.replace(".", " ")
    return roof.name


def _memory_kind(device: DeviceRoofs, roof: Roof) -> str | None:
    # Datasheet DRAM notes read "<label> <memory kind>", e.g. "H100 SXM HBM3".
    if roof.source == DATASHEET and roof.note:
        return roof.note.split()[-1]
    return None


#: Below this many columns the default chart leaves out the datasheet roofs whose measured twin
#: is drawn (the legend would not fit); :func:`chart_footnotes` says so under the chart.
NARROW_CHART_WIDTH = 100


def select_chart_roofs(
    model: RooflineModel, detail: Literal["main", "all"] = "main", width: int | None = None
) -> list[ChartRoof]:
    """The roofs worth drawing. ``"all"`` draws every roof. ``"main"`` (the default of the
    terminal chart, the TUI and the HTML report) keeps, per device:

    - compute: the best measured roof of every measured dtype, and the datasheet roof of the same
      dtype (dimmer, so the gap shows); the roofs of the dtypes its workloads use; the highest
      datasheet roof when nothing was measured;
    - memory: the best measured kernel of every level (L1, L2, LLC, DRAM), and the datasheet
      roof of each level that has one;
    - transfer: the best measured roof per direction (h2d, d2h, d2d, peer, NVLink), and the
      datasheet PCIe or NVLink roof it is held against;
    - collective: one roof per collective, bus bandwidth (algbw only where no busbw exists);
    - every straggler roof.

    With ``width`` below :data:`NARROW_CHART_WIDTH` the datasheet roofs whose measured twin is
    drawn are left out (``"main"`` only)."""
    chosen: list[ChartRoof] = []
    # One device: the header above the chart names it, so the legend leaves it out (it fits
    # in two columns at 60 characters).
    single = sum(1 for device in model.devices if device.roofs) == 1
    for device in model.devices:
        if not device.roofs:
            continue
        label = "" if single else model.device_label(device.key) + " "
        if detail == "all":
            picked = sorted(device.roofs, key=_roof_order)
        else:
            picked = _main_roofs(model, device)
            if width is not None and width < NARROW_CHART_WIDTH:
                picked = [roof for roof in picked if not _has_measured_twin(roof, picked)]
        for roof in picked:
            text = roof_label(roof, _memory_kind(device, roof))
            value = format_si(roof.value, "", 3)
            unit = "FLOP/s" if roof.kind == "compute" else "B/s"
            suffix = " (datasheet)" if roof.source == DATASHEET else ""
            if roof.straggler:
                below = roof.below_median_percent
                suffix += " straggler" + (f" -{below:.0f}% vs median" if below is not None else "")
            chosen.append(ChartRoof(roof, device, f"{label}{text} {value}{unit}{suffix}"))
    return chosen


def chart_footnotes(model: RooflineModel, detail: Literal["main", "all"] = "main", width: int | None = None) -> list[str]:
    """Lines (at most ``width`` wide) printed under the legend: what the default selection left
    out at this width."""
    if detail == "all" or width is None or width >= NARROW_CHART_WIDTH:
        return []
    hidden = len(select_chart_roofs(model, detail)) - len(select_chart_roofs(model, detail, width))
    if hidden <= 0:
        return []
    roofs = "roof" if hidden == 1 else "roofs"
    text = f"{hidden} datasheet {roofs} with a measured twin hidden below {NARROW_CHART_WIDTH} columns (--all-roofs shows every roof)"
    return textwrap.wrap(text, max(20, width))


def _has_measured_twin(roof: Roof, picked: Sequence[Roof]) -> bool:
    """A datasheet roof whose measured counterpart (same dtype, or same memory level) is drawn."""
    if roof.source != DATASHEET or roof.straggler:
        return False
    for other in picked:
        if other.source != MEASURED or other.kind != roof.kind:
            continue
        if roof.kind == "compute" and roof_serves_dtype(roof.name, _dtype_of(other.name)):
            return True
        if roof.kind == "memory" and other.level == roof.level:
            return True
        if roof.kind == "transfer" and _transfer_datasheet_name(other.name) == roof.name:
            return True
    return False


def _dtype_of(compute_roof_name: str) -> str:
    """``"fp64.tensor"`` -> ``"fp64"``, ``"bf16"`` -> ``"bf16"``."""
    return compute_roof_name.split(".", 1)[0]


def _roof_order(roof: Roof) -> tuple[Any, ...]:
    kinds = {"compute": 0, "memory": 1, "transfer": 2, "collective": 3}
    return (kinds.get(roof.kind, 9), 0 if roof.source == MEASURED else 1, -roof.value)


def _best(roofs: Sequence[Roof]) -> Roof | None:
    return max(roofs, key=lambda roof: roof.value) if roofs else None


def _transfer_group(name: str) -> str:
    """Transfer roofs of one direction share a group: ``"h2d.pinned"`` and ``"h2d.pageable"``
    -> ``"h2d"``; ``"d2d.peer"`` stays apart from ``"d2d"``."""
    head, _, rest = name.partition(".")
    return head if rest in ("", "pinned", "pageable") else name


def _transfer_datasheet_name(name: str) -> str | None:
    """The datasheet transfer roof a measured one is held against (as the report's tables do):
    pinned or plain host copies against PCIe each way, NVLink and peer copies against NVLink;
    pageable copies and on-device copies have none."""
    head = name.lower()
    if "pageable" in head:
        return None
    if head.startswith(("h2d", "pcie.h2d")):
        return "pcie.h2d"
    if head.startswith(("d2h", "pcie.d2h")):
        return "pcie.d2h"
    if head.startswith(("nvlink", "p2p")):
        return "nvlink"
    return None


def _main_roofs(model: RooflineModel, device: DeviceRoofs) -> list[Roof]:
    picked: list[Roof] = []

    def add(roof: Roof | None) -> None:
        if roof is not None and roof not in picked:
            picked.append(roof)

    measured_compute = device.of_kind("compute", MEASURED)
    datasheet_compute = device.of_kind("compute", DATASHEET)
    dtypes = {_dtype_of(roof.name) for roof in measured_compute}
    dtypes |= {point.dtype for point in model.points if point.key == device.key and point.dtype}
    if not measured_compute and datasheet_compute:
        dtypes.add(_dtype_of(datasheet_compute[0].name))
    if not dtypes:
        add(compute_roof_for(device, None))
    for dtype in sorted(dtypes):
        # Every measured variant of the dtype ("fp64" and "fp64.tensor" are different roofs).
        measured = [roof for roof in measured_compute if roof_serves_dtype(roof.name, dtype)]
        for name in sorted({roof.name for roof in measured}):
            add(_best([roof for roof in measured if roof.name == name]))
        add(_best([roof for roof in datasheet_compute if roof_serves_dtype(roof.name, dtype)]))
    if any(point.key == device.key and not point.dtype for point in model.points):
        add(compute_roof_for(device, None))
    levels = {roof.level for roof in device.memory}
    ordered_levels = [level for level in ("l1", "l2", "llc", "dram") if level in levels]
    ordered_levels += sorted(level for level in levels if level not in ordered_levels and level is not None)
    for level in ordered_levels:
        for source in (MEASURED, DATASHEET):
            add(_best([roof for roof in device.memory if roof.level == level and roof.source == source]))
    transfers = device.of_kind("transfer", MEASURED)
    for group in sorted({_transfer_group(roof.name) for roof in transfers}):
        best = _best([roof for roof in transfers if _transfer_group(roof.name) == group])
        add(best)
        twin = _transfer_datasheet_name(best.name) if best is not None else None
        add(_best([roof for roof in device.of_kind("transfer", DATASHEET) if roof.name == twin]))
    collectives = device.of_kind("collective", MEASURED)
    for op in sorted({roof.name.split(".", 1)[0] for roof in collectives}):
        mine = [roof for roof in collectives if roof.name.split(".", 1)[0] == op]
        busbw = [roof for roof in mine if roof.name.endswith(".busbw")]
        add(_best(busbw or mine))
    for roof in device.stragglers:  # a straggler's slow roof is always drawn
        add(roof)
    return sorted(picked, key=_roof_order)


def plotext_color(palette: ChartPalette, color: Color) -> Color | None:
    """A colour plotext accepts (``"#rrggbb"`` -> RGB tuple); None in monochrome."""
    if not palette.use_color:
        return None
    if isinstance(color, str) and color.startswith("#") and len(color) == 7:
        return (int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16))
    return color


def style_roofs(roofs: Sequence[ChartRoof], palette: ChartPalette) -> list[ChartRoof]:
    """Give each roof its colour and marker: GPU and CPU roofs cycle through their own colours
    (and, in monochrome, markers); datasheet roofs take the dim colour and the dotted marker;
    straggler roofs of a multi-rank run take the straggler colour and marker."""
    styled = []
    gpu_index = cpu_index = 0
    for chart_roof in roofs:
        is_cpu = chart_roof.device.device_type == "cpu"
        if chart_roof.roof.source == DATASHEET:
            color = palette.cpu_datasheet if is_cpu else palette.gpu_datasheet
            marker = palette.datasheet_marker
        else:
            colors = palette.cpu_roofs if is_cpu else palette.gpu_roofs
            markers = palette.cpu_markers if is_cpu else palette.gpu_markers
            position = cpu_index if is_cpu else gpu_index
            color = colors[position % len(colors)] if colors else "default"
            marker = markers[position % len(markers)] if markers else "braille"
            if is_cpu:
                cpu_index += 1
            else:
                gpu_index += 1
            if chart_roof.roof.straggler:
                color, marker = palette.straggler, palette.straggler_marker
        styled.append(replace(chart_roof, color=color, marker=marker))
    return styled
