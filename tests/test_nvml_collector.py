"""The real NvmlCollector and the real pynvml bindings against the fake NVML library."""

from __future__ import annotations

import os

import psutil
import pynvml
import pytest
from support.samples import make_sample

from gpuscope.telemetry.nvml import GpuSide
from gpuscope.telemetry.records import record_to_dict
from gpuscope.telemetry.values import Reason, Unavailable
from gpuscope.telemetry.wire import convert_record
from gpuscope.testing.fake_nvml import (
    FakeClock,
    FakeGpu,
    FakeNvml,
    FakeProcess,
    opened_collector,
    reason_of,
)

GIB = 2**30
H200_PEAK = 6144 * 3201e6 * 2 / 8
A100_PEAK = 5120 * 1593e6 * 2 / 8


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_hopper_gpm_dram_bandwidth_is_exact(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h200()], clock=clock)
    fake.set_load(
        0,
        dram_bytes_per_s=2.4e12,
        sm_activity_percent=62.5,
        sm_occupancy_percent=30.0,
        tensor_activity_percent=40.0,
        hmma_tensor_activity_percent=35.0,
        imma_tensor_activity_percent=5.0,
        dfma_tensor_activity_percent=0.0,
        fp16_activity_percent=1.0,
        fp32_activity_percent=12.0,
        fp64_activity_percent=2.0,
        pcie_tx_bytes_per_s=8e9,
        pcie_rx_bytes_per_s=2e9,
    )
    with opened_collector(fake, clock) as collector:
        clock.advance(1.0)
        gpu = collector.sample().gpus[0]
        assert gpu.architecture == "Hopper" and gpu.state == "ok"
        assert gpu.dram_peak_bytes_per_s == H200_PEAK
        assert gpu.dram_bandwidth_bytes_per_s == pytest.approx(2.4e12, rel=1e-12)
        assert gpu.dram_bandwidth_percent_of_peak == pytest.approx(2.4e12 / H200_PEAK * 100, rel=1e-12)
        assert gpu.sm_activity_percent == pytest.approx(62.5)
        assert gpu.sm_occupancy_percent == pytest.approx(30.0)
        assert gpu.tensor_activity_percent == pytest.approx(40.0)
        assert gpu.hmma_tensor_activity_percent == pytest.approx(35.0)
        assert gpu.imma_tensor_activity_percent == pytest.approx(5.0)
        assert gpu.dfma_tensor_activity_percent == pytest.approx(0.0)
        assert (gpu.fp16_activity_percent, gpu.fp32_activity_percent, gpu.fp64_activity_percent) == pytest.approx(
            (1.0, 12.0, 2.0)
        )
        assert gpu.pcie_tx_bytes_per_s == pytest.approx(8e9, rel=1e-12)
        assert gpu.pcie_rx_bytes_per_s == pytest.approx(2e9, rel=1e-12)

        fake.set_load(0, dram_bytes_per_s=1.2e12)
        clock.advance(0.5)
        assert collector.sample().gpus[0].dram_bandwidth_bytes_per_s == pytest.approx(1.2e12, rel=1e-12)


def test_gpm_window_shorter_than_100ms_reuses_the_last_metrics(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h100()], clock=clock)
    fake.set_load(0, sm_activity_percent=80.0)
    with opened_collector(fake, clock) as collector:
        assert reason_of(collector.sample().gpus[0].sm_activity_percent) is Reason.WARMING_UP
        clock.advance(0.2)
        assert collector.sample().gpus[0].sm_activity_percent == pytest.approx(80.0)
        metrics_calls = fake.calls["nvmlGpmMetricsGet"]
        fake.set_load(0, sm_activity_percent=10.0)
        clock.advance(0.05)
        assert collector.sample().gpus[0].sm_activity_percent == pytest.approx(80.0)
        assert fake.calls["nvmlGpmMetricsGet"] == metrics_calls
        clock.advance(0.05)  # 0.1 s after the last GPM sample: not *more* than 100 ms yet
        assert collector.sample().gpus[0].sm_activity_percent == pytest.approx(80.0)
        assert fake.calls["nvmlGpmMetricsGet"] == metrics_calls
        clock.advance(0.1)
        # the window runs from the last GPM sample (0.2 s ago), all of it at 10 %
        assert collector.sample().gpus[0].sm_activity_percent == pytest.approx(10.0)


def test_gpm_samples_exactly_100ms_apart_are_never_paired(clock: FakeClock) -> None:
    """nvml.h asks for GPM samples more than 100 ms apart; the fake refuses 100 ms windows."""
    fake = FakeNvml.with_gpus([FakeGpu.h100()], clock=clock)
    fake.set_load(0, sm_activity_percent=60.0)
    with opened_collector(fake, clock) as collector:
        for _ in range(12):
            clock.advance(0.1)
            value = collector.sample().gpus[0].sm_activity_percent
            assert not isinstance(value, Unavailable) or value.reason is Reason.WARMING_UP, value
        assert collector.sample().gpus[0].sm_activity_percent == pytest.approx(60.0)


