"""The dashboard with AMD GPUs next to NVIDIA ones (issue 30): each card shows what its vendor gives
(XGMI for NVLink, PCIe as one total, the hotspot sensor), from samples of the real collectors on the
fake NVML and the fake AMD SMI library."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from tui_samples import run_async, shown, tui_env  # noqa: F401 - tui_env is a fixture

from gpuscope.telemetry.collector import TelemetryCollector
from gpuscope.telemetry.records import Sample
from gpuscope.testing._fake_nvml_model import FakeClock
from gpuscope.testing.fake_amdsmi import build_fake_amdsmi, install_fake_amdsmi, parse_amd_scenario
from gpuscope.testing.fake_nvml import FakeGpu, FakeNvml, install_fake_nvml
from gpuscope.tui.widgets.gpu_card import DenseGpuCard, GpuCard

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("amdsmi") is None, reason="the amdsmi package (the dev extra) is not installed"
)


def _samples(count: int) -> list[Sample]:
    clock = FakeClock()
    nvidia = FakeNvml.with_gpus([FakeGpu.h200()], clock=clock)
    nvidia.set_load(0, gpu_util_percent=80, sm_activity_percent=70, power_w=500)
    amd = build_fake_amdsmi(parse_amd_scenario("gpus=1xmi300x"), clock=clock)
    out = []
    with install_fake_nvml(nvidia), install_fake_amdsmi(amd):
        with TelemetryCollector(wall_clock=lambda: 1_800_000_000.0 + clock()) as collector:
            for _ in range(count):
                clock.advance(1.0)
                out.append(collector.sample())
    return out


def _app(count: int):  # type: ignore[no-untyped-def]
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.sources import ScriptedSource

    series = _samples(count)
    app = GpuscopeApp(ScriptedSource(series[-1:]), interval_s=3600.0)
    app.history.extend(series[:-1])
    return app


@run_async
async def test_amd_and_nvidia_cards_side_by_side(tui_env: Path) -> None:
    app = _app(5)
    async with shown(app, (160, 50)) as pilot:
        cards = list(app.screen.query(GpuCard)) + list(app.screen.query(DenseGpuCard))
        by_title = {str(card.border_title): card for card in cards}
        amd = next(card for title, card in by_title.items() if "MI300X" in title)
        nvidia = next(card for title, card in by_title.items() if "H200" in title)
        assert "GPU 1 · AMD Instinct MI300X · cdna3" in str(amd.border_title)
        assert set(amd.cells.keys) >= {"xgmi_tx", "pcie", "hotspot"} and "nvlink_tx" not in amd.cells.keys
        assert "nvlink_tx" in nvidia.cells.keys and "xgmi_tx" not in nvidia.cells.keys
        assert amd.cells.cell("xgmi_tx").value_text == "140 GB/s ×7"  # 7 links x 20 GB/s, on the fake's clock
        assert amd.cells.cell("hotspot").value_text == "79°C"
        assert amd.cells.cell("pcie").value_text == "6.00 GB/s"
        await pilot.pause()
