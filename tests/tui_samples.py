"""Deterministic telemetry samples for the TUI tests (no NVML, no psutil, fixed clock)."""

from __future__ import annotations

import contextlib as _contextlib
import math
import time as _time
from pathlib import Path as _Path

import pytest as _pytest

from gpuscope.telemetry.records import (
    CpuCoreSample,
    GpuProcessSample,
    GpuSample,
    HostSample,
    NicSample,
    NvLinkLinkSample,
    Sample,
)
from gpuscope.telemetry.values import Reason, Unavailable

T0 = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC


def host_sample(step: int = 0, cores: int = 8) -> HostSample:
    wave = lambda k: 50 + 40 * math.sin((step + 3 * k) / 4)  # noqa: E731
    return HostSample(
        hostname="node01",
        cpu_model="AMD EPYC 7B13",
        logical_cores=cores,
        physical_cores=cores // 2,
        cpu_utilization_percent=round(sum(wave(k) for k in range(cores)) / cores, 1),
        cores=[CpuCoreSample(k, round(wave(k), 1), 2450.0) for k in range(cores)],
        load_average_1m=1.5,
        load_average_5m=1.25,
        load_average_15m=1.0,
        memory_total_bytes=256_000_000_000,
        memory_used_bytes=96_000_000_000 + step * 1_000_000_000,
        memory_available_bytes=150_000_000_000,
        swap_total_bytes=0,
        swap_used_bytes=0,
        nics=[
            NicSample("eth0", 1.25e8 + step * 1e6, 2.5e7, True, 25000.0),
            NicSample("lo", 1e3, 1e3, True, Unavailable(Reason.NOT_APPLICABLE, "loopback")),
        ],
        infiniband_ports=[],
        disk_read_bytes_per_s=2.5e8 + step * 1e6,
        disk_write_bytes_per_s=4.0e7,
    )


def h200(step: int = 0, index: int = 0) -> GpuSample:
    util = 60 + 30 * math.sin(step / 3)
    return GpuSample(
        index=index,
        name="NVIDIA H200",
        uuid=f"GPU-h200-{index}",
        pci_bus_id=f"00000000:{index + 1:02x}:00.0",
        architecture="Hopper",
        state="ok",
        mig_mode=False,
        utilization_percent=round(util, 1),
        memory_busy_percent=40.0,
        memory_used_bytes=80_100_000_000,
        memory_total_bytes=141_000_000_000,
        dram_bandwidth_bytes_per_s=3.2e12 + step * 1e10,
        dram_bandwidth_percent_of_peak=round(100 * (3.2e12 + step * 1e10) / 4.8e12, 1),
        dram_peak_bytes_per_s=4.8e12,
        sm_activity_percent=round(util - 10, 1),
        sm_occupancy_percent=41.0,
        tensor_activity_percent=55.0,
        hmma_tensor_activity_percent=55.0,
        imma_tensor_activity_percent=0.0,
        dfma_tensor_activity_percent=0.0,
        fp64_activity_percent=0.0,
        fp32_activity_percent=12.0,
        fp16_activity_percent=3.0,
        pcie_tx_bytes_per_s=1.2e9,
        pcie_rx_bytes_per_s=3.4e9,
        pcie_link_generation=5,
        pcie_link_width=16,
        nvlink_tx_bytes_per_s=1.2e11,
        nvlink_rx_bytes_per_s=1.18e11,
        nvlink_active_links=18,
        nvlink_version=4,
        nvlink_link_peak_bytes_per_s=2.5e10,
        nvlink_links=[NvLinkLinkSample(k, 6.6e9, 6.5e9) for k in range(18)],
        sm_clock_mhz=1980.0,
        sm_clock_max_mhz=1980.0,
        memory_clock_mhz=2619.0,
        memory_clock_max_mhz=2619.0,
        power_w=512.0 + step,
        power_limit_w=700.0,
        energy_j=1.234e7,
        temperature_gpu_c=62.0,
        temperature_memory_c=70.0,
        fan_speed_percent=Unavailable(Reason.NOT_SUPPORTED, "passively cooled board"),
        throttle_reasons=[],
        ecc_corrected_errors=0,
        ecc_uncorrected_errors=0,
        processes=[
            GpuProcessSample(4242, "python train.py", "alice", 78_000_000_000, 71.0, "compute"),
            GpuProcessSample(
                5151,
                "nccl-proxy",
                "alice",
                2_100_000_000,
                Unavailable(Reason.NOT_SUPPORTED, "no accounting"),
                "compute",
            ),
        ],
    )


