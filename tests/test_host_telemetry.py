"""TelemetryCollector: host plus GPU side, with a scripted GPU source and (when present) the fake NVML."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.samples import make_gpu_sample

from gpuscope.telemetry.collector import TelemetryCollector
from gpuscope.telemetry.host import HostCollector
from gpuscope.telemetry.records import GpuSample
from gpuscope.telemetry.values import Metric, Reason, Unavailable


@dataclass
class Side:
    gpus: list[GpuSample]
    driver_version: Metric[str] = "550.54.15"
    nvml_version: Metric[str] = "12.550.54.15"
    cuda_driver_version: Metric[str] = "12.4"
    unavailable: Unavailable | None = None


@dataclass
class ScriptedGpus:
    open_result: Unavailable | None = None
    fail_after: int | None = None
    calls: int = 0
    closed: int = 0
    opened: int = 0
    log: list[str] = field(default_factory=list)

    def open(self) -> Unavailable | None:
        self.opened += 1
        return self.open_result

    def sample(self) -> Side:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise RuntimeError("driver exploded")
        return Side(gpus=[make_gpu_sample(0, self.calls), make_gpu_sample(1, self.calls)])

    def close(self) -> None:
        self.closed += 1


def host(tmp_path: Path) -> HostCollector:
    return HostCollector(sysfs_root=tmp_path)


def test_host_only_when_gpus_are_turned_off(tmp_path: Path) -> None:
    collector = TelemetryCollector(nvml=False, host=host(tmp_path), wall_clock=lambda: 1234.5)
    assert collector.open() == Unavailable(Reason.NOT_APPLICABLE, "GPU collection turned off")
    sample = collector.sample()
    assert sample.timestamp == 1234.5
    assert sample.gpus == []
    assert sample.gpu_unavailable == collector.gpu_unavailable
    assert isinstance(sample.driver_version, Unavailable)
    assert sample.host.logical_cores >= 1
    assert sample.sample_cost_s > 0
    collector.close()
    collector.close()  # twice is fine


def test_gpu_side_is_composed_into_the_sample(tmp_path: Path) -> None:
    gpus = ScriptedGpus()
    with TelemetryCollector(host=host(tmp_path), gpu_source=gpus) as collector:
        first = collector.sample()
        second = collector.sample()
    assert gpus.opened == 1 and gpus.closed == 1
    assert [g.index for g in second.gpus] == [0, 1]
    assert second.gpus[0].energy_j == make_gpu_sample(0, 2).energy_j
    assert first.driver_version == "550.54.15" and first.cuda_driver_version == "12.4"
    assert first.gpu_unavailable is None


def test_gpu_side_that_cannot_open_leaves_the_host(tmp_path: Path) -> None:
    reason = Unavailable(Reason.NO_DRIVER, "libnvidia-ml.so.1 not found")
    gpus = ScriptedGpus(open_result=reason)
    collector = TelemetryCollector(host=host(tmp_path), gpu_source=gpus)
    assert collector.open() == reason
    sample = collector.sample()
    assert gpus.calls == 0 and gpus.closed == 1
    assert sample.gpu_unavailable == reason and sample.driver_version == reason
    assert sample.host.memory_total_bytes > 0


def test_a_failing_gpu_side_never_spoils_the_host(tmp_path: Path) -> None:
    gpus = ScriptedGpus(fail_after=1)
    collector = TelemetryCollector(host=host(tmp_path), gpu_source=gpus)
    assert len(collector.sample().gpus) == 2
    broken = collector.sample()
    assert broken.gpus == []
    assert isinstance(broken.gpu_unavailable, Unavailable) and "driver exploded" in broken.gpu_unavailable.detail
    assert broken.host.logical_cores >= 1
    collector.close()


def test_end_to_end_log_against_the_fake_nvml(tmp_path: Path) -> None:
    """``gpuscope log`` in-process, with the real NVML collector running on the fake C symbols."""
    nvml = pytest.importorskip("gpuscope.telemetry.nvml", reason="the NVML collector is not in this checkout yet")
    if not hasattr(nvml, "NvmlCollector"):
        pytest.skip("gpuscope.telemetry.nvml has no NvmlCollector yet")
    fake_nvml = pytest.importorskip("gpuscope.testing.fake_nvml")
    from gpuscope.cli import main
    from gpuscope.telemetry.logfile import read_log

    fake = fake_nvml.FakeNvml.with_gpus(
        [fake_nvml.FakeGpu.h200(), fake_nvml.FakeGpu.h200()], clock=fake_nvml.FakeClock(real=True)
    )
    output = tmp_path / "gpu.jsonl"
    with fake_nvml.install_fake_nvml(fake):
        code = main(["log", "--interval", "0.15", "--duration", "0.5", "--output", str(output)])
    assert code == 0
    records = list(read_log(output))
    assert 1 <= len(records) <= 4
    last = records[-1]
    assert last.gpu_unavailable is None
    assert [gpu.name for gpu in last.gpus] == [gpu.name for gpu in records[0].gpus] and len(last.gpus) == 2
    assert isinstance(last.gpus[0].memory_total_bytes, int) and last.gpus[0].memory_total_bytes > 0
    assert "H200" in last.gpus[0].name
    first_line = json.loads(output.read_text().splitlines()[0])
    assert first_line["gpus"][0]["uuid"] == last.gpus[0].uuid
