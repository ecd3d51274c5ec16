"""Issue 28: compare's symmetric rule, at the command line (two results files in, text and JSON out).

Each difference between two runs is listed once (the second run against the first), and a rise
and the fall that undoes it are judged by the same rule against the same spread (log ratio).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.reports import make_results, write_results

from gpuscope.cli import main


def _compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], first: float, second: float, spread: float
) -> tuple[str, dict]:
    write_results(tmp_path / "a.json", make_results(gpus=1, hbm_bytes_per_s=[first], spread=spread))
    write_results(tmp_path / "b.json", make_results(gpus=1, hbm_bytes_per_s=[second], spread=spread))
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    text = capsys.readouterr().out
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--format", "json"]) == 0
    return text, json.loads(capsys.readouterr().out)


def _triad(flags: list[dict]) -> list[dict]:
    return [flag for flag in flags if flag["name"] == "dram.triad"]


def test_a_difference_is_listed_once_in_text_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """dram.triad 3.0 vs 1.53 TB/s: one flag, b against a ("49% below a"), never also "96% above"."""
    text, data = _compare(tmp_path, capsys, 3.0e12, 1.53e12, 0.01)
    flags = _triad(data["flags"])
    assert len(flags) == 1, flags
    assert flags[0]["run"].endswith("b.json") and flags[0]["text"].count("49% below") == 1
    assert "96%" not in text and text.count("(dram.triad) 49% below") == 1
    assert "log ratio" in data["rule"]


@pytest.mark.parametrize(("first", "second"), [(1.0e12, 1.59e12), (1.59e12, 1.0e12)])
def test_rise_and_fall_are_judged_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], first: float, second: float
) -> None:
    """A 59% rise and the 37% fall that undoes it, against the same spread: both flagged, once each."""
    _, data = _compare(tmp_path, capsys, first, second, 0.095)  # samples spread ±19% each: ±38% in all
    flags = _triad(data["flags"])
    assert len(flags) == 1, flags
    noise = flags[0]["noise_percent"]
    assert 37 < noise < 59, noise  # a percentage rule would flag the rise and not the fall
    word = "above" if second > first else "below"
    assert flags[0]["run"].endswith("b.json"), flags  # the second run, stated against the first
    assert word in flags[0]["text"]


@pytest.mark.parametrize(("first", "second"), [(1.0e12, 1.2e12), (1.2e12, 1.0e12)])
def test_within_the_spread_neither_way_is_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], first: float, second: float
) -> None:
    """A 20% rise and its 17% fall, with a wider spread: neither flagged."""
    _, data = _compare(tmp_path, capsys, first, second, 0.15)
    assert _triad(data["flags"]) == []