def a100(step: int = 0, index: int = 1) -> GpuSample:
    gpm = Unavailable(Reason.NOT_SUPPORTED, "GPM needs Hopper or newer")
    return GpuSample(
        index=index,
        name="NVIDIA A100-SXM4-80GB",
        uuid=f"GPU-a100-{index}",
        pci_bus_id=f"00000000:{index + 1:02x}:00.0",
        architecture="Ampere",
        state="ok",
        mig_mode=False,
        utilization_percent=35.0,
        memory_busy_percent=12.0,
        memory_used_bytes=20_000_000_000,
        memory_total_bytes=80_000_000_000,
        dram_bandwidth_bytes_per_s=gpm,
        dram_bandwidth_percent_of_peak=gpm,
        dram_peak_bytes_per_s=2.039e12,
        sm_activity_percent=gpm,
        sm_occupancy_percent=gpm,
        tensor_activity_percent=gpm,
        pcie_tx_bytes_per_s=5e8,
        pcie_rx_bytes_per_s=Unavailable(Reason.WARMING_UP, "needs two reads") if step == 0 else 7e8,
        pcie_link_generation=4,
        pcie_link_width=16,
        nvlink_tx_bytes_per_s=Unavailable(Reason.NOT_APPLICABLE, "no active NVLink"),
        nvlink_rx_bytes_per_s=Unavailable(Reason.NOT_APPLICABLE, "no active NVLink"),
        nvlink_active_links=0,
        sm_clock_mhz=1410.0,
        sm_clock_max_mhz=1410.0,
        memory_clock_mhz=1593.0,
        memory_clock_max_mhz=1593.0,
        power_w=250.0,
        power_limit_w=400.0,
        energy_j=5.0e6,
        temperature_gpu_c=48.0,
        temperature_memory_c=Unavailable(Reason.NOT_SUPPORTED, "no memory sensor"),
        fan_speed_percent=Unavailable(Reason.NOT_SUPPORTED, "passively cooled board"),
        throttle_reasons=["sw_power_cap"],
        ecc_corrected_errors=2,
        ecc_uncorrected_errors=0,
        processes=[GpuProcessSample(777, "vllm serve", "bob", 18_000_000_000, 30.0, "compute")],
    )


def sample(step: int = 0, gpus: bool = True) -> Sample:
    no_driver = Unavailable(Reason.NO_DRIVER, "NVML library libnvidia-ml.so.1 not found (no driver)")
    return Sample(
        timestamp=T0 + step,
        host=host_sample(step),
        gpus=[h200(step), a100(step)] if gpus else [],
        driver_version="550.54.15" if gpus else no_driver,
        nvml_version="12.550.54.15" if gpus else no_driver,
        cuda_driver_version="12.4" if gpus else no_driver,
        gpu_unavailable=None if gpus else no_driver,
    )


def samples(count: int, gpus: bool = True) -> list[Sample]:
    return [sample(step, gpus) for step in range(count)]


# --- shared fixtures for the TUI tests (imported by each tests/test_tui_*.py) ----------------


@_pytest.fixture
def tui_env(tmp_path: _Path, monkeypatch: _pytest.MonkeyPatch) -> _Path:
    """Config and screenshots in tmp_path, UTC clock, no user themes from the real home."""
    config = tmp_path / "config"
    monkeypatch.setenv("GPUSCOPE_CONFIG_DIR", str(config))
    monkeypatch.setenv("GPUSCOPE_SCREENSHOT_DIR", str(tmp_path / "shots"))
    monkeypatch.setenv("TZ", "UTC")
    _time.tzset()
    yield config
    monkeypatch.undo()
    _time.tzset()


def _typed_results(kwargs: dict) -> dict:
    """``probe_results`` given as documents (dicts) or typed views become the (typed, as written)
    pairs the app holds, each document kept as written (what ``gpuscope tui --probes`` gives the
    app); pairs pass through."""
    from gpuscope.results import to_results

    documents = kwargs.get("probe_results") or ()
    pairs = [
        d if isinstance(d, tuple) else (to_results(d, f"results {n + 1}"), d) if isinstance(d, dict) else (d, None)
        for n, d in enumerate(documents)
    ]
    return {**kwargs, "probe_results": pairs}


