"""``gpuscope --demo``: the real collector against the fake NVML (an H200 with GPM and NVLink,
an A100 without GPM) whose load moves in slow waves, plus this machine's real CPU side.
For trying the UI on a machine without GPUs; the top bar says "demo"."""

from __future__ import annotations

import math
import os
import time
from typing import Any

from gpuscope.telemetry.records import Sample
from gpuscope.tui.sources import LiveSource

__all__ = ["DemoSource", "demo_fake_nvml"]


def demo_fake_nvml(clock: Any = None) -> Any:
    """The demo's fake NVML: GPU 0 an H200 (GPM, 18 NVLinks), GPU 1 an A100 (no GPM); this
    process and its parent show as GPU processes."""
    from gpuscope.testing.fake_nvml import GIB, FakeClock, FakeGpu, FakeNvml, FakeProcess

    gpus = [
        FakeGpu.h200(wobble=0.03, seed=1, processes=[FakeProcess(os.getpid(), 61 * GIB, 72)]),
        FakeGpu.a100(wobble=0.03, seed=2, processes=[FakeProcess(os.getppid(), 18 * GIB, None)]),
    ]
    return FakeNvml.with_gpus(gpus, clock=clock or FakeClock(real=True))


#: The demo GPUs' moving metrics: field -> (H200, A100), each ``(base, swing, wave)`` giving
#: ``base + swing * wave(t)`` (``phase``: a slow training-like cycle; ``burst``: a faster one), or
#: None where that GPU's load leaves the field alone.
_MOVING: dict[str, tuple[tuple[float, float, str] | None, tuple[float, float, str] | None]] = {
    "gpu_util_percent": ((60, 38, "phase"), (20, 30, "burst")),
    "memory_busy_percent": ((30, 40, "phase"), (10, 15, "burst")),
    "sm_activity_percent": ((45, 45, "phase"), None),
    "sm_occupancy_percent": ((25, 20, "phase"), None),
    "tensor_activity_percent": ((20, 55, "phase"), None),
    "hmma_tensor_activity_percent": ((20, 55, "phase"), None),
    "fp32_activity_percent": ((5, 10, "burst"), None),
    "dram_bytes_per_s": ((1.2e12, 2.6e12, "phase"), None),
    "pcie_tx_bytes_per_s": ((0.4e9, 2e9, "burst"), (2e8, 5e8, "burst")),
    "pcie_rx_bytes_per_s": ((1e9, 6e9, "burst"), (5e8, 1.5e9, "burst")),
    "nvlink_tx_bytes_per_s": ((2e9, 5e9, "burst"), None),
    "nvlink_rx_bytes_per_s": ((2e9, 5e9, "burst"), None),
    "power_w": ((280, 380, "phase"), (120, 150, "burst")),
    "sm_clock_mhz": ((1755, 225, "phase"), None),
    "temperature_gpu_c": ((48, 20, "phase"), (40, 10, "burst")),
    "temperature_memory_c": ((55, 18, "phase"), (45, 8, "burst")),
}


def _moving(gpu: int, waves: dict[str, float]) -> dict[str, float]:
    loads: dict[str, float] = {}
    for name, per_gpu in _MOVING.items():
        moving = per_gpu[gpu]
        if moving is not None:
            base, swing, wave = moving
            loads[name] = base + swing * waves[wave]
    return loads


def demo_load(t_s: float) -> tuple[dict[str, float], dict[str, float]]:
    """Scripted loads of the two demo GPUs (H200, A100) at ``t_s`` seconds: a training-like cycle."""
    phase, burst = 0.5 + 0.5 * math.sin(t_s / 7.0), 0.5 + 0.5 * math.sin(t_s / 2.3)
    h200, a100 = (_moving(gpu, {"phase": phase, "burst": burst}) for gpu in (0, 1))
    h200.update(memory_used_bytes=int(70e9 + 8e9 * phase), throttle_reasons=0)
    a100.update(sm_clock_mhz=1410, memory_clock_mhz=1593, memory_used_bytes=int(18e9 + 2e9 * burst))
    a100["throttle_reasons"] = 0x4 if burst > 0.8 else 0  # SW power cap at the peaks
    return h200, a100


def demo_amd_load(fake: Any, t_s: float) -> None:
    """Moving loads on the demo's AMD GPUs (two MI300X): the same training-like cycle, out of phase."""
    for number, gpu in enumerate(fake.gpus):
        phase = 0.5 + 0.5 * math.sin(t_s / 7.0 + 1.5 * number)
        burst = 0.5 + 0.5 * math.sin(t_s / 2.3 + number)
        gpu.gfx_activity_percent, gpu.umc_activity_percent = 55 + 40 * phase, 25 + 45 * phase
        gpu.power_w, gpu.gfx_clock_mhz = 300 + 380 * phase, int(1700 + 300 * phase)
        gpu.temperature_hotspot_c, gpu.temperature_hbm_c = int(55 + 30 * phase), int(48 + 20 * phase)
        gpu.pcie_bytes_per_s = 1e9 + 8e9 * burst
        gpu.xgmi_tx_bytes_per_s_per_link = gpu.xgmi_rx_bytes_per_s_per_link = 4e9 + 18e9 * burst
        gpu.vram_used_bytes = int(120e9 + 30e9 * phase)


class DemoSource(LiveSource):
    """The TUI's live collector (as :class:`LiveSource` builds it) on fake GPUs with moving loads:
    ``vendor`` "nvidia" (a fake NVML), "amd" (a fake AMD SMI) or "both"."""

    def __init__(self, vendor: str = "nvidia") -> None:
        super().__init__()
        self.vendor = vendor
        self.label = {"nvidia": "demo (fake NVML)", "amd": "demo (fake AMD SMI)"}.get(
            vendor, "demo (fake NVML + AMD SMI)"
        )
        self.simulated = True
        self._fake: Any = None
        self._amd_fake: Any = None
        self._installed: list[Any] = []
        self._t0 = time.monotonic()

    def open(self) -> None:
        if self.vendor in ("nvidia", "both"):
            from gpuscope.testing.fake_nvml import install_fake_nvml

            self._fake = demo_fake_nvml()
            self._installed.append(install_fake_nvml(self._fake))
        if self.vendor in ("amd", "both"):
            from gpuscope.testing.fake_amdsmi import AmdScenario, build_fake_amdsmi, install_fake_amdsmi

            self._amd_fake = build_fake_amdsmi(AmdScenario(gpus="2xmi300x"))
            self._installed.append(install_fake_amdsmi(self._amd_fake))
        for context in self._installed:
            context.__enter__()
        self._set_load()
        super().open()

    def _set_load(self) -> None:
        t_s = time.monotonic() - self._t0
        if self._fake is not None:
            h200, a100 = demo_load(t_s)
            self._fake.set_load(0, **h200)
            self._fake.set_load(1, **a100)
        if self._amd_fake is not None:
            with self._amd_fake.settled():
                demo_amd_load(self._amd_fake, t_s)

    def sample(self) -> Sample:
        if not self._installed:
            self.open()
        self._set_load()
        return super().sample()

    def close(self) -> None:
        super().close()
        installed, self._installed = self._installed, []
        for context in reversed(installed):
            context.__exit__(None, None, None)