def test_ampere_without_gpm_reads_pcie_from_counters(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.a100()], clock=clock)
    fake.set_load(
        0,
        pcie_tx_bytes_per_s=3 * GIB,
        pcie_rx_bytes_per_s=GIB,
        power_w=250.0,
        gpu_util_percent=77,
        memory_busy_percent=33,
    )
    with opened_collector(fake, clock) as collector:
        first = collector.sample().gpus[0]
        assert reason_of(first.pcie_tx_bytes_per_s) is Reason.WARMING_UP  # no time has passed since open
        clock.advance(2.0)
        gpu = collector.sample().gpus[0]
    assert gpu.architecture == "Ampere"
    for name in (
        "sm_activity_percent",
        "sm_occupancy_percent",
        "tensor_activity_percent",
        "dram_bandwidth_bytes_per_s",
        "dram_bandwidth_percent_of_peak",
        "fp32_activity_percent",
    ):
        assert reason_of(getattr(gpu, name)) is Reason.NOT_SUPPORTED, name
    assert gpu.dram_peak_bytes_per_s == A100_PEAK
    assert gpu.pcie_tx_bytes_per_s == 3 * GIB
    assert gpu.pcie_rx_bytes_per_s == GIB
    assert gpu.utilization_percent == 77.0 and gpu.memory_busy_percent == 33.0
    assert gpu.power_w == 250.0 and gpu.power_limit_w == 400.0
    assert gpu.energy_j == pytest.approx(70.0 * 0 + 250.0 * 2.0 + first.energy_j)
    assert (gpu.sm_clock_max_mhz, gpu.memory_clock_max_mhz) == (1410.0, 1593.0)
    assert (gpu.pcie_link_generation, gpu.pcie_link_width) == (4, 16)


def test_two_gpus_nvlink_per_link_and_totals_from_counters(clock: FakeClock) -> None:
    gpus = [FakeGpu.a100(nvlink_inactive=frozenset({3})), FakeGpu.a100()]
    fake = FakeNvml.with_gpus(gpus, clock=clock)
    fake.set_load(
        0,
        nvlink_tx_bytes_per_s=[(k + 1) * GIB for k in range(12)],
        nvlink_rx_bytes_per_s=[(k + 1) * 2**29 for k in range(12)],
    )
    fake.set_load(1, nvlink_tx_bytes_per_s=2 * GIB, nvlink_rx_bytes_per_s=3 * GIB)
    with opened_collector(fake, clock) as collector:
        clock.advance(2.0)
        first, second = collector.sample().gpus
    active = [k for k in range(12) if k != 3]
    assert first.nvlink_active_links == 11 and [link.link for link in first.nvlink_links] == active
    assert first.nvlink_version == 3 and first.nvlink_link_peak_bytes_per_s == 25e9
    for link in first.nvlink_links:
        assert link.tx_bytes_per_s == (link.link + 1) * GIB
        assert link.rx_bytes_per_s == (link.link + 1) * 2**29
    assert first.nvlink_tx_bytes_per_s == sum((k + 1) * GIB for k in active)
    assert first.nvlink_rx_bytes_per_s == sum((k + 1) * 2**29 for k in active)
    assert second.nvlink_active_links == 12
    assert second.nvlink_tx_bytes_per_s == 12 * 2 * GIB and second.nvlink_rx_bytes_per_s == 12 * 3 * GIB
    assert all(link.tx_bytes_per_s == 2 * GIB for link in second.nvlink_links)


def test_hopper_nvlink_per_link_from_gpm(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h100(), FakeGpu.h100()], clock=clock)
    fake.set_load(0, nvlink_tx_bytes_per_s=[1e9 * (k + 1) for k in range(18)], nvlink_rx_bytes_per_s=5e9)
    with opened_collector(fake, clock) as collector:
        clock.advance(1.0)
        gpu = collector.sample().gpus[0]
    assert gpu.nvlink_active_links == 18 and gpu.nvlink_version == 4
    assert [link.tx_bytes_per_s for link in gpu.nvlink_links] == pytest.approx(
        [1e9 * (k + 1) for k in range(18)], rel=1e-12
    )
    assert gpu.nvlink_tx_bytes_per_s == pytest.approx(1e9 * 171, rel=1e-12)
    assert gpu.nvlink_rx_bytes_per_s == pytest.approx(18 * 5e9, rel=1e-12)


