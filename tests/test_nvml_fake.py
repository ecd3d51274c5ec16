"""The fake NVML library itself, driven through the real pynvml wrappers."""

from __future__ import annotations

import pynvml
import pytest

from gpuscope.telemetry.nvml import compat
from gpuscope.testing.fake_nvml import (
    FakeClock,
    FakeGpu,
    FakeNvml,
    FakeProcess,
    error_code,
    install_fake_nvml,
    no_nvml_library,
    opened_collector,
)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_identity_through_real_wrappers(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h200(), FakeGpu.a100()], clock=clock)
    with install_fake_nvml(fake):
        pynvml.nvmlInit()
        try:
            assert pynvml.nvmlDeviceGetCount() == 2
            handle = pynvml.nvmlDeviceGetHandleByIndex(1)
            assert pynvml.nvmlDeviceGetName(handle) == "NVIDIA A100-SXM4-80GB"
            assert pynvml.nvmlDeviceGetArchitecture(handle) == pynvml.NVML_DEVICE_ARCH_AMPERE
            assert pynvml.nvmlDeviceGetPciInfo(handle).busId == "00000000:28:00.0"
            assert pynvml.nvmlDeviceGetMemoryBusWidth(handle) == 5120
            assert pynvml.nvmlSystemGetDriverVersion() == "560.35.03"
        finally:
            pynvml.nvmlShutdown()


def test_pynvml_is_restored_after_the_block(clock: FakeClock) -> None:
    before = pynvml.nvmlLib
    with install_fake_nvml(FakeNvml(clock=clock)):
        assert pynvml.nvmlLib is not before
    assert pynvml.nvmlLib is before


def test_calls_before_init_are_uninitialized(clock: FakeClock) -> None:
    with install_fake_nvml(FakeNvml.with_gpus([FakeGpu.l4()], clock=clock)):
        with pytest.raises(pynvml.NVMLError_Uninitialized):
            pynvml.nvmlDeviceGetCount()


def test_removed_symbol_is_function_not_found(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h100()], clock=clock, missing_symbols={"nvmlGpmSampleAlloc"})
    with install_fake_nvml(fake):
        pynvml.nvmlInit()
        with pytest.raises(pynvml.NVMLError_FunctionNotFound):
            pynvml.nvmlGpmSampleAlloc()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        assert pynvml.nvmlDeviceGetTemperature(handle, 0) == 33
        fake.remove_symbols("nvmlDeviceGetTemperature")  # even after it was looked up once
        with pytest.raises(pynvml.NVMLError_FunctionNotFound):
            pynvml.nvmlDeviceGetTemperature(handle, 0)


def test_library_not_found_and_init_errors(clock: FakeClock) -> None:
    with no_nvml_library():
        with pytest.raises(pynvml.NVMLError_LibraryNotFound):
            pynvml.nvmlInit()
    with install_fake_nvml(FakeNvml(clock=clock, init_error="DriverNotLoaded")):
        with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
            pynvml.nvmlInit()


def test_error_code_accepts_names_codes_and_classes() -> None:
    assert error_code("NotSupported") == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert error_code("GPU_IS_LOST") == pynvml.NVML_ERROR_GPU_IS_LOST
    assert error_code(pynvml.NVMLError_NoPermission) == pynvml.NVML_ERROR_NO_PERMISSION
    assert error_code(15) == 15
    with pytest.raises(ValueError):
        error_code("NoSuchError")


def test_inject_skips_then_fails_count_calls(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.l4(), FakeGpu.l4()], clock=clock)
    fake.inject("nvmlDeviceGetPowerUsage", "Timeout", gpu=1, after_calls=1, count=2)
    with install_fake_nvml(fake):
        pynvml.nvmlInit()
        first, second = (pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(2))
        outcomes = []
        for _ in range(4):
            pynvml.nvmlDeviceGetPowerUsage(first)  # GPU 0 is never affected
            try:
                outcomes.append(pynvml.nvmlDeviceGetPowerUsage(second))
            except pynvml.NVMLError_Timeout:
                outcomes.append("timeout")
        assert outcomes == [70000, "timeout", "timeout", 70000]
        assert fake.device_calls[("nvmlDeviceGetPowerUsage", 1)] == 4


def test_lost_gpu_after_calls_and_restore(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h100(), FakeGpu.h100()], clock=clock)
    with install_fake_nvml(fake):
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        other = pynvml.nvmlDeviceGetHandleByIndex(1)
        fake.lose_gpu(0, after_calls=2)
        pynvml.nvmlDeviceGetName(handle)
        pynvml.nvmlDeviceGetName(handle)
        with pytest.raises(pynvml.NVMLError_GpuIsLost):
            pynvml.nvmlDeviceGetName(handle)
        with pytest.raises(pynvml.NVMLError_GpuIsLost):
            pynvml.nvmlDeviceGetHandleByIndex(0)
        assert pynvml.nvmlDeviceGetName(other) == "NVIDIA H100 80GB HBM3"
        fake.restore_gpu(0, at_time_s=clock() + 1.0)
        with pytest.raises(pynvml.NVMLError_GpuIsLost):
            pynvml.nvmlDeviceGetName(handle)
        clock.advance(1.0)
        assert pynvml.nvmlDeviceGetName(handle) == "NVIDIA H100 80GB HBM3"


