"""Screen switch latency measured inside the app: from the key event to the first frame of the
new screen (not Pilot's idle detection).

``bench_tui_responsive.py`` and ``bench_tui_8gpu.py`` time ``pilot.press`` + ``pilot.pause()``,
which each wait for the process to look idle (``textual._wait.wait_for_idle``: at least three
20 ms sleeps), so they cannot go below ~60 ms whatever the app does. Here the key event is put
straight on the headless driver's queue and the clock stops when the app composes the first
frame of the requested screen (``App._display`` with no batch open), so the number is what a
terminal would see, minus the terminal's own write. Also reported: the CPU time of the process
over the same span (the UI's own work for the switch, plus whatever the poll did meanwhile).

The app runs headless at 120x40 (``--size``) fed by the real collector against the fake NVML
(``gpus=2xh200`` and ``gpus=8xh200``, busy load) at a 1 s refresh. Every screen is shown once
first (the first visit composes the screen); then the keys ``2 3 4 1`` cycle with a 0.3 s
pause between presses.

Usage: .venv/bin/python benchmarks/bench_tui_switch.py [--presses 40] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("GPUSCOPE_CONFIG_DIR", tempfile.mkdtemp(prefix="gpuscope-bench-"))

MODES = {"1": "dashboard", "2": "roofline", "3": "probes", "4": "processes"}


def _summary(values_ms: list[float]) -> dict[str, float]:
    ms = sorted(values_ms)
    return {
        "presses": len(ms),
        "median_ms": round(statistics.median(ms), 1),
        "p95_ms": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 1),
        "max_ms": round(ms[-1], 1),
    }


async def run(scenario: str, presses: int, size: tuple[int, int]) -> dict[str, object]:
    from textual import events

    from gpuscope.testing.fake_nvml import install_fake_nvml
    from gpuscope.testing.scenarios import build_fake, parse_scenario
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.sources import LiveSource

    fake = build_fake(parse_scenario(scenario))
    with install_fake_nvml(fake):
        app = GpuscopeApp(LiveSource(), interval_s=1.0, persist_settings=False)
        frames: list[float] = []
        display = app._display

        def timed_display(screen, renderable):  # noqa: ANN001, ANN202
            if renderable is not None and not app._batch_count and screen is app.screen:
                frames.append(time.perf_counter())
            return display(screen, renderable)

        app._display = timed_display  # type: ignore[method-assign]
        latency: dict[str, list[float]] = {}
        cpu: list[float] = []
        async with app.run_test(size=size) as pilot:
            while app.latest_sample is None:
                await pilot.pause(0.05)
            for key in "2341":  # first visits compose the screens
                await pilot.press(key)
                await pilot.pause(0.3)
            keys = "2341"  # never the screen on show: that would be no switch
            for number in range(presses):
                key = keys[number % len(keys)]
                frames.clear()
                cpu_started = time.process_time()
                started = time.perf_counter()
                event = events.Key(key, key)
                event.set_sender(app)
                app._driver.send_message(event)
                while time.perf_counter() - started < 5.0:
                    await asyncio.sleep(0.001)
                    if frames and app.current_mode == MODES[key]:
                        break
                if frames:
                    latency.setdefault(key, []).append(1000 * (frames[-1] - started))
                    cpu.append(1000 * (time.process_time() - cpu_started))
                await asyncio.sleep(0.3)
    every = [value for values in latency.values() for value in values]
    return {
        "scenario": scenario,
        "size": f"{size[0]}x{size[1]}",
        **_summary(every),
        "cpu_median_ms": round(statistics.median(cpu), 1),
        "by_screen_median_ms": {
            MODES[key]: round(statistics.median(values), 1) for key, values in sorted(latency.items())
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presses", type=int, default=40)
    parser.add_argument("--size", default="120x40")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    width, height = (int(part) for part in args.size.split("x"))
    rows = []
    for scenario in ("gpus=2xh200,links=18", "gpus=8xh200,links=18"):
        row = asyncio.run(run(scenario, args.presses, (width, height)))
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"cores": os.cpu_count(), "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
