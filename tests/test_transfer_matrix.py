"""The nvbandwidth-style pair matrix and host table: expected figures from the fake NVML's
topologies, the 80% flag against the best comparable cell, the text tables, and the CUDA entry
point's one line without CUDA (the measurements themselves run in benchmarks/gpu_acceptance.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from gpuscope.probing.transfer_matrix import (
    HostTransfer,
    PairCell,
    PairMatrix,
    expected_cell,
    flag_cells,
    render_host_transfers,
    render_pair_matrix,
)
from gpuscope.telemetry.topology import Topology
from gpuscope.telemetry.topology_read import read_topology
from gpuscope.testing._fake_nvml_topology import hgx_h200_8, pcie_pairs_4
from gpuscope.testing.fake_nvml import FakeClock, FakeNvml, install_fake_nvml


def _topology(gpus: list, tmp_path: Path) -> Topology:  # type: ignore[type-arg]
    with install_fake_nvml(FakeNvml.with_gpus(gpus, clock=FakeClock())):
        return read_topology(tmp_path)


def test_expected_cells_come_from_the_topology(tmp_path: Path) -> None:
    hgx = _topology(hgx_h200_8(), tmp_path)
    assert expected_cell(hgx, 0, 7) == ("NV18", 450e9) and expected_cell(hgx, 7, 0) == ("NV18", 450e9)
    pcie = _topology(pcie_pairs_4(), tmp_path)
    assert expected_cell(pcie, 2, 3) == ("NV11", 300e9)  # 11 links active of the 12 the pair should have
    connection, expected = expected_cell(pcie, 1, 2)
    assert connection == "SYS" and expected == pytest.approx(63.0e9, rel=1e-3)  # at the maximum, not as trained
    assert expected_cell(None, 0, 1) == ("?", None) and expected_cell(pcie, 0, 9) == ("?", None)


def _cells() -> list[PairCell]:
    rates = {(0, 1): 380e9, (1, 0): 385e9, (0, 2): 40e9, (2, 0): 52e9, (1, 2): 51e9, (2, 1): 50e9}
    links = {frozenset({0, 1}): "NV18"}
    return [
        PairCell(src=a, dst=b, bytes_per_s=rate, connection=links.get(frozenset({a, b}), "SYS"))
        for (a, b), rate in rates.items()
    ]


def test_cells_under_80_percent_of_the_best_comparable_are_flagged() -> None:
    cells = flag_cells([*_cells(), PairCell(src=2, dst=2, error="peer access refused", connection="SYS")])
    flagged = {(c.src, c.dst) for c in cells if c.flagged}
    assert flagged == {(0, 2), (2, 2)}  # 40 of the best SYS 52 (77%); an error is flagged too
    share = next(c for c in cells if (c.src, c.dst) == (0, 2)).fraction_of_best
    assert share == pytest.approx(40 / 52)
    assert next(c for c in cells if (c.src, c.dst) == (0, 1)).fraction_of_best == pytest.approx(380 / 385)


def test_matrix_and_host_tables() -> None:
    cells = flag_cells([msgspec.structs.replace(c, expected_bytes_per_s=63e9) for c in _cells()])
    matrix = PairMatrix(
        mode="unidirectional", engine="copy engine", size_bytes=256 * 2**20, repeats=5, devices=[0, 1, 2], cells=cells
    )
    lines = render_pair_matrix(matrix).splitlines()
    assert lines[1].split() == ["measured", "GPU0", "GPU1", "GPU2"]
    assert lines[2].split() == ["GPU0", "-", "380", "40*"]
    assert lines[5].split() == ["expected", "GPU0", "GPU1", "GPU2"] and lines[6].split() == ["GPU0", "-", "63", "63"]
    assert "  GPU0 -> GPU2: 40 GB/s (77% of the best SYS)" in lines
    rows = [
        HostTransfer(name="h2d.ce.pinned", direction="h2d", engine="ce", memory="pinned", bidirectional=False,
                     size_bytes=2**28, bytes_per_s=53.1e9, expected_bytes_per_s=63e9),
        HostTransfer(name="h2d.sm.pinned", direction="h2d", engine="sm", memory="pinned", bidirectional=False,
                     size_bytes=2**28, error="triton not installed"),
    ]  # fmt: skip
    table = render_host_transfers(rows)
    assert "h2d.ce.pinned  256 MiB  53" in table and "triton not installed" in table


def test_cuda_entry_point_without_cuda_is_one_line_exit_4(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    done = subprocess.run(
        [sys.executable, "-m", "gpuscope.probing.transfer_cuda", str(tmp_path / "out.json")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the acceptance run measures it")
    assert done.returncode == 4 and done.stderr.strip().startswith("gpuscope: error: transfers need CUDA")
    assert not (tmp_path / "out.json").exists()


def test_acceptance_reads_the_transfer_report() -> None:
    import importlib.util

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_acceptance.py"
    spec = importlib.util.spec_from_file_location("gpu_acceptance_transfers", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses resolve their annotations through sys.modules, so the script must be registered while it loads
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    cells = flag_cells(_cells())
    report = {
        "device": 0,
        "host": [{"name": "h2d.ce.pinned", "bytes_per_s": 53e9}, {"name": "h2d.sm.pinned", "error": "no triton"}],
        "matrices": [
            {
                "mode": "unidirectional",
                "devices": list(range(8)),
                "seconds": 12.0,
                "cells": [msgspec.to_builtins(c) for c in cells],
            },
            {"mode": "bidirectional", "devices": list(range(8)), "seconds": 75.0, "cells": []},
        ],
        "latency_s": {"h2d": 9.5e-6, "d2h": 1.1e-5, "d2d 0->1": 1.2e-5, "d2d 1->0": 1.4e-5},
    }
    problems, notes = module.transfer_problems(report)
    assert problems == ["pair matrix bidirectional took 75 s (at most 60 s)"]
    assert "pair matrix unidirectional: 8 GPUs in 12.0 s, 1 cell(s) under 80%" in notes
    assert "transfer h2d.sm.pinned: no triton" in notes
    assert "latency h2d 9.5 us, d2h 11.0 us, slowest d2d 1->0 14.0 us" in notes
    assert module.transfer_problems(None)[0] == ["transfers.json is missing or unreadable"]
