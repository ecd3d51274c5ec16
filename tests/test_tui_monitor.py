"""The monitor's daily tools: history charts with scale, time axis and window; panels that
reflow and fill the screen; the 8-GPU layout; the alert line; the processes screen (host
columns, tree, filter, signals); demo honesty in reports. Hand-made samples, no hardware."""

from __future__ import annotations

import dataclasses
import os
import signal
from pathlib import Path

from textual.widgets import DataTable, Static
from tui_samples import (  # noqa: F401
    host_processes,
    make_app,
    make_fake_nvml_app,
    make_many_gpu_app,
    run_async,
    sample,
    samples,
    tui_env,
    wait_for_sample,
)

from gpuscope.telemetry.values import Reason, Unavailable
from gpuscope.tui.history import History, capacity_for
from gpuscope.tui.screens.processes import ProcessesScreen, process_rows, tree_order
from gpuscope.tui.widgets.alert_line import AlertLine
from gpuscope.tui.widgets.gpu_card import GpuCard
from gpuscope.tui.widgets.history_plot import ChartData, plot_lines, resample_max
from gpuscope.tui.widgets.signal_dialog import SignalDialog


def _content_rows(body) -> int:
    """Rows the dashboard body's children take (its virtual size never goes below the viewport)."""
    return sum(child.outer_size.height for child in body.children if child.display)


def _text(lines) -> list[str]:
    return ["".join(text for text, _ in line) for line in lines]


# --- history -------------------------------------------------------------------------------------


def test_history_is_bounded_and_windows_pad_on_the_left() -> None:
    assert capacity_for(1.0) == 901 and capacity_for(0.1) == 3600 and capacity_for(3600) == 300
    history = History(50)
    history.extend(samples(120))
    assert len(history.timestamps) == 50 and len(history.series("host", "cpu")) == 50
    window = history.window(("host", "cpu"), 80)
    assert len(window) == 80 and window[:30] == [None] * 30 and window[-1] is not None
    assert history.points_in(60.0) == 50  # 1 s apart, capped by what is kept


def test_chart_has_a_value_scale_and_a_time_axis() -> None:
    values = [None] * 30 + [50.0] * 30
    lines = _text(plot_lines(ChartData("SM", "50%", tuple(values), 100.0, lambda v: f"{v:.0f}%"), 30, 5, 300.0))
    assert len(lines) == 5
    assert lines[0].startswith("SM 50%") and lines[0].rstrip().endswith("0–100%")
    assert lines[-1].startswith("-5m") and lines[-1].rstrip().endswith("now")
    bars = lines[1:-1]
    assert all(row[:15].strip() == "" for row in bars)  # the older half of the window has no data
    assert bars[-1][15:29].strip() and not bars[0][15:29].strip()  # 50% of the scale: bottom rows only
    assert resample_max([1.0, 5.0, None, 2.0], 2) == [5.0, 2.0]
    assert resample_max([3.0], 3) == [3.0, 3.0, 3.0]


