"""Theme files: TOML that defines a Textual theme and the chart colours. Nothing in them runs.

A theme file (``themes/*.toml`` shipped with gpuscope, or ``<config dir>/themes/*.toml``)::

    [theme]
    name = "gpuscope-dark"          # letters, digits, '-', '_', '.'
    dark = true
    primary = "#4ea1ff"             # required; any colour Textual parses (#rgb, #rrggbb, rgb(...), names)
    secondary = "#..."              # optional: secondary accent warning error success foreground
    ...                             #           background surface panel boost
    [theme.variables]               # optional Textual CSS variables, name = colour/value string
    footer-key-foreground = "#..."

    [chart]                         # all optional; missing keys come from the default palette
    series = ["#...", "#..."]       # history charts, one colour per GPU (cycled)
    gpu_roofs = ["#...", ...]       # roofline: one colour per GPU, for its roofs and points (cycled)
    cpu_roofs = ["#...", ...]       # roofline: the first CPU, then the others (cycled)
    point = "#..."                  # workload / probe points
    highlight = "#..."              # the point selected in the table
    live = "#..."                   # live positions estimated from activity counters
    above_roof = "#..."             # a point above its roof (a counting error)
    axes = "#..."
    bar_low = "#..."  bar_mid = "#..."  bar_high = "#..."   # level bars (<50%, <85%, above)

A user theme with the same name as a shipped one replaces it. Any problem (not TOML, unknown
key, bad colour, missing primary) raises :class:`ThemeError` with one line naming the file and
the field; the app shows it and falls back to the default theme.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from textual.color import Color, ColorParseError
from textual.css.stylesheet import Stylesheet
from textual.theme import Theme

from gpuscope.roofline.paint_text import DEFAULT_PALETTE
from gpuscope.schema.core import problem_of
from gpuscope.schema.themes import PALETTE_LISTS, RETIRED_CHART_KEYS, THEME_COLOURS, ChartTable, ThemeFileSpec
from gpuscope.tui.config import read_toml

if TYPE_CHECKING:
    from gpuscope.roofline.paint_text import ChartPalette as RooflinePalette

__all__ = [
    "DEFAULT_THEME",
    "ChartPalette",
    "ThemeFile",
    "ThemeError",
    "load_theme_file",
    "discover_themes",
    "fallback_theme",
]

#: The theme used when none is chosen, or when the chosen one is broken or missing.
DEFAULT_THEME = "gpuscope-dark"


class ThemeError(Exception):
    """A theme file is unreadable or invalid; the message is one line naming file and field."""


@dataclass(frozen=True)
class ChartPalette:
    """Chart colours as ``#rrggbb`` strings (tuples cycle: one colour per device or roof)."""

    series: tuple[str, ...] = ("#4ea1ff", "#ffb000", "#5ad17a", "#ff7eb6", "#b48cff", "#3fd0c9")
    gpu_roofs: tuple[str, ...] = ()  # empty: the roofline's colour-blind-safe device colours
    cpu_roofs: tuple[str, ...] = ()
    point: str = "#f0f0f0"
    highlight: str = "#ff4fd8"
    live: str = "#b0b0b0"
    above_roof: str = "#ff5f5f"
    axes: str = "#9aa0ab"
    bar_low: str = "#5ad17a"
    bar_mid: str = "#ffb000"
    bar_high: str = "#ff5f5f"

    def bar_colour(self, percent: float) -> str:
        """The bar colour for a 0-100 level."""
        if percent >= 85:
            return self.bar_high
        if percent >= 50:
            return self.bar_mid
        return self.bar_low

    def roofline_palette(self) -> RooflinePalette:
        """The roofline chart's palette in these colours (RGB tuples for plotext)."""
        return DEFAULT_PALETTE.with_colors(
            gpu_roofs=tuple(_rgb(c) for c in self.gpu_roofs),
            cpu_roofs=tuple(_rgb(c) for c in self.cpu_roofs),
            points=_rgb(self.point),
            highlight=_rgb(self.highlight),
            estimated=_rgb(self.live),
            above_roof=_rgb(self.above_roof),
            straggler=_rgb(self.above_roof),
            axes=_rgb(self.axes),
        )


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    colour = Color.parse(hex_colour)
    return (colour.r, colour.g, colour.b)


@dataclass(frozen=True)
class ThemeFile:
    """A loaded theme: the Textual theme, its chart palette and where it came from."""

    theme: Theme
    palette: ChartPalette
    source: Path | None = None
    #: One line per retired key the file still has (it loads; the key is ignored).
    notes: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.theme.name


