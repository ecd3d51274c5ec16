"""Collectives as nccl-tests reports them: the five ops over gloo between local processes, busbw
recomputed from the raw per-iteration times by nccl-tests' formulas, p50/p99 and the per-rank
spread, and a rank slowed on purpose found as the straggler."""

from __future__ import annotations

import statistics

import pytest

from gpuscope.probing import cluster
from gpuscope.probing.collective import collective_probe
from gpuscope.probing.collective_stats import (
    OPS,
    STRAGGLER_MARGIN,
    bus_factor,
    iteration_times_s,
    rank_statistics,
    sample_times_s,
)
from gpuscope.probing.context import ProbeContext
from gpuscope.probing.environment import MemoryBudget, parse_device
from gpuscope.probing.stats import percentile
from gpuscope.probing.timing import TimingPolicy
from gpuscope.schema.core import detail_map
from gpuscope.schema.results import Measurement

#: nccl-tests' doc/PERFORMANCE.md, written out again: (op, n) -> factor
NCCL_TESTS_FACTORS = {
    ("allreduce", 4): 2 * 3 / 4,
    ("allgather", 4): 3 / 4,
    ("reducescatter", 4): 3 / 4,
    ("alltoall", 4): 3 / 4,
    ("broadcast", 4): 1.0,
    ("allreduce", 2): 1.0,
    ("broadcast", 2): 1.0,
}


def test_factors_are_nccl_tests() -> None:
    for (op, n), factor in NCCL_TESTS_FACTORS.items():
        assert bus_factor(op, n) == pytest.approx(factor)
    with pytest.raises(ValueError):
        bus_factor("sendrecv", 2)
    assert STRAGGLER_MARGIN == cluster.DEFAULT_STRAGGLER_MARGIN  # the rule probe --distributed states


def test_rank_statistics_from_raw_times() -> None:
    # rank 2 arrives late: it spends least time in the call; the others wait ~4 ms for it
    raw = [[5e-3, 5.2e-3, 5.1e-3, 5e-3], [5.1e-3, 5e-3, 5e-3, 5.3e-3], [1e-3, 1.1e-3, 0.9e-3, 1e-3]]
    stats = rank_statistics(raw, ranks=[0, 1, 2])
    assert stats["iteration_p99_s"] == pytest.approx(percentile(iteration_times_s(raw), 0.99))
    assert stats["iteration_p50_s"] == pytest.approx(statistics.median([5.1e-3, 5.2e-3, 5.1e-3, 5.3e-3]))
    assert stats["rank_min_s"] == pytest.approx(1e-3) and stats["fastest_rank"] == 2
    assert stats["rank_spread"] == pytest.approx(
        (max(map(statistics.mean, raw)) - 1e-3) / max(map(statistics.mean, raw))
    )
    straggler = stats["straggler"]
    assert isinstance(straggler, dict) and straggler["rank"] == 2
    # the rule probe --distributed states: more than the margin below the median (here, of each iteration)
    columns = list(zip(*raw, strict=True))
    fractions = [column[2] / statistics.median(column) for column in columns]
    assert straggler["fraction_of_median"] == pytest.approx(statistics.median(fractions))
    assert straggler["late_iterations_fraction"] == 1.0 and stats["late_iterations"] == {"0": 0, "1": 0, "2": 4}
    assert stats["stragglers"] == [straggler]
    # two ranks slowed: both are named, the more consistent first
    two = [[5e-3] * 5, [5.1e-3] * 5, [1e-3] * 5, [1e-3, 1e-3, 1e-3, 1e-3, 6e-3]]
    named = rank_statistics(two, ranks=[0, 1, 2, 3])["stragglers"]
    assert [s["rank"] for s in named] == [2, 3]  # type: ignore[index, union-attr]
    # late in 3 of 5 iterations (60%) is not consistent
    three = [[5e-3] * 5, [5.1e-3] * 5, [1e-3, 1e-3, 1e-3, 5e-3, 5e-3]]
    assert rank_statistics(three, ranks=[0, 1, 2])["straggler"] is None
    even = [[1e-3, 1.1e-3, 1e-3, 1e-3], [1.05e-3, 1e-3, 1.02e-3, 1.01e-3]]
    assert rank_statistics(even, ranks=[0, 1])["straggler"] is None  # within the margin
    assert sample_times_s(raw, 2) == [pytest.approx(max(5.1e-3, 5.05e-3, 1.05e-3)), pytest.approx(5.15e-3)]


