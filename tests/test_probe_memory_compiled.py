"""The compiled (numba) memory kernels: results checked after repeated passes, the byte count of a
team call, the cache folder, and what happens without numba. No timing assertions."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from gpuscope.probing import clock, jit, memory
from gpuscope.probing.errors import ProbeSkipped
from gpuscope.schema.core import detail_map
from gpuscope.schema.results import Measurement
from gpuscope.telemetry.values import Unavailable
from tests.test_probe_memory import cpu_context

KERNELS = ["copy", "scale", "add", "triad", "read"]


@pytest.fixture
def no_numba(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import numba`` fails as it does where numba is not installed."""
    monkeypatch.setitem(sys.modules, "numba", None)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kernel", KERNELS)
def test_compiled_kernels_compute_the_stream_kernel_over_repeated_passes(kernel: str, dtype: type) -> None:
    from gpuscope.probing.cpu_kernels.stream import KERNELS as COMPILED

    rng = np.random.default_rng(7)
    n = 1001  # not a multiple of any vector width: the loop's tail runs too
    arrays = [(rng.random(n) + 0.5).astype(dtype) for _ in range(memory.KERNEL_ARRAYS[kernel][0])]
    before = [a.astype(np.float64) for a in arrays]
    args = (*arrays, dtype(memory.SCALAR)) if kernel in ("scale", "triad") else tuple(arrays)
    total = COMPILED[kernel](*args, 5)
    tolerance = 1e-12 if dtype is np.float64 else 1e-6
    if kernel == "read":
        assert total == pytest.approx(5 * before[0].sum(), rel=tolerance)
        return
    expected = {
        "copy": lambda: (arrays[1], before[0]),
        "scale": lambda: (arrays[0], memory.SCALAR * before[1]),
        "add": lambda: (arrays[2], before[0] + before[1]),
        # a = b + s*c repeated: b and c are unchanged, so a is the same after 5 passes
        "triad": lambda: (arrays[0], before[1] + memory.SCALAR * before[2]),
    }[kernel]
    got, want = expected()
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tolerance)


def test_the_probe_uses_the_compiled_kernel_and_counts_its_passes() -> None:
    """A variant list with the compiled kernel first; the team call's bytes are STREAM's count
    times passes times threads, and the record says which JIT ran."""
    records: list[Measurement] = []
    memory.memory_probe(["triad"], [96 * 1024], "fp64", cpu_context(), records.append)
    (record,) = records
    assert record.status == "ok", record.error
    p = detail_map(record.parameters)
    trial = p["trial_bytes_per_s"]
    assert isinstance(trial, dict) and memory.COMPILED_NAME in trial
    assert str(p["jit"]).startswith("numba ")
    elements, passes, threads = (p[key] for key in ("elements_per_thread", "passes_per_call", "threads"))
    assert isinstance(elements, int) and isinstance(passes, int) and isinstance(threads, int)
    assert record.bytes == 3 * elements * 8 * passes * threads


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_compiled_kernel_that_computes_wrong_fails_validation(kernel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuscope.probing.cpu_kernels import stream

    def wrong(*args: object) -> float:
        for array in args:
            if isinstance(array, np.ndarray):
                array[::2] = 0.0  # every other element lost
        return 0.0

    monkeypatch.setitem(stream.KERNELS, kernel, wrong)
    monkeypatch.setattr(memory, "_cpu_variants", lambda k, per, reps, team: memory._compiled_variants(
        k, per, reps, lambda fns: lambda: [fn() for fn in fns]))  # fmt: skip
    records: list[Measurement] = []
    memory.memory_probe([kernel], [64 * 1024], "fp64", cpu_context(), records.append)
    assert records[0].status == "failed" and "validation" in (records[0].error or "")


def test_numba_caches_under_gpuscope_cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("GPUSCOPE_CACHE_DIR", str(tmp_path))
    assert jit.numba_cache_dir() == tmp_path / "numba"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "own"))  # the user's own choice wins
    assert jit.numba_cache_dir() == tmp_path / "own"


def test_loaded_numba_writes_its_cache_where_jit_says() -> None:
    numba = jit.load_numba()
    assert not isinstance(numba, Unavailable)
    assert numba.config.CACHE_DIR == str(jit.numba_cache_dir())
    assert "numba_cache_dir" in jit.jit_versions()


@pytest.mark.usefixtures("no_numba")
def test_without_numba_the_answer_is_a_value_not_a_crash() -> None:
    reason = jit.load_numba()
    assert isinstance(reason, Unavailable) and reason.detail == jit.NUMBA_MISSING
    assert jit.unavailable_text(reason) == "unavailable, because numba is not installed"
    assert jit.jit_versions() == {"numba": "unavailable, because numba is not installed"}
    with pytest.raises(ProbeSkipped, match="unavailable, because numba is not installed"):
        jit.require_numba()


def test_disabled_jit_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMBA_DISABLE_JIT", "1")
    reason = jit.load_numba()
    assert isinstance(reason, Unavailable) and "NUMBA_DISABLE_JIT" in reason.detail


@pytest.mark.usefixtures("no_numba")
def test_without_numba_the_probe_runs_numpy_and_says_why() -> None:
    records: list[Measurement] = []
    memory.memory_probe(["copy"], [64 * 1024], "fp64", cpu_context(), records.append)
    (record,) = records
    assert record.status == "ok", record.error
    p = detail_map(record.parameters)
    assert p["jit"] == "unavailable, because numba is not installed"
    assert memory.COMPILED_NAME not in str(record.implementation)
    with ThreadPoolExecutor(1) as team:
        per_thread = [memory._ThreadArrays("copy", 100, np.float64, 1)]
        assert memory._compiled_variants("copy", per_thread, 2, lambda fns: fns[0]) == []
        assert memory._cpu_variants("copy", per_thread, 2, team)


def test_numpy_and_torch_are_tried_only_where_they_can_win(monkeypatch: pytest.MonkeyPatch) -> None:
    with ThreadPoolExecutor(1) as team:
        small = [memory._ThreadArrays("copy", 1000, np.float64, 1)]
        assert [v.name for v in memory._cpu_variants("copy", small, 2, team)] == [memory.COMPILED_NAME]
        monkeypatch.setattr(memory, "LIBRARY_MIN_PASS_BYTES", 16_000)  # one pass is 2 x 8000 bytes
        names = [v.name for v in memory._cpu_variants("copy", small, 2, team)]
        assert names[0] == memory.COMPILED_NAME and len(names) > 1


def test_core_cpus_gives_one_cpu_per_physical_core() -> None:
    import os

    cpus = clock.core_cpus()
    assert len(cpus) == len(set(cpus)) and set(cpus) <= set(os.sched_getaffinity(0))
    assert clock.core_cpus(set()) == []


def test_a_kernel_numba_cannot_compile_leaves_the_libraries_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuscope.probing.cpu_kernels import stream

    def broken(*args: object) -> float:
        raise RuntimeError("LLVM ERROR: no such instruction")

    monkeypatch.setitem(stream.KERNELS, "copy", broken)
    monkeypatch.setattr(memory, "_COMPILE_FAILURES", {})
    records: list[Measurement] = []
    memory.memory_probe(["copy"], [64 * 1024], "fp64", cpu_context(), records.append)
    (record,) = records
    assert record.status == "ok", record.error
    assert memory.COMPILED_NAME not in str(record.implementation)
    jit_text = str(detail_map(record.parameters)["jit"])
    assert jit_text.startswith("unavailable, because numba could not compile copy") and "LLVM ERROR" in jit_text