def _colour(value: str, where: str) -> str:
    try:
        colour = Color.parse(value)
    except ColorParseError:
        raise ThemeError(f"{where}: {value!r} is not a colour (use #rrggbb)") from None
    if colour.ansi is not None:  # Textual cannot derive a theme's shades from a terminal colour
        raise ThemeError(f"{where}: {value!r} is an ANSI colour name; use #rrggbb")
    return colour.hex


def parse_theme(data: dict[str, Any], source: str) -> ThemeFile:
    """Build a :class:`ThemeFile` from parsed TOML ``data`` (checked against
    :class:`gpuscope.schema.themes.ThemeFileSpec`, colours by Textual); ``source`` names it in
    errors: ``<file>: <problem> - at `$.theme.primary```."""
    try:
        spec = msgspec.convert(data, ThemeFileSpec, strict=True)
    except msgspec.ValidationError as exc:
        raise ThemeError(f"{source}: {problem_of(exc)}") from None
    table = spec.theme
    kwargs: dict[str, Any] = {"name": table.name, "dark": table.dark, "variables": dict(table.variables)}
    for key in THEME_COLOURS:
        value = getattr(table, key)
        if value is not None:
            kwargs[key] = _colour(value, f"{source}: [theme] {key}")
    for key in ("luminosity_spread", "text_alpha"):
        if getattr(table, key) is not None:
            kwargs[key] = getattr(table, key)
    palette_kwargs: dict[str, Any] = {}
    notes = tuple(
        f"{source}: [chart] {key} is no longer used (datasheet roofs take their device's colour); remove it"
        for key in RETIRED_CHART_KEYS
        if getattr(spec.chart, key) is not None
    )
    for key in ChartTable.__struct_fields__:
        value = getattr(spec.chart, key)
        if value is None or key in RETIRED_CHART_KEYS:
            continue
        where = f"{source}: [chart] {key}"
        if key in PALETTE_LISTS:
            palette_kwargs[key] = tuple(_colour(item, f"{where}[{i}]") for i, item in enumerate(value))
        else:
            palette_kwargs[key] = _colour(value, where)
    try:
        theme = Theme(**kwargs)
        variables = theme.to_color_system().generate()  # surfaces any colour problem now, not at draw time
        # The variables end up in the app's stylesheet: one that would break it is refused here.
        sheet = Stylesheet(variables={**variables, **theme.variables})
        sheet.add_source("Screen { color: $foreground; }")
        sheet.parse()
    except Exception as exc:  # noqa: BLE001 - Textual's own validation; report it as one line
        raise ThemeError(
            f"{source}: [theme] rejected by Textual ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
        ) from None
    return ThemeFile(theme=theme, palette=ChartPalette(**palette_kwargs), notes=notes)


def load_theme_file(path: Path) -> ThemeFile:
    """Read and validate one theme file. Raises :class:`ThemeError`."""
    try:
        data = read_toml(path, "theme")
    except FileNotFoundError:
        raise ThemeError(f"{path}: no such file") from None
    except ValueError as exc:
        raise ThemeError(str(exc)) from None
    return dataclasses.replace(parse_theme(data, str(path)), source=path)


def discover_themes(folders: list[Path]) -> tuple[dict[str, ThemeFile], list[str]]:
    """Load every ``*.toml`` in ``folders`` (later folders override earlier ones by name).

    Returns the themes by name and one message per file that failed to load (a loaded theme's
    ``notes`` name retired keys it still has)."""
    themes: dict[str, ThemeFile] = {}
    problems: list[str] = []
    for folder in folders:
        try:
            paths = sorted(folder.glob("*.toml"))
        except OSError:
            continue
        for path in paths:
            try:
                loaded = load_theme_file(path)
            except ThemeError as exc:
                problems.append(str(exc))
                continue
            themes[loaded.name] = loaded
    return themes, problems


def fallback_theme() -> ThemeFile:
    """The built-in default, used when even the shipped theme files cannot be read."""
    theme = Theme(
        name=DEFAULT_THEME,
        primary="#4ea1ff",
        secondary="#2d6cb5",
        accent="#ffb000",
        warning="#ffb000",
        error="#ff5555",
        success="#5ad17a",
        foreground="#e6e6e6",
        background="#15171c",
        surface="#1d2027",
        panel="#252a33",
        dark=True,
    )
    return ThemeFile(theme=theme, palette=ChartPalette())
