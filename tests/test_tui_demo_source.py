"""``gpuscope --demo``'s source: the TUI's own live collector (as LiveSource builds it) on a fake
NVML with moving loads, labelled as simulated, and the real pynvml back after close."""

from __future__ import annotations

import time

import pynvml

from gpuscope.telemetry.values import Unavailable
from gpuscope.tui.demo import DemoSource
from gpuscope.tui.sources import LiveSource


def test_demo_is_the_tui_collector_on_a_fake_and_says_so() -> None:
    library_before = pynvml.nvmlLib
    source = DemoSource()
    assert isinstance(source, LiveSource)
    assert source.simulated and source.label == "demo (fake NVML)"
    try:
        source.set_gpu_processes_shown(False)  # the dashboard: lists every 5 s
        first = source.sample()
        time.sleep(0.15)  # GPM needs more than 100 ms between its samples
        second = source.sample()
    finally:
        source.close()
    assert pynvml.nvmlLib is library_before  # the fake is uninstalled
    assert [gpu.name for gpu in first.gpus] == ["NVIDIA H200", "NVIDIA A100-SXM4-80GB"]
    h200 = second.gpus[0]
    assert h200.nvlink_active_links == 18 and h200.nvlink_links == []  # totals only, as the TUI shows
    assert isinstance(h200.nvlink_tx_bytes_per_s, float) and h200.nvlink_tx_bytes_per_s > 0
    assert isinstance(h200.sm_activity_percent, float)  # GPM works on the demo H200
    assert not isinstance(h200.processes, Unavailable) and len(h200.processes) == 1  # read at start
