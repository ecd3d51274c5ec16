"""How gpuscope calls NVML's C symbols directly (session.c_function / CFunction): the function
is looked up once per query and kept, new sessions look it up afresh, and nothing depends on
pynvml's private lookup cache existing."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pynvml
import pytest

from gpuscope.telemetry.nvml.collector import NvmlCollector
from gpuscope.telemetry.nvml.session import CFunction, c_function
from gpuscope.telemetry.values import Reason
from gpuscope.testing.fake_nvml import FakeClock, FakeGpu, FakeNvml, install_fake_nvml, opened_collector, reason_of


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _lookups_without_cache(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """A future nvidia-ml-py without ``_nvmlGetFunctionPointer_cache``: the lookup function
    remains (counting its calls here), the dict is gone."""
    looked_up: Counter[str] = Counter()

    def lookup(name: str) -> Any:
        looked_up[name] += 1
        try:
            return getattr(pynvml.nvmlLib, name)
        except AttributeError:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND) from None

    monkeypatch.delattr(pynvml, "_nvmlGetFunctionPointer_cache")
    monkeypatch.setattr(pynvml, "_nvmlGetFunctionPointer", lookup)
    return looked_up


def test_sampling_works_without_pynvmls_private_cache_and_looks_each_symbol_up_once(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h100(), FakeGpu.h100()], clock=clock, missing_symbols={"nvmlDeviceGetFanSpeed"})
    with install_fake_nvml(fake), monkeypatch.context() as patch:
        looked_up = _lookups_without_cache(patch)
        collector = NvmlCollector(clock=clock)
        assert collector.open() is None
        try:
            for _ in range(3):
                clock.advance(1.0)
                side = collector.sample()
            gpu = side.gpus[0]
            assert isinstance(gpu.utilization_percent, int | float)
            assert isinstance(gpu.memory_used_bytes, int)
            assert isinstance(gpu.temperature_gpu_c, int | float)
            assert reason_of(gpu.fan_speed_percent) is Reason.DRIVER_TOO_OLD  # FunctionNotFound, as before
            before = looked_up.copy()
            for _ in range(3):
                clock.advance(1.0)
                collector.sample()
        finally:
            collector.close()
        # the per-sample symbols were looked up (also by pynvml's wrappers at open), then never again
        for symbol in ("nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetFieldValues"):
            assert before[symbol] >= 1, symbol
            assert looked_up[symbol] == before[symbol], symbol


def test_a_new_fake_gets_new_functions(clock: FakeClock) -> None:
    first = FakeNvml.with_gpus([FakeGpu.h100()], clock=clock)
    second = FakeNvml.with_gpus([FakeGpu.h100()], clock=clock)
    for fake in (first, second):
        with opened_collector(fake, clock) as collector:
            fake.reset_calls()
            for _ in range(2):
                clock.advance(1.0)
                collector.sample()
    assert first.calls["nvmlDeviceGetUtilizationRates"] == 2
    assert second.calls["nvmlDeviceGetUtilizationRates"] == 2
    assert second.calls["nvmlDeviceGetFieldValues"] == 2


def test_c_function_raises_what_pynvmls_lookup_raises(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.l4()], clock=clock, missing_symbols={"nvmlGpmSampleAlloc"})
    with install_fake_nvml(fake):
        pynvml.nvmlInit()
        try:
            with pytest.raises(pynvml.NVMLError_FunctionNotFound):
                c_function("nvmlGpmSampleAlloc")
            function = CFunction("nvmlDeviceGetCount_v2")
            assert function.resolve() is function.fn is not None
        finally:
            pynvml.nvmlShutdown()
