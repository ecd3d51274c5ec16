"""Key press to redraw while a probe runs: the child-process design against running the probe
in a thread of the UI process.

Part 1, as a user sees it: ``gpuscope --demo`` runs in tmux (120x40); a key that switches
screens is sent with ``tmux send-keys`` and the pane is polled every 5 ms until the new screen
shows. Measured idle, then while the probes screen runs ``--suite`` on the CPU (child process).

Part 2, a like-for-like comparison of the two designs: the app runs headless (Textual's test
driver, 120x40) fed by the demo source (fake NVML, two GPUs) at a 1 s refresh. A key that
switches screens is pressed every 0.25 s; the latency is the time from posting the key until the
app has processed it and painted (``pilot.press`` then ``pilot.pause()``). Three conditions, each ``--presses`` presses:

- ``idle``: no probe running;
- ``child``: the probes screen's own run (``python -m gpuscope.tui.probe_child``, a separate
  process) of ``--suite`` on the CPU;
- ``thread``: the same suite through :class:`gpuscope.probing.ProbeRunner` in a thread of the UI
  process (what the TUI would do without the child process), for comparison.

Target (issue 5): well under 100 ms with a probe running. On a 2-core machine the probe competes
with the UI for the cores in every condition; the GIL adds to that only in ``thread``.

Usage: .venv/bin/python benchmarks/bench_tui_responsive.py [--suite quick] [--presses 40] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("GPUSCOPE_CONFIG_DIR", tempfile.mkdtemp(prefix="gpuscope-bench-"))


def _summary(latencies_s: list[float]) -> dict[str, float]:
    ms = sorted(1000 * value for value in latencies_s)
    return {
        "presses": len(ms),
        "median_ms": round(statistics.median(ms), 1),
        "p95_ms": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 1),
        "max_ms": round(ms[-1], 1),
    }


async def _presses(pilot, count: int, still_running) -> list[float]:  # noqa: ANN001
    latencies = []
    keys = "4242"
    for number in range(count):
        if still_running is not None and not still_running():
            break
        started = time.perf_counter()
        await pilot.press(keys[number % len(keys)])
        await pilot.pause()
        latencies.append(time.perf_counter() - started)
        await asyncio.sleep(0.25)
    return latencies


async def run(condition: str, suite: str, presses: int) -> dict[str, object]:
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.demo import DemoSource
    from gpuscope.tui.screens.probes import ProbesScreen

    app = GpuscopeApp(DemoSource(), persist_settings=False, extra_suites=[Path(suite)])
    result: dict[str, object] = {"condition": condition}
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(200):
            if app.latest_sample is not None:
                break
            await pilot.pause(0.05)
        still_running = None
        thread = None
        if condition == "child":
            await pilot.press("3")
            await pilot.pause(0.3)
            screen = app.screen
            assert isinstance(screen, ProbesScreen)
            screen.action_run()  # the suite passed as extra_suites is preselected
            await pilot.pause(3.0)  # let the child import torch and start measuring
            still_running = lambda: screen.job is not None  # noqa: E731
            await pilot.press("2")
        elif condition == "thread":
            from gpuscope.probing.runner import ProbeRunner
            from gpuscope.probing.suite import load_suite

            cancel = threading.Event()
            runner = ProbeRunner(load_suite(suite), "cpu")
            thread = threading.Thread(target=runner.run, args=(cancel,), daemon=True)
            thread.start()
            await pilot.pause(3.0)
            still_running = thread.is_alive
        latencies = await _presses(pilot, presses, still_running)
        result.update(_summary(latencies) if latencies else {"presses": 0})
        if condition == "child" and app.screen is not None:
            for screen in app.screen_stack:
                if isinstance(screen, ProbesScreen) and screen.job is not None:
                    screen.job.cancel()
        if thread is not None:
            cancel.set()
            thread.join(timeout=30)
    return result


def _tmux(*args: str) -> str:
    import subprocess

    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def _key_latency(session: str, key: str, marker: str, timeout_s: float = 5.0) -> float | None:
    """Seconds from sending ``key`` until the pane contains ``marker`` (None: it never did)."""
    started = time.perf_counter()
    _tmux("send-keys", "-t", session, key)
    while time.perf_counter() - started < timeout_s:
        if marker in _tmux("capture-pane", "-p", "-t", session):
            return time.perf_counter() - started
        time.sleep(0.005)
    return None


def tmux_latencies(suite: str, presses: int) -> dict[str, object]:
    """Part 1: idle, then with the probes screen's child process running ``suite``."""
    import shutil
    import subprocess

    if shutil.which("tmux") is None:
        return {"error": "tmux not found"}
    session = "gpuscope-responsive"
    subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    python = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv" / "bin" / "python").exists() else sys.executable
    env = f"PYTHONPATH={REPO} GPUSCOPE_CONFIG_DIR={os.environ['GPUSCOPE_CONFIG_DIR']} TERM=xterm-256color"
    _tmux(
        "new-session",
        "-d",
        "-s",
        session,
        "-x",
        "120",
        "-y",
        "40",
        f"exec env {env} {python} -m gpuscope --demo --suite {suite}",
    )
    out: dict[str, object] = {}
    # Markers that appear only once each screen has been drawn.
    targets = [("4", "sorted by"), ("1", "GPU 0 ·")]
    try:
        time.sleep(4.0)

        def measure(count: int) -> list[float]:
            values = []
            for number in range(count):
                key, marker = targets[number % 2]
                latency = _key_latency(session, key, marker)
                if latency is not None:
                    values.append(latency)
                time.sleep(0.25)
            return values

        out["idle"] = _summary(measure(presses))
        _key_latency(session, "3", "measurement")
        _tmux("send-keys", "-t", session, "C-r")
        time.sleep(3.0)  # the child imports torch and starts measuring
        running = measure(presses)
        screen = _tmux("capture-pane", "-p", "-t", session)
        out["probe_running_child"] = _summary(running)
        _key_latency(session, "3", "measurement")
        out["probe_status_after"] = next(
            (
                line.strip()
                for line in _tmux("capture-pane", "-p", "-t", session).splitlines()
                if "Running" in line or "Done" in line
            ),
            "",
        )
        del screen
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="quick", help="shipped suite name or path (default quick)")
    parser.add_argument("--presses", type=int, default=40)
    parser.add_argument("--conditions", default="idle,child,thread")
    parser.add_argument("--json", type=Path, default=REPO / "bench-out" / "tui_responsive.json")
    args = parser.parse_args()
    suite = args.suite
    if not Path(suite).exists():
        from gpuscope.resources import suites_dir

        suite = str(suites_dir() / f"{suite}.toml")
    tmux = tmux_latencies(suite, args.presses)
    print("tmux (as a user sees it): " + json.dumps(tmux), flush=True)
    results = []
    for condition in args.conditions.split(","):
        outcome = asyncio.run(run(condition, suite, args.presses))
        results.append(outcome)
        print(
            f"{condition:<7} " + " ".join(f"{key}={value}" for key, value in outcome.items() if key != "condition"),
            flush=True,
        )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps({"suite": suite, "cores": os.cpu_count(), "tmux": tmux, "pilot": results}, indent=2) + "\n"
    )
    print(f"(written to {args.json})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
