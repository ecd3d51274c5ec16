"""MIG: GPUs first, then their MIG devices, with GPM per GPU instance."""

from __future__ import annotations

import os

import pytest

from gpuscope.telemetry.nvml import NvmlCollector
from gpuscope.telemetry.values import Reason
from gpuscope.testing.fake_nvml import (
    FakeClock,
    FakeGpu,
    FakeMig,
    FakeNvml,
    FakeProcess,
    install_fake_nvml,
    reason_of,
)

GIB = 2**30


def test_hopper_mig_devices_with_gpm_per_instance() -> None:
    clock = FakeClock()
    mig_gpu = FakeGpu.h100(mig=["3g.40gb", "2g.20gb", "1g.10gb"])
    mig_gpu.mig[0].processes = [FakeProcess(os.getpid(), used_gpu_memory_bytes=2 * GIB)]
    fake = FakeNvml.with_gpus([mig_gpu, FakeGpu.h100()], clock=clock)
    fake.set_load(0, mig=0, sm_activity_percent=70.0, gpu_util_percent=90.0, memory_used_bytes=8 * GIB)
    fake.set_load(0, mig=2, sm_activity_percent=10.0, tensor_activity_percent=4.0)
    fake.set_load(0, power_w=420.0, sm_activity_percent=30.0)
    with install_fake_nvml(fake):
        collector = NvmlCollector(clock=clock)
        assert collector.open() is None
        clock.advance(1.0)
        gpus = collector.sample().gpus
        collector.close()

    assert [(g.index, g.mig_parent_index) for g in gpus] == [(0, None), (1, None), (0, 0), (1, 0), (2, 0)]
    parent, other, first, second, third = gpus
    assert parent.mig_mode is True and other.mig_mode is False
    assert parent.power_w == 420.0
    assert parent.sm_activity_percent == pytest.approx(30.0)
    assert reason_of(parent.memory_busy_percent) is Reason.NOT_SUPPORTED  # utilization rates are off in MIG mode

    assert first.name == "NVIDIA H100 80GB HBM3 MIG 3g.40gb"
    assert (first.mig_gpu_instance_id, first.mig_compute_instance_id) == (1, 0)
    assert first.pci_bus_id == parent.pci_bus_id and first.architecture == "Hopper"
    assert first.memory_total_bytes == 40 * 1000 * 2**20 and first.memory_used_bytes == 8 * GIB
    assert first.sm_activity_percent == pytest.approx(70.0)
    assert first.utilization_percent == pytest.approx(90.0)  # GPM GRAPHICS_UTIL
    assert third.sm_activity_percent == pytest.approx(10.0) and third.tensor_activity_percent == pytest.approx(4.0)
    assert reason_of(first.dram_bandwidth_bytes_per_s) is Reason.NOT_SUPPORTED
    assert reason_of(first.power_w) is Reason.NOT_APPLICABLE and "parent GPU 0" in first.power_w.detail  # type: ignore[union-attr]
    assert isinstance(first.processes, list) and [p.pid for p in first.processes] == [os.getpid()]
    assert reason_of(first.processes[0].sm_percent) is Reason.NOT_APPLICABLE
    assert second.processes == []


def test_compute_instances_sharing_a_gpu_instance_read_its_gpm_once() -> None:
    clock = FakeClock()
    shared = [
        FakeMig("1c.3g.40gb", gpu_instance_id=1, compute_instance_id=0),
        FakeMig("2c.3g.40gb", gpu_instance_id=1, compute_instance_id=1),
    ]
    fake = FakeNvml.with_gpus([FakeGpu.h100(mig=shared)], clock=clock)
    fake.set_load(0, mig=0, sm_activity_percent=44.0)
    with install_fake_nvml(fake):
        collector = NvmlCollector(clock=clock)
        collector.open()
        clock.advance(1.0)
        fake.reset_calls()
        _parent, first, second = collector.sample().gpus
        assert fake.calls["nvmlGpmMigSampleGet"] == 1
        collector.close()
    assert first.sm_activity_percent == second.sm_activity_percent == pytest.approx(44.0)
    assert (second.mig_gpu_instance_id, second.mig_compute_instance_id) == (1, 1)


def test_ampere_mig_without_gpm_and_lost_parent() -> None:
    clock = FakeClock()
    fake = FakeNvml.with_gpus([FakeGpu.a100(mig=["4g.40gb", "3g.40gb"])], clock=clock)
    with install_fake_nvml(fake):
        collector = NvmlCollector(clock=clock)
        collector.open()
        clock.advance(1.0)
        parent, first, _second = collector.sample().gpus
        assert reason_of(first.sm_activity_percent) is Reason.NOT_SUPPORTED
        assert first.memory_total_bytes == 40 * 1000 * 2**20
        fake.lose_gpu(0)
        clock.advance(1.0)
        lost = collector.sample().gpus
        collector.close()
    assert [g.state for g in lost] == ["lost", "lost", "lost"]
    assert reason_of(lost[1].memory_used_bytes) is Reason.GPU_LOST
    assert lost[1].mig_parent_index == 0 and lost[1].name == first.name