def test_counters_integrate_the_scripted_rates_exactly(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.a100()], clock=clock)
    fields = [
        pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
        compat.FI_PCIE_COUNT_TX_BYTES,
        (pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 2),
    ]
    with install_fake_nvml(fake):
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        before = pynvml.nvmlDeviceGetFieldValues(handle, fields)
        fake.set_load(0, power_w=250.0, pcie_tx_bytes_per_s=3 * 2**30, nvlink_tx_bytes_per_s=[0, 0, 2**30])
        clock.advance(2.0)
        after = pynvml.nvmlDeviceGetFieldValues(handle, fields)
        assert after[0].value.ullVal - before[0].value.ullVal == 500_000  # mJ
        assert after[1].value.ullVal - before[1].value.ullVal == 6 * 2**30
        assert after[2].value.ullVal - before[2].value.ullVal == 2 * 2**20  # KiB
        assert after[0].timestamp - before[0].timestamp == 2_000_000


def test_wobble_is_seeded_and_moves_with_the_clock() -> None:
    def readings(seed: int) -> list[int]:
        clock = FakeClock()
        fake = FakeNvml.with_gpus([FakeGpu.h100(wobble=0.3, seed=seed)], clock=clock)
        fake.gpus[0].load.gpu_util_percent = 50.0
        values = []
        with install_fake_nvml(fake):
            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            for _ in range(6):
                values.append(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
                clock.advance(0.5)
        return values

    first = readings(1)
    assert first == readings(1)
    assert first != readings(2)
    assert len(set(first)) > 1 and all(35 <= value <= 65 for value in first)


def test_process_lists_use_the_two_call_protocol(clock: FakeClock) -> None:
    gpu = FakeGpu.l4(
        processes=[
            FakeProcess(11, sm_percent=20),
            FakeProcess(12, kind="graphics", used_gpu_memory_bytes=None, sm_percent=None),
        ]
    )
    with install_fake_nvml(FakeNvml.with_gpus([gpu], clock=clock)):
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        compute = pynvml.nvmlDeviceGetComputeRunningProcesses_v3(handle)
        graphics = pynvml.nvmlDeviceGetGraphicsRunningProcesses(handle)
        assert [p.pid for p in compute] == [11] and compute[0].usedGpuMemory == 2**30
        assert [p.pid for p in graphics] == [12] and graphics[0].usedGpuMemory is None
        samples = pynvml.nvmlDeviceGetProcessUtilization(handle, 0)
        assert [(s.pid, s.smUtil) for s in samples] == [(11, 20)]
        with pytest.raises(pynvml.NVMLError_NotFound):  # nothing newer than the last seen stamp
            pynvml.nvmlDeviceGetProcessUtilization(handle, samples[0].timeStamp)


def test_busy_scenario_runs_at_boost_clock_without_idle_reason() -> None:
    from gpuscope.testing.scenarios import build_fake, parse_scenario

    for text, busy in (("gpus=h200+a100", True), ("gpus=h200+a100,busy=0", False)):
        fake = build_fake(parse_scenario(text), clock=FakeClock())
        with install_fake_nvml(fake):
            pynvml.nvmlInit()
            for index, gpu in enumerate(fake.gpus):
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                clock_mhz = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
                reasons = pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
                if busy:  # boost range: within the wobble of the model's maximum
                    assert clock_mhz >= 0.95 * gpu.max_sm_clock_mhz and reasons & 0x1 == 0, (text, index)
                else:
                    assert clock_mhz < 0.5 * gpu.max_sm_clock_mhz and reasons & 0x1, (text, index)
            pynvml.nvmlShutdown()


def test_field_values_and_gpm_metrics_read_through_pynvml_structs(clock: FakeClock) -> None:
    gpu = FakeGpu.h100(
        pcie_counter_bits=32,
        field_errors={pynvml.NVML_FI_DEV_MEMORY_TEMP: "NoPermission"},
        gpm_metric_errors={pynvml.NVML_GPM_METRIC_SM_UTIL: "NotSupported"},
    )
    fake = FakeNvml.with_gpus([gpu], clock=clock)
    fake.set_load(0, nvlink_tx_bytes_per_s=[float(link) * 2**20 for link in range(18)], fp16_activity_percent=25.0)
    with install_fake_nvml(fake):
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        sample1, sample2 = pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc()
        pynvml.nvmlGpmSampleGet(handle, sample1)
        clock.advance(2.0)
        pynvml.nvmlGpmSampleGet(handle, sample2)
        tx = pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
        values = pynvml.nvmlDeviceGetFieldValues(
            handle, [(tx, 5), (tx, 0xFFFFFFFF), compat.FI_PCIE_COUNT_TX_BYTES, pynvml.NVML_FI_DEV_MEMORY_TEMP]
        )
        assert [v.nvmlReturn for v in values] == [0, 0, 0, pynvml.NVML_ERROR_NO_PERMISSION]
        assert values[0].valueType == pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
        assert values[0].value.ullVal == 10 * 1024  # 5 MiB/s for 2 s, in KiB
        assert values[1].value.ullVal == sum(range(18)) * 2 * 1024
        assert values[2].valueType == pynvml.NVML_VALUE_TYPE_UNSIGNED_INT and values[2].value.uiVal < 2**32
        assert values[0].timestamp == values[3].timestamp == round(clock() * 1e6)
        request = pynvml.c_nvmlGpmMetricsGet_t()
        request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = 3
        request.sample1, request.sample2 = sample1, sample2
        wanted = (
            pynvml.NVML_GPM_METRIC_NVLINK_L3_TX_PER_SEC,
            pynvml.NVML_GPM_METRIC_SM_UTIL,
            pynvml.NVML_GPM_METRIC_FP16_UTIL,
        )
        for slot, metric_id in enumerate(wanted):
            request.metrics[slot].metricId = metric_id
        pynvml.nvmlGpmMetricsGet(request)
        got = [(request.metrics[slot].nvmlReturn, request.metrics[slot].value) for slot in range(3)]
        assert got == [(0, pytest.approx(3.0)), (pynvml.NVML_ERROR_NOT_SUPPORTED, 0.0), (0, pytest.approx(25.0))]
        assert request.metrics[3].nvmlReturn == 0 and request.metrics[3].value == 0.0  # past numMetrics: untouched
        pynvml.nvmlShutdown()


def test_calls_are_counted_per_symbol_and_gpu_whatever_the_handle(clock: FakeClock) -> None:
    """The dispatcher decodes device handles itself (its fast path): a full-GPU handle, a MIG
    handle, a GPU index, a call on no GPU and a handle of no GPU are attributed as before."""
    import ctypes

    fake = FakeNvml.with_gpus([FakeGpu.h100(), FakeGpu.h100(mig=["3g.40gb", "4g.40gb"])], clock=clock)
    with install_fake_nvml(fake):
        pynvml.nvmlInit()
        fake.reset_calls()
        gpu1 = pynvml.nvmlDeviceGetHandleByIndex(1)
        mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu1, 1)
        assert pynvml.nvmlDeviceGetMemoryInfo(mig).total == 40000 * 2**20
        pynvml.nvmlDeviceGetClockInfo(gpu1, pynvml.NVML_CLOCK_SM)
        pynvml.nvmlSystemGetDriverVersion()
        with pytest.raises(pynvml.NVMLError_InvalidArgument):
            pynvml.nvmlDeviceGetHandleByIndex(7)
        stray = pynvml.c_nvmlDevice_t()
        ctypes.c_void_p.from_buffer(stray).value = 9 << 16  # no GPU 8
        with pytest.raises(pynvml.NVMLError_InvalidArgument):
            pynvml.nvmlDeviceGetClockInfo(stray, pynvml.NVML_CLOCK_SM)
        fake.lose_gpu(1, after_calls=1)
        pynvml.nvmlDeviceGetClockInfo(gpu1, pynvml.NVML_CLOCK_SM)
        with pytest.raises(pynvml.NVMLError_GpuIsLost):
            pynvml.nvmlDeviceGetMemoryInfo(mig)  # a MIG handle is its GPU's
    assert dict(fake.device_calls) == {
        ("nvmlDeviceGetHandleByIndex_v2", 1): 1,
        ("nvmlDeviceGetMigDeviceHandleByIndex", 1): 1,
        ("nvmlDeviceGetMemoryInfo", 1): 2,
        ("nvmlDeviceGetClockInfo", 1): 2,
        ("nvmlSystemGetDriverVersion", None): 1,
        ("nvmlDeviceGetHandleByIndex_v2", None): 1,
        ("nvmlDeviceGetClockInfo", None): 1,
    }
    assert fake.calls["nvmlDeviceGetClockInfo"] == 3 and fake.calls["nvmlDeviceGetMemoryInfo"] == 2


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


def test_gpm_metrics_follow_metric_errors_and_link_count() -> None:
    """nvmlGpmMetricsGet answers what the GPU has now: its metric errors and links as they are."""
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
