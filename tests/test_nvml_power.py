"""GPU power comes from the field-value batch (NVML_FI_DEV_POWER_AVERAGE where the GPU has it,
else NVML_FI_DEV_POWER_INSTANT), meaning what nvmlDeviceGetPowerUsage means, with that call
only where the batch has no power reading (old drivers, a failed batch)."""

from __future__ import annotations

import pynvml
import pytest
from support.nvml import field_set

from gpuscope.telemetry.nvml.fields import POWER_AVERAGE, POWER_INSTANT
from gpuscope.telemetry.values import Reason
from gpuscope.testing.fake_nvml import FakeClock, FakeGpu, FakeNvml, install_fake_nvml, opened_collector, reason_of

AVERAGE = pynvml.NVML_FI_DEV_POWER_AVERAGE
INSTANT = pynvml.NVML_FI_DEV_POWER_INSTANT
POWER_CALL = "nvmlDeviceGetPowerUsage"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _power_codes(fake: FakeNvml, index: int) -> list[tuple[int, int]]:
    """(nvmlReturn, value in mW) of fields 185 and 186 and nvmlDeviceGetPowerUsage's mW, read
    through pynvml at one clock time."""
    with install_fake_nvml(fake):
        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            answers = pynvml.nvmlDeviceGetFieldValues(handle, [AVERAGE, INSTANT])
            call_mw = pynvml.nvmlDeviceGetPowerUsage(handle)
        finally:
            pynvml.nvmlShutdown()
    return [(int(a.nvmlReturn), int(a.value.uiVal)) for a in answers] + [(0, int(call_mw))]


def test_fake_answers_the_power_fields_per_architecture(clock: FakeClock) -> None:
    """nvml.h: the 1 s average on Ampere except GA100 and newer; the instantaneous reading
    everywhere; both in mW, as nvmlDeviceGetPowerUsage."""
    fake = FakeNvml.with_gpus([FakeGpu.h200(wobble=0.1), FakeGpu.a100(wobble=0.1), FakeGpu.l4(wobble=0.1)], clock=clock)
    for index in range(3):
        fake.set_load(index, power_w=123.456 + index)
    hopper, ga100, ada = (_power_codes(fake, index) for index in range(3))
    ok, not_supported = pynvml.NVML_SUCCESS, pynvml.NVML_ERROR_NOT_SUPPORTED
    assert [code for code, _ in hopper] == [ok, ok, ok]
    assert hopper[0][1] == hopper[1][1] == hopper[2][1]  # the same reading as the call
    assert [code for code, _ in ada] == [ok, ok, ok] and ada[0][1] == ada[2][1]
    assert [code for code, _ in ga100][:2] == [not_supported, ok]  # GA100: no average field
    assert ga100[1][1] == ga100[2][1]


def test_power_comes_from_the_batch_not_a_call(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h200(wobble=0.05), FakeGpu.a100(wobble=0.05)], clock=clock)
    fake.set_load(0, power_w=512.3)
    fake.set_load(1, power_w=250.7)
    with opened_collector(fake, clock) as collector:
        # Hopper keeps the average only; the GA100 keeps the instantaneous field only
        assert POWER_AVERAGE in field_set(collector, 0).asked and POWER_INSTANT in field_set(collector, 0).asked
        fake.reset_calls()
        for _ in range(3):
            clock.advance(1.0)
            side = collector.sample()
            expected = [_power_codes(fake, index)[2][1] * 1e-3 for index in range(2)]
            assert [gpu.power_w for gpu in side.gpus] == expected  # what the call would have said
        assert fake.calls[POWER_CALL] == 3 * 2  # only _power_codes' own reads
        assert POWER_AVERAGE in field_set(collector, 0).asked and POWER_INSTANT not in field_set(collector, 0).asked
        assert POWER_INSTANT in field_set(collector, 1).asked and POWER_AVERAGE not in field_set(collector, 1).asked
        assert reason_of(field_set(collector, 1)._dropped[POWER_AVERAGE]) is Reason.NOT_SUPPORTED


def test_power_stays_exactly_what_it_was(clock: FakeClock) -> None:
    """Watts as before: the mW integer x 1e-3."""
    fake = FakeNvml.with_gpus([FakeGpu.h100()], clock=clock)
    fake.set_load(0, power_w=333.3339)
    with opened_collector(fake, clock) as collector:
        clock.advance(1.0)
        power_w = collector.sample().gpus[0].power_w
    assert power_w == float(333334 * 1e-3)
    assert type(power_w) is float


def test_a_driver_without_the_power_fields_uses_the_call(clock: FakeClock) -> None:
    old = {AVERAGE: "InvalidArgument", INSTANT: "InvalidArgument"}
    fake = FakeNvml.with_gpus([FakeGpu.h100(field_errors=old)], clock=clock)
    fake.set_load(0, power_w=400.0)
    with opened_collector(fake, clock) as collector:
        fake.reset_calls()
        for _ in range(2):
            clock.advance(1.0)
            assert collector.sample().gpus[0].power_w == 400.0
        assert fake.calls[POWER_CALL] == 2
        fields = field_set(collector)
        assert POWER_AVERAGE not in fields.asked and POWER_INSTANT not in fields.asked  # dropped at open
        dropped = fields._dropped[POWER_AVERAGE]
        assert reason_of(dropped) is Reason.DRIVER_TOO_OLD and "power fields" in dropped.detail


def test_a_failed_batch_reads_power_with_the_call_that_sample_only(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h200()], clock=clock)
    fake.set_load(0, power_w=300.0)
    with opened_collector(fake, clock) as collector:
        fake.reset_calls()
        fake.inject("nvmlDeviceGetFieldValues", "Unknown", count=1)
        clock.advance(1.0)
        failed = collector.sample().gpus[0]
        assert reason_of(failed.energy_j) is Reason.ERROR
        assert failed.power_w == 300.0 and fake.calls[POWER_CALL] == 1
        clock.advance(1.0)
        assert collector.sample().gpus[0].power_w == 300.0 and fake.calls[POWER_CALL] == 1


def test_one_power_field_failing_falls_back_to_the_other(clock: FakeClock) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h200(field_errors={AVERAGE: "Unknown"})], clock=clock)
    fake.set_load(0, power_w=210.0)
    with opened_collector(fake, clock) as collector:
        fake.reset_calls()
        clock.advance(1.0)
        assert collector.sample().gpus[0].power_w == 210.0
        assert fake.calls[POWER_CALL] == 0
        assert POWER_INSTANT in field_set(collector).asked  # the average did not answer at open: kept


@pytest.mark.parametrize("error, reason", [("Unknown", Reason.ERROR), ("NoPermission", Reason.NO_PERMISSION)])
def test_power_unreadable_shows_the_reason_every_sample(clock: FakeClock, error: str, reason: Reason) -> None:
    """An error scripted for nvmlDeviceGetPowerUsage is the power sensor's: the fields answer it
    too, and the power shows unavailable with the call's reason, as before."""
    fake = FakeNvml.with_gpus([FakeGpu.h200(), FakeGpu.h200()], clock=clock)
    fake.inject(POWER_CALL, error, gpu=0, count=None)
    with opened_collector(fake, clock) as collector:
        for _ in range(2):
            clock.advance(1.0)
            side = collector.sample()
            assert reason_of(side.gpus[0].power_w) is reason
            assert POWER_CALL in side.gpus[0].power_w.detail  # type: ignore[union-attr]
            assert side.gpus[1].power_w == 70.0
