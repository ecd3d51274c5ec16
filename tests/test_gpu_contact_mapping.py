"""Issue 12 item 3: one NVML <-> CUDA device mapping, by UUID, used by probe telemetry,
``gpuscope.measure`` and the live roofline position. The fake numbers GPUs differently from
CUDA (``pci_order``), as nvml.h allows; torch's side is the isolated ``cuda_device_uuid``."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest
from support.samples import make_sample

from gpuscope.probing.environment import DeviceSpec
from gpuscope.probing.telemetry import ProbeTelemetry, summarize_device
from gpuscope.roofline.live import cuda_device_name, estimate_live_position
from gpuscope.telemetry.collector import TelemetryCollector
from gpuscope.telemetry.nvml import NvmlCollector, mapping
from gpuscope.testing.fake_nvml import FakeClock, install_fake_nvml
from gpuscope.testing.scenarios import build_fake, cuda_uuids, parse_scenario


def _sample_of(fake: Any, clock: FakeClock) -> Any:
    """The second NVML sample (GPM needs two) of ``fake``: a GpuSide, whose ``gpus`` is what a
    telemetry sample carries."""
    collector = NvmlCollector(processes=False, clock=clock)
    with install_fake_nvml(fake):
        collector.open()
        clock.advance(1.0)
        collector.sample()
        clock.advance(1.0)
        sample = collector.sample()
        collector.close()
    return sample


@pytest.fixture
def reordered() -> tuple[Any, FakeClock]:
    """Three H200s; NVML index 2 sits on the lowest PCI bus, so CUDA's device 0 is NVML's 2."""
    clock = FakeClock()
    fake = build_fake(parse_scenario("gpus=3xh200,pci_order=2+0+1,busy=0"), clock=clock)
    for index, watts in enumerate((100.0, 200.0, 300.0)):
        fake.set_load(index, power_w=watts)  # tell the GPUs apart by power
    fake.gpus[0].wobble = fake.gpus[1].wobble = fake.gpus[2].wobble = 0.0
    return fake, clock


def test_uuid_match_wins_over_indices(reordered: tuple[Any, FakeClock], monkeypatch: pytest.MonkeyPatch) -> None:
    fake, clock = reordered
    sample = _sample_of(fake, clock)
    uuids = cuda_uuids(fake)
    assert uuids[0] == mapping.normalize_uuid(fake.gpus[2].uuid)  # CUDA 0 = NVML 2
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for cuda_index, nvml_index in enumerate((2, 0, 1)):
        match = mapping.match_cuda_device(sample.gpus, cuda_index, cuda_uuid=uuids[cuda_index])
        assert match is not None and match.gpu.index == nvml_index and match.method == "uuid"
        # without torch's UUID: PCI order gives the same answer, and says it is assumed
        guessed = mapping.match_cuda_device(sample.gpus, cuda_index)
        assert guessed is not None and guessed.gpu.index == nvml_index and not guessed.certain


def test_probe_telemetry_reads_the_probed_gpu_not_the_same_nvml_index(
    reordered: tuple[Any, FakeClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: ``g.index == device.index`` picked NVML GPU 0 (200 W) for cuda:0 (NVML 2, 300 W)."""
    fake, clock = reordered
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")  # cuda:0 = PCI position 1 = NVML index 0
    uuids = cuda_uuids(fake, "1,0")
    monkeypatch.setattr(mapping, "cuda_device_uuid", lambda index: uuids[index])
    device = DeviceSpec("cuda:1", "gpu", 1)  # = PCI position 0 = NVML index 2 (300 W)
    with install_fake_nvml(fake):
        telemetry = ProbeTelemetry(device, factory=lambda: TelemetryCollector(processes=False))
        telemetry.open()
        clock.advance(1.0)
        snapshot = telemetry.snapshot()
        telemetry.close()
    assert snapshot["available"] and snapshot["gpu_match"] == "uuid"
    assert snapshot["gpu_uuid"] == fake.gpus[2].uuid
    assert snapshot["power_w"] == pytest.approx(300.0)


