"""Issue 28 (narrow screens): `gpuscope roofline` at 60, 80, 100 and 160 columns (the terminal's
width from $COLUMNS). No line is longer than the width; every number the tables print parses and
equals the `--json` value rounded to what was printed (a number is never cut: its column is left
out whole); columns go in the stated order (gpuscope.roofline.tables.POINTS_DROP_ORDER,
ROOFS_DROP_ORDER) and the table says which; names shrink with "…" before numbers go."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.cluster import multi_rank_results
from support.profiles import profile_results
from support.roofline import fleet_results, workload, write_results

from gpuscope.cli import main
from gpuscope.roofline.columns import distinct_cuts, fit_columns, format_fitted
from gpuscope.roofline.tables import POINTS_DROP_ORDER, ROOFS_DROP_ORDER

WIDTHS = [60, 80, 100, 160]
LONG_NAME = "transformer block fwd+bwd bf16 seq 4096 batch 8"  # 47 characters

_NUMBER = re.compile(r"^(-?\d+(?:\.\d+)?)\s?([kMGTPE]?)(?:B|FLOP/s|B/s)?$")
_SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


def _long_names() -> dict[str, Any]:
    document = fleet_results()
    document["workloads"].append(workload(LONG_NAME, "cuda:0", 2.2e12, 1.1e9, 0.004, dtype="bf16"))
    return document


DOCUMENTS = {"fleet": fleet_results, "long_names": _long_names, "ranks": multi_rank_results, "profile": profile_results}


def _number(text: str) -> float:
    """The value a table cell prints ("2.24G", "790 TFLOP/s", "58%", "0.167"); fails on a cut one."""
    if text.endswith("%"):
        return float(text[:-1]) / 100
    match = _NUMBER.match(text)
    assert match, f"not a whole number: {text!r}"
    return float(match.group(1)) * _SCALE[match.group(2)]


def _close(printed: str, value: float) -> None:
    """``printed`` is ``value`` rounded to the digits printed (3 significant, or whole percent)."""
    got = _number(printed)
    tolerance = 0.0051 if printed.endswith("%") else 0.0051 * abs(value)
    assert abs(got - value) <= tolerance + 1e-12, (printed, value)


def _run(tmp_path: Path, name: str, width: int, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> tuple[str, Any]:
    path = write_results(tmp_path / f"{name}.json", DOCUMENTS[name]())
    monkeypatch.setenv("COLUMNS", str(width))
    monkeypatch.setenv("LINES", "40")
    assert main(["roofline", "--probes", str(path), "--no-color"]) == 0
    text = capsys.readouterr().out
    assert main(["roofline", "--probes", str(path), "--json"]) == 0
    return text, json.loads(capsys.readouterr().out)


def _table(text: str, title: str, first: str) -> tuple[list[str], list[list[str]], list[str]]:
    """The header, the rows (cells split at 2+ spaces) and the lines after a table."""
    lines = text.split(title, 1)[1].splitlines()
    start = next(n for n, line in enumerate(lines) if line.split()[:1] == [first])
    header = re.split(r"\s{2,}", lines[start].strip())
    rows = []
    for line in lines[start + 1 :]:
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) != len(header) or line.startswith("     "):
            if line.startswith("     "):  # a note under a row
                continue
            break
        rows.append(cells)
    rest = lines[start + 1 + len(rows) :]
    return header, rows, rest


def _dropped_in_order(header: list[str], all_headers: list[str], order: tuple[str, ...]) -> list[str]:
    dropped = [name for name in all_headers if name not in header]  # in the table's order
    stated = [name for name in order if name in all_headers]
    assert set(dropped) == set(stated[: len(dropped)]), (dropped, stated)  # the first ones of the order
    return dropped


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_roofline_text_fits_and_keeps_every_number_whole(
    name: str, width: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    text, document = _run(tmp_path, name, width, monkeypatch, capsys)
    long = [line for line in text.splitlines() if len(line) > width]
    assert not long, long
    points = document["points"]

    header, rows, rest = _table(text, "Workloads", "#")
    all_points = ["#", "workload", "bound", "eff.", "roof", "device", "dtype", "FLOP/B", "FLOP/s"]
    all_points += (["FLOP/DRAM B"] if "FLOP/DRAM B" in header else []) + ["FLOP", "bytes"]
    dropped = _dropped_in_order(header, all_points, POINTS_DROP_ORDER)
    if dropped:
        note = " ".join(rest[:3])
        assert f"not shown at {width} columns: {', '.join(dropped)}" in note
    assert len(rows) == len(points)
    for cells, point in zip(rows, points):
        row = dict(zip(header, cells))
        assert point["name"].startswith(row["workload"].removesuffix("…"))
        if "FLOP/s" in row:
            _close(row["FLOP/s"], point["flop_per_s"])
        if "FLOP/B" in row:
            _close(row["FLOP/B"], point["intensity_flop_per_byte"])
        if "FLOP" in row:
            _close(row["FLOP"], point["flops"])
        if "bytes" in row:
            _close(row["bytes"], point["bytes"])
        if point["efficiency"] is None:
            assert row["eff."] == "-"
        else:
            _close(row["eff."], point["efficiency"])
    if width >= 80:  # the 80 columns: both numbers of each point, the name shortened first
        assert "FLOP/B" in header and "FLOP/s" in header
    if width >= 160:
        assert dropped == []

    header, rows, rest = _table(text, "\nRoofs:", "device")
    assert {"device", "roof", "value", "ridge FLOP/B"} <= set(header)
    all_roofs = ["device", "kind", "roof", "value", "source", "ridge FLOP/B", "flag"]
    _dropped_in_order(header, [h for h in all_roofs if h in header or h != "flag"], ROOFS_DROP_ORDER)
    by_label = {device["label"]: device for device in document["devices"]}
    for cells in rows:
        row = dict(zip(header, cells))
        device = by_label[row["device"]]
        value = _number(row["value"])
        roof = min(device["roofs"], key=lambda r: abs(r["value"] - value))
        _close(row["value"], roof["value"])
        if row["ridge FLOP/B"] != "-":
            assert roof["kind"] == "compute"
            _close(row["ridge FLOP/B"], roof["value"] / device["envelope"]["memory"]["value"])


def test_names_shrink_before_numbers_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    text, _ = _run(tmp_path, "long_names", 80, monkeypatch, capsys)
    header, rows, _ = _table(text, "Workloads", "#")
    names = [dict(zip(header, cells))["workload"] for cells in rows]
    long = next(name for name in names if name.startswith("transformer"))
    assert long.endswith("…") and 16 <= len(long) < len(LONG_NAME)  # not 45 characters
    assert "FLOP/B" in header and "FLOP/s" in header


def test_fit_columns_drops_in_the_stated_order_and_never_cuts_a_number() -> None:
    headers = ["name", "kind", "value", "extra"]
    rows = [["a very long workload name", "compute", "790 TFLOP/s", "12345"], ["b", "memory", "4.3 TB/s", "6"]]
    whole = fit_columns(headers, rows, None, drop_order=[3, 1], shrink=[0])
    assert whole.kept == (0, 1, 2, 3) and whole.rows[0][0] == rows[0][0]
    # 25 + 7 + 11 + 5 + 6 = 54: the name gives up to 12 cells first (41), then "extra", then "kind"
    assert fit_columns(headers, rows, 50, drop_order=[3, 1], shrink=[0]).kept == (0, 1, 2, 3)
    fitted = fit_columns(headers, rows, 40, drop_order=[3, 1], shrink=[0])
    assert fitted.kept == (0, 1, 2) and fitted.dropped == (3,)
    assert fitted.rows[0][0].endswith("…") and fitted.rows[0][2] == "790 TFLOP/s"
    assert all(len(line) <= 40 for line in format_fitted(fitted))
    fitted = fit_columns(headers, rows, 20, drop_order=[3, 1], shrink=[0])
    assert fitted.kept == (0, 2) and fitted.rows[0][1] == "790 TFLOP/s"
    assert all(len(line) <= 20 for line in format_fitted(fitted))
    # the last resort: columns outside the stated order go from the right, numbers still whole
    fitted = fit_columns(headers, rows, 12, drop_order=[], shrink=[0])
    assert 2 not in fitted.kept or fitted.rows[0][fitted.kept.index(2)] == "790 TFLOP/s"
    assert all(len(line) <= 12 for line in format_fitted(fitted))


def test_text_cut_alike_is_told_apart_by_its_last_words() -> None:
    """Different names that the column would cut to the same text keep their start and last whole
    words instead; a name alone in its cut, or names no tail tells apart, keep the plain cut."""
    names = ["mm fp32 1x128, 128x128", "mm fp32 1x128, 128x344", "add fp32 1x1x1", "mm fp32 1x128, 128x128"]
    assert distinct_cuts(names, 12) == ["mm f…128x128", "mm f…128x344", "add fp32 1x…", "mm f…128x128"]
    alike = ["matmul fp32 4096x4096, 4096x4096", "matmul fp32 4096x1024, 1024x4096"]
    assert distinct_cuts(alike, 12) == ["matmul fp32…", "matmul fp32…"]  # no tail of whole words fits
    assert distinct_cuts(alike, 16) == ["matmul…4096x4096", "matmul…1024x4096"]
    assert distinct_cuts(["dram.triad", "dram.copy"], 6) == ["dram.…", "dram.…"]  # one word: nothing to keep
    # one name without a tail keeps the plain cut when the others' tails tell them apart from it
    step = "gpuscope.profiling.compiled_examples:transformer_train_step"
    assert distinct_cuts([step, f"{step} (eager)"], 34) == [step[:33] + "…", step[:26] + "…(eager)"]
    fitted = fit_columns(["name", "value"], [[names[0], "1 GB/s"], [names[1], "2 GB/s"]], 20, shrink=[0])
    assert [row[0] for row in fitted.rows] == ["mm f…128x128", "mm f…128x344"]
