"""The runner: plan, progress and measurement callbacks, telemetry adapter, cancellation."""

from __future__ import annotations

import json
import threading
from typing import Any

import msgspec
from support.samples import make_sample

from gpuscope.probing.derive import derive_ceilings
from gpuscope.probing.environment import parse_device
from gpuscope.probing.runner import ProbeRunner
from gpuscope.probing.suite import parse_suite
from gpuscope.probing.telemetry import ProbeTelemetry
from gpuscope.results import to_results
from gpuscope.schema.core import Detail, as_detail, detail_map, encode_json
from gpuscope.schema.results import Measurement, SuiteRef

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
        on_measurement=lambda measurement: seen.append(str(measurement.id)),
        telemetry_factory=lambda: collector,
    )
    assert [s.label for s in runner.steps] == [
        "matmul fp32 ceiling",
        "memory copy",
        "memory scale",
    ]  # no transfer on CPU
    results = runner.run(threading.Event())
    assert to_results(json.loads(encode_json(results)), "runner") == results  # the file reads back as built
    assert progress[0] == (0, 3, "matmul fp32 ceiling") and progress[-1] == (3, 3, "done")
    assert seen == [m.id for m in results.measurements] == ["m0001", "m0002", "m0003"]
    assert collector.closed and collector.samples >= 2 * len(results.measurements)
    before, during = results.measurements[-1].telemetry_before, results.measurements[-1].telemetry_during
    assert isinstance(before, dict) and before["available"] is True and before["host_memory_used_bytes"] > 0
    assert isinstance(during, dict) and during["available"] is False  # CPU: not sampled during
    assert results.partial is False and results.summary is not None
    assert results.summary.ok == len(results.measurements) and results.duration_s is not None
    assert results.suite == SuiteRef(name="runner", path="runner.toml", description="")
    assert [d.device for d in results.devices] == ["cpu"] and results.devices[0].caches  # one identity
    assert [c.name for c in results.ceilings] == [
        "fp32",
        *(f"{results.measurements[1].level}.{k}" for k in ("copy", "scale")),
    ]


def test_every_measurement_a_probe_builds_reads_back_as_built(monkeypatch: Any) -> None:
    """The runner checks each probe's Measurement as the file will hold it: none of the probes'
    own measurements breaks the schema (which would turn it into a failed one)."""
    from gpuscope.probing import runner as runner_module

    built: list[Measurement] = []
    checked = runner_module.checked_measurement
    monkeypatch.setattr(
        runner_module, "checked_measurement", lambda record, id_: built.append(record) or checked(record, id_)
    )
    results = ProbeRunner(parse_suite(SUITE, "runner.toml"), "cpu", telemetry=False).run(threading.Event())
    assert len(built) == len(results.measurements) == 3
    for before, after in zip(built, results.measurements):
        assert after == msgspec.structs.replace(before, id=after.id), after.error


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
    assert results.partial is True and results.measurements == []


def test_cancel_from_a_measurement_callback_stops_the_run() -> None:
    cancel = threading.Event()
    runner = ProbeRunner(
        parse_suite(SUITE, "runner.toml"), "cpu", telemetry=False, on_measurement=lambda record: cancel.set()
    )
    results = runner.run(cancel)
    assert results.partial is True and results.partial_reason is not None
    assert 1 <= len(results.measurements) < 3


def test_ceilings_take_the_best_ok_measurement_per_name() -> None:
    def m(i: int, rate: float, status: str = "ok", library: str = "torch") -> Measurement:
        parameters: Detail = {"role": "ceiling", "dtype": "fp32"}
        return Measurement(id=f"m{i}", kind="matmul", device="cpu", status=status, flop_per_s=rate, name=f"g{i}",
                           n=5, parameters=parameters, library=library)  # fmt: skip

    ceilings = derive_ceilings([m(1, 10.0), m(2, 30.0), m(3, 99.0, "failed"), m(4, 20.0, library="numpy")])
    assert len(ceilings) == 1
    assert (ceilings[0].value, ceilings[0].measurement_id, ceilings[0].kind) == (30.0, "m2", "compute")
    assert ceilings[0].libraries_flop_per_s == {"torch": 30.0, "numpy": 20.0}  # a failed one is no rate


def test_a_record_that_breaks_the_schema_is_a_failed_measurement_that_says_why() -> None:
    from gpuscope.probing.runner import checked_measurement

    kept = checked_measurement(Measurement(name="x", kind="memory", device="cpu", bytes_per_s=-5.0), "m0007")
    assert (kept.id, kept.status, kept.name, kept.kind) == ("m0007", "failed", "x", "memory")
    assert kept.error is not None and "`$.bytes_per_s`" in kept.error
    nan = checked_measurement(Measurement(name="y", status="ok", spread=float("nan")), "m0008")
    assert (nan.status, nan.spread) == ("ok", None)  # as the file would hold it


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
        record=Measurement(kind="matmul", name="x", device="cpu", parameters={}, flops=100, bytes=8, counting_rule={}),
    )
    assert isinstance(record.attempts, list)
    assert [detail_map(a).get("host_contention_percent") for a in record.attempts] == [80.0, 50.0, 5.0]
    assert record.status == "ok"
    assert record.host_contention_percent in (80.0, 50.0, 5.0)


def test_a_step_that_raises_is_a_failed_measurement_and_the_run_goes_on(monkeypatch: Any) -> None:
    from gpuscope.probing import matmul

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("library exploded")

    monkeypatch.setattr(matmul, "matmul_ceiling", broken)
    results = ProbeRunner(parse_suite(SUITE, "runner.toml"), "cpu", telemetry=False).run(threading.Event())
    first = results.measurements[0]
    assert first.status == "failed" and first.error is not None and "library exploded" in first.error
    assert [m.status for m in results.measurements[1:]] == ["ok", "ok"]  # the memory steps still ran
    assert results.summary is not None and results.summary.failed == 1 and results.partial is False


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


def test_a_gpu_memory_record_with_its_dram_check_is_typed_field_by_field() -> None:
    """What the GPU memory probe adds (no GPU needed): the DRAM counter's B/s and the check of it."""
    from gpuscope.probing.memory import dram_check
    from gpuscope.probing.runner import checked_measurement

    for level, reported in (("l2", 0.05e12), ("dram", 4.6e12), ("dram", None), ("l1", 1e9)):
        during: dict[str, Detail] = {"available": True, "n": 10}
        if reported is not None:
            during["dram_bandwidth_bytes_per_s_mean"] = reported
        record = Measurement(kind="memory", name="memory copy", device="cuda:0", status="ok", level=level,
                             bytes_per_s=4.5e12, telemetry_during=as_detail(during),
                             reported_dram_bytes_per_s=reported)  # fmt: skip
        check = dram_check(record)
        typed = checked_measurement(msgspec.structs.replace(record, dram_check=check), "m0001")
        assert typed.status == "ok" and typed.reported_dram_bytes_per_s == reported
        assert typed.dram_check == check
        assert check.ok is {"l2": True, "dram": None if reported is None else True, "l1": None}[level]
