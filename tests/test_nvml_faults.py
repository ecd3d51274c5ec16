"""NVML failures: lost GPUs, missing driver or library, old drivers, permissions, random errors."""

from __future__ import annotations

import functools

import pynvml
import pytest

from gpuscope.telemetry.nvml import NvmlCollector, compat
from gpuscope.telemetry.nvml.gpm import ACTIVITY_METRICS
from gpuscope.telemetry.nvml.readings import METRIC_FIELDS
from gpuscope.telemetry.nvml.session import unavailable_from_error
from gpuscope.telemetry.records import GpuSample
from gpuscope.telemetry.values import Reason, Unavailable
from gpuscope.testing.fake_nvml import (
    OLD_DRIVER_MISSING_SYMBOLS,
    FakeClock,
    FakeGpu,
    FakeNvml,
    FakeProcess,
    install_fake_nvml,
    no_nvml_library,
    opened_collector,
    reason_of,
)

GIB = 2**30
opened = functools.partial(opened_collector, check_open=False)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def assert_all_lost(gpu: GpuSample) -> None:
    assert gpu.state == "lost"
    for name in METRIC_FIELDS:
        assert reason_of(getattr(gpu, name)) is Reason.GPU_LOST, name


def test_gpu_lost_mid_run_others_keep_updating_then_it_comes_back(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h100(), FakeGpu.h100(), FakeGpu.h100()], clock=clock)
    fake.set_load(0, power_w=100.0)
    fake.set_load(1, power_w=200.0, sm_activity_percent=50.0)
    with opened(fake, clock) as collector:
        clock.advance(1.0)
        before = collector.sample().gpus
        assert [gpu.state for gpu in before] == ["ok", "ok", "ok"]

        fake.lose_gpu(1)
        clock.advance(1.0)
        during = collector.sample().gpus
        assert [gpu.state for gpu in during] == ["ok", "lost", "ok"]
        assert_all_lost(during[1])
        assert during[1].name == "NVIDIA H100 80GB HBM3" and during[1].uuid == before[1].uuid
        assert during[0].energy_j == pytest.approx(before[0].energy_j + 100.0)

        # not retried on every tick: no call reaches the lost GPU before the retry interval
        fake.reset_calls()
        clock.advance(1.0)
        assert collector.sample().gpus[1].state == "lost"
        assert sum(count for (symbol, gpu), count in fake.device_calls.items() if gpu == 1) == 0

        fake.restore_gpu(1)
        clock.advance(collector.lost_retry_interval_s)
        back = collector.sample().gpus
        assert [gpu.state for gpu in back] == ["ok", "ok", "ok"]
        assert back[1].uuid == before[1].uuid
        assert reason_of(back[1].sm_activity_percent) is Reason.WARMING_UP  # GPM starts afresh
        clock.advance(1.0)
        again = collector.sample().gpus[1]
        assert again.sm_activity_percent == pytest.approx(50.0)
        assert again.power_w == 200.0


def test_gpu_lost_in_the_middle_of_a_sample(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.a100(), FakeGpu.a100()], clock=clock)
    with opened(fake, clock) as collector:
        clock.advance(1.0)
        fake.lose_gpu(0, after_calls=3)  # utilization, memory, then the SM clock call fails
        side = collector.sample()
    assert_all_lost(side.gpus[0])
    assert side.gpus[1].state == "ok" and side.gpus[1].power_w == 70.0


def test_gpu_lost_at_a_chosen_time_and_before_open(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.l4(), FakeGpu.l4()], clock=clock)
    fake.lose_gpu(1)
    fake.lose_gpu(0, at_time_s=clock() + 1.5)
    with opened(fake, clock) as collector:
        first = collector.sample().gpus
        assert [gpu.state for gpu in first] == ["ok", "lost"]
        assert first[1].name == "unknown"  # never identified
        clock.advance(2.0)
        assert [gpu.state for gpu in collector.sample().gpus] == ["lost", "lost"]
        fake.restore_gpu(0)
        fake.restore_gpu(1)
        clock.advance(collector.lost_retry_interval_s)
        recovered = collector.sample().gpus
    assert [gpu.state for gpu in recovered] == ["ok", "ok"]
    assert recovered[1].name == "NVIDIA L4"


