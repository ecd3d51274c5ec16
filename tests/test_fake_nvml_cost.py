"""The fake NVML's cheap paths give exactly what the plain ones gave: one NVLink total standing for
every link, the per-symbol call counts, symbol lookup without ``__getattr__``."""

from __future__ import annotations

import random

import pynvml
import pytest

from gpuscope.testing._fake_nvml_model import LinkBytes, _per_link
from gpuscope.testing.fake_nvml import FakeClock, FakeGpu, FakeNvml, install_fake_nvml


def _per_link_reference(steps: list[tuple[float | list[float], frozenset[int], float]], links: int) -> list[float]:
    """One float per link, one ``+=`` per active link and step: what the fake did before."""
    totals = [0.0] * links
    for rate, inactive, dt in steps:
        for link in range(links):
            if link not in inactive:
                totals[link] += _per_link(rate, link) * dt if isinstance(rate, list) else float(rate) * dt
    return totals


@pytest.mark.parametrize("split_at", [None, 0, 7])
def test_shared_link_total_is_bit_exact(split_at: int | None) -> None:
    draw = random.Random(11)
    links = 18
    steps: list[tuple[float | list[float], frozenset[int], float]] = []
    for step in range(15):
        dt = draw.uniform(0.05, 1.7)
        if split_at is not None and step == split_at:  # the links part ways: a list, one link down
            steps.append(([draw.uniform(0, 5e10) for _ in range(links - 3)], frozenset({4}), dt))
        else:
            steps.append((draw.uniform(0, 5e10), frozenset(), dt))
    shared, before = LinkBytes(), LinkBytes()
    for number, (rate, inactive, dt) in enumerate(steps):
        shared.add(rate, links, inactive, dt)
        if number == 5:
            before = shared.copy()
    expected = _per_link_reference(steps, links)
    assert [shared.at(link) for link in range(links)] == expected  # ==, not approx
    assert (shared.by_link is None) == (split_at is None)
    assert shared.at(links) == 0.0
    # what moved since `before`, summed in link order, as the driver-side sum did
    reference_before = _per_link_reference(steps[:6], links)
    inactive = frozenset({4}) if split_at is not None else frozenset()
    moved = sum(expected[link] - reference_before[link] for link in range(links) if link not in inactive)
    assert shared.moved(before, links, inactive) == moved
    assert shared.total(links, frozenset()) == sum(expected)


def test_calls_are_counted_per_symbol_and_gpu() -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h100(), FakeGpu.l4()], clock=FakeClock())
    with install_fake_nvml(fake):
        pynvml.nvmlInit()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(index) for index in (0, 1)]
        for _ in range(3):
            pynvml.nvmlDeviceGetMemoryInfo(handles[1])
        pynvml.nvmlDeviceGetMemoryInfo(handles[0])
        with pytest.raises(pynvml.NVMLError_NotSupported):
            pynvml.nvmlDeviceGetFanSpeed(handles[0])  # refused calls count too
        assert fake.calls["nvmlDeviceGetMemoryInfo"] == 4 and fake.calls["nvmlDeviceGetFanSpeed"] == 1
        assert fake.device_calls[("nvmlDeviceGetMemoryInfo", 1)] == 3
        assert fake.device_calls[("nvmlDeviceGetHandleByIndex_v2", 0)] == 1
        assert fake.device_calls[("nvmlInitWithFlags", None)] == 1
        assert ("nvmlDeviceGetFanSpeed", 1) not in fake.device_calls  # never called: no entry
        fake.reset_calls()
        assert not fake.calls and not fake.device_calls
        pynvml.nvmlDeviceGetMemoryInfo(handles[0])
        assert dict(fake.device_calls) == {("nvmlDeviceGetMemoryInfo", 0): 1}
        pynvml.nvmlShutdown()


def test_symbols_are_class_attributes_and_missing_ones_are_absent() -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h100()], clock=FakeClock(), missing_symbols={"nvmlGpmSampleAlloc"})
    assert "__getattr__" not in vars(FakeNvml)  # it would slow every attribute read in the fake
    assert fake.nvmlDeviceGetName is fake.nvmlDeviceGetName  # one object, so pynvml's restype sticks
    assert not hasattr(fake, "nvmlGpmSampleAlloc") and not hasattr(fake, "nvmlNoSuchSymbol")
    fake.remove_symbols("nvmlDeviceGetName")
    assert not hasattr(fake, "nvmlDeviceGetName")


def _gpm_read(fake: FakeNvml, clock: FakeClock, metric_ids: list[int]) -> list[tuple[int, int, float]]:
    """(metric id, return code, value) of one nvmlGpmMetricsGet over a fresh 0.5 s window on GPU 0."""
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    samples = [pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc()]
    pynvml.nvmlGpmSampleGet(handle, samples[0])
    clock.advance(0.5)
    pynvml.nvmlGpmSampleGet(handle, samples[1])
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = len(metric_ids)
    request.sample1, request.sample2 = samples
    for slot, metric_id in enumerate(metric_ids):
        request.metrics[slot].metricId = metric_id
    pynvml.nvmlGpmMetricsGet(request)
    for sample in samples:
        pynvml.nvmlGpmSampleFree(sample)
    return [(m.metricId, m.nvmlReturn, m.value) for m in request.metrics[: len(metric_ids)]]


def test_gpm_plan_follows_metric_errors_and_link_count() -> None:
    """nvmlGpmMetricsGet's cached plan is not stale when a GPU's metric errors or links change."""
    clock = FakeClock()
    gpu = FakeGpu.h100(nvlink_links=4)
    fake = FakeNvml.with_gpus([gpu], clock=clock)
    fake.set_load(0, sm_activity_percent=40.0, nvlink_tx_bytes_per_s=[2 * 2**20, 4 * 2**20, 0.0, 8 * 2**20])
    sm, link3_tx, total_tx = pynvml.NVML_GPM_METRIC_SM_UTIL, pynvml.NVML_GPM_METRIC_NVLINK_L3_TX_PER_SEC, 61
    ok, unknown, not_supported = pynvml.NVML_SUCCESS, pynvml.NVML_ERROR_UNKNOWN, pynvml.NVML_ERROR_NOT_SUPPORTED
    with install_fake_nvml(fake):
        pynvml.nvmlInit()
        ids = [sm, link3_tx, total_tx]
        assert _gpm_read(fake, clock, ids) == [(sm, ok, 40.0), (link3_tx, ok, 8.0), (total_tx, ok, 14.0)]
        gpu.gpm_metric_errors[sm] = "Unknown"  # changed in place
        assert _gpm_read(fake, clock, ids)[0] == (sm, unknown, 0.0)
        gpu.gpm_metric_errors.clear()
        gpu.nvlink_links = 3  # link 3 is gone
        assert _gpm_read(fake, clock, ids) == [(sm, ok, 40.0), (link3_tx, not_supported, 0.0), (total_tx, ok, 6.0)]
        pynvml.nvmlShutdown()
