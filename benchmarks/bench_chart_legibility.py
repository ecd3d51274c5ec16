"""Chart legibility: what the roofline layout still gets wrong, counted at 60, 80, 120 and 160
columns for three pictures (CPU only; CPU + H200 + A100; a dozen workloads on them).

For each picture and width the terminal chart is drawn (plotext, monochrome) and the label
placement of :mod:`gpuscope.roofline.layout` is checked cell by cell against what was drawn:

- ``overlaps``: cells two labels share (target 0);
- ``over_lines``: label cells on a line cell (target 0);
- ``over_points``: label cells on a point or ridge mark (target 0);
- ``dropped``: labels with no free place (not an error: the tables carry them), and how many
  point tags were placed next to their mark;
- ``too_wide``: output lines longer than the width asked for (target 0).

The same counts are taken on the layout alone (its own rasterisation of the lines, plot area
``width - 9`` x ``18`` cells), as the painters other than plotext use it.

Usage: .venv/bin/python benchmarks/bench_chart_legibility.py [--json OUT]
Exit status 1 when any target is missed. Runs in a few seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

WIDTHS = (60, 80, 120, 160)


def _pictures() -> dict[str, Any]:
    """The chart snapshot tests' pictures (support.roofline.CHART_PICTURES)."""
    from gpuscope.roofline.loading import build_model

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/support
    from support.roofline import CHART_PICTURES, typed

    labels = {"cpu_only": "cpu only", "cpu_h200_a100": "cpu + h200 + a100", "dozen_workloads": "dozen workloads"}
    return {
        labels[name]: build_model(typed([(f"{name}.json", make())]), local_cpu=None)
        for name, make in CHART_PICTURES.items()
    }


def measure() -> list[dict[str, Any]]:
    from gpuscope.roofline.layout_cells import legibility, place_labels
    from gpuscope.roofline.paint_text import MONOCHROME_PALETTE, render_roofline_labelled

    rows = []
    for name, model in _pictures().items():
        for width in WIDTHS:
            for all_roofs in (False, True):
                rendered = render_roofline_labelled(model, width, 24, palette=MONOCHROME_PALETTE, all_roofs=all_roofs)
                counts = legibility(rendered.placement) if rendered.placement else {}
                alone = legibility(place_labels(rendered.layout, width - 9, 18))
                points = sum(1 for point in rendered.layout.points)
                tags = sum(
                    1 for text in (rendered.placement.texts if rendered.placement else []) if text.kind == "point"
                )
                rows.append(
                    {
                        "picture": name,
                        "width": width,
                        "all_roofs": all_roofs,
                        "overlaps": counts.get("label_overlaps", -1),
                        "over_lines": counts.get("labels_over_lines", -1),
                        "over_points": counts.get("labels_over_points", -1),
                        "dropped": counts.get("dropped", -1),
                        "point_tags": f"{tags}/{points}",
                        "too_wide": sum(1 for line in rendered.text.splitlines() if len(line) > width),
                        "layout_overlaps": alone["label_overlaps"],
                        "layout_over_lines": alone["labels_over_lines"],
                        "layout_over_points": alone["labels_over_points"],
                    }
                )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="OUT", help="also write the rows as JSON")
    args = parser.parse_args()
    rows = measure()
    columns = list(rows[0])
    widths = [max(len(column), *(len(str(row[column])) for row in rows)) for column in columns]
    print("  ".join(column.ljust(width) for column, width in zip(columns, widths)))
    for row in rows:
        print("  ".join(str(row[column]).ljust(width) for column, width in zip(columns, widths)))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=2)
    missed = [
        row
        for row in rows
        if any(
            row[key] != 0
            for key in (
                "overlaps",
                "over_lines",
                "over_points",
                "too_wide",
                "layout_overlaps",
                "layout_over_lines",
                "layout_over_points",
            )
        )
    ]
    print(
        f"{len(rows) - len(missed)}/{len(rows)} pictures meet every target "
        "(zero overlaps, zero labels over lines or points, no line too wide)"
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
