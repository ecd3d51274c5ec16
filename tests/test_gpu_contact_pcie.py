"""Issue 12 items 6 and the fake scenarios: PCIe byte counters that wrap at 32 bits, are absent
on driver 550, and are the only PCIe source when GPM is refused. A rate is right or unavailable
with a reason, never aliased."""

from __future__ import annotations

from typing import Any

import pytest

from gpuscope.telemetry.nvml import NvmlCollector
from gpuscope.telemetry.nvml.fields import PCIE_MAX_BYTES_PER_S
from gpuscope.telemetry.values import Reason, Unavailable
from gpuscope.testing.fake_nvml import FakeClock, FakeGpu, FakeNvml, install_fake_nvml
from gpuscope.testing.scenarios import build_fake, parse_scenario

RATE = 6e9  # bytes/s: a 32-bit counter wraps every 0.72 s
SAFE_S = 2**32 / PCIE_MAX_BYTES_PER_S


def _rates(fake: FakeNvml, clock: FakeClock, step_s: float, steps: int) -> list[Any]:
    values = []
    with install_fake_nvml(fake):
        collector = NvmlCollector(gpm=False, processes=False, clock=clock)
        collector.open()
        for _ in range(steps):
            clock.advance(step_s)
            values.append(collector.sample().gpus[0].pcie_tx_bytes_per_s)
        collector.close()
    return values


@pytest.mark.parametrize("bits", [32, "ull32"])
def test_wrapping_counter_read_often_enough_gives_exact_rates(bits: int | str) -> None:
    clock = FakeClock()
    fake = FakeNvml.with_gpus([FakeGpu.a100(pcie_counter_bits=bits)], clock=clock)
    fake.set_load(0, pcie_tx_bytes_per_s=RATE)
    step = SAFE_S * 0.9
    values = _rates(fake, clock, step, int(3.0 / step))  # several wraps
    # exact up to the driver timestamps' microsecond rounding; a missed wrap would be off by 4 GiB
    assert all(value == pytest.approx(RATE, rel=1e-4) for value in values[1:]), values[:5]


@pytest.mark.parametrize("bits", [32, "ull32"])
def test_wrapping_counter_read_slowly_is_unavailable_never_aliased(
    bits: int | str,
) -> None:
    """Before: a 32-bit counter read 1 s apart at 6 GB/s gave (6e9 mod 2**32)/1 s = 1.7 GB/s."""
    clock = FakeClock()
    fake = FakeNvml.with_gpus([FakeGpu.a100(pcie_counter_bits=bits)], clock=clock)
    fake.set_load(0, pcie_tx_bytes_per_s=RATE)
    values = _rates(fake, clock, 1.0, 5)
    for value in values:
        assert isinstance(value, Unavailable), values
    assert values[-1].reason is Reason.NOT_SUPPORTED and "wraps every 4 GiB" in values[-1].detail


def test_64_bit_counter_is_exact_at_any_interval() -> None:
    clock = FakeClock()
    fake = FakeNvml.with_gpus([FakeGpu.a100()], clock=clock)  # counts since boot: above 2**32
    fake.set_load(0, pcie_tx_bytes_per_s=RATE)
    values = _rates(fake, clock, 1.0, 4)
    assert all(value == pytest.approx(RATE, rel=1e-9) for value in values[1:]), values


def test_driver_550_without_gpm_permission_has_no_pcie_rate_and_says_why() -> None:
    clock = FakeClock()
    fake = build_fake(parse_scenario("gpus=1xh200,gpm=noperm,driver=550"), clock=clock)
    assert fake.driver_version.startswith("550.")
    with install_fake_nvml(fake):
        collector = NvmlCollector(processes=False, clock=clock)
        collector.open()
        for _ in range(3):
            clock.advance(1.0)
            gpu = collector.sample().gpus[0]
        collector.close()
    for value in (gpu.pcie_tx_bytes_per_s, gpu.pcie_rx_bytes_per_s):
        assert isinstance(value, Unavailable)
        assert value.reason is Reason.NO_PERMISSION  # the fixable cause comes first ...
        assert "does not know the PCIe byte counters" in value.detail  # ... and the counters' too
    assert gpu.power_w == pytest.approx(450.0, rel=0.05)  # everything else still reads


def test_driver_550_field_error_drops_the_fields_at_open() -> None:
    clock = FakeClock()
    fake = build_fake(parse_scenario("gpus=1xa100,driver=550,busy=0"), clock=clock)
    with install_fake_nvml(fake):
        collector = NvmlCollector(processes=False, clock=clock)
        collector.open()
        clock.advance(1.0)
        collector.sample()
        calls = fake.calls["nvmlDeviceGetFieldValues"]
        clock.advance(1.0)
        gpu = collector.sample().gpus[0]
        collector.close()
    assert fake.calls["nvmlDeviceGetFieldValues"] == calls + 1  # still one batched call
    value = gpu.pcie_tx_bytes_per_s
    assert isinstance(value, Unavailable) and value.reason is Reason.DRIVER_TOO_OLD  # A100: no GPM either
    assert (
        value.detail.startswith("pcie_tx_bytes_per_s (field 197): this driver does not know")
        and "drivers 560" in value.detail
    )


def test_scenario_parsing_of_the_new_keys() -> None:
    from gpuscope.errors import UsageError

    scenario = parse_scenario("gpus=3xh200,pci_order=2+0+1,pcie_bits=ull32,gpm=noperm,driver=550")
    assert scenario.pci_order == [2, 0, 1] and scenario.pcie_bits == "ull32"
    assert scenario.gpm_no_permission and scenario.driver == "550"
    for bad in ("pci_order=0+0", "pcie_bits=16", "gpm=maybe", "driver=470"):
        with pytest.raises(UsageError):
            parse_scenario(f"gpus=2xh200,{bad}")


def test_models_answer_not_supported_like_the_real_boards() -> None:
    clock = FakeClock()
    fake = FakeNvml.with_gpus([FakeGpu.l4(), FakeGpu.h200()], clock=clock)
    with install_fake_nvml(fake):
        collector = NvmlCollector(processes=False, clock=clock)
        collector.open()
        clock.advance(1.0)
        l4, h200 = collector.sample().gpus
        collector.close()
    assert isinstance(l4.temperature_memory_c, Unavailable) and l4.temperature_memory_c.reason is Reason.NOT_SUPPORTED
    assert not isinstance(h200.temperature_memory_c, Unavailable)
    for gpu in (l4, h200):
        assert isinstance(gpu.fan_speed_percent, Unavailable) and gpu.fan_speed_percent.reason is Reason.NOT_SUPPORTED
