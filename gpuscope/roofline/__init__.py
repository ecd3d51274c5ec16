"""The roofline's pure half: roofs per device (measured ceilings and datasheet figures), workloads
as points, the picture and its painters, the live position from telemetry. No torch, no Textual.

Modules, each importing only those above it in this list: :mod:`.units` (number formats),
:mod:`.model` (the pure model and the rules on roof names), :mod:`.datasheet` (built-in GPU table),
:mod:`.stragglers`, :mod:`.loading` (results -> model, one machine identity), :mod:`.shapes` (what
a painter draws), :mod:`.layout_fleet`, :mod:`.layout` (the picture as positioned primitives),
:mod:`.layout_cells` (labels in a cell grid), :mod:`.model_json` (the model's JSON form),
:mod:`.paint_text` (plotext painter; the report's matplotlib painter is
:func:`gpuscope.report.charts.roofline_svg`), :mod:`.tables`, :mod:`.live` (estimated position from
activity counters). The torch half (``gpuscope.measure``) is :mod:`gpuscope.measuring`. plotext
loads only when a chart is drawn.
"""
