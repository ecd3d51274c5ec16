"""The TUI's topology view: the drawing at 80 and 160 columns (hgx8, pcie4), link findings as
alerts (rising counters from two reads, held; PCIe generation only while busy), the screen on
key 5 with live rates, and hostile NIC names kept as text."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from support.topo_view import HOSTILE_NIC, make_topology_app, read_twice
from tui_samples import fake_nvml_samples, run_async, tui_env, wait_for_sample  # noqa: F401

from gpuscope.telemetry.topology import PcieLink
from gpuscope.telemetry.topology_health import link_findings
from gpuscope.testing._fake_nvml_topology import hgx_h200_8, pcie_pairs_4
from gpuscope.tui.screens.topology_feed import RISING_HOLD_S, TopologyWatch, link_alerts
from gpuscope.tui.screens.topology_graph import draw_topology, layout_blocks, live_rates


@pytest.fixture(scope="module")
def hgx8(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return read_twice("hgx8", tmp_path_factory.mktemp("hgx8") / "sys")


@pytest.fixture(scope="module")
def pcie4(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return read_twice("pcie4", tmp_path_factory.mktemp("pcie4") / "sys")


def _plain(lines) -> list[str]:  # type: ignore[no-untyped-def]
    return [line.plain for line in lines]


def test_layout_groups_switches_numa_nodes_and_nics(pcie4) -> None:  # type: ignore[no-untyped-def]
    blocks = layout_blocks(pcie4[1])
    assert [block.numa for block in blocks] == [0, 1]
    assert [block.cpus for block in blocks] == [list(range(8)), list(range(8, 16))]
    first, second = blocks
    assert [gpu.index for gpu in first.branches[0].gpus] == [0, 1]
    names = {pcie4[1].nics[n].name for block in blocks for branch in block.branches for n in branch.nics}
    assert names == {"eth0", "eth1", "mlx5_0"}
    # eth0 sits under GPU 0/1's switch (PIX in the sysfs tree); eth1 on its own root port
    assert [pcie4[1].nics[n].name for n in first.branches[0].nics] == ["eth0"]
    assert any([pcie4[1].nics[n].name for n in b.nics] == ["eth1"] and not b.gpus for b in second.branches)


def test_hgx8_fits_80x24_and_uses_160_columns(hgx8) -> None:  # type: ignore[no-untyped-def]
    samples = fake_nvml_samples(2, gpus=hgx_h200_8())
    findings = link_findings(hgx8[0], hgx8[1], window_s=2.0)
    lines, detail = draw_topology(hgx8[1], samples[-1], findings, 80, 20)
    text = _plain(lines)
    assert all(len(line) <= 80 for line in text) and len(text) <= 20
    assert detail in ("compact", "dense")
    joined = "\n".join(text)
    assert all(f"GPU{index}" in joined for index in range(8))
    assert "NVSwitch ×4" in joined and "GPU 5 NVLink link 3" in joined
    wide, wide_detail = draw_topology(hgx8[1], samples[-1], findings, 160, 46)
    wide_text = _plain(wide)
    assert wide_detail == "full" and all(len(line) <= 160 for line in wide_text)
    # the two NUMA nodes side by side, with bars and the PCIe state spelled out
    assert any("CPU NUMA 0" in line and "CPU NUMA 1" in line for line in wide_text)
    assert "H200 PCIe x16 Gen5" in "\n".join(wide_text)
    assert any("on grey23" in str(span.style) for line in wide for span in line.spans)  # the bars
    # rows to spare: the nvidia-smi topo -m matrix under the drawing (NV18 off the diagonal)
    assert sum(line.count("NV18") for line in wide_text if line.startswith("GPU")) >= 8 * 7
    assert not any(line.startswith("GPU0 X") for line in text)  # not at 80x24: no room


def test_live_rates_are_the_busier_direction_against_expected(pcie4) -> None:  # type: ignore[no-untyped-def]
    sample = fake_nvml_samples(2, gpus=pcie_pairs_4())[-1]
    rates = live_rates(sample)
    gpu = sample.gpus[1]
    assert rates.pcie[1] == max(gpu.pcie_tx_bytes_per_s, gpu.pcie_rx_bytes_per_s)  # type: ignore[type-var]
    assert rates.nic["eth0"] == max(sample.host.nics[0].rx_bytes_per_s, sample.host.nics[0].tx_bytes_per_s)  # type: ignore[type-var]
    lines, _ = draw_topology(pcie4[1], sample, link_findings(pcie4[1]), 120, 40)
    text = "\n".join(_plain(lines))
    expected = pcie4[1].gpus[1].pcie.expected_bytes_per_s
    assert f"{rates.pcie[1] / 1e9:.1f}/{expected / 1e9:.1f}!" in text  # GPU 1: short, marked
    assert "x8 Gen4 of x16 Gen5" in text and "GPU2 ══NV11══ GPU3" in text


def test_rising_counters_need_two_reads_and_are_held(hgx8) -> None:  # type: ignore[no-untyped-def]
    watch = TopologyWatch()
    first = watch.update(hgx8[0], 0.0)
    assert not [f for f in first if f.kind == "nvlink_errors"]  # one read: nothing to compare
    second = watch.update(hgx8[1], 10.0)
    rising = [f for f in second if f.kind == "nvlink_errors"]
    assert [f.subject for f in rising] == ["GPU5 NVLink 3"]
    assert watch.reads == 2
    held = watch.update(hgx8[1], 20.0)  # the same counters again: not rising, still shown
    assert [f.subject for f in held if f.kind == "nvlink_errors"] == ["GPU5 NVLink 3"]
    gone = watch.update(hgx8[1], 20.0 + RISING_HOLD_S + 1)
    assert not [f for f in gone if f.kind == "nvlink_errors"]
    alerts = link_alerts(second)
    assert {a.kind for a in alerts} == {"link"} and alerts[0].level == "warning"
    assert any(a.gpu == 5 and "CRC flit" in a.message for a in alerts)


def test_pcie_generation_only_while_busy(pcie4) -> None:  # type: ignore[no-untyped-def]
    slow = msgspec.structs.replace(pcie4[1])
    slow.gpus = [msgspec.structs.replace(gpu) for gpu in slow.gpus]
    gpu = slow.gpus[0]
    gpu.pcie = PcieLink(generation=3, width=16, max_generation=5, max_width=16, current_bytes_per_s=15.75e9,
                        expected_bytes_per_s=63e9)  # fmt: skip
    for utilization, found in ((5.0, False), (80.0, True)):
        gpu.utilization_percent = utilization
        watch = TopologyWatch()
        kinds = {(f.subject, f.kind) for f in watch.update(slow, 0.0)}
        assert (("GPU0 PCIe", "pcie_generation") in kinds) is found


def _graph_text(app) -> str:  # type: ignore[no-untyped-def]
    from textual.widgets import Static

    return str(app.screen.query_one("#topology-graph", Static).render())


async def _topology_shown(pilot, app) -> None:  # type: ignore[no-untyped-def]
    await wait_for_sample(pilot, app)
    for _ in range(200):
        if app.topology_feed.watch.reads >= 2:
            break
        await pilot.pause(0.02)
    app.topology_feed.period_s = app.topology_feed.idle_period_s = 3600.0
    await pilot.press("5")
    for _ in range(100):
        if app.screen.is_mounted and getattr(app.screen, "MODE", "") == "topology" and app.screen.detail:
            break
        await pilot.pause(0.02)
    await pilot.pause()


@run_async
async def test_screen_on_key_5_with_link_alerts(tui_env: Path, tmp_path: Path) -> None:
    app = make_topology_app("pcie4", tmp_path / "sys")
    async with app.run_test(size=(100, 30)) as pilot:
        await _topology_shown(pilot, app)
        assert app.current_mode == "topology"
        text = _graph_text(app)
        assert "GPU1" in text and "x8 Gen4 of x16 Gen5" in text and "mlx5_0" in text
        messages = [a.message for a in app.alerts if a.kind == "link"]
        assert any("GPU 1 PCIe trained at x8 Gen4" in m for m in messages)
        assert any("NVLink GPU 2 - GPU 3" in m for m in messages)
        assert any("mlx5_0 port 2 not active" in m for m in messages)
        # the alert line of every screen shows them: back on the dashboard too
        await pilot.press("1")
        await pilot.pause()
        assert any(a.kind == "link" for a in app.alerts)
        assert app.screen.query_one("#alert-line").display


@run_async
async def test_hostile_nic_name_stays_text(tui_env: Path, tmp_path: Path) -> None:
    app = make_topology_app("pcie4", tmp_path / "sys", hostile=True)
    async with app.run_test(size=(160, 40)) as pilot:
        await _topology_shown(pilot, app)
        text = _graph_text(app)
        assert "\x1b" not in text and "\\x1b[31m[bold red]X[/]<img" in text
        svg = app.export_screenshot()
        assert "[bold red]X[/]" in svg.replace("&#160;", " ") or "[bold&#160;red]X[/]" in svg
        assert HOSTILE_NIC not in svg


@run_async
async def test_replay_has_no_topology(tui_env: Path) -> None:
    from tui_samples import samples

    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.sources import ReplayCursor

    app = GpuscopeApp(replay=ReplayCursor(samples(3)), persist_settings=False)
    app.replay.paused = True  # type: ignore[union-attr]
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5")
        await pilot.pause()
        assert "a replay has no topology" in _graph_text(app)
        assert not any(a.kind == "link" for a in app.alerts)


@run_async
async def test_opening_the_screen_reads_again_when_the_last_read_is_old(tui_env: Path, tmp_path: Path) -> None:
    """Hidden, the topology is read every idle period (a minute); opening the screen after that
    reads it at once, so a counter that rose meanwhile is shown without waiting for the next one."""
    app = make_topology_app("hgx8", tmp_path / "sys")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for_sample(pilot, app)
        feed = app.topology_feed
        for _ in range(200):
            if feed.watch.reads >= 1:
                break
            await pilot.pause(0.02)
        feed.period_s, feed.idle_period_s = 15.0, 3600.0  # no periodic read during the test
        await pilot.pause(0.1)
        reads = feed.watch.reads
        feed.clock = lambda: (feed.read_at or 0.0) + 20.0  # the last read is 20 s old, over the period
        await pilot.press("5")
        for _ in range(200):
            if feed.watch.reads > reads:
                break
            await pilot.pause(0.02)
        assert feed.watch.reads == reads + 1
        feed.clock = lambda: feed.read_at or 0.0  # just read: switching again does not read
        await pilot.press("1")
        await pilot.press("5")
        await pilot.pause(0.2)
        assert feed.watch.reads == reads + 1