def test_chart_scale_never_reads_as_a_second_value() -> None:
    """A title line short of room for ``0–126GB/s`` writes ``≤126GB/s`` (a bound), ``0–126G``,
    ``≤126G`` or no scale,
    never the bare ``126GB/s`` ("PCIe 9.37GB/s  126GB/s" read as two current values), at every
    width and for every kind of chart: fixed scale (percent, watts, a link's peak) or the window's
    largest value."""
    values = tuple([None] * 10 + [9.37e9] * 50)
    charts = [
        ChartData("PCIe", "9.37GB/s", values, 126e9, lambda v: f"{v / 1e9:.0f}GB/s"),
        ChartData("SM", "49%", (49.0,) * 60, 100.0, lambda v: f"{v:.0f}%"),
        ChartData("power", "310 W", (310.0,) * 60, 700.0, lambda v: f"{v:.0f}W"),
        ChartData("DRAM", "n/a", values[:-1] + (None,), 2.04e12, lambda v: f"{v / 1e12:.2f}TB/s"),
        ChartData("NVL", "0B/s", (0.0, 2e9, None), None, lambda v: f"{v / 1e9:.1f}GB/s"),  # window's largest
    ]
    seen = set()
    for chart in charts:
        top = chart.scale_fmt(chart.maximum or 2e9)
        for width in range(1, 40):
            lines = _text(plot_lines(chart, width, 4, 60.0))
            head, axis = lines[0], lines[-1]
            assert len(head) <= max(0, width - 1) and len(axis) <= max(0, width - 1)
            scale = head[len(f"{chart.title} {chart.current}") :].strip()
            short = top.removesuffix("B/s")
            assert scale in ("", f"0–{top}", f"≤{top}", f"0–{short}", f"≤{short}"), (chart.title, width, head)
            seen.add(scale[:1])
            # a title line without room for the scale hands it to the time axis, as a bound
            # (``-1m ≤126G now``) and never as a second current value; from 14 cells on, every
            # chart shows its scale on one line or the other
            middle = axis.split()[1:-1]
            assert middle == [] or (not scale and len(middle) == 1 and middle[0].startswith("≤")), (width, axis)
            if width >= 14:
                assert scale or middle, (chart.title, width, lines)
    assert seen == {"", "0", "≤"}
    pcie = charts[0]
    assert _text(plot_lines(pcie, 24, 4, 60.0))[0] == "PCIe 9.37GB/s 0–126GB/s"
    assert _text(plot_lines(pcie, 23, 4, 60.0))[0] == "PCIe 9.37GB/s ≤126GB/s"
    # the card's chart width at 120x40: the unit stays with the current value
    assert _text(plot_lines(pcie, 22, 4, 60.0))[0] == "PCIe 9.37GB/s  0–126G"
    assert _text(plot_lines(pcie, 20, 4, 60.0))[0] == "PCIe 9.37GB/s ≤126G"
    assert _text(plot_lines(pcie, 19, 4, 60.0))[0].rstrip() == "PCIe 9.37GB/s"
    assert _text(plot_lines(pcie, 19, 4, 60.0))[-1] == "-1m  ≤126GB/s  now"
    # the 80x24 card's chart width: the bound without "B/s", and one digit fewer where needed
    assert _text(plot_lines(pcie, 15, 4, 60.0))[-1] == "-1m ≤126G  now"
    dram = ChartData("DRAM", "1.41TB/s", values, 4.92e12, lambda v: f"{v / 1e12:.2f}TB/s")
    assert _text(plot_lines(dram, 15, 4, 60.0))[-1] == "-1m ≤4.92T now"
    assert _text(plot_lines(dram, 14, 4, 60.0))[-1] == "-1m ≤4.9T now"


@run_async
async def test_window_key_switches_the_chart_axis(tui_env: Path) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for_sample(pilot, app)
        charts = app.screen.query_one(GpuCard).query_one("#charts")
        assert charts.window_s == 60.0
        await pilot.press("w")
        await pilot.pause()
        assert app.history_window_s == 300.0 and charts.window_s == 300.0
        lines = [strip.text for strip in charts.render_lines(charts.region.reset_offset)]
        assert any(line.startswith("-5m") for line in lines)


# --- layout --------------------------------------------------------------------------------------


