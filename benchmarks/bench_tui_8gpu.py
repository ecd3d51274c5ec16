"""The TUI with 8 fake GPUs (18 NVLink links each): key press to redraw while it polls.

The app runs headless (Textual's test driver) fed by the real collector against the fake NVML
(gpuscope/testing/scenarios.py: ``gpus=8xh200``, busy load), at ``--interval`` seconds. A key
that switches screens is pressed every 0.25 s; the latency is the time from posting the key until
the app processed it and painted (``pilot.press`` then ``pilot.pause()``). Reported: median, p95
and max over ``--presses`` presses, for each interval, with and without random NVML errors; also
how many polls completed (the UI must keep polling while it answers keys). A 2-GPU run is the
reference measured the same way in the same run.

``--sample-cost`` measures the sampling thread instead (no app): CPU ms per
``LiveSource.sample()`` (best batch of ``--batches``, fake clock advanced 1 s per sample so
every GPM window is a real one), the host process scan amortised over its 5 s period, and the
share of a sample spent inside the fake NVML (cProfile; the rest is gpuscope, pynvml and psutil).
``--spaced N`` adds the median of N samples each taken after a 1 s sleep, as the app takes them:
on a shared VM caches are cold by then and the same sample costs about twice as much.
The 2-GPU case is the reference; 8 GPUs are reported as a ratio to it.

Usage: .venv/bin/python benchmarks/bench_tui_8gpu.py [--presses 40] [--json bench-out/tui_8gpu.json]
       [--scenario gpus=8xh200,links=18 --interval 1]  (one case only, to save time)
       .venv/bin/python benchmarks/bench_tui_8gpu.py --sample-cost [--batches 20] [--spaced 15]
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


def sample_cost(scenario: str, batches: int, per_batch: int = 10, spaced: int = 0) -> dict[str, object]:
    """CPU per sample and its split (see the module docstring)."""
    import cProfile
    import pstats

    from gpuscope.telemetry.collector import TelemetryCollector
    from gpuscope.telemetry.nvml.collector import NvmlCollector
    from gpuscope.testing.fake_nvml import FakeClock, install_fake_nvml
    from gpuscope.testing.scenarios import build_fake, parse_scenario
    from gpuscope.tui.sources import LiveSource

    clock = FakeClock()
    with install_fake_nvml(build_fake(parse_scenario(scenario), clock=clock)):
        source = LiveSource()
        # as LiveSource.open builds it (per-link NVLink rates off), on the fake's clock
        source._collector = TelemetryCollector(gpu_source=NvmlCollector(clock=clock, nvlink_per_link=False))

        def tick() -> None:
            clock.advance(1.0)
            source.sample()

        for _ in range(5):
            tick()
        batch_ms = []
        for _ in range(batches):
            started = time.process_time()
            for _ in range(per_batch):
                tick()
            batch_ms.append((time.process_time() - started) / per_batch * 1e3)
        spaced_ms = []
        for _ in range(spaced):  # as the app samples: after a second of sleep (cold caches)
            time.sleep(1.0)
            started = time.thread_time()
            tick()
            spaced_ms.append((time.thread_time() - started) * 1e3)
        scans_ms = []
        for _ in range(5):
            started = time.process_time()
            source.host_processes()
            scans_ms.append((time.process_time() - started) * 1e3)
        profile = cProfile.Profile()

        def ticks() -> None:
            for _ in range(20):
                tick()

        profile.runcall(ticks)
        source.close()
    # own time per function; a builtin's (path "~") counts for the function that called it
    fake_s = total_s = 0.0
    for (path, _, _), (_, _, own_s, _, callers) in pstats.Stats(profile).stats.items():  # type: ignore[attr-defined]
        for caller_path, share_s in [(path, own_s)] if path != "~" else [(c[0], v[2]) for c, v in callers.items()]:
            total_s += share_s
            fake_s += share_s if f"gpuscope{os.sep}testing{os.sep}" in caller_path else 0.0
    sample_ms, scan_ms = min(batch_ms), sorted(scans_ms)[len(scans_ms) // 2]
    return {
        "scenario": scenario,
        "sample_cpu_ms": round(sample_ms, 3),
        "host_scan_cpu_ms": round(scan_ms, 3),
        "per_tick_cpu_ms": round(sample_ms + scan_ms / 5, 3),  # scans every 5 s, samples every 1 s
        "sample_after_1s_sleep_cpu_ms": round(sorted(spaced_ms)[len(spaced_ms) // 2], 3) if spaced_ms else None,
        "fake_nvml_share": round(fake_s / max(1e-9, total_s), 3),
    }


def main_sample_cost(batches: int, out: Path | None, spaced: int = 0) -> int:
    scenarios = ("gpus=2xh200,links=18", "gpus=8xh200,links=18")
    rows = [sample_cost(scenario, batches, spaced=spaced) for scenario in scenarios]
    reference = float(str(rows[0]["per_tick_cpu_ms"]))
    print("| scenario | sample CPU ms | host scan ms | per 1 s tick ms (x 2-GPU reference) | in fake NVML |")
    print("|---|---|---|---|---|")
    for row in rows:
        ratio = float(str(row["per_tick_cpu_ms"])) / reference
        print(
            f"| {row['scenario']} | {row['sample_cpu_ms']} | {row['host_scan_cpu_ms']} | {row['per_tick_cpu_ms']} "
            f"(x{ratio:.2f}) | {float(str(row['fake_nvml_share'])):.0%} |"
        )
    for row in rows if spaced else []:
        print(f"{row['scenario']}: median sample after a 1 s sleep {row['sample_after_1s_sleep_cpu_ms']} ms CPU")
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


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
    parser.add_argument("--sample-cost", action="store_true", help="measure LiveSource.sample() only (no app)")
    parser.add_argument("--batches", type=int, default=20, help="--sample-cost: batches of 10 samples (best one)")
    parser.add_argument(
        "--spaced", type=int, default=0, help="--sample-cost: also this many samples each after a 1 s sleep (median)"
    )
    args = parser.parse_args()
    if args.sample_cost:
        return main_sample_cost(args.batches, args.json, args.spaced)
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