def test_driver_that_ignores_the_link_scope(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.a100(nvlink_scope_ignored=True)], clock=clock)
    fake.set_load(0, nvlink_tx_bytes_per_s=GIB)
    with opened_collector(fake, clock) as collector:
        clock.advance(1.0)
        gpu = collector.sample().gpus[0]
        assert collector.device_status()[0].nvlink_scope_honoured is False
    assert gpu.nvlink_tx_bytes_per_s == 12 * GIB
    assert all(reason_of(link.tx_bytes_per_s) is Reason.NOT_SUPPORTED for link in gpu.nvlink_links)


def test_gpu_without_nvlink(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.l4()], clock=clock)
    with opened_collector(fake, clock) as collector:
        clock.advance(1.0)
        gpu = collector.sample().gpus[0]
    assert reason_of(gpu.nvlink_active_links) is Reason.NOT_SUPPORTED
    assert reason_of(gpu.nvlink_tx_bytes_per_s) is Reason.NOT_SUPPORTED
    assert gpu.nvlink_links == []


def test_one_batched_field_call_per_gpu_per_sample_and_no_pcie_throughput(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h100(), FakeGpu.a100(), FakeGpu.l4()], clock=clock)
    with opened_collector(fake, clock) as collector:
        fake.reset_calls()
        for _ in range(5):
            clock.advance(0.25)
            collector.sample()
    for index in range(3):
        assert fake.device_calls[("nvmlDeviceGetFieldValues", index)] == 5
        assert fake.device_calls[("nvmlGpmMetricsGet", None)] == 5  # only the H100 has GPM
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 0


def test_a_field_the_gpu_lacks_is_dropped_at_open(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h100(), FakeGpu.l4()], clock=clock)
    with opened_collector(fake, clock) as collector:
        l4 = collector._gpus[1].fields
        assert l4 is not None
        for _ in range(3):
            clock.advance(1.0)
            collector.sample()
        # the L4 has no memory sensor: that field was dropped at open and is not asked again
        assert "temperature_memory_c" not in l4.asked
        assert all(field.key != "temperature_memory_c" for field in l4._fields)


def test_per_sample_cost_is_bounded(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h100(processes=[FakeProcess(os.getpid())])], clock=clock)
    with opened_collector(fake, clock) as collector:
        clock.advance(1.0)
        collector.sample()  # the first sample also reads the slow and process groups
        fake.reset_calls()
        clock.advance(0.2)
        collector.sample()
        # field values (power among them), utilization, memory, 2 clocks, temperature, throttle,
        # 2 GPM (fan: not supported, learnt at the first sample and not asked again), and one
        # nvmlEventSetWait_v2 for Xid events (per sample, not per GPU)
        assert sum(fake.calls.values()) == 10, dict(fake.calls)
        assert fake.calls["nvmlDeviceGetPowerUsage"] == 0


def test_not_supported_per_metric_spoils_nothing_else(clock: FakeClock) -> None:
    gpu = FakeGpu.h100(
        errors={"nvmlDeviceGetPowerUsage": "NotSupported", "nvmlDeviceGetClockInfo": "NotSupported"},
        field_errors={pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION: "NotSupported"},
        gpm_metric_errors={pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: "NotSupported"},
    )
    fake = FakeNvml.with_gpus([gpu], clock=clock)
    fake.set_load(0, sm_activity_percent=55.0, temperature_gpu_c=61.0)
    with opened_collector(fake, clock) as collector:
        for _ in range(3):
            clock.advance(1.0)
            sample = collector.sample().gpus[0]
        assert fake.device_calls[("nvmlDeviceGetPowerUsage", 0)] == 1  # learnt once, not retried
    for name in ("power_w", "sm_clock_mhz", "memory_clock_mhz", "energy_j", "tensor_activity_percent"):
        assert reason_of(getattr(sample, name)) is Reason.NOT_SUPPORTED, name
    assert sample.sm_activity_percent == pytest.approx(55.0)
    assert sample.temperature_gpu_c == 61.0
    assert sample.power_limit_w == 700.0


def test_throttle_reasons_ecc_temperatures_energy(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h100(ecc_corrected=7, ecc_uncorrected=1)], clock=clock)
    fake.set_load(0, throttle_reasons=0x4 | 0x40 | 0x4000, temperature_memory_c=72.0, power_w=300.0)
    with opened_collector(fake, clock) as collector:
        clock.advance(1.0)
        first = collector.sample().gpus[0]
        clock.advance(2.0)
        second = collector.sample().gpus[0]
    assert first.throttle_reasons == ["sw_power_cap", "hw_thermal_slowdown", "unknown_0x4000"]
    assert (second.ecc_corrected_errors, second.ecc_uncorrected_errors) == (7, 1)
    assert second.temperature_memory_c == 72.0
    assert second.energy_j - first.energy_j == pytest.approx(600.0)