def test_function_not_found_on_an_old_driver(clock: FakeClock) -> None:
    missing = OLD_DRIVER_MISSING_SYMBOLS | {"nvmlDeviceGetComputeRunningProcesses_v2", "nvmlDeviceGetMemoryBusWidth"}
    gpu = FakeGpu.h100(processes=[FakeProcess(4_000_000, used_gpu_memory_bytes=5 * GIB)])
    fake = FakeNvml.with_gpus([gpu], clock=clock, missing_symbols=missing)
    fake.set_load(0, temperature_gpu_c=48.0, throttle_reasons=0x4, pcie_tx_bytes_per_s=GIB)
    with opened(fake, clock) as collector:
        clock.advance(1.0)
        side = collector.sample()
        assert collector.device_status()[0].gpm is not None
    sample = side.gpus[0]
    for name in ("sm_activity_percent", "tensor_activity_percent", "dram_bandwidth_percent_of_peak"):
        assert reason_of(getattr(sample, name)) is Reason.DRIVER_TOO_OLD, name
    assert reason_of(sample.dram_peak_bytes_per_s) is Reason.DRIVER_TOO_OLD
    assert "update the NVIDIA driver" in sample.dram_peak_bytes_per_s.detail  # type: ignore[union-attr]
    # the older functions still answer
    assert sample.temperature_gpu_c == 48.0  # nvmlDeviceGetTemperature instead of ...V
    assert sample.throttle_reasons == ["sw_power_cap"]  # ClocksThrottleReasons instead of ...EventReasons
    assert sample.pcie_tx_bytes_per_s == GIB  # field counters instead of GPM
    assert side.cuda_driver_version == "12.6"  # nvmlSystemGetCudaDriverVersion (v1)
    assert isinstance(sample.processes, list)
    assert [(p.pid, p.gpu_memory_bytes) for p in sample.processes] == [(4_000_000, 5 * GIB)]  # the v1 symbol


def test_library_not_found_host_only() -> None:
    with no_nvml_library():
        collector = NvmlCollector()
        why = collector.open()
        side = collector.sample()
        collector.close()
    assert why is not None and why.reason is Reason.NO_DRIVER
    assert side.gpus == [] and side.unavailable == why
    assert reason_of(side.driver_version) is Reason.NO_DRIVER
    assert "libnvidia-ml.so.1" in why.detail


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ("DriverNotLoaded", Reason.NO_DRIVER),
        ("LibRmVersionMismatch", Reason.DRIVER_MISMATCH),
        ("NoPermission", Reason.NO_PERMISSION),
    ],
)
def test_init_failures_mean_no_gpu_side(clock: FakeClock, error: str, expected: Reason) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h100()], clock=clock, init_error=error)
    with install_fake_nvml(fake):
        collector = NvmlCollector(clock=clock)
        side = collector.sample()  # sample() opens on first use
        collector.close()
    assert side.unavailable is not None and side.unavailable.reason is expected
    assert side.gpus == []


def test_nvml_without_gpus(clock: FakeClock) -> None:
    with install_fake_nvml(FakeNvml(clock=clock)):
        collector = NvmlCollector(clock=clock)
        why = collector.open()
        collector.close()
    assert why is not None and why.reason is Reason.NOT_APPLICABLE


def test_no_permission_on_gpm_samples_falls_back_to_counters(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h200(gpm_no_permission=True)], clock=clock)
    fake.set_load(0, pcie_rx_bytes_per_s=4 * GIB, nvlink_tx_bytes_per_s=GIB, sm_activity_percent=90.0)
    with opened(fake, clock) as collector:
        clock.advance(1.0)
        gpu = collector.sample().gpus[0]
    for name in (
        "sm_activity_percent",
        "sm_occupancy_percent",
        "tensor_activity_percent",
        "dram_bandwidth_bytes_per_s",
    ):
        value = getattr(gpu, name)
        assert reason_of(value) is Reason.NO_PERMISSION, name
        assert "RmProfilingAdminOnly" in value.detail and "NVreg_RestrictProfilingToAdminUsers=0" in value.detail
    assert gpu.dram_peak_bytes_per_s == 6144 * 3201e6 * 2 / 8
    assert gpu.pcie_rx_bytes_per_s == 4 * GIB  # counters still work
    assert gpu.nvlink_tx_bytes_per_s == 18 * GIB
    assert all(link.tx_bytes_per_s == GIB for link in gpu.nvlink_links)


