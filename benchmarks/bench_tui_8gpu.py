"""The TUI with 8 fake GPUs (18 NVLink links each): key press to redraw while it polls.

The app runs headless (Textual's test driver) fed by the real collector against the fake NVML
(gpuscope/testing/scenarios.py: ``gpus=8xh200``, busy load), at ``--interval`` seconds. A key
that switches screens is pressed every 0.25 s; the latency is the time from posting the key until
the app processed it and painted (``pilot.press`` then ``pilot.pause()``). Reported: median, p95
and max over ``--presses`` presses, for each interval, with and without random NVML errors; also
how many polls completed (the UI must keep polling while it answers keys). A 2-GPU run is the
reference measured the same way in the same run.

Usage: .venv/bin/python benchmarks/bench_tui_8gpu.py [--presses 40] [--json bench-out/tui_8gpu.json]
       [--scenario gpus=8xh200,links=18 --interval 1]  (one case only, to save time)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("GPUSCOPE_CONFIG_DIR", tempfile.mkdtemp(prefix="gpuscope-bench-"))

from bench_tui_responsive import _summary  # noqa: E402 - the same latency summary (median, p95, max)

SCENARIOS = (
    "gpus=2xh200,links=18",  # the reference, measured the same way in the same run
    "gpus=8xh200,links=18",
    "gpus=8xh200,links=18,random=0.05,seed=1,errors=Unknown+Timeout",
)


async def run(scenario: str, interval_s: float, presses: int) -> dict[str, object]:
    from gpuscope.testing.fake_nvml import install_fake_nvml
    from gpuscope.testing.scenarios import build_fake, parse_scenario
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.sources import LiveSource

    fake = build_fake(parse_scenario(scenario))
    with install_fake_nvml(fake):
        app = GpuscopeApp(LiveSource(), interval_s=interval_s, persist_settings=False)
        async with app.run_test(size=(160, 50)) as pilot:
            for _ in range(400):
                if app.latest_sample is not None:
                    break
                await pilot.pause(0.05)
            polls_before = len(app.recent_samples)
            started = time.perf_counter()
            latencies = []
            keys = "1241"
            for number in range(presses):
                t0 = time.perf_counter()
                await pilot.press(keys[number % len(keys)])
                await pilot.pause()
                latencies.append(time.perf_counter() - t0)
                await asyncio.sleep(0.25)
            elapsed = time.perf_counter() - started
            polls = len(app.recent_samples) - polls_before
    return {
        "scenario": scenario,
        "interval_s": interval_s,
        **_summary(latencies),
        "polls_per_s": round(polls / elapsed, 2),
        "polls_expected_per_s": round(1 / interval_s, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presses", type=int, default=40)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--scenario", action="append", help="a GPUSCOPE_FAKE_NVML scenario to run (repeatable; default: all three)"
    )
    parser.add_argument(
        "--interval", type=float, action="append", help="refresh interval s (repeatable; default 1, 0.1)"
    )
    args = parser.parse_args()
    rows = []
    for scenario in args.scenario or SCENARIOS:
        for interval_s in args.interval or (1.0, 0.1):
            row = asyncio.run(run(scenario, interval_s, args.presses))
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("| scenario | interval | median ms | p95 ms | max ms | polls/s (expected) |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['scenario']} | {row['interval_s']} s | {row['median_ms']} | {row['p95_ms']} | {row['max_ms']} | "
            f"{row['polls_per_s']} ({row['polls_expected_per_s']}) |"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