def make_app(count: int = 30, gpus: bool = True, interval_s: float = 3600.0, **kwargs):
    """An app fed hand-made samples: history prefilled with ``count - 1`` samples, then the source
    returns the last one (one poll at start; the long interval keeps it from polling again)."""
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.sources import ScriptedSource

    series = samples(count, gpus)
    app = GpuscopeApp(ScriptedSource(series[-1:]), interval_s=interval_s, **_typed_results(kwargs))
    app.history.extend(series[:-1])
    return app


async def wait_for_sample(pilot, app) -> None:
    """Pause until the first sample reached the screens."""
    for _ in range(200):
        if app.latest_sample is not None:
            break
        await pilot.pause(0.02)
    await pilot.pause()


@_contextlib.asynccontextmanager
async def shown(app, size: tuple[int, int]):
    """``app`` running in a ``size`` test terminal, once its first sample is drawn and settled."""
    async with app.run_test(size=size) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.pause(0.1)
        yield pilot


def run_async(test):
    """Run an ``async def`` test with asyncio.run (no pytest-asyncio plugin needed)."""
    import asyncio
    import functools

    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))

    return wrapper


# --- samples from the real collector against the fake NVML (snapshot tests) -----------------

_PROCESS_NAMES = {
    910001: ("python train.py", "alice"),
    910002: ("python serve.py", "bob"),
    910003: ("nccl-proxy", "alice"),
}


class _FixedHost:
    """Stands in for HostCollector: the hand-made host of step ``n`` (deterministic)."""

    def __init__(self) -> None:
        self.step = 0

    def sample(self) -> HostSample:
        return host_sample(self.step)


def fake_nvml_samples(count: int = 30, gpus: list | None = None) -> list[Sample]:
    """``count`` samples, one per fake second, from TelemetryCollector + NvmlCollector against
    the fake NVML (an H200 with GPM and NVLink, an A100 without GPM; or ``gpus``: FakeGpu
    objects, all given the H200's load) under a manual clock. Loads follow the demo's script;
    process names are fixed (their pids do not exist)."""
    from gpuscope.telemetry.collector import TelemetryCollector
    from gpuscope.telemetry.nvml.collector import NvmlCollector
    from gpuscope.testing.fake_nvml import GIB, FakeClock, FakeGpu, FakeNvml, FakeProcess, install_fake_nvml
    from gpuscope.tui.demo import demo_load

    clock = FakeClock(start_s=1000.0)
    fake = FakeNvml.with_gpus(
        gpus
        or [
            FakeGpu.h200(processes=[FakeProcess(910001, 61 * GIB, 72), FakeProcess(910003, 2 * GIB, None)]),
            FakeGpu.a100(processes=[FakeProcess(910002, 18 * GIB, 35)]),
        ],
        clock=clock,
    )
    host = _FixedHost()
    out: list[Sample] = []
    with install_fake_nvml(fake):
        collector = TelemetryCollector(
            host=host, gpu_source=NvmlCollector(clock=clock), wall_clock=lambda: T0 + host.step
        )
        collector.open()
        try:
            for step in range(count):
                host.step = step
                h200_load, a100_load = demo_load(float(step))
                if gpus:
                    for index in range(len(gpus)):
                        fake.set_load(index, **{**h200_load, "power_w": h200_load["power_w"] - 20 * index})
                else:
                    fake.set_load(0, **h200_load)
                    fake.set_load(1, **a100_load)
                clock.advance(1.0)
                out.append(collector.sample())
        finally:
            collector.close()
    for sample in out:
        sample.sample_cost_s = 0.0
        for gpu in sample.gpus:
            if not isinstance(gpu.processes, Unavailable):
                for proc in gpu.processes:
                    proc.name, proc.user = _PROCESS_NAMES.get(proc.pid, ("?", "?"))
    return out


