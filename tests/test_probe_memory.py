"""Memory probes: STREAM byte counting, cache-level classification, real tiny kernels, safety."""

from __future__ import annotations

import pytest

from gpuscope.probing import memory
from gpuscope.probing.context import ProbeContext
from gpuscope.probing.environment import MemoryBudget, parse_device
from gpuscope.probing.memory import CacheSizes, WorkingSet, classify, memory_probe, plan_working_sets, stream_bytes
from gpuscope.probing.timing import TimingPolicy
from gpuscope.schema.core import detail_map
from gpuscope.schema.results import Measurement

FAST = TimingPolicy(samples=3, target_sample_s=0.001, warmup_max_s=0.2)
CACHES = CacheSizes(l1_bytes=48 * 1024, l2_bytes=1024 * 1024, llc_bytes=32 * 1024 * 1024, threads=2)


def cpu_context(free_bytes: int = 1 << 34, fraction: float = 0.5) -> ProbeContext:
    device = parse_device("cpu")
    return ProbeContext(
        device=device,
        budget=MemoryBudget(device, fraction, lambda: free_bytes),
        ceiling_policy=FAST,
        contention_retries=0,
    )


@pytest.mark.parametrize("kernel,arrays", [("copy", 2), ("scale", 2), ("add", 3), ("triad", 3), ("read", 1)])
def test_stream_counts_each_named_array_once(kernel: str, arrays: int) -> None:
    assert stream_bytes(kernel, 1000, 8) == arrays * 1000 * 8
    assert memory.KERNEL_ARRAYS[kernel][0] == arrays


def test_write_allocate_is_not_counted() -> None:
    # STREAM: copy moves 16 bytes per element (8 read + 8 written), not 24 with the write-allocate read
    assert stream_bytes("copy", 1, 8) == 16
    assert "write-allocate traffic is not counted" in memory.BYTES_RULE


def test_levels_by_footprint() -> None:
    assert classify(WorkingSet("copy", 48 * 1024, None), CACHES) == "l1"  # 24 KiB per core
    assert classify(WorkingSet("copy", 1024 * 1024, None), CACHES) == "l2"  # 512 KiB per core
    assert classify(WorkingSet("copy", 16 * 1024 * 1024, None), CACHES) == "llc"
    assert classify(WorkingSet("triad", 3 * 128 * 1024 * 1024, None), CACHES) == "dram"
    assert classify(WorkingSet("copy", 40 * 1024 * 1024, None), CACHES) is None  # between LLC and DRAM


def test_auto_plan_has_one_size_per_level_and_dram_arrays_four_times_the_llc() -> None:
    plan = plan_working_sets("triad", "auto", CACHES)
    assert [ws.level for ws in plan] == ["l1", "l2", "llc", "dram"]
    assert plan[-1].array_bytes >= 4 * CACHES.llc_bytes
    sweep = plan_working_sets("copy", "sweep", CACHES)
    sizes = [ws.footprint_bytes for ws in sweep]
    assert sizes == sorted(sizes) and sweep[0].level == "l1" and sweep[-1].level == "dram"


@pytest.mark.parametrize("kernel", ["copy", "scale", "add", "triad", "read"])
def test_tiny_kernels_run_validate_and_count_bytes(kernel: str) -> None:
    records: list[Measurement] = []
    memory_probe([kernel], [64 * 1024], "fp64", cpu_context(), records.append)
    (record,) = records
    assert record.status == "ok", record.error
    p = detail_map(record.parameters)
    elements, passes, threads = (p[key] for key in ("elements_per_thread", "passes_per_call", "threads"))
    assert isinstance(elements, int) and isinstance(passes, int) and isinstance(threads, int)
    assert record.bytes == stream_bytes(kernel, elements, 8) * passes * threads
    assert record.bytes_per_s == pytest.approx(record.bytes / record.time_s)
    assert record.statistic == "best" and record.n == 3
    assert record.implementation


def test_memory_fraction_caps_the_working_set() -> None:
    records: list[Measurement] = []
    # 10 MB free at fraction 0.5: a 64 MiB working set is refused before any allocation
    memory_probe(["copy"], [64 * 1024 * 1024], "fp64", cpu_context(free_bytes=10_000_000), records.append)
    assert records[0].status == "skipped"
    assert "budget" in records[0].error


def test_out_of_memory_at_one_size_is_skipped_and_the_next_size_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    real = memory._ThreadArrays

    def allocate(kernel: str, elements: int, np_dtype: object, seed: int) -> object:
        if elements > 100_000:
            raise MemoryError()
        return real(kernel, elements, np_dtype, seed)

    monkeypatch.setattr(memory, "_ThreadArrays", allocate)
    records: list[Measurement] = []
    memory_probe(["copy"], [8 * 1024 * 1024, 32 * 1024], "fp64", cpu_context(), records.append)
    assert [r.status for r in records] == ["skipped", "ok"]
    assert "out of memory" in records[0].error


def test_wrong_memory_kernel_fails_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(kernel: str, per_thread: list, reps: int, team: object) -> list:
        def run() -> None:
            for t in per_thread:
                t.arrays[1][:] = 0.0  # "copy" that writes zeros

        return [memory._Variant("broken copy", run)]

    monkeypatch.setattr(memory, "_cpu_variants", broken)
    records: list[Measurement] = []
    memory_probe(["copy"], [32 * 1024], "fp64", cpu_context(), records.append)
    assert records[0].status == "failed" and records[0].bytes_per_s is None


@pytest.mark.parametrize("kernel", ["copy", "scale", "add", "triad", "read"])
@pytest.mark.parametrize("reps", [1, 3])
def test_every_implementation_computes_the_kernel(kernel: str, reps: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    monkeypatch.setattr(memory, "LIBRARY_MIN_PASS_BYTES", 0)  # numpy and torch too, on small arrays

    with ThreadPoolExecutor(2) as team:
        per_thread = [memory._ThreadArrays(kernel, 1000, np.float64, seed) for seed in (1, 2)]
        originals = [[a.copy() for a in t.arrays] for t in per_thread]
        variants = memory._cpu_variants(kernel, per_thread, reps, team)
        assert len(variants) >= 2
        for variant in variants:
            for t, arrays in zip(per_thread, originals):  # start each variant from fresh outputs
                for target, source in zip(t.arrays, arrays):
                    target[:] = source
                t.sums = None
            variant.run()
            error, tolerance = memory._validate_cpu(kernel, per_thread, "fp64")
            assert error <= tolerance, variant.name


def test_fp32_cpu_arrays_are_filled_in_their_own_dtype() -> None:
    """A suite may ask for fp32 on the CPU: numpy's generator refuses a float32 ``out`` unless
    told the dtype, which used to fail every fp32 CPU memory measurement."""
    records: list[Measurement] = []
    memory_probe(["triad"], [64 * 1024], "fp32", cpu_context(), records.append)
    (record,) = records
    assert record.status == "ok", record.error
    assert detail_map(record.parameters)["dtype"] == "fp32"
