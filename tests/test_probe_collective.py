"""Collectives: nccl-tests bus-bandwidth factors, and gloo between two local processes."""

from __future__ import annotations

import os

import pytest

from gpuscope.probing.collective import bus_factor, collective_probe
from gpuscope.probing.context import ProbeContext
from gpuscope.probing.environment import MemoryBudget, parse_device
from gpuscope.probing.timing import TimingPolicy
from gpuscope.schema.core import detail_map
from gpuscope.schema.results import Measurement


def test_bus_factors_match_nccl_tests() -> None:
    assert bus_factor("allreduce", 2) == 1.0
    assert bus_factor("allreduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor("allgather", 8) == pytest.approx(7 / 8)
    with pytest.raises(ValueError):
        bus_factor("sendrecv", 2)


@pytest.mark.slow
def test_gloo_allreduce_and_allgather_between_two_processes() -> None:
    device = parse_device("cpu")
    ctx = ProbeContext(
        device=device, budget=MemoryBudget(device), ceiling_policy=TimingPolicy(samples=2, target_sample_s=0.005)
    )
    records: list[Measurement] = []
    collective_probe(["allreduce", "allgather"], [65536], 2, ctx, records.append, timeout_s=120)
    assert [detail_map(r.parameters)["op"] for r in records] == ["allreduce", "allgather"]
    for record in records:
        assert record.status == "ok", record.error
        assert record.validation_error == 0.0
        parameters = detail_map(record.parameters)
        assert parameters["backend"] == "gloo" and parameters["world_size"] == 2
        assert record.bytes is not None and record.time_s and record.algbw_bytes_per_s is not None
        assert record.algbw_bytes_per_s == pytest.approx(record.bytes / record.time_s)
        assert record.busbw_bytes_per_s == pytest.approx(
            record.algbw_bytes_per_s * bus_factor(str(parameters["op"]), 2)
        )
        assert record.samples_s is not None and len(record.samples_s) == 2


def test_one_rank_is_skipped_with_a_reason() -> None:
    device = parse_device("cpu")
    ctx = ProbeContext(device=device, budget=MemoryBudget(device))
    records: list[Measurement] = []
    collective_probe(["allreduce"], [1024], 1, ctx, records.append)
    assert records[0].status == "skipped" and "two or more" in (records[0].error or "")


def test_children_import_this_gpuscope(tmp_path, monkeypatch):
    import subprocess
    import sys
    from pathlib import Path

    import gpuscope
    from gpuscope.paths import child_env

    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = child_env(EXTRA="1")
    root = str(Path(gpuscope.__file__).resolve().parents[1])
    assert env["PYTHONPATH"].split(os.pathsep) == [root, "/elsewhere"] and env["EXTRA"] == "1"
    shown = subprocess.run(
        [sys.executable, "-c", "import gpuscope; print(gpuscope.__file__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert Path(shown.strip()).resolve() == Path(gpuscope.__file__).resolve()
