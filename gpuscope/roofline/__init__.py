"""The roofline: roofs per device (measured ceilings and datasheet figures), workloads as
points, the terminal chart, ``gpuscope.measure`` and the live position from telemetry.

Modules: :mod:`.model` (pure model), :mod:`.datasheet` (built-in GPU table), :mod:`.loading`
(results files -> model, model <-> JSON, one machine identity), :mod:`.layout` (the picture as
positioned primitives and label cells), :mod:`.paint_text` (plotext painter; the report's
matplotlib painter is :func:`gpuscope.report.charts.roofline_svg`), :mod:`.tables`,
:mod:`.measure` / :mod:`.counting` / :mod:`.timing` (user workloads), :mod:`.live` (estimated
position from activity counters). Nothing here imports Textual; torch loads only when a
measurement runs, plotext only when a chart is drawn.
"""

from __future__ import annotations

from gpuscope.roofline.loading import build_model, load_model, model_to_json
from gpuscope.roofline.model import DeviceKey, DeviceRoofs, Placement, Point, Roof, RooflineModel, place_point

__all__ = [
    "DeviceKey",
    "DeviceRoofs",
    "Placement",
    "Point",
    "Roof",
    "RooflineModel",
    "build_model",
    "load_model",
    "model_to_json",
    "place_point",
]