@run_async
async def test_eight_gpus_with_18_links_fit_160x48_without_scrolling(tui_env: Path) -> None:
    app = make_many_gpu_app(8, persist_settings=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.pause(0.3)
        cards = list(app.screen.query(".gpu-card"))
        assert len(cards) == 8 and all(card.dense for card in cards)
        body = app.screen.query_one("#body")
        assert body.max_scroll_y == 0
        assert _content_rows(body) == body.size.height  # no empty rows either
        assert all(card.region.bottom <= body.region.bottom for card in cards)
        assert "×18" in cards[0].cells.cell("nvlink_tx").value_text
        for card in cards:  # the left column is a cell narrower: its text still keeps off the border
            rows = [strip.text for strip in card.render_lines(card.outer_size.region)[1:-1]]
            assert rows and all(row.endswith(" │") for row in rows), rows


@run_async
async def test_no_empty_rows_at_160x48_and_single_gpu_keeps_tall_charts(tui_env: Path) -> None:
    app = make_fake_nvml_app(persist_settings=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.pause(0.3)
        body = app.screen.query_one("#body")
        assert _content_rows(body) == body.size.height and body.max_scroll_y == 0
        main, side = app.screen.query_one("#cpu"), app.screen.query_one("#host-side")
        assert main.outer_size.height == side.outer_size.height  # the two host columns end together
        assert all("-tall" in card.classes and not card.dense for card in app.screen.query(GpuCard))


@run_async
async def test_80x24_scrolls_without_gaps(tui_env: Path) -> None:
    app = make_fake_nvml_app(persist_settings=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.pause(0.3)
        body = app.screen.query_one("#body")
        assert _content_rows(body) >= body.size.height


@run_async
async def test_hidden_panels_reflow_and_all_hidden_says_so(tui_env: Path) -> None:
    app = make_app(persist_settings=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for_sample(pilot, app)
        host = app.screen.query_one("#host")
        assert host.styles.grid_size_columns == 2
        for key in "mndp":  # the right column empties: the CPU panel takes the whole width
            await pilot.press(key)
        await pilot.pause()
        assert host.styles.grid_size_columns == 1
        assert app.screen.query_one("#cpu").size.width >= 150
        await pilot.press("g", "c")
        await pilot.pause()
        message = app.screen.query_one("#all-hidden", Static)
        assert (
            message.display
            and "All panels are hidden" in str(message.render())
            and "g c m n d p" in str(message.render())
        )
        await pilot.press("c")
        await pilot.pause()
        assert not message.display


# --- alerts --------------------------------------------------------------------------------------


@run_async
async def test_alert_line_shows_the_worst_alert_first(tui_env: Path) -> None:
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.sources import ScriptedSource

    hot = sample(3)
    hot.gpus[0] = dataclasses.replace(hot.gpus[0], temperature_gpu_c=91.0, throttle_reasons=["hw_thermal_slowdown"])
    app = GpuscopeApp(ScriptedSource([hot]), interval_s=3600, persist_settings=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.pause()
        line = app.screen.query_one(AlertLine)
        assert line.display
        text = "".join(strip.text for strip in line.render_lines(line.region.reset_offset))
        assert text.lstrip().startswith("CRITICAL") and "GPU 0: 91°C" in text
        assert [a.level for a in app.alerts][:2] == ["critical", "critical"]


@run_async
async def test_no_alert_line_without_alerts(tui_env: Path) -> None:
    quiet = sample(3)
    quiet.gpus[1] = dataclasses.replace(quiet.gpus[1], throttle_reasons=[], ecc_corrected_errors=0)
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.sources import ScriptedSource

    app = GpuscopeApp(ScriptedSource([quiet]), interval_s=3600, persist_settings=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for_sample(pilot, app)
        assert app.alerts == [] and not app.screen.query_one(AlertLine).display


# --- processes -----------------------------------------------------------------------------------


def test_process_rows_join_gpu_and_host_and_build_a_tree() -> None:
    rows, problems = process_rows(sample(2), host_processes(), include_host=False)
    assert problems == []
    by_pid = {row.pid: row for row in rows}
    assert set(by_pid) == {4242, 5151, 777}  # the hand-made GPU processes; none of them is on this host list
    rows, _ = process_rows(sample(2), host_processes(), include_host=True)
    assert any(row.kind == "host" and row.pid == 910010 for row in rows)
    ordered = tree_order(rows, key=lambda r: r.pid, reverse=False)
    prefixes = {row.pid: prefix for row, prefix in ordered}
    assert prefixes[1] == "" and prefixes[910001].endswith("└─ ") and prefixes[910003].endswith("└─ ")
    pids = [row.pid for row, _ in ordered]
    assert pids.index(910000) < pids.index(910001) < pids.index(910003)  # parents before children


@run_async
async def test_processes_screen_has_host_columns_filter_tree_and_signal(tui_env: Path) -> None:
    app = make_fake_nvml_app(persist_settings=False)
    mine = dataclasses.replace(host_processes()[2], uid=1001, user="alice")  # python train.py, pid 910001
    app.source._processes = [mine if p.pid == mine.pid else p for p in host_processes()]
    sent: list[tuple[int, int]] = []
    ProcessesScreen.effective_uid = staticmethod(lambda: 1001)  # type: ignore[assignment]  # alice, not root
    ProcessesScreen.signal_sender = staticmethod(lambda process, signum: sent.append((process.pid, signum)))  # type: ignore[assignment]
    try:
        async with app.run_test(size=(140, 30)) as pilot:
            await wait_for_sample(pilot, app)
            await pilot.press("4")
            await pilot.pause(0.3)
            screen = app.screen
            table = screen.query_one(DataTable)
            assert table.row_count == 3
            first = [str(cell) for cell in table.get_row_at(0)]
            assert first[1] == "910001" and first[3].endswith("MiB") and first[5] == "312" and first[6] == "24.5G"
            assert first[7] == "1:23h" and first[9].startswith("python train.py --model llama-70b")
            await pilot.press("slash")
            await pilot.press(*"serve")
            await pilot.press("enter")
            await pilot.pause()
            assert table.row_count == 1 and "910002" in str(table.get_row_at(0)[1])
            await pilot.press("k")  # bob's process: not offered
            await pilot.pause()
            assert not isinstance(app.screen, SignalDialog)
            assert any("only root or bob" in n.message for n in app._notifications)
            await pilot.press("slash")
            await pilot.press("escape")
            await pilot.press("a", "t")
            await pilot.pause()
            assert table.row_count == 3 + 4 and "tree" in str(screen.query_one("#proc-status", Static).render())
            keys = [row.pid for row in screen._visible]
            table.move_cursor(row=keys.index(910001))
            await pilot.press("k")
            await pilot.pause()
            assert isinstance(app.screen, SignalDialog)
            await pilot.press("escape")  # cancel: nothing sent
            await pilot.pause()
            assert sent == []
            await pilot.press("k")
            await pilot.pause()
            await pilot.click("#signal-sigterm")
            await pilot.pause()
            assert sent == [(910001, int(signal.SIGTERM))]
    finally:
        from gpuscope.telemetry.hostprocs import send_signal

        ProcessesScreen.signal_sender = staticmethod(send_signal)  # type: ignore[assignment]
        ProcessesScreen.effective_uid = staticmethod(os.geteuid)  # type: ignore[assignment]


# --- honesty -------------------------------------------------------------------------------------


@run_async
async def test_a_report_from_fake_hardware_says_so_first_and_fills_the_system(tui_env: Path) -> None:
    from gpuscope.report import make_report
    from gpuscope.tui.report_hook import report_inputs

    app = make_fake_nvml_app(persist_settings=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for_sample(pilot, app)
        assert app.simulated
        documents = report_inputs(app)
        system = documents[0]["system"]
        assert (
            system["simulated"].startswith("fake NVML")
            and system["python"]
            and system["os"]
            and system["cpu_model"] == "AMD EPYC 7B13"
        )
        assert "torch" in system  # the installed version, or None: never imported here
        report = make_report(documents, samples=app.history_samples())
        assert report["title"].startswith("SIMULATED DATA")


def test_memory_is_shown_in_binary_units() -> None:
    from gpuscope.tui.widgets.gpu_card import GPU_CELLS

    memory = dict((key, fn) for key, _, fn in GPU_CELLS)["memory"]
    gpu = sample(0).gpus[1]
    gpu = dataclasses.replace(gpu, memory_total_bytes=80 * 2**30, memory_used_bytes=20 * 2**30)
    assert memory(gpu) == "20.0/80GiB 25%"


def test_reason_text_says_it_once() -> None:
    from gpuscope.tui.format import reason_text

    assert (
        reason_text(
            Unavailable(Reason.NOT_SUPPORTED, "nvmlDeviceGetFanSpeed: not supported by this GPU or driver")
        ).count("not supported")
        == 1
    )
    assert (
        reason_text(Unavailable(Reason.NOT_SUPPORTED, "GPM needs Hopper"))
        == "not supported by this GPU or driver: GPM needs Hopper"
    )


@run_async
async def test_cpu_only_dashboard_fills_the_screen(tui_env: Path) -> None:
    app = make_app(gpus=False, persist_settings=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for_sample(pilot, app)
        await pilot.pause(0.3)
        body = app.screen.query_one("#body")
        assert _content_rows(body) == body.size.height  # the top-processes panel takes the spare rows
        await pilot.press("p")  # without it, the CPU chart does
        await pilot.pause(0.3)
        assert _content_rows(body) == body.size.height
