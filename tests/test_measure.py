"""``gpuscope.measure`` and ``gpuscope measure``: exact FLOPs and byte bounds of a torch matmul on
the CPU, warnings for ops without a FLOP formula, the timing rules, the results file, and DRAM
bytes from (fake) GPM telemetry."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from types import SimpleNamespace
from unittest.mock import patch

import msgspec
import pytest

torch = pytest.importorskip("torch")

from results_files import results_json  # noqa: E402
from support.samples import make_sample  # noqa: E402

import gpuscope  # noqa: E402
from gpuscope.cli import main  # noqa: E402
from gpuscope.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_USAGE, ResourceError  # noqa: E402
from gpuscope.measuring.counting import POINTWISE_RULE  # noqa: E402
from gpuscope.measuring.dram import dram_bytes_per_call, match_gpu, measure_dram_bytes  # noqa: E402
from gpuscope.measuring.measure import UncountedOpsWarning, measure  # noqa: E402
from gpuscope.measuring.timing import MIN_TIMER_TICKS, percentile, time_callable  # noqa: E402
from gpuscope.roofline.loading import load_model  # noqa: E402
from gpuscope.telemetry.values import Reason, Unavailable  # noqa: E402

FAST = {"samples": 3, "target_sample_s": 0.001, "max_time_s": 0.5, "warmup_max_s": 0.05}


def test_matmul_flops_and_bytes_are_exact():
    m, n, k = 64, 48, 32
    a, b = torch.randn(m, k), torch.randn(k, n)
    result = measure(torch.matmul, a, b, name="mm", **FAST)
    assert result.flops == 2 * m * n * k
    assert result.bytes == (m * k + k * n + m * n) * 4
    assert result.counts.read_bytes == (m * k + k * n) * 4
    assert result.counts.written_bytes == m * n * 4
    assert result.dtype == "fp32"
    assert result.device == "cpu"
    assert result.timing.n == 3 and result.timing.timer == "perf_counter"
    assert result.timing.ticks_per_sample >= MIN_TIMER_TICKS
    assert result.timing.cache_state == "warm"
    assert result.time_s > 0 and result.flop_per_s > 0
    assert result.intensity_flop_per_byte == pytest.approx(2 * m * n * k / ((m * k + k * n + m * n) * 4))
    assert isinstance(result.dram_bytes_measured, Unavailable)
    assert result.dram_bytes_measured.reason == Reason.NOT_APPLICABLE


def test_bf16_matmul_and_transposed_view_count_storage_once():
    a = torch.randn(32, 16, dtype=torch.bfloat16)
    result = measure(lambda x: x.t() @ x, a, name="gram", **FAST)
    assert result.flops == 2 * 16 * 16 * 32
    assert result.bytes == (32 * 16 + 16 * 16) * 2  # x read once (x.t() is a view), result written
    assert result.dtype == "bf16"


def test_module_weights_count_as_bytes_read():
    layer = torch.nn.Linear(32, 16)
    x = torch.randn(8, 32)
    with torch.no_grad():
        result = measure(layer, x, name="linear", **FAST)
    assert result.flops == 2 * 8 * 32 * 16
    assert result.counts.read_bytes == (8 * 32 + 16 * 32 + 16) * 4
    assert result.counts.written_bytes == 8 * 16 * 4


def test_in_place_update_counts_read_and_write():
    x = torch.randn(1024)
    result = measure(lambda t: t.mul_(1.0), x, name="scale", **FAST)
    assert result.counts.read_bytes == 4096 and result.counts.written_bytes == 4096
    assert result.flops == 1024  # in-place mul: one FLOP per element


def test_axpy_is_two_flops_per_element_and_memory_bound_intensity():
    x, y = torch.randn(4096), torch.randn(4096)
    result = measure(lambda a, b: 2.0 * a + b, x, y, name="axpy", **FAST)
    assert result.flops == 2 * 4096 and result.dtype == "fp32"
    assert result.bytes == 3 * 4 * 4096  # x and y read, the result written; the temporary left out
    assert result.intensity_flop_per_byte == pytest.approx(2 / 12)
    assert not result.counts.uncounted_ops


def test_pointwise_formulas_per_element():
    from gpuscope.measuring.counting import POINTWISE_FLOPS_PER_ELEMENT, count_call

    x = torch.randn(64, 32)
    cases = {
        "gelu": (torch.nn.functional.gelu, 8),
        "softmax": (lambda t: torch.softmax(t, -1), 5),
        "layer_norm": (lambda t: torch.nn.functional.layer_norm(t, (32,)), 7),
        "relu": (torch.relu, 1),
        "sum": (torch.sum, 1),
    }
    for name, (fn, per_element) in cases.items():
        counts, _ = count_call(fn, (x,), {})
        assert counts.flops == per_element * x.numel(), name
    assert POINTWISE_FLOPS_PER_ELEMENT["gelu"] == 8


def test_warning_names_ops_without_flop_formula():
    a, b = torch.randn(16, 16), torch.randn(16, 16)
    with pytest.warns(UncountedOpsWarning) as record:
        result = measure(lambda x, y: torch.erfinv(torch.tanh(x @ y)) + 1.0, a, b, name="mixed", **FAST)
    message = str(record[0].message)
    assert "aten.erfinv" in message
    assert "aten.mm" not in message and "aten.view" not in message and "aten.add" not in message
    assert result.flops == 2 * 16 * 16 * 16 + 2 * 16 * 16  # matmul, tanh (1) and add (1) per element
    assert result.counts.uncounted_ops == {"aten.erfinv": 1}


def test_no_warning_for_pure_data_movement(recwarn):
    x = torch.randn(64, 64)
    measure(lambda t: t.t().contiguous().clone(), x, name="copy", **FAST)
    assert not [w for w in recwarn.list if issubclass(w.category, UncountedOpsWarning)]


def test_overrides_and_forwarder():
    x = torch.randn(128)
    result = gpuscope.measure(torch.sin, x, name="sin", flops=128.0, bytes_moved=1024.0, **FAST)
    assert result.flops == 128.0 and result.bytes == 1024.0
    assert result.bytes_rule == "given by the caller"


def test_cold_run_flushes_caches():
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    result = measure(torch.matmul, a, b, name="cold", warm=False, **FAST)
    assert result.timing.cache_state in ("flushed", "warm")
    if result.timing.cache_state == "warm":  # only when one call is shorter than 20 ticks
        assert any("timer ticks" in note for note in result.timing.notes)
    assert result.to_workload().warm == (result.timing.cache_state == "warm")


def test_results_file_is_created_then_appended(tmp_path):
    path = tmp_path / "results.json"
    a, b = torch.randn(32, 32), torch.randn(32, 32)
    measure(torch.matmul, a, b, name="first", results=path, **FAST)
    measure(torch.matmul, a, b, name="second", results=path, **FAST)
    document = results_json(path)
    assert [w["name"] for w in document["workloads"]] == ["first", "second"]
    assert len(document["devices"]) == 1 and document["devices"][0]["type"] == "cpu"
    workload = document["workloads"][0]
    assert workload["source"] == "measure"
    assert workload["flops"] == 2 * 32**3
    assert workload["n"] == 3 and workload["statistic"] == "median"
    assert workload["time_p10_s"] <= workload["time_s"] <= workload["time_p90_s"]
    assert "dram_bytes_measured" not in workload and workload["dram_bytes_unavailable"].startswith("not_applicable")
    assert workload["pointwise_rule"] == POINTWISE_RULE and "pointwise_rule" in workload["flop_counting_rule"]
    # the probe's device entry and system (gpuscope.probing.environment): one identity
    from gpuscope.probing.environment import device_info, parse_device, system_info

    assert document["devices"][0]["caches"] == [msgspec.to_builtins(c) for c in device_info(parse_device("cpu")).caches]
    assert document["system"]["simd"] == system_info(parse_device("cpu")).simd
    model = load_model([path])
    assert {placement.point.name for placement in model.placements} == {"first", "second"}
    assert all(placement.point.source == "measure" for placement in model.placements)


def test_appending_to_a_bad_results_file_fails_cleanly(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(Exception, match="results.json"):
        measure(torch.sin, torch.randn(8), name="x", results=path, flops=8.0, **FAST)
    assert path.read_text(encoding="utf-8") == "{not json"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_request_without_cuda_is_a_resource_error():
    with pytest.raises(ResourceError, match="CUDA"):
        measure(torch.sin, torch.randn(8), device="cuda", **FAST)


# --- timing rules ------------------------------------------------------------------------------


class FakeClock:
    """Each call takes ``per_call_s``; the clock ticks every ``resolution_s`` (no real waiting)."""

    name = "fake"

    def __init__(self, per_call_s: float, resolution_s: float) -> None:
        self.per_call_s_true = per_call_s
        self.resolution_s = resolution_s
        self.calls = 0

    def sample(self, fn, inner_reps: int, cancel) -> float:
        for _ in range(inner_reps):
            fn()
        self.calls += inner_reps
        return inner_reps * self.per_call_s_true


def test_samples_span_twenty_ticks_and_the_target():
    clock = FakeClock(per_call_s=1e-6, resolution_s=1e-6)
    result = time_callable(lambda: None, clock=clock, target_sample_s=0.0, samples=7, warmup_max_s=0.01)
    assert result.reps_per_sample >= MIN_TIMER_TICKS  # 20 ticks of 1 us: at least 20 calls per sample
    assert result.ticks_per_sample >= MIN_TIMER_TICKS
    assert result.n == 7 and result.statistic == "median"
    assert result.median_s == pytest.approx(1e-6)
    assert result.p10_s <= result.median_s <= result.p90_s
    clock = FakeClock(per_call_s=1e-6, resolution_s=1e-9)
    result = time_callable(lambda: None, clock=clock, target_sample_s=1e-3, samples=3, warmup_max_s=0.01)
    assert result.reps_per_sample * 1e-6 >= 1e-3  # the target duration dominates
    assert result.cache_state == "warm" and result.timer == "fake"


def test_short_calls_cannot_be_timed_cold():
    flushes = []
    clock = FakeClock(per_call_s=1e-6, resolution_s=1e-6)
    result = time_callable(
        lambda: None, clock=clock, flush=lambda: flushes.append(1), target_sample_s=0.0, samples=3, warmup_max_s=0.01
    )
    assert result.cache_state == "warm" and result.reps_per_sample > 1
    assert any("20 timer ticks" in note for note in result.notes)
    flushes.clear()
    clock = FakeClock(per_call_s=1e-3, resolution_s=1e-6)
    result = time_callable(
        lambda: None, clock=clock, flush=lambda: flushes.append(1), target_sample_s=0.0, samples=3, warmup_max_s=0.01
    )
    assert result.cache_state == "flushed" and result.reps_per_sample == 1
    assert len(flushes) >= 3 + 2  # every sample, warm-up ones included, starts flushed


def test_time_budget_bounds_the_samples_but_keeps_three():
    clock = FakeClock(per_call_s=1.0, resolution_s=1e-6)
    result = time_callable(
        lambda: None,
        clock=clock,
        target_sample_s=0.0,
        samples=50,
        max_time_s=0.5,
        per_call_estimate_s=1.0,
        warmup_max_s=0.01,
    )
    assert result.n == 3
    assert any("3 samples instead of 50" in note for note in result.notes)


def test_percentiles():
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert percentile(values, 0.5) == 3.0
    assert percentile(values, 0.1) == pytest.approx(1.4)
    assert percentile(values, 0.9) == pytest.approx(4.6)
    assert percentile([7.0], 0.9) == 7.0


# --- DRAM bytes from telemetry ------------------------------------------------------------------


def test_dram_bytes_per_call_integrates_bandwidth():
    intervals = [(0.5, 2e12, 100), (0.25, 4e12, 50), (0.3, Unavailable(Reason.WARMING_UP), 60)]
    assert dram_bytes_per_call(intervals) == pytest.approx((0.5 * 2e12 + 0.25 * 4e12) / 150)
    reason = Unavailable(Reason.NOT_SUPPORTED, "GPM needs Hopper")
    assert dram_bytes_per_call([(0.5, reason, 10)]) is reason


class FakeCollector:
    """Yields Samples 0.25 s apart whose GPU 0 reports ``bandwidth`` bytes/s; ``now_s`` is the
    monotonic clock the intervals are measured on (it advances 0.25 s per sample)."""

    def __init__(self, bandwidth, missing=None) -> None:
        self.bandwidth = bandwidth
        self.missing = missing
        self.tick = 0
        self.closed = False
        self.now_s = 0.0

    def open(self):
        return self.missing

    def sample(self):
        sample = make_sample(tick=0, gpus=1, timestamp=1000.0 + 0.25 * self.tick)
        self.tick += 1
        self.now_s += 0.25
        sample.gpus[0] = replace(sample.gpus[0], dram_bandwidth_bytes_per_s=self.bandwidth)
        return sample

    def close(self) -> None:
        self.closed = True


def _run_dram(collector, window_s=0.05):
    import gpuscope.measuring.dram as dram_module

    calls = []
    clock = SimpleNamespace(perf_counter=lambda: collector.now_s)  # intervals come from a monotonic clock
    with patch.object(dram_module, "time", clock):
        value = measure_dram_bytes(
            lambda: calls.append(1),
            per_call_s=0.01,
            window_s=window_s,
            collector_factory=lambda: collector,
            synchronize=lambda: None,
            select_gpu=lambda sample: sample.gpus[0] if sample.gpus else None,
            device_text="cuda:0",
        )
    return value, len(calls)


def test_dram_bytes_from_fake_gpm_telemetry():
    collector = FakeCollector(bandwidth=2e12)
    value, calls = _run_dram(collector)
    assert calls >= 25  # a batch is ~0.25 s of calls
    intervals = collector.tick - 1
    assert value == pytest.approx(2e12 * 0.25 * intervals / calls)
    assert collector.closed


def test_dram_bytes_unavailable_reasons():
    value, _ = _run_dram(FakeCollector(bandwidth=Unavailable(Reason.NOT_SUPPORTED, "GPM needs Hopper or newer")))
    assert isinstance(value, Unavailable) and value.reason == Reason.NOT_SUPPORTED
    missing = Unavailable(Reason.NO_DRIVER, "libnvidia-ml.so.1 not found")
    value, calls = _run_dram(FakeCollector(bandwidth=1e12, missing=missing))
    assert value is missing and calls == 0

    def broken():
        raise ImportError("no collector")

    value = measure_dram_bytes(lambda: None, 0.01, 0.01, broken, lambda: None, lambda s: None, "cuda:0")
    assert isinstance(value, Unavailable) and "no collector" in value.detail
    assert not math.isnan(0.0)


# --- the command ------------------------------------------------------------------------------


TENSORS = '[{"tensor": [32, 16]}, {"tensor": [16, 8]}]'
FAST_ARGS = ["--samples", "3", "--target-sample", "0.001", "--max-time", "0.5", "--warmup-max", "0.05"]


def test_measure_command_appends_a_point(tmp_path, capsys):
    path = tmp_path / "r.json"
    code = main(["measure", "torch:matmul", "--args-json", TENSORS, "--name", "mm", "-o", str(path), *FAST_ARGS])
    out = capsys.readouterr().out
    assert code == 0
    assert "mm on cpu" in out and f"appended to {path}" in out
    workload = results_json(path)["workloads"][0]
    assert workload["flops"] == 2 * 32 * 16 * 8
    assert workload["bytes"] == (32 * 16 + 16 * 8 + 32 * 8) * 4


def test_measure_command_json_and_kwargs(tmp_path, capsys):
    args = '{"args": [{"tensor": [8, 8], "dtype": "float64"}], "kwargs": {"dim": 0}}'
    code = main(["measure", "torch:cummax", "--args-json", args, "--json", *FAST_ARGS])
    captured = capsys.readouterr()
    assert code == 0
    data = json.loads(captured.out)
    assert data["name"] == "torch:cummax" and data["uncounted_ops"] == {"aten.cummax": 1}
    assert "gpuscope: warning:" in captured.err and "aten.cummax" in captured.err


def test_measure_command_loads_a_file(tmp_path, capsys):
    script = tmp_path / "bench.py"
    script.write_text("import torch\nA = torch.randn(16, 16)\ndef step():\n    return A @ A\n", encoding="utf-8")
    code = main(["measure", f"{script}:step", *FAST_ARGS])
    out = capsys.readouterr().out
    assert code == 0 and "not saved" in out


@pytest.mark.parametrize(
    ("argv", "expected_code", "fragment"),
    [
        (["measure", "no_such_module_xyz:fn"], EXIT_USAGE, "cannot import"),
        (["measure", "torch:no_such_function"], EXIT_USAGE, "no attribute"),
        (["measure", "torch"], EXIT_USAGE, "MODULE:FUNCTION"),
        (["measure", "torch:matmul", "--args-json", "[1,"], EXIT_USAGE, "not valid JSON"),
        (
            ["measure", "torch:matmul", "--args-json", '[{"tensor": [3, 4]}, {"tensor": [5, 6]}]'],
            EXIT_FAILURE,
            "raised RuntimeError",
        ),
        (["measure", "torch:matmul", "--args-json", '[{"tensor": "x"}]'], EXIT_USAGE, "tensor shape"),
        (["measure", "torch:sin", "--samples", "0"], EXIT_USAGE, "--samples"),
    ],
)
def test_measure_command_errors_are_one_line(capsys, argv, expected_code, fragment):
    code = main([*argv, *FAST_ARGS] if "--samples" not in argv else argv)
    err = capsys.readouterr().err
    assert code == expected_code
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuscope: error:") and fragment in lines[0], err


def test_measure_command_refuses_a_bad_output_file(tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_text('{"schema": "other"}', encoding="utf-8")
    code = main(["measure", "torch:matmul", "--args-json", TENSORS, "-o", str(path), *FAST_ARGS])
    assert code == EXIT_BAD_INPUT
    assert str(path) in capsys.readouterr().err


def test_telemetry_gpu_matched_by_visible_index(monkeypatch):
    from types import SimpleNamespace

    sample = make_sample(gpus=4)
    device = SimpleNamespace(type="cuda", index=1)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda _device: (_ for _ in ()).throw(RuntimeError("no CUDA"))
    )
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert match_gpu(sample, device).index == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert match_gpu(sample, device).index == 3
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda _device: SimpleNamespace(uuid="00000002"))
    assert match_gpu(sample, device).index == 2  # the UUID wins over the index


def test_sample_budget_comes_from_a_warm_uncounted_call(monkeypatch):
    """Counting is slow (dispatch modes); the sample count is sized from a plain warm call, so a
    fast function keeps all its samples even when its counted call took longer than the budget."""
    import time as time_module

    import gpuscope.measuring.measure as measure_module

    real = measure_module.count_call

    def slow_count(*args, **kwargs):
        time_module.sleep(0.6)
        return real(*args, **kwargs)

    monkeypatch.setattr(measure_module, "count_call", slow_count)
    result = measure(
        torch.add,
        torch.randn(16),
        torch.randn(16),
        name="add",
        samples=5,
        max_time_s=0.5,
        target_sample_s=0.001,
        warmup_max_s=0.05,
    )
    assert result.timing.n == 5
    assert not any("samples instead" in note for note in result.timing.notes)


def test_public_api_is_typed_and_loads_on_first_use() -> None:
    """``gpuscope.measure`` and ``gpuscope.profile`` are the real functions (an editor sees their
    keywords and result types, no ``**kwargs: Any``), loaded on first use: ``import gpuscope``
    stays cheap."""
    import inspect
    import subprocess
    import sys

    from gpuscope.measuring.measure import MeasuredWorkload
    from gpuscope.measuring.measure import measure as measure_function
    from gpuscope.profiling.api import Profiler
    from gpuscope.profiling.api import profile as profile_function
    from gpuscope.profiling.result import ProfileResult

    assert gpuscope.measure is measure_function and gpuscope.profile is profile_function
    assert (gpuscope.MeasuredWorkload, gpuscope.Profiler, gpuscope.ProfileResult) == (
        MeasuredWorkload, Profiler, ProfileResult,
    )  # fmt: skip
    for function in (gpuscope.measure, gpuscope.profile):
        kinds = {parameter.kind for parameter in inspect.signature(function).parameters.values()}
        assert inspect.Parameter.VAR_KEYWORD not in kinds
    assert inspect.signature(gpuscope.measure).return_annotation == "MeasuredWorkload"
    assert {"measure", "profile", "ProfileResult"} <= set(dir(gpuscope))
    with pytest.raises(AttributeError, match="no attribute 'mesure'"):
        gpuscope.mesure  # noqa: B018
    code = (
        "import sys, gpuscope; assert 'msgspec' not in sys.modules and 'gpuscope.measuring' not in sys.modules;"
        " gpuscope.measure; assert 'gpuscope.measuring.measure' in sys.modules and 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
