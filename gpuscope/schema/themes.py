"""Theme files (TOML) as declared types (the TUI settings file is ``gpuscope.tui.config.Settings``).

They are written by hand, so unknown keys are refused. A theme's colours are strings here; the
TUI checks each with Textual's colour parser (``gpuscope.tui.themes``), refuses ANSI colour names
(Textual cannot derive a theme from them) and CSS variable values that could close a rule
(``{``, ``}``, ``;``).
"""

from __future__ import annotations

from typing import Annotated

import msgspec

__all__ = ["Name", "ThemeTable", "ChartTable", "ThemeFileSpec", "THEME_COLOURS", "PALETTE_LISTS", "RETIRED_CHART_KEYS"]

#: A theme or panel name: letters, digits, '-', '_' and '.'.
Name = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
Colour = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
Colours = Annotated[list[Colour], msgspec.Meta(min_length=1, max_length=32)]
Unit = Annotated[float, msgspec.Meta(ge=0, le=1)]
CssName = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9-]{1,64}$")]
#: A CSS variable value: one line that cannot end the rule it is put in.
CssValue = Annotated[str, msgspec.Meta(pattern=r"^[^{};\r\n]{0,99}$")]

THEME_COLOURS = (
    "primary", "secondary", "accent", "warning", "error", "success",
    "foreground", "background", "surface", "panel", "boost",
)  # fmt: skip
PALETTE_LISTS = ("series", "gpu_roofs", "cpu_roofs")
#: Keys of 0.1.0 themes that nothing draws any more (datasheet roofs take their device's colour and a
#: dash-dot line): a theme that has them still loads, and the TUI says they are ignored.
RETIRED_CHART_KEYS = ("gpu_datasheet", "cpu_datasheet")


class ThemeTable(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``[theme]``: a Textual theme."""

    name: Name
    primary: Colour
    dark: bool = True
    secondary: Colour | None = None
    accent: Colour | None = None
    warning: Colour | None = None
    error: Colour | None = None
    success: Colour | None = None
    foreground: Colour | None = None
    background: Colour | None = None
    surface: Colour | None = None
    panel: Colour | None = None
    boost: Colour | None = None
    luminosity_spread: Unit | None = None
    text_alpha: Unit | None = None
    variables: dict[CssName, CssValue] = msgspec.field(default_factory=dict)


class ChartTable(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``[chart]``: chart colours; a missing one comes from the default palette."""

    series: Colours | None = None
    gpu_roofs: Colours | None = None
    cpu_roofs: Colours | None = None
    point: Colour | None = None
    highlight: Colour | None = None
    live: Colour | None = None
    above_roof: Colour | None = None
    axes: Colour | None = None
    bar_low: Colour | None = None
    bar_mid: Colour | None = None
    bar_high: Colour | None = None
    gpu_datasheet: Colour | None = None  # retired (RETIRED_CHART_KEYS)
    cpu_datasheet: Colour | None = None  # retired (RETIRED_CHART_KEYS)


class ThemeFileSpec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A whole theme file."""

    theme: ThemeTable
    chart: ChartTable = msgspec.field(default_factory=ChartTable)