def test_power_limit_is_reread_only_every_slow_interval(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h100()], clock=clock)
    with opened_collector(fake, clock) as collector:
        assert collector.sample().gpus[0].power_limit_w == 700.0
        fake.gpus[0].power_limit_w = 500.0
        clock.advance(1.0)
        assert collector.sample().gpus[0].power_limit_w == 700.0
        clock.advance(collector.SLOW_INTERVAL_S)
        assert collector.sample().gpus[0].power_limit_w == 500.0


def test_processes_name_user_sm_and_other_pid_namespace(clock: FakeClock) -> None:
    me = os.getpid()
    gpu = FakeGpu.l4(
        processes=[
            FakeProcess(me, used_gpu_memory_bytes=3 * GIB, sm_percent=37),
            FakeProcess(4_000_000, sm_percent=None),  # beyond pid_max: a PID of another namespace
            FakeProcess(4_000_001, kind="graphics", used_gpu_memory_bytes=None),
        ]
    )
    fake = FakeNvml.with_gpus([gpu], clock=clock)
    with opened_collector(fake, clock) as collector:
        clock.advance(1.0)
        processes = collector.sample().gpus[0].processes
        assert isinstance(processes, list)
        mine, hidden, graphics = processes
        assert (mine.pid, mine.kind, mine.gpu_memory_bytes, mine.sm_percent) == (me, "compute", 3 * GIB, 37.0)
        assert mine.name == psutil.Process(me).name() and mine.user == psutil.Process(me).username()
        assert hidden.name == Unavailable(Reason.NOT_APPLICABLE, "process in another PID namespace")
        assert hidden.user == hidden.name
        assert reason_of(hidden.sm_percent) is Reason.NOT_APPLICABLE
        assert graphics.kind == "graphics" and reason_of(graphics.gpu_memory_bytes) is Reason.NOT_SUPPORTED
        fake.reset_calls()
        for _ in range(6):  # processes are re-read once per PROCESS_INTERVAL_S, not every tick
            clock.advance(0.2)
            collector.sample()
        assert fake.calls["nvmlDeviceGetComputeRunningProcesses_v3"] == 2  # one read: size, then fill


def test_collection_switches(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h100(processes=[FakeProcess(1)])], clock=clock)
    with opened_collector(fake, clock, gpm=False, processes=False) as collector:
        clock.advance(1.0)
        gpu = collector.sample().gpus[0]
    assert fake.calls["nvmlGpmSampleGet"] == 0 and fake.calls["nvmlDeviceGetComputeRunningProcesses_v3"] == 0
    assert reason_of(gpu.sm_activity_percent) is Reason.NOT_APPLICABLE
    assert reason_of(gpu.processes) is Reason.NOT_APPLICABLE
    assert gpu.nvlink_active_links == 18  # counters still give NVLink and PCIe
    assert gpu.pcie_tx_bytes_per_s == 0.0


def test_versions_and_round_trip_through_the_log_schema(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h200()], clock=clock, cuda_driver_version=12040)
    with opened_collector(fake, clock) as collector:
        clock.advance(1.0)
        side = collector.sample()
    assert isinstance(side, GpuSide) and side.unavailable is None
    assert (side.driver_version, side.nvml_version, side.cuda_driver_version) == ("560.35.03", "12.560.35.03", "12.4")
    data = record_to_dict(side.gpus[0])
    sample = make_sample(gpus=1)
    sample.gpus = [side.gpus[0]]
    assert convert_record(record_to_dict(sample)).gpus[0] == side.gpus[0]
    assert all(
        value is not None
        for key, value in data.items()
        if key not in data.get("unavailable", {}) and key != "unavailable" and not key.startswith("mig_")
    )


def test_counter_rates_survive_wraps_and_resets() -> None:
    from gpuscope.telemetry.nvml.fields import FieldSet, _Field

    fields = FieldSet(handle=None, links=[])
    counter = _Field("pcie_tx_bytes_per_s", 197, 0, 1.0, True)
    assert reason_of(fields._rate(counter, 2**32 - 1000, 1_000_000, 1 << 32)) is Reason.WARMING_UP
    assert fields._rate(counter, 3000, 2_000_000, 1 << 32) == 4000.0  # a 32-bit counter wrapped once
    assert fields._rate(counter, 3000, 2_000_000, 1 << 32) == 4000.0  # same stamp: the last rate again
    assert reason_of(fields._rate(counter, 10, 3_000_000)) is Reason.WARMING_UP  # a 64-bit counter reset
    assert fields._rate(counter, 510, 3_500_000) == 1000.0
