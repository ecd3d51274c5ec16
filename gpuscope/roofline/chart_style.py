"""Style and selection of the roofline chart: the palette, which roofs to draw, their legend
text, colour and marker. Shared by :mod:`gpuscope.roofline.chart` and the TUI."""

from __future__ import annotations

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
    "select_chart_roofs",
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

    gpu_roofs: tuple[Color, ...] = (46, 51, 39, 43, 34, 37)  # greens, cyans, blues (256 colours)
    cpu_roofs: tuple[Color, ...] = (214, 220, 208, 178, 202)  # oranges and yellows
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
    gpu_markers=("braille", "x", "*", "#", "@", "$", "&"),
    cpu_markers=("+", "o", "=", "%", "~", "^", "?"),
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
        return roof.name.replace(".busbw", " busbw")
    return roof.name


def _memory_kind(device: DeviceRoofs, roof: Roof) -> str | None:
    # Datasheet DRAM notes read "<label> <memory kind>", e.g. "H100 SXM HBM3".
    if roof.source == DATASHEET and roof.note:
        return roof.note.split()[-1]
    return None


def select_chart_roofs(model: RooflineModel, detail: Literal["main", "all"] = "main") -> list[ChartRoof]:
    """The roofs worth drawing. ``"all"`` draws every roof. ``"main"`` keeps, per device: the
    compute roofs of the dtypes its points use and of its highest measured roof (measured and
    datasheet, so the gap between them shows), the best roof per memory level (DRAM measured and
    datasheet), and the best measured transfer and collective roof."""
    chosen: list[ChartRoof] = []
    for device in model.devices:
        if not device.roofs:
            continue
        label = model.device_label(device.key)
        if detail == "all":
            picked = sorted(device.roofs, key=_roof_order)
        else:
            picked = _main_roofs(model, device)
        for roof in picked:
            text = roof_label(roof, _memory_kind(device, roof))
            value = format_si(roof.value, "", 3)
            unit = "FLOP/s" if roof.kind == "compute" else "B/s"
            suffix = " (datasheet)" if roof.source == DATASHEET else ""
            if roof.straggler:
                below = roof.below_median_percent
                suffix += " straggler" + (f" -{below:.0f}% vs median" if below is not None else "")
            chosen.append(ChartRoof(roof, device, f"{label} {text} {value}{unit}{suffix}"))
    return chosen


def _roof_order(roof: Roof) -> tuple[Any, ...]:
    kinds = {"compute": 0, "memory": 1, "transfer": 2, "collective": 3}
    return (kinds.get(roof.kind, 9), 0 if roof.source == MEASURED else 1, -roof.value)


def _main_roofs(model: RooflineModel, device: DeviceRoofs) -> list[Roof]:
    picked: list[Roof] = []

    def add(roof: Roof | None) -> None:
        if roof is not None and roof not in picked:
            picked.append(roof)

    dtypes = {point.dtype for point in model.points if point.key == device.key and point.dtype}
    measured_compute = device.of_kind("compute", MEASURED)
    if measured_compute:
        dtypes.add(measured_compute[0].name)
    datasheet_compute = device.of_kind("compute", DATASHEET)
    if not measured_compute and datasheet_compute:
        dtypes.add(datasheet_compute[0].name)
    if not dtypes:
        add(compute_roof_for(device, None))
    for dtype in sorted(dtypes):
        for source in (MEASURED, DATASHEET):
            candidates = [roof for roof in device.compute if roof.source == source and roof_serves_dtype(roof.name, dtype)]
            add(max(candidates, key=lambda roof: roof.value) if candidates else None)
    if any(point.key == device.key and not point.dtype for point in model.points):
        add(compute_roof_for(device, None))
    levels = [roof.level for roof in device.memory]
    for level in ("l1", "l2", "llc", "dram"):
        if level not in levels:
            continue
        for source in (MEASURED, DATASHEET):
            candidates = [roof for roof in device.memory if roof.level == level and roof.source == source]
            if candidates and (source == MEASURED or level == "dram"):
                add(max(candidates, key=lambda roof: roof.value))
    for kind in ("transfer", "collective"):
        measured = device.of_kind(kind, MEASURED)
        add(measured[0] if measured else None)
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
