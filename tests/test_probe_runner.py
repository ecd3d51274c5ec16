"""The runner: plan, progress and measurement callbacks, telemetry adapter, cancellation."""

from __future__ import annotations

import threading
from typing import Any

from gpuscope.probing.environment import parse_device
from gpuscope.probing.runner import ProbeRunner, derive_ceilings
from gpuscope.probing.suite import parse_suite
from gpuscope.probing.telemetry import ProbeTelemetry
from gpuscope.results import validate_results
from gpuscope.testing.samples import make_sample

SUITE = """\
[suite]
name = "runner"
samples = 2
target_sample_s = 0.001
warmup_max_s = 0.1
contention_retries = 0

[[probe]]
kind = "matmul"
dtypes = ["fp32"]
libraries = ["torch"]
shapes = [[48, 48, 48]]

[[probe]]
kind = "memory"
kernels = ["copy", "scale"]
working_sets = ["16KiB"]

[[probe]]
kind = "transfer"
devices = ["cuda"]
"""


class FakeCollector:
    def __init__(self) -> None:
        self.samples = 0
        self.closed = False

    def open(self) -> None:
        return None

    def sample(self) -> Any:
        self.samples += 1
        return make_sample(tick=self.samples)

    def close(self) -> None:
        self.closed = True


def test_runner_progress_measurements_and_telemetry() -> None:
    collector = FakeCollector()
    progress: list[tuple[int, int, str]] = []
    seen: list[str] = []
    runner = ProbeRunner(
        parse_suite(SUITE, "runner.toml"),
        "cpu",
        on_progress=lambda done, total, label: progress.append((done, total, label)),
        on_measurement=lambda record: seen.append(record["id"]),
        telemetry_factory=lambda: collector,
    )
    assert [s.label for s in runner.steps] == [
        "matmul fp32 ceiling",
        "memory copy",
        "memory scale",
    ]  # no transfer on CPU
    results = runner.run(threading.Event())
    validate_results(results, "runner")
    assert progress[0] == (0, 3, "matmul fp32 ceiling") and progress[-1] == (3, 3, "done")
    assert seen == [m["id"] for m in results["measurements"]]
    assert collector.closed and collector.samples >= 2 * len(results["measurements"])
    measurement = results["measurements"][-1]
    assert measurement["telemetry_before"]["available"] is True
    assert measurement["telemetry_before"]["host_memory_used_bytes"] > 0
    assert measurement["telemetry_during"]["available"] is False  # CPU: not sampled during
    assert results["partial"] is False and results["summary"]["ok"] == len(results["measurements"])


def test_telemetry_missing_is_recorded_with_a_reason() -> None:
    def broken() -> Any:
        raise ImportError("No module named 'gpuscope.telemetry.collector'")

    adapter = ProbeTelemetry(parse_device("cpu"), factory=broken)
    adapter.open()
    assert not adapter.available
    snapshot = adapter.snapshot()
    assert snapshot["available"] is False and "not importable" in snapshot["reason"]


def test_gpu_during_sampling_summarises_dram_bandwidth() -> None:
    adapter = ProbeTelemetry(parse_device("cuda:0"), interval_s=0.01, factory=FakeCollector)
    adapter.open()
    sampler = adapter.start_during()
    assert sampler is not None
    threading.Event().wait(0.08)
    during = sampler.stop()
    assert during["n"] >= 2
    assert "dram_bandwidth_bytes_per_s_mean" in during and "power_w_max" in during


def test_cancel_before_start_gives_partial_results() -> None:
    cancel = threading.Event()
    cancel.set()
    runner = ProbeRunner(parse_suite(SUITE, "runner.toml"), "cpu", telemetry=False)
    results = runner.run(cancel)
    assert results["partial"] is True and results["measurements"] == []


def test_cancel_from_a_measurement_callback_stops_the_run() -> None:
    cancel = threading.Event()
    runner = ProbeRunner(
        parse_suite(SUITE, "runner.toml"), "cpu", telemetry=False, on_measurement=lambda record: cancel.set()
    )
    results = runner.run(cancel)
    assert results["partial"] is True
    assert 1 <= len(results["measurements"]) < 3


def test_ceilings_take_the_best_ok_measurement_per_name() -> None:
    def m(i: int, rate: float, status: str = "ok") -> dict[str, Any]:
        return {
            "id": f"m{i}",
            "kind": "matmul",
            "device": "cpu",
            "status": status,
            "flop_per_s": rate,
            "name": f"g{i}",
            "n": 5,
            "parameters": {"role": "ceiling", "dtype": "fp32"},
        }

    ceilings = derive_ceilings([m(1, 10.0), m(2, 30.0), m(3, 99.0, "failed"), m(4, 20.0)])
    assert len(ceilings) == 1
    assert ceilings[0]["value"] == 30.0 and ceilings[0]["measurement_id"] == "m2" and ceilings[0]["kind"] == "compute"


def test_contended_cpu_measurement_is_retried_and_labelled(monkeypatch: Any) -> None:
    from gpuscope.probing import context as context_module
    from gpuscope.probing.context import ProbeContext
    from gpuscope.probing.environment import MemoryBudget
    from gpuscope.probing.timing import TimingPolicy

    contention = iter([80.0, 50.0, 5.0])
    monkeypatch.setattr(context_module, "_contention_percent", lambda before, after: next(contention))
    device = parse_device("cpu")
    ctx = ProbeContext(
        device=device,
        budget=MemoryBudget(device),
        ceiling_policy=TimingPolicy(samples=2, target_sample_s=0.001, warmup_max_s=0.05),
        contention_retries=3,
    )
    record = ctx.measure(
        lambda: sum(range(100)),
        statistic="best",
        validate=None,
        record={
            "kind": "matmul",
            "name": "x",
            "device": "cpu",
            "parameters": {},
            "flops": 100,
            "bytes_": 8,
            "counting_rule": {},
        },
    )
    assert [a["host_contention_percent"] for a in record["attempts"]] == [80.0, 50.0, 5.0]
    assert record["status"] == "ok"
    assert record["host_contention_percent"] in (80.0, 50.0, 5.0)


def test_a_step_that_raises_is_a_failed_measurement_and_the_run_goes_on(monkeypatch: Any) -> None:
    from gpuscope.probing import matmul

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("library exploded")

    monkeypatch.setattr(matmul, "matmul_ceiling", broken)
    results = ProbeRunner(parse_suite(SUITE, "runner.toml"), "cpu", telemetry=False).run(threading.Event())
    first = results["measurements"][0]
    assert first["status"] == "failed" and "library exploded" in first["error"]
    assert [m["status"] for m in results["measurements"][1:]] == ["ok", "ok"]  # the memory steps still ran
    assert results["summary"]["failed"] == 1 and results["partial"] is False


def test_torch_cpu_allocator_failure_counts_as_out_of_memory() -> None:
    from gpuscope.probing.environment import is_out_of_memory

    assert is_out_of_memory(
        RuntimeError(
            "[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory: "
            "you tried to allocate 4 bytes"
        )
    )
    assert is_out_of_memory(MemoryError())
    assert not is_out_of_memory(RuntimeError("shape mismatch"))