#: one rank's (input, output) bytes for the whole array S over n ranks (nccl-tests' size rule)
def _rank_bytes(op: str, size: int, n: int) -> tuple[int, int]:
    return {"allgather": (size // n, size), "reducescatter": (size, size // n)}.get(op, (size, size))


def _run(ops: list[str], world: int, **slow: float | int) -> list[Measurement]:
    device = parse_device("cpu")
    policy = TimingPolicy(samples=3, target_sample_s=0.01 if not slow else 0.05)
    ctx = ProbeContext(device=device, budget=MemoryBudget(device), ceiling_policy=policy)
    records: list[Measurement] = []
    collective_probe(ops, [64 * 1024], world, ctx, records.append, timeout_s=120, **slow)  # type: ignore[arg-type]
    return records


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 4])
def test_every_op_matches_nccl_tests_formulas(world: int) -> None:
    records = _run(list(OPS), world)
    assert [detail_map(r.parameters)["op"] for r in records] == list(OPS)
    for record in records:
        parameters = detail_map(record.parameters)
        op = str(parameters["op"])
        assert record.status == "ok", (op, record.error)
        assert record.validation_error == 0.0 and record.bytes == 64 * 1024
        assert parameters["group_size"] == world
        # the bytes each rank's tensors hold, against nccl-tests' rule for S
        assert (parameters["rank_input_bytes"], parameters["rank_output_bytes"]) == _rank_bytes(op, 64 * 1024, world)
        timing = detail_map(record.timing)
        raw = timing["rank_iteration_s"]
        assert isinstance(raw, list) and len(raw) == world
        iters = int(timing["inner_reps"])  # type: ignore[arg-type]
        assert all(len(row) == iters * 3 for row in raw)  # type: ignore[union-attr]
        # nccl-tests: t = the slowest rank's time per call, algbw = S / t, busbw = algbw x factor
        best_s = min(sample_times_s(raw, iters))  # type: ignore[arg-type]
        assert record.time_s == pytest.approx(best_s)
        factor = {"allreduce": 2 * (world - 1) / world, "broadcast": 1.0}.get(op, (world - 1) / world)
        recomputed = record.bytes / best_s * factor
        assert record.busbw_bytes_per_s == pytest.approx(recomputed, rel=0.05)
        assert record.algbw_bytes_per_s == pytest.approx(record.bytes / best_s, rel=0.05)
        assert record.bus_factor == pytest.approx(factor)
        assert timing["iteration_p99_s"] == pytest.approx(percentile(iteration_times_s(raw), 0.99))  # type: ignore[arg-type]
        means = [statistics.mean(row) for row in raw]  # type: ignore[union-attr, arg-type]
        assert timing["rank_min_s"] == pytest.approx(min(means)) and timing["rank_max_s"] == pytest.approx(max(means))
        assert timing["rank_spread"] == pytest.approx((max(means) - min(means)) / max(means))
        assert timing["slowest_rank"] == means.index(max(means)) and timing["fastest_rank"] == means.index(min(means))
        assert timing["iteration_p50_s"] <= timing["iteration_p99_s"]  # type: ignore[operator]


@pytest.mark.slow
def test_a_rank_slowed_on_purpose_is_named_the_straggler() -> None:
    records = _run(["allreduce", "broadcast"], 4, slow_rank=2, slow_s=0.008)
    for record in records:
        assert record.status == "ok", record.error
        straggler = detail_map(record.timing)["straggler"]
        assert isinstance(straggler, dict) and straggler["rank"] == 2, detail_map(record.timing)
        assert float(straggler["fraction_of_median"]) < 1 - STRAGGLER_MARGIN  # type: ignore[arg-type]
        assert [s["rank"] for s in detail_map(record.timing)["stragglers"]] == [2]  # type: ignore[index, union-attr]


@pytest.mark.slow
def test_a_slowed_rank_between_two_processes_is_named() -> None:
    records = _run(["allgather"], 2, slow_rank=1, slow_s=0.008)
    straggler = detail_map(records[0].timing)["straggler"]
    assert isinstance(straggler, dict) and straggler["rank"] == 1, detail_map(records[0].timing)