def test_no_permission_on_one_profiling_metric(clock: FakeClock) -> None:
    gpu = FakeGpu.h100(gpm_metric_errors={pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: "NoPermission"})
    fake = FakeNvml.with_gpus([gpu], clock=clock)
    fake.set_load(0, dram_bytes_per_s=1e12, sm_activity_percent=20.0)
    with opened(fake, clock) as collector:
        clock.advance(1.0)
        sample = collector.sample().gpus[0]
    assert reason_of(sample.sm_occupancy_percent) is Reason.NO_PERMISSION
    assert "RmProfilingAdminOnly" in sample.sm_occupancy_percent.detail  # type: ignore[union-attr]
    assert sample.sm_activity_percent == pytest.approx(20.0)
    assert sample.dram_bandwidth_bytes_per_s == pytest.approx(1e12, rel=1e-12)


@pytest.mark.parametrize("field", [name for name in ACTIVITY_METRICS if name != "utilization_percent"])
def test_each_gpm_metric_lands_in_its_own_field(clock: FakeClock, field: str) -> None:
    """A failing GPM metric makes exactly its own GpuSample field unavailable (the collector
    stores the activity fields by position: a slip would move the reason to a neighbour)."""
    gpu = FakeGpu.h100(gpm_metric_errors={ACTIVITY_METRICS[field]: "NoPermission"})
    with opened(FakeNvml.with_gpus([gpu], clock=clock), clock) as collector:
        clock.advance(1.0)
        sample = collector.sample().gpus[0]
    failed = [name for name in ACTIVITY_METRICS if isinstance(getattr(sample, name), Unavailable)]
    assert failed == [field]


def test_transient_errors_do_not_stick(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h100()], clock=clock)
    with opened(fake, clock) as collector:
        fake.inject("nvmlDeviceGetPowerUsage", "Unknown", count=1)
        fake.inject("nvmlGpmSampleGet", "NoPermission", count=1)
        clock.advance(1.0)
        failed = collector.sample().gpus[0]
        clock.advance(1.0)
        middle = collector.sample().gpus[0]
        clock.advance(1.0)
        fine = collector.sample().gpus[0]
    assert reason_of(failed.power_w) is Reason.ERROR and "Unknown" in failed.power_w.detail  # type: ignore[union-attr]
    assert reason_of(failed.sm_activity_percent) is Reason.NO_PERMISSION
    assert middle.power_w == 70.0
    assert reason_of(middle.sm_activity_percent) is Reason.WARMING_UP  # GPM starts its window again
    assert fine.sm_activity_percent == pytest.approx(0.0)


@pytest.mark.parametrize("seed", [7, 8])
def test_random_errors_never_raise_and_recovery_follows(clock: FakeClock, seed: int) -> None:
    fake = FakeNvml.with_gpus(
        [FakeGpu.h100(mig=["3g.40gb", "3g.40gb"]), FakeGpu.a100(), FakeGpu.l4(), FakeGpu.h200()], clock=clock
    )
    with opened(fake, clock) as collector:
        fake.inject_random(0.15, seed=seed, errors=("Unknown", "Timeout", "GpuIsLost", "InsufficientSize"))
        for _ in range(40):
            clock.advance(0.3)
            side = collector.sample()
            assert side.unavailable is None
            for gpu in side.gpus:
                assert gpu.state in ("ok", "lost")
                for name in METRIC_FIELDS:
                    assert getattr(gpu, name) is not None
        assert sum(fake.calls.values()) > 200  # the errors really were exercised
        fake.clear_injections()
        clock.advance(collector.MAX_REOPEN_DELAY_S)  # past every lost-GPU retry and static re-read
        collector.sample()
        clock.advance(1.0)
        final = collector.sample()
    assert [gpu.state for gpu in final.gpus] == ["ok"] * 6
    assert all(not isinstance(gpu.energy_j, Unavailable) for gpu in final.gpus[:4])