@pytest.mark.parametrize(
    ("visible", "cuda_index", "nvml_index", "method"),
    [
        ("1", 0, 0, "visible-devices index"),  # PCI position 1 = NVML 0
        ("2,0", 1, 2, "visible-devices index"),
        (None, 0, 2, "pci order"),
        (
            "0,bogus,1",
            1,
            None,
            None,
        ),  # CUDA stops at the first bad entry: one device visible
    ],
)
def test_visible_devices_by_index(
    reordered: tuple[Any, FakeClock],
    visible: str | None,
    cuda_index: int,
    nvml_index: int | None,
    method: str | None,
) -> None:
    fake, clock = reordered
    sample = _sample_of(fake, clock)
    match = mapping.match_cuda_device(sample.gpus, cuda_index, visible_devices=visible)
    if nvml_index is None:
        assert match is None
    else:
        assert match is not None and (match.gpu.index, match.method) == (
            nvml_index,
            method,
        )


def test_visible_devices_by_uuid_and_prefix(reordered: tuple[Any, FakeClock]) -> None:
    fake, clock = reordered
    sample = _sample_of(fake, clock)
    full = fake.gpus[1].uuid
    match = mapping.match_cuda_device(sample.gpus, 0, visible_devices=f"{full},GPU-00000000")
    assert match is not None and match.gpu.index == 1 and match.certain
    second = mapping.match_cuda_device(sample.gpus, 1, visible_devices=f"{full},GPU-00000000")
    assert second is not None and second.gpu.index == 0  # a unique UUID prefix, as CUDA accepts
    assert cuda_uuids(fake, f"{full},GPU-00000000") == [
        mapping.normalize_uuid(full),
        mapping.normalize_uuid(fake.gpus[0].uuid),
    ]


def test_mig_device_by_uuid_and_its_parent_power() -> None:
    from gpuscope.testing.fake_nvml import FakeGpu, FakeNvml

    clock = FakeClock()
    fake = FakeNvml.with_gpus([FakeGpu.h100(mig=["3g.40gb", "4g.40gb"])], clock=clock)
    fake.set_load(0, power_w=321.0)
    sample = _sample_of(fake, clock)
    mig_uuid = fake.gpus[0].mig[1].uuid
    match = mapping.match_cuda_device(sample.gpus, 0, visible_devices=mig_uuid)
    assert match is not None and match.gpu.uuid == mig_uuid and match.gpu.mig_parent_index == 0
    # torch reports a MIG device's UUID without the MIG- prefix
    device = DeviceSpec("cuda:0", "gpu", 0)
    full = dataclasses.replace(make_sample(), gpus=sample.gpus)  # the GPU side in a telemetry sample
    summary = summarize_device(full, device, cuda_uuid=mapping.normalize_uuid(mig_uuid))
    assert summary["gpu_uuid"] == mig_uuid and summary["power_w"] == pytest.approx(321.0, rel=0.05)


def test_measure_uses_the_same_mapping(reordered: tuple[Any, FakeClock], monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuscope.measuring.dram import match_gpu

    fake, clock = reordered
    sample = _sample_of(fake, clock)
    uuids = cuda_uuids(fake)
    monkeypatch.setattr(mapping, "cuda_device_uuid", lambda index: uuids[index])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert match_gpu(sample, SimpleNamespace(type="cuda", index=0)).index == 2


def test_live_position_names_the_cuda_device(reordered: tuple[Any, FakeClock], monkeypatch: pytest.MonkeyPatch) -> None:
    fake, clock = reordered
    fake.set_load(2, hmma_tensor_activity_percent=50.0, dram_bytes_per_s=1e12)
    sample = _sample_of(fake, clock)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nvml2 = next(gpu for gpu in sample.gpus if gpu.index == 2)
    assert cuda_device_name(nvml2, sample.gpus) == "cuda:0"
    estimate = estimate_live_position(nvml2, gpus=sample.gpus)
    assert not isinstance(estimate, Exception) and getattr(estimate, "device", None) == "cuda:0"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert cuda_device_name(nvml2, sample.gpus) == "nvml:2"  # CUDA cannot see it in this process


def test_cuda_device_uuid_without_cuda_is_none() -> None:
    assert mapping.cuda_device_uuid(0) is None  # CPU torch (or none): fall back, never raise
