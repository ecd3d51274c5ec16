"""GPU process lists are read every second only while a screen shows them (issue 15: idle cost).

They cost two NVML calls per GPU (on a real driver among the slowest queries) and only the
processes screen lists them; elsewhere they are read every ``PROCESS_BACKGROUND_INTERVAL_S`` so
that a report made from the TUI still has them. Becoming shown reads them at the next sample.
"""

from __future__ import annotations

import time
from pathlib import Path

from tui_samples import run_async, tui_env  # noqa: F401 - tui_env is a fixture

from gpuscope.telemetry.nvml.collector import NvmlCollector
from gpuscope.testing.fake_nvml import FakeClock, FakeProcess, install_fake_nvml
from gpuscope.testing.scenarios import build_fake, parse_scenario

_LIST = "nvmlDeviceGetComputeRunningProcesses_v3"


def _reads_per_tick(shown_at: dict[int, bool], ticks: int) -> list[int]:
    """Process-list calls on GPU 0 in each of ``ticks`` one-second samples; ``shown_at`` maps a
    tick number to the ``set_processes_shown`` value given before it."""
    clock = FakeClock()
    fake = build_fake(parse_scenario("gpus=1xh200"), clock=clock)
    fake.gpus[0].processes.append(FakeProcess(pid=4242))
    reads: list[int] = []
    with install_fake_nvml(fake):
        collector = NvmlCollector(clock=clock)
        collector.open()
        for tick in range(ticks):
            if tick in shown_at:
                collector.set_processes_shown(shown_at[tick])
            before = fake.device_calls[(_LIST, 0)]
            sample = collector.sample().gpus[0]
            reads.append(fake.device_calls[(_LIST, 0)] - before)
            # between reads the last list stands: never "unavailable", never empty
            assert isinstance(sample.processes, list) and [p.pid for p in sample.processes] == [4242]
            clock.advance(1.0)
        collector.close()
    return reads


def test_shown_lists_are_read_every_second() -> None:
    assert all(reads > 0 for reads in _reads_per_tick({}, 6))


def test_lists_nobody_shows_are_read_every_five_seconds() -> None:
    reads = _reads_per_tick({1: False}, 12)
    read_ticks = [tick for tick, count in enumerate(reads) if count]
    assert read_ticks[0] == 0
    gaps = [b - a for a, b in zip(read_ticks, read_ticks[1:])]
    assert gaps and all(gap == NvmlCollector.PROCESS_BACKGROUND_INTERVAL_S for gap in gaps), read_ticks


def test_becoming_shown_reads_the_lists_at_the_next_sample() -> None:
    # hidden from tick 1: read at 0 and 5; shown again before tick 7 -> read at 7 (not at 10)
    reads = _reads_per_tick({1: False, 7: True}, 10)
    assert [tick for tick, count in enumerate(reads) if count] == [0, 5, 7, 8, 9]


@run_async
async def test_the_tui_reads_gpu_processes_often_only_on_the_processes_screen(tui_env: Path) -> None:
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.screens.processes import ProcessesScreen
    from gpuscope.tui.sources import LiveSource

    fake = build_fake(parse_scenario("gpus=2xh200"))
    with install_fake_nvml(fake):
        source = LiveSource()
        app = GpuscopeApp(source, interval_s=0.1, persist_settings=False)
        async with app.run_test(size=(120, 40)) as pilot:
            deadline = time.monotonic() + 30
            while app.latest_sample is None and time.monotonic() < deadline:
                await pilot.pause(0.05)
            assert app.latest_sample is not None, "no sample reached the app"

            def interval_s() -> float:
                collector = source._collector
                assert collector is not None
                gpu_side = collector._gpu
                assert isinstance(gpu_side, NvmlCollector)
                return gpu_side._process_interval_s

            assert interval_s() == NvmlCollector.PROCESS_BACKGROUND_INTERVAL_S  # the dashboard
            await pilot.press("4")
            await pilot.pause(0.3)
            assert isinstance(app.screen, ProcessesScreen)
            assert interval_s() == NvmlCollector.PROCESS_INTERVAL_S
            await pilot.press("1")
            await pilot.pause(0.3)
            assert interval_s() == NvmlCollector.PROCESS_BACKGROUND_INTERVAL_S
