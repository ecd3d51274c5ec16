"""Field-value counters that GPM already gives are not asked of the driver; when GPM stops giving
one, its counter is asked again and restarts (one read warming up), never an average over the
time it was not read, never zero, never a stale rate."""

from __future__ import annotations

import random

import pynvml
import pytest
from support.nvml import field_set

from gpuscope.telemetry.nvml.collector import NvmlCollector
from gpuscope.telemetry.nvml.fields import KEEP_READS
from gpuscope.telemetry.records import GpuSample
from gpuscope.telemetry.values import Reason, Unavailable
from gpuscope.testing.fake_nvml import FakeClock, FakeGpu, FakeNvml, opened_collector, reason_of

GIB = 2**30
#: the fields GPM cannot give: energy, memory temperature, the two ECC totals, power (the 1 s
#: average on Hopper; the instantaneous field is asked at open only, see OPEN)
ALWAYS = ["energy_j", "temperature_memory_c", "ecc_corrected_errors", "ecc_uncorrected_errors", "power_average_w"]
PCIE = ["pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"]
TOTALS = ["nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s"]
#: asked at the first read besides ALWAYS (dropped where the average answers)
OPEN = ["power_instant_w"]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _link_rates(step: int) -> list[float]:
    """A per-link NVLink load that differs per link and per step (bytes/s)."""
    return [1e9 * (1 + link) * (1 + step % 5) for link in range(18)]


def _busy(fake: FakeNvml, step: int, index: int = 0) -> None:
    fake.set_load(
        index,
        nvlink_tx_bytes_per_s=_link_rates(step),
        nvlink_rx_bytes_per_s=3e9 * (1 + step % 3),
        pcie_tx_bytes_per_s=1e9 * (1 + step % 4),
        pcie_rx_bytes_per_s=2e9,
    )


def _tick(fake: FakeNvml, clock: FakeClock, collector: NvmlCollector, step: int) -> GpuSample:
    """Load ``step`` runs for one second, then a sample is taken (its rates are that load's)."""
    _busy(fake, step)
    clock.advance(1.0)
    return collector.sample().gpus[0]


def _expect(gpu: GpuSample, step: int) -> None:
    """Every interconnect value has the load of the last second exactly."""
    assert [link.tx_bytes_per_s for link in gpu.nvlink_links] == pytest.approx(_link_rates(step), rel=1e-6)
    assert all(link.rx_bytes_per_s == pytest.approx(3e9 * (1 + step % 3), rel=1e-6) for link in gpu.nvlink_links)
    assert gpu.pcie_tx_bytes_per_s == pytest.approx(1e9 * (1 + step % 4), rel=1e-6)
    assert gpu.nvlink_tx_bytes_per_s == pytest.approx(sum(_link_rates(step)), rel=1e-6)


def test_counters_gpm_gives_are_not_asked(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h200(), FakeGpu.a100()], clock=clock)
    with opened_collector(fake, clock) as collector:
        assert len(field_set(collector).asked) == 46  # the first read asks everything
        for step in range(4):
            gpu = _tick(fake, clock, collector, step)
            _expect(gpu, step)
        # Hopper: GPM gives PCIe and every NVLink counter; the scope check is decided
        assert field_set(collector).asked == ALWAYS
        assert collector.device_status()[0].nvlink_scope_honoured is True
        # the A100 has no GPM: everything still comes from the counters (its power: instantaneous)
        assert field_set(collector, 1).asked[:5] == [*ALWAYS[:4], "power_instant_w"]
        assert len(field_set(collector, 1).asked) == 5 + 2 + 2 + 2 * 12


def test_gpm_stops_mid_run_links_come_back_after_one_warming_read(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h200()], clock=clock)
    with opened_collector(fake, clock) as collector:
        for step in range(5):
            _expect(_tick(fake, clock, collector, step), step)
        fake.inject("nvmlGpmSampleGet", "NoPermission", count=None)  # e.g. RmProfilingAdminOnly set mid-run
        gpu = _tick(fake, clock, collector, 5)
        assert reason_of(gpu.sm_activity_percent) is Reason.NO_PERMISSION
        # the counters were not read for 5 s: they restart instead of averaging over the gap
        assert all(reason_of(link.tx_bytes_per_s) is Reason.WARMING_UP for link in gpu.nvlink_links)
        assert reason_of(gpu.pcie_tx_bytes_per_s) is Reason.WARMING_UP
        for step in range(6, 9):
            gpu = _tick(fake, clock, collector, step)
            _expect(gpu, step)  # from the counters, this second's load: not zero, not stale
            assert reason_of(gpu.sm_activity_percent) is Reason.NO_PERMISSION
        assert len(field_set(collector).asked) == 45  # all but the instantaneous power
        fake.clear_injections()
        for step in range(9, 12 + KEEP_READS):
            _expect(_tick(fake, clock, collector, step), step)
        assert field_set(collector).asked == ALWAYS  # GPM is back and has been for a while


