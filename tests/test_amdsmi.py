"""AMD GPUs through the real ``amdsmi`` package against the fake ``libamd_smi.so`` (issue 30).

The fake stands in for the C library (``gpuscope.testing.fake_amdsmi``); AMD's own wrappers fill
their ctypes structures from it, and gpuscope's collector reads them into ``GpuSample`` records.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuscope.roofline.datasheet import match_gpu_datasheet
from gpuscope.telemetry.amdsmi.collector import AmdSmiCollector, load_amdsmi
from gpuscope.telemetry.collector import TelemetryCollector
from gpuscope.telemetry.records import NOT_COLLECTED, GpuSample
from gpuscope.telemetry.values import Reason, Unavailable
from gpuscope.testing._fake_nvml_model import FakeClock
from gpuscope.testing.fake_amdsmi import (
    AmdScenario,
    FakeAmdGpu,
    FakeAmdProcess,
    FakeAmdSmi,
    build_fake_amdsmi,
    install_fake_amdsmi,
    parse_amd_scenario,
)
from gpuscope.testing.fake_nvml import FakeGpu, FakeNvml, install_fake_nvml

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("amdsmi") is None, reason="the amdsmi package (the dev extra) is not installed"
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@contextlib.contextmanager
def _opened(fake: FakeAmdSmi, clock: FakeClock, first_index: int = 0) -> Iterator[AmdSmiCollector]:
    with install_fake_amdsmi(fake):
        collector = AmdSmiCollector(clock=clock, first_index=first_index)
        assert collector.open() is None
        try:
            yield collector
        finally:
            collector.close()


def _reason(value: object) -> Reason:
    assert isinstance(value, Unavailable), f"expected unavailable, got {value!r}"
    return value.reason


def test_eight_mi300x_every_field_is_a_value_or_a_reason(clock: FakeClock) -> None:
    fake = build_fake_amdsmi(AmdScenario(gpus="8xmi300x"), clock=clock)
    with _opened(fake, clock) as collector:
        collector.sample()
        clock.advance(2.0)
        gpus = collector.sample().gpus
    assert [gpu.index for gpu in gpus] == list(range(8)) and {gpu.vendor for gpu in gpus} == {"amd"}
    for gpu in gpus:
        for item in dataclasses.fields(GpuSample):
            value = getattr(gpu, item.name)
            assert value is not NOT_COLLECTED, f"{item.name} left 'not collected'"
            if isinstance(value, Unavailable):
                assert value.detail, f"{item.name} unavailable without a reason"
    gpu = gpus[0]
    assert gpu.name == "AMD Instinct MI300X" and gpu.architecture == "cdna3" and gpu.state == "ok"
    assert gpu.pci_bus_id == "0000:0C:00.0" and gpu.uuid.startswith("00ff74a1")
    assert gpu.memory_total_bytes == 192 * 2**30
    assert gpu.pcie_link_generation == 5 and gpu.pcie_link_width == 16
    assert _reason(gpu.temperature_gpu_c) is Reason.NOT_SUPPORTED  # MI300X has no edge sensor
    assert "temperature_edge" in str(gpu.temperature_gpu_c)
    assert gpu.temperature_hotspot_c == 79 and gpu.temperature_memory_c == 66
    assert _reason(gpu.nvlink_tx_bytes_per_s) is Reason.NOT_APPLICABLE and "XGMI" in str(gpu.nvlink_tx_bytes_per_s)
    assert _reason(gpu.pcie_tx_bytes_per_s) is Reason.NOT_SUPPORTED and gpu.pcie_bytes_per_s == 6e9


def test_rates_and_energy_integrate_the_scripted_load_exactly(clock: FakeClock) -> None:
    gpu = FakeAmdGpu.mi300x(0)
    gpu.power_w, gpu.xgmi_tx_bytes_per_s_per_link, gpu.xgmi_rx_bytes_per_s_per_link = 500.0, 32 * 2**30, 16 * 2**30
    fake = FakeAmdSmi([gpu], clock=clock)
    with _opened(fake, clock) as collector:
        first = collector.sample().gpus[0]
        assert _reason(first.xgmi_tx_bytes_per_s) is Reason.WARMING_UP
        clock.advance(4.0)
        second = collector.sample().gpus[0]
    assert second.xgmi_active_links == 7
    assert second.xgmi_tx_bytes_per_s == pytest.approx(7 * 32 * 2**30, rel=1e-6)
    assert second.xgmi_rx_bytes_per_s == pytest.approx(7 * 16 * 2**30, rel=1e-6)
    assert second.xgmi_link_peak_bytes_per_s == 64e9  # 32 Gbit/s x 16 lanes / 8, each way
    assert isinstance(first.energy_j, float) and isinstance(second.energy_j, float)
    # counts of 15.259 uJ (a float32 resolution, as amdsmi.h types it): 2 kJ to a millionth
    assert second.energy_j - first.energy_j == pytest.approx(2000.0, rel=1e-6)


def test_mi250x_is_two_dies_per_card_and_the_second_die_says_why_it_has_no_power(clock: FakeClock) -> None:
    fake = build_fake_amdsmi(parse_amd_scenario("gpus=4xmi250x"), clock=clock)
    with _opened(fake, clock, first_index=2) as collector:
        gpus = collector.sample().gpus
    assert [gpu.index for gpu in gpus] == list(range(2, 10))
    assert {gpu.name for gpu in gpus} == {"AMD Instinct MI250X"} and gpus[0].architecture == "cdna2"
    assert isinstance(gpus[0].power_w, int | float) and gpus[0].power_w > 0
    assert _reason(gpus[1].power_w) is Reason.NOT_SUPPORTED and "first die" in str(gpus[1].power_w)
    assert _reason(gpus[1].energy_j) is Reason.NOT_SUPPORTED and "first die" in str(gpus[1].energy_j)
    assert gpus[0].pcie_link_generation == 4


def test_a_lost_gpu_is_marked_lost_and_the_others_keep_reading(clock: FakeClock) -> None:
    fake = build_fake_amdsmi(parse_amd_scenario("gpus=4xmi300x,lose=2@1.0"), clock=clock)
    with _opened(fake, clock) as collector:
        before = collector.sample().gpus
        clock.advance(1.5)
        after = collector.sample().gpus
    assert [gpu.state for gpu in before] == ["ok"] * 4
    assert [gpu.state for gpu in after] == ["ok", "ok", "lost", "ok"]
    assert _reason(after[2].utilization_percent) is Reason.GPU_LOST
    assert after[3].utilization_percent == 92


def test_processes_come_with_their_vram(clock: FakeClock) -> None:
    gpu = FakeAmdGpu.mi300x(0, processes=[FakeAmdProcess(os.getpid(), "python", 3 * 2**30)])
    with _opened(FakeAmdSmi([gpu], clock=clock), clock) as collector:
        processes = collector.sample().gpus[0].processes
    assert isinstance(processes, list) and len(processes) == 1
    assert processes[0].pid == os.getpid() and processes[0].gpu_memory_bytes == 3 * 2**30
    assert _reason(processes[0].sm_percent) is Reason.NOT_SUPPORTED


def test_no_permission_and_an_old_library_say_why() -> None:
    with install_fake_amdsmi(build_fake_amdsmi(parse_amd_scenario("noperm=1"))):
        why = AmdSmiCollector().open()
    assert why is not None and why.reason is Reason.NO_PERMISSION and "render and video groups" in why.detail
    with install_fake_amdsmi(build_fake_amdsmi(parse_amd_scenario("old=1"))):
        module, old = load_amdsmi()
    assert module is None and old is not None and old.reason is Reason.DRIVER_TOO_OLD
    assert "amdsmi_get_" in old.detail and "/opt/rocm/share/amd_smi" in old.detail


def test_both_vendors_in_one_sample_numbered_nvidia_first(clock: FakeClock) -> None:
    nvml = FakeNvml.with_gpus([FakeGpu.h200(), FakeGpu.h200()], clock=clock)
    amd = build_fake_amdsmi(parse_amd_scenario("gpus=2xmi300x"), clock=clock)
    with install_fake_nvml(nvml), install_fake_amdsmi(amd), TelemetryCollector() as collector:
        sample = collector.sample()
    assert [(gpu.index, gpu.vendor) for gpu in sample.gpus] == [(0, "nvidia"), (1, "nvidia"), (2, "amd"), (3, "amd")]
    assert sample.gpu_unavailable is None and sample.nvidia_unavailable is None and sample.amd_unavailable is None
    assert sample.amd_driver_version == "6.10.5" and sample.amdsmi_library_version == "25.3.0"


def test_amd_only_machine_has_a_gpu_side_and_names_the_missing_vendor(clock: FakeClock) -> None:
    amd = build_fake_amdsmi(parse_amd_scenario("gpus=2xmi300x"), clock=clock)
    with install_fake_amdsmi(amd), TelemetryCollector() as collector:
        sample = collector.sample()
    assert len(sample.gpus) == 2 and sample.gpu_unavailable is None
    assert sample.nvidia_unavailable is not None  # no NVIDIA driver on this test machine


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("GPUSCOPE_FAKE")}
    return subprocess.run(
        [sys.executable, "-m", "gpuscope", *args], capture_output=True, text=True, env={**clean, **env}, timeout=120
    )


def test_snapshot_json_on_the_fake_lists_every_field_real_or_with_its_reason() -> None:
    done = _run(["snapshot", "--json", "--wait", "0.2"], {"GPUSCOPE_FAKE_AMDSMI": "gpus=2xmi300x"})
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["simulated"] == "GPUSCOPE_FAKE_AMDSMI=gpus=2xmi300x"
    gpus = document["record"]["gpus"]
    assert len(gpus) == 2 and gpus[0]["vendor"] == "amd"
    names = {item.name for item in dataclasses.fields(GpuSample)}
    for gpu in gpus:
        unavailable = gpu.get("unavailable", {})
        assert names <= set(gpu), names - set(gpu)
        for name in names:
            assert gpu[name] is not None or name in unavailable or name.startswith("mig_"), name
        assert all(not text.startswith("error: not collected") for text in unavailable.values())
        assert gpu["xgmi_tx_bytes_per_s"] > 0 and gpu["temperature_hotspot_c"] == 79


def test_neither_vendor_still_shows_the_cpu_with_one_line_per_missing_vendor() -> None:
    done = _run(["snapshot", "--wait", "0.1"], {})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert sum(line.startswith("no NVIDIA GPUs: ") for line in lines) == 1
    assert sum(line.startswith("no AMD GPUs: ") for line in lines) == 1
    assert any("CPU" in line and "cores" in line for line in lines)


def test_both_vendors_on_the_command_line_and_in_doctor() -> None:
    env = {"GPUSCOPE_FAKE_NVML": "gpus=1xh200", "GPUSCOPE_FAKE_AMDSMI": "gpus=1xmi250x"}
    done = _run(["snapshot", "--wait", "0.2"], env)
    assert done.returncode == 0, done.stderr
    assert "[0] NVIDIA H200" in done.stdout and "[1] AMD Instinct MI250X" in done.stdout
    assert "[2] AMD Instinct MI250X" in done.stdout and "XGMI tx" in done.stdout
    assert "GPUSCOPE_FAKE_AMDSMI=gpus=1xmi250x" in done.stdout.splitlines()[0]
    doctor = _run(["doctor", "--no-torch"], {"GPUSCOPE_FAKE_AMDSMI": "gpus=1xmi300x"})
    assert "AMD (AMD SMI)" in doctor.stdout and "GPU 0  AMD Instinct MI300X  cdna3" in doctor.stdout
    assert "amdgpu driver    6.10.5" in doctor.stdout


def test_bad_fake_value_is_one_line() -> None:
    done = _run(["snapshot"], {"GPUSCOPE_FAKE_AMDSMI": "gpus=3xmi999"})
    assert done.returncode != 0
    assert done.stderr.strip().startswith("gpuscope: error: GPUSCOPE_FAKE_AMDSMI: gpus='3xmi999'")
    assert len(done.stderr.strip().splitlines()) == 1


def test_datasheets_of_amd_gpus_match_amd_smi_names() -> None:
    mi300x, mi325x, gcd = (match_gpu_datasheet(f"AMD Instinct {n}") for n in ("MI300X", "MI325X", "MI250X"))
    assert mi300x is not None and mi325x is not None and gcd is not None
    assert mi300x.peak_flop_per_s("bf16") == pytest.approx(1307.4e12) and mi300x.memory_bytes_per_s == 5.3e12
    assert mi325x.memory_bytes_per_s == 6.0e12 and mi325x.memory_bytes == 256e9
    assert gcd.peak_flop_per_s("fp64") == pytest.approx(95.7e12 / 2)  # one GCD: half the module's matrix FP64
    assert {mi300x.gpu_link_name, gcd.vendor} == {"XGMI", "amd"}
    assert match_gpu_datasheet("AMD Instinct MI250") is None  # not the X: other figures


def test_rocm_device_numbering_follows_rocr_then_hip_visible_devices(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuscope.telemetry.nvml.mapping import cuda_index_of, match_cuda_device

    fake = build_fake_amdsmi(parse_amd_scenario("gpus=4xmi300x"), clock=clock)
    with _opened(fake, clock) as collector:
        gpus = collector.sample().gpus
    by_bus = sorted(gpus, key=lambda gpu: gpu.pci_bus_id)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", "1,2,3")  # the runtime hides the first GPU
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "2,0")  # then HIP indexes what is left
    first = match_cuda_device(gpus, 0)
    second = match_cuda_device(gpus, 1)
    assert first is not None and first.gpu is by_bus[3] and first.method == "visible-devices index"
    assert second is not None and second.gpu is by_bus[1]
    assert match_cuda_device(gpus, 2) is None
    assert cuda_index_of(by_bus[3], gpus) == 0 and cuda_index_of(by_bus[0], gpus) is None


def test_an_mi300x_sits_on_the_roofline_beside_an_h200(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from support.roofline import ceiling, h200_results, results_document, workload, write_results

    mi300x = results_document(
        "mi-node",
        devices=[{"device": "cuda:0", "type": "gpu", "name": "AMD Instinct MI300X", "host": "mi-node"}],
        ceilings=[ceiling("cuda:0", "compute", "bf16", 700e12), ceiling("cuda:0", "memory", "dram.triad", 4.0e12)],
        workloads=[workload("decode step", "cuda:0", 2e9, 4e9, 0.0012, dtype="bf16")],
    )
    amd, nvidia = write_results(tmp_path / "mi.json", mi300x), write_results(tmp_path / "h200.json", h200_results())
    done = _run(["roofline", "--probes", str(amd), "--probes", str(nvidia), "--json"], {})
    assert done.returncode == 0, done.stderr
    model = json.loads(done.stdout)
    devices = {device["name"]: device for device in model["devices"]}
    roofs = {(r["name"], r["source"]): r["value"] for r in devices["AMD Instinct MI300X"]["roofs"]}
    assert devices["AMD Instinct MI300X"]["datasheet"] == "MI300X" and devices["NVIDIA H200"]["datasheet"] == "H200 SXM"
    assert roofs[("bf16", "datasheet")] == pytest.approx(1307.4e12) and roofs[("xgmi", "datasheet")] == 448e9
    assert ("nvlink", "datasheet") not in roofs
    decode = next(point for point in model["points"] if point["name"] == "decode step")
    assert decode["bound"] == "memory" and decode["efficiency"] == pytest.approx((4e9 / 0.0012) / 4.0e12)
