"""Probe results ``devices`` entries carry the GPU's UUID, found by the one NVML <-> CUDA mapping
(gpuscope.telemetry.nvml.mapping), so a GPU is the same device across files. The fake numbers its
GPUs differently from CUDA (``pci_order=2+0+1``: CUDA device 0 is NVML's GPU 2)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from gpuscope.probing.environment import DeviceSpec, device_info, gpu_uuid
from gpuscope.telemetry.nvml import mapping
from gpuscope.testing.fake_nvml import FakeClock, install_fake_nvml
from gpuscope.testing.scenarios import build_fake, cuda_uuids, parse_scenario


@pytest.fixture
def reordered(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return build_fake(parse_scenario("gpus=3xh200,pci_order=2+0+1,busy=0"), clock=FakeClock())


def _fake_torch_properties(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    props = SimpleNamespace(
        name="NVIDIA H200",
        total_memory=141 * 2**30,
        multi_processor_count=132,
        major=9,
        minor=0,
        L2_cache_size=60 * 2**20,
    )
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)


def test_device_entry_carries_the_nvml_uuid_of_the_cuda_device(reordered: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    uuids = cuda_uuids(reordered)  # what torch reports for cuda:0, 1, 2 (bare)
    monkeypatch.setattr(mapping, "cuda_device_uuid", lambda index: uuids[index])
    _fake_torch_properties(monkeypatch)
    with install_fake_nvml(reordered):
        entries = [device_info(DeviceSpec(f"cuda:{i}", "gpu", i)) for i in range(3)]
    # CUDA 0, 1, 2 = NVML 2, 0, 1; the UUID as NVML spells it, never NVML GPU N for cuda:N
    assert [entry.uuid for entry in entries] == [reordered.gpus[n].uuid for n in (2, 0, 1)]
    assert str(entries[0].uuid).startswith("GPU-") and entries[0].name == "NVIDIA H200"


def test_uuid_without_torch_is_null_unless_cuda_visible_devices_names_it(
    reordered: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mapping, "cuda_device_uuid", lambda index: None)  # no UUID from torch
    with install_fake_nvml(reordered):
        assert gpu_uuid(0) is None  # PCI order would guess NVML 2: a guess is not an identity
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", reordered.gpus[1].uuid)
        assert gpu_uuid(0) == reordered.gpus[1].uuid


def test_uuid_from_torch_alone_when_nvml_lists_nothing(reordered: Any) -> None:
    bare = cuda_uuids(reordered)[0]
    assert gpu_uuid(0, gpus=[], cuda_uuid=bare) == bare
    assert gpu_uuid(0, gpus=[], cuda_uuid="") is None