def test_error_mapping_names_each_reason() -> None:
    cases = {
        pynvml.NVML_ERROR_NOT_SUPPORTED: Reason.NOT_SUPPORTED,
        pynvml.NVML_ERROR_NO_PERMISSION: Reason.NO_PERMISSION,
        pynvml.NVML_ERROR_GPU_IS_LOST: Reason.GPU_LOST,
        pynvml.NVML_ERROR_FUNCTION_NOT_FOUND: Reason.DRIVER_TOO_OLD,
        pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH: Reason.DRIVER_MISMATCH,
        pynvml.NVML_ERROR_LIBRARY_NOT_FOUND: Reason.NO_DRIVER,
        pynvml.NVML_ERROR_DRIVER_NOT_LOADED: Reason.NO_DRIVER,
        pynvml.NVML_ERROR_UNKNOWN: Reason.ERROR,
    }
    for code, expected in cases.items():
        assert unavailable_from_error(pynvml.NVMLError(code), "x").reason is expected
    if compat.LIBRARY_MISMATCH_ERRORS:  # nvidia-ml-py 12.550 and newer
        assert unavailable_from_error(compat.LIBRARY_MISMATCH_ERRORS[0]("old"), "x").reason is Reason.DRIVER_TOO_OLD
    assert unavailable_from_error(ValueError("bad"), "x") == Unavailable(Reason.ERROR, "x: ValueError: bad")


def test_random_permanent_errors_never_raise(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h100(mig=["1g.10gb"]), FakeGpu.a100()], clock=clock)
    fake.inject_random(0.3, seed=3, errors=("NotSupported", "NoPermission", "FunctionNotFound", "GpuIsLost", "Unknown"))
    with install_fake_nvml(fake):
        collector = NvmlCollector(clock=clock)
        for _ in range(25):
            clock.advance(0.5)
            side = collector.sample()  # the first call opens, under the same errors
            for gpu in side.gpus:
                assert gpu.state in ("ok", "lost")
        collector.close()


def test_failed_open_is_retried_now_and_then(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.l4()], clock=clock, init_error="DriverNotLoaded")
    with install_fake_nvml(fake):
        collector = NvmlCollector(clock=clock)
        assert collector.sample().unavailable is not None
        fake.init_error = None  # the driver gets loaded
        clock.advance(1.0)
        assert collector.sample().unavailable is not None  # not retried on every tick
        clock.advance(collector.OPEN_RETRY_INTERVAL_S)
        side = collector.sample()
        collector.close()
    assert side.unavailable is None and side.gpus[0].name == "NVIDIA L4"
    assert fake.calls["nvmlInitWithFlags"] == 2


def test_the_lost_gpu_retry_interval_is_the_collectors_option_and_a_loss_can_end(clock: FakeClock) -> None:
    """``lost_retry_interval_s`` belongs to one collector (a scenario's ``lost_retry_s`` passes
    it); a loss scheduled with an end (``lose_gpu(until_time_s=)``) ends by itself."""
    fake = FakeNvml.with_gpus([FakeGpu.l4()], clock=clock)
    fake.lose_gpu(0, at_time_s=clock() + 1.0, until_time_s=clock() + 2.0)
    with install_fake_nvml(fake):
        quick = NvmlCollector(clock=clock, lost_retry_interval_s=0.5)
        assert quick.open() is None
        try:
            clock.advance(1.0)
            assert quick.sample().gpus[0].state == "lost"
            assert "retried every 0.5 s" in str(quick.sample().gpus[0].power_w)
            clock.advance(1.0)  # the loss is over; the next retry is due within 0.5 s
            assert quick.sample().gpus[0].state == "ok"
        finally:
            quick.close()
    assert NvmlCollector().lost_retry_interval_s == 5.0  # the default, per collector