def host_processes() -> list:
    """Host processes matching the GPU processes above, plus a few that use no GPU (fixed)."""
    from gpuscope.telemetry.hostprocs import HostProcess

    def proc(pid, ppid, uid, user, name, command, cpu, rss_gib, elapsed_s):
        return HostProcess(pid, ppid, uid, user, name, command, "S", cpu, int(rss_gib * 2**30), elapsed_s, pid * 10)

    return [
        proc(1, 0, 0, "root", "systemd", "/sbin/init", 0.0, 0.01, 864000.0),
        proc(910000, 1, 1001, "alice", "bash", "-bash", 0.0, 0.005, 7200.0),
        proc(
            910001,
            910000,
            1001,
            "alice",
            "python",
            "python train.py --model llama-70b --batch 8 --lr 3e-4",
            312.5,
            24.5,
            5025.0,
        ),
        proc(910003, 910001, 1001, "alice", "nccl-proxy", "nccl-proxy --rank 0", 4.0, 0.3, 5020.0),
        proc(910002, 1, 1002, "bob", "python", "python serve.py --port 8000 --model mistral-7b", 88.0, 9.2, 600.0),
        proc(910010, 1, 0, "root", "dockerd", "/usr/bin/dockerd -H fd://", 1.5, 0.12, 864000.0),
        proc(910011, 1, 1001, "alice", "jupyter", "jupyter lab --no-browser", 0.5, 0.4, 86000.0),
    ]


def make_many_gpu_app(count_gpus: int = 8, links: int = 18, **kwargs):
    """An app showing ``count_gpus`` fake H200s with ``links`` NVLinks each (the 8-GPU layout)."""
    from gpuscope.testing.fake_nvml import GIB, FakeGpu, FakeProcess
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.sources import ScriptedSource

    gpus = [FakeGpu.h200(processes=[FakeProcess(910001, 61 * GIB, 72)]) for _ in range(count_gpus)]
    series = fake_nvml_samples(30, gpus=gpus)
    app = GpuscopeApp(
        ScriptedSource(series[-1:], label="fake NVML", processes=host_processes()),
        interval_s=3600.0,
        **_typed_results(kwargs),
    )
    app.history.extend(series[:-1])
    return app


def make_fake_nvml_app(count: int = 30, **kwargs):
    """Like :func:`make_app`, with samples from the fake NVML."""
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.sources import ScriptedSource

    series = fake_nvml_samples(count)
    app = GpuscopeApp(
        ScriptedSource(series[-1:], label="fake NVML", processes=host_processes()),
        interval_s=3600.0,
        **_typed_results(kwargs),
    )
    app.history.extend(series[:-1])
    return app


def fixed_cpu_info():
    """A CpuInfo matching host_sample()'s CPU, so the CPU datasheet roof does not depend on the test machine."""
    from gpuscope.telemetry.cpuinfo import CpuInfo

    return CpuInfo(
        model="AMD EPYC 7B13",
        vendor="AuthenticAMD",
        architecture="x86_64",
        logical_cores=8,
        physical_cores=4,
        base_frequency_mhz=2450.0,
        max_frequency_mhz=2450.0,
        simd="avx2",
        fp32_flop_per_cycle_per_core=32,
    )


def results_document() -> dict:
    """A probe results file for node01: measured ceilings and three workloads."""
    from results_files import new_document as new_results

    doc = new_results(
        system={"hostname": "node01", "cpu_model": "AMD EPYC 7B13"}, suite={"name": "quick", "path": "quick.toml"}
    )
    doc["created"] = T0
    doc["devices"] = [
        {"device": "cuda:0", "type": "gpu", "name": "NVIDIA H200", "host": "node01"},
        {"device": "cpu", "type": "cpu", "name": "AMD EPYC 7B13", "host": "node01"},
    ]
    doc["ceilings"] = [
        {"device": "cuda:0", "kind": "compute", "name": "bf16", "value": 7.9e14, "unit": "FLOP/s"},
        {"device": "cuda:0", "kind": "memory", "name": "dram", "value": 4.3e12, "unit": "B/s"},
        {"device": "cpu", "kind": "compute", "name": "fp32", "value": 1.45e11, "unit": "FLOP/s"},
        {"device": "cpu", "kind": "memory", "name": "dram", "value": 2.3e10, "unit": "B/s"},
    ]
    doc["workloads"] = [
        {"name": "decode attn", "device": "cuda:0", "flops": 2.0e11, "bytes": 1.0e11, "time_s": 0.03, "dtype": "bf16"},
        {
            "name": "prefill gemm",
            "device": "cuda:0",
            "flops": 1.1e12,
            "bytes": 4.0e8,
            "time_s": 1.8e-3,
            "dtype": "bf16",
        },
        {"name": "numpy sgemm", "device": "cpu", "flops": 2.0e10, "bytes": 4.8e7, "time_s": 0.16, "dtype": "fp32"},
    ]
    return doc