def test_an_intermittent_gpm_failure_finds_the_counters_running(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h200()], clock=clock)
    with opened_collector(fake, clock) as collector:
        for step in range(3):
            _tick(fake, clock, collector, step)
        fake.inject("nvmlGpmMetricsGet", "Unknown", count=1)
        gpu = _tick(fake, clock, collector, 3)
        assert reason_of(gpu.nvlink_links[0].tx_bytes_per_s) is Reason.WARMING_UP
        _expect(_tick(fake, clock, collector, 4), 4)  # GPM again
        fake.inject("nvmlGpmMetricsGet", "Unknown", count=1)
        gpu = _tick(fake, clock, collector, 5)
        assert reason_of(gpu.sm_activity_percent) is Reason.ERROR
        _expect(gpu, 5)  # the counters kept running since the last failure: a number at once


def test_one_gpm_link_metric_missing_reads_that_counter_only(clock: FakeClock) -> None:
    tx3 = pynvml.NVML_GPM_METRIC_NVLINK_L3_TX_PER_SEC
    fake = FakeNvml.with_gpus([FakeGpu.h200(gpm_metric_errors={tx3: "NotSupported"})], clock=clock)
    with opened_collector(fake, clock) as collector:
        for step in range(4):
            _expect(_tick(fake, clock, collector, step), step)  # link 3 tx from its counter, every time
        assert field_set(collector).asked == [*ALWAYS, "nvlink_tx_bytes_per_s:3"]


def test_random_gpm_failures_never_show_a_stale_or_averaged_rate(clock: FakeClock) -> None:
    """GPM calls and single GPM link metrics fail at random while the load changes every second:
    every number shown is the last second's load, whichever source gave it."""
    fake = FakeNvml.with_gpus([FakeGpu.h200()], clock=clock)
    rng = random.Random(5)
    link_ids = [pynvml.NVML_GPM_METRIC_NVLINK_L0_TX_PER_SEC + 2 * link for link in range(18)]
    numbers = warming = 0
    with opened_collector(fake, clock) as collector:
        fake.inject_random(
            0.15, seed=3, errors=("Unknown", "Timeout"), symbols={"nvmlGpmSampleGet", "nvmlGpmMetricsGet"}
        )
        for step in range(80):
            fake.gpus[0].gpm_metric_errors = {metric: "Unknown" for metric in link_ids if rng.random() < 0.05}
            gpu = _tick(fake, clock, collector, step)
            values = [link.tx_bytes_per_s for link in gpu.nvlink_links]
            for link, value in enumerate(values):
                if isinstance(value, Unavailable):
                    assert value.reason is Reason.WARMING_UP, value
                    warming += 1
                else:
                    assert value == pytest.approx(_link_rates(step)[link], rel=1e-6), (step, link)
                    numbers += 1
            for value, expected in (
                (gpu.pcie_tx_bytes_per_s, 1e9 * (1 + step % 4)),
                (gpu.nvlink_tx_bytes_per_s, sum(_link_rates(step))),
            ):
                if not isinstance(value, Unavailable):
                    assert value == pytest.approx(expected, rel=1e-6), step
    assert numbers > 20 * 18 and warming > 0  # both paths were exercised


def test_scope_ignored_is_found_with_gpm_and_the_links_are_not_asked_again(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h200(nvlink_scope_ignored=True)], clock=clock)
    with opened_collector(fake, clock) as collector:
        for step in range(3):
            _expect(_tick(fake, clock, collector, step), step)  # per link from GPM, which is right
        assert collector.device_status()[0].nvlink_scope_honoured is False
        assert field_set(collector).asked == ALWAYS
        fake.inject("nvmlGpmSampleGet", "NoPermission", count=None)
        _tick(fake, clock, collector, 3)
        gpu = _tick(fake, clock, collector, 4)
        # without GPM the per-link counters would all be the total: not asked; GPM's reason shows
        assert all(reason_of(link.tx_bytes_per_s) is Reason.NO_PERMISSION for link in gpu.nvlink_links)
        assert gpu.nvlink_tx_bytes_per_s == pytest.approx(sum(_link_rates(4)), rel=1e-6)
        assert field_set(collector).asked == [*ALWAYS, *PCIE, *TOTALS]


def test_scope_check_waits_for_traffic_reading_only_the_totals(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h200()], clock=clock)  # idle: no NVLink traffic yet
    with opened_collector(fake, clock) as collector:
        for _ in range(3):
            clock.advance(1.0)
            gpu = collector.sample().gpus[0]
        assert collector.device_status()[0].nvlink_scope_honoured is None
        assert field_set(collector).asked == [*ALWAYS, *TOTALS]
        assert all(link.tx_bytes_per_s == 0.0 for link in gpu.nvlink_links)
        fake.set_load(0, nvlink_tx_bytes_per_s=GIB)
        for _ in range(2):  # traffic on a total, then every link read beside it once
            clock.advance(1.0)
            collector.sample()
        assert collector.device_status()[0].nvlink_scope_honoured is True
        clock.advance(1.0)
        gpu = collector.sample().gpus[0]
        assert field_set(collector).asked == ALWAYS
        assert all(link.tx_bytes_per_s == pytest.approx(GIB) for link in gpu.nvlink_links)


def test_a_lost_gpu_comes_back_with_gpm_and_skips_again(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h200()], clock=clock)
    with opened_collector(fake, clock) as collector:
        for step in range(3):
            _tick(fake, clock, collector, step)
        fake.lose_gpu(0)
        assert _tick(fake, clock, collector, 3).state == "lost"
        fake.restore_gpu(0)
        clock.advance(collector.lost_retry_interval_s)
        for step in range(4, 8):
            gpu = _tick(fake, clock, collector, step)
        assert gpu.state == "ok"
        _expect(gpu, 7)
        assert field_set(collector).asked == ALWAYS


def test_a_failed_field_call_says_so_for_every_counter_it_asked(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h200(gpm_no_permission=True)], clock=clock)
    with opened_collector(fake, clock) as collector:
        for step in range(2):
            _tick(fake, clock, collector, step)
        fake.inject("nvmlDeviceGetFieldValues", "Unknown", count=1)
        gpu = _tick(fake, clock, collector, 2)
        assert reason_of(gpu.energy_j) is Reason.ERROR
        assert reason_of(gpu.nvlink_links[0].tx_bytes_per_s) is Reason.ERROR
        assert reason_of(gpu.pcie_tx_bytes_per_s) is Reason.NO_PERMISSION  # GPM's reason first, then the counter's
        assert "Unknown" in gpu.pcie_tx_bytes_per_s.detail  # type: ignore[union-attr]


def test_per_link_off_reads_the_totals_only_and_they_stay_true(clock: FakeClock) -> None:
    """The TUI shows NVLink totals only (``nvlink_per_link=False``): no per-link GPM metric or
    counter is read, nvlink_links stays empty, and the totals keep this second's load, from
    GPM and, when GPM fails, from the total counters."""
    fake = FakeNvml.with_gpus([FakeGpu.h200()], clock=clock)
    with opened_collector(fake, clock, nvlink_per_link=False) as collector:
        assert field_set(collector).asked == ALWAYS + OPEN + PCIE + TOTALS  # the first read: no link asked
        gpm = collector._gpus[0].gpm
        assert gpm is not None and not any(":" in key for key in gpm.metrics.values())  # totals, no links
        assert "nvlink_tx_bytes_per_s" in gpm.metrics.values()
        for step in range(3):
            gpu = _tick(fake, clock, collector, step)
            assert gpu.nvlink_links == []
            assert gpu.nvlink_tx_bytes_per_s == pytest.approx(sum(_link_rates(step)), rel=1e-6)
            assert gpu.nvlink_active_links == 18
        assert field_set(collector).asked == ALWAYS
        assert collector.device_status()[0].nvlink_scope_honoured is None  # never checked
        fake.inject("nvmlGpmSampleGet", "NoPermission", count=None)
        assert reason_of(_tick(fake, clock, collector, 3).nvlink_tx_bytes_per_s) is Reason.WARMING_UP
        for step in range(4, 7):
            gpu = _tick(fake, clock, collector, step)
            assert gpu.nvlink_links == []
            assert gpu.nvlink_tx_bytes_per_s == pytest.approx(sum(_link_rates(step)), rel=1e-6)
            assert gpu.pcie_tx_bytes_per_s == pytest.approx(1e9 * (1 + step % 4), rel=1e-6)
        assert field_set(collector).asked == ALWAYS + PCIE + TOTALS


def test_the_tui_source_reads_no_per_link_rates(clock: FakeClock) -> None:
    from gpuscope.testing.fake_nvml import install_fake_nvml
    from gpuscope.tui.sources import LiveSource

    fake = FakeNvml.with_gpus([FakeGpu.h200()], clock=clock)
    with install_fake_nvml(fake):
        source = LiveSource()
        try:
            gpu = source.sample().gpus[0]
        finally:
            source.close()
    assert gpu.nvlink_active_links == 18 and gpu.nvlink_links == []
