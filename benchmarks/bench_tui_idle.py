"""The TUI's cost when idle, its first frame, and that it does not import torch.

1. Idle CPU: each tool runs in its own tmux session (120x40) at a 1 s refresh; after
   ``--warmup`` seconds, utime+stime of its process (from /proc/<pid>/stat) are read, and again
   ``--seconds`` later. Reported as % of one core. Tools: ``gpuscope`` (live: the real collector;
   on a machine without GPUs that is the CPU side), ``gpuscope --demo`` (fake NVML, two GPUs: the
   full dashboard), ``gpuscope`` against 8 fake H200s with 18 NVLinks each (``GPUSCOPE_FAKE_NVML``)
   at 160x48, and a reference monitor run the same way: btop (update_ms=1000 in a private config;
   installed with apt-get when missing) or, failing that, glances (``-t 1``).
   Budgets (issue 25), as same-run ratios to the reference: the CPU-only dashboard <= x1.25, and
   8 GPUs x 18 links <= x2.4 (the fake NVML's simulation included: it stands in for the driver).
   The ratios move with the machine's load (btop is C++, gpuscope Python): run it on a quiet one.
2. First frame: time from spawning ``gpuscope`` in tmux until the pane shows the dashboard's
   top bar, and until it shows the first sample's clock (median of ``--repeat`` runs).
   Target: <= 1.5 s.
   ``fleet-32gpu`` (issue 29): ``gpuscope fleet --hosts`` over 4 exporters of 8 fake H200s each
   (one real ``gpuscope serve`` exposition, captured once and served by this script on 4 ports, so
   the exporters' own cost is not on the machine) at a 2 s refresh, 160x48. Budget: at most x2 of
   ``gpuscope-8gpu`` in the same run.
3. torch: a headless run (Textual's test driver) that opens every screen reports whether
   ``torch`` is in ``sys.modules`` (it must not be before a probe runs).

Usage: .venv/bin/python benchmarks/bench_tui_idle.py [--seconds 60] [--warmup 5] [--together] [--json OUT]
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv" / "bin" / "python").exists() else sys.executable
CLK_TCK = os.sysconf("SC_CLK_TCK")
#: Issue 25's budgets: idle CPU as a multiple of the reference's, measured in the same run.
CPU_ONLY_BUDGET_RATIO = 1.25
EIGHT_GPU_BUDGET_RATIO = 2.4
#: Issue 29: the fleet view with 32 fake GPUs at 2 s, as a multiple of gpuscope-8gpu in the same run.
FLEET_BUDGET_RATIO = 2.0
SIZE = ("120", "40")

_TORCH_PROBE = r"""
import asyncio, sys
from gpuscope.tui.app import GpuscopeApp
from gpuscope.tui.sources import LiveSource

async def main():
    app = GpuscopeApp(LiveSource(), persist_settings=False)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(200):
            if app.latest_sample is not None:
                break
            await pilot.pause(0.05)
        for key in "2341":
            await pilot.press(key)
            await pilot.pause(0.3)
    print("torch" in sys.modules)

asyncio.run(main())
"""


def _cpu_ticks(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def _start(name: str, command: str, env: dict[str, str], size: tuple[str, str] = SIZE) -> int:
    """Start ``command`` in a detached tmux session; returns the command's pid (exec'd in the pane)."""
    subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
    exports = " ".join(f"{key}={_quote(value)}" for key, value in env.items())
    for attempt in range(3):  # the tmux server may still be exiting after the previous session ended
        try:
            out = _tmux(
                "new-session",
                "-d",
                "-s",
                name,
                "-x",
                size[0],
                "-y",
                size[1],
                "-P",
                "-F",
                "#{pane_pid}",
                f"exec env {exports} {command}",
            )
            break
        except subprocess.CalledProcessError:
            if attempt == 2:
                raise
            time.sleep(0.5)
    return int(out.strip())


def _quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


def _stop(name: str) -> None:
    subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)


#: One idle run: (session name, command, environment, terminal size).
Planned = tuple[str, str, dict[str, str], tuple[str, str]]


def idle_cpu(planned: list[Planned], warmup_s: float, seconds: float) -> list[dict[str, float | str]]:
    """Idle CPU (% of one core) of each planned command, each in its own tmux session, all
    measured over the same window (the machine's other load weighs on each alike)."""
    pids: dict[str, int] = {}
    try:
        for name, command, env, size in planned:
            pids[name] = _start(name, command, env, size)
        time.sleep(warmup_s)
        before, started = {name: _cpu_ticks(pid) for name, pid in pids.items()}, time.monotonic()
        time.sleep(seconds)
        after, elapsed = {name: _cpu_ticks(pid) for name, pid in pids.items()}, time.monotonic() - started
        screens = {name: _tmux("capture-pane", "-p", "-t", name) for name in pids}
    finally:
        for name in pids:
            _stop(name)
    return [
        {
            "tool": name,
            "command": command,
            "seconds": round(elapsed, 1),
            "cpu_core_percent": round(100.0 * (after[name] - before[name]) / CLK_TCK / elapsed, 2),
            "screen_lines_with_text": sum(1 for line in screens[name].splitlines() if line.strip()),
            "size": "x".join(size),
        }
        for name, command, _env, size in planned
    ]


def first_frame(env: dict[str, str], repeat: int) -> dict[str, float]:
    clock = re.compile(r"\d\d:\d\d:\d\d")
    frames, data = [], []
    for number in range(repeat):
        name = f"gs-first-{number}"
        started = time.monotonic()
        _start(name, f"{PYTHON} -m gpuscope", env)
        first = first_data = None
        try:
            while time.monotonic() - started < 20:
                screen = _tmux("capture-pane", "-p", "-t", name)
                now = time.monotonic() - started
                if first is None and "Dashboard" in screen:
                    first = now
                if first is not None and clock.search(screen.splitlines()[0] if screen else ""):
                    first_data = now
                    break
                time.sleep(0.01)
        finally:
            _stop(name)
        if first is not None:
            frames.append(first)
        if first_data is not None:
            data.append(first_data)
        time.sleep(0.5)
    return {
        "first_frame_s_median": round(statistics.median(frames), 3) if frames else float("nan"),
        "first_sample_shown_s_median": round(statistics.median(data), 3) if data else float("nan"),
        "runs": repeat,
    }


def torch_imported() -> bool:
    result = subprocess.run(
        [PYTHON, "-c", _TORCH_PROBE],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GPUSCOPE_CONFIG_DIR": tempfile.mkdtemp()},
    )
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-2000:])
    return result.stdout.strip().endswith("True")


def fleet_exporters(env: dict[str, str], count: int = 4) -> tuple[list[str], Callable[[], None]]:
    """``count`` loopback addresses serving one real exposition of 8 fake H200s (captured from a
    ``gpuscope serve`` run once), and a function that stops them."""
    scenario = {**env, "GPUSCOPE_FAKE_NVML": "gpus=8xh200,links=18,slow=3"}
    serve = subprocess.Popen(
        [PYTHON, "-m", "gpuscope", "serve", "--listen", "127.0.0.1:0", "--interval", "0.5"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO, env=scenario,
    )  # fmt: skip
    try:
        assert serve.stderr is not None
        match = re.search(r"http://(127\.0\.0\.1:\d+)/metrics", serve.stderr.readline())
        if match is None:
            raise RuntimeError("gpuscope serve did not start")
        time.sleep(3.0)
        with urllib.request.urlopen(f"http://{match.group(1)}/metrics", timeout=10) as response:  # noqa: S310
            body = response.read()
    finally:
        serve.terminate()
        serve.wait(timeout=20)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler) for _ in range(count)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop() -> None:
        for server in servers:
            server.shutdown()
            server.server_close()

    return [f"127.0.0.1:{server.server_address[1]}" for server in servers], stop


def reference_command(home: Path) -> tuple[str, str] | None:
    """(name, command) of the reference monitor at a 1 s refresh, installing btop if needed."""
    if shutil.which("btop") is None and shutil.which("apt-get"):
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "btop"],
            capture_output=True,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
    if shutil.which("btop"):
        config = home / ".config" / "btop"
        config.mkdir(parents=True, exist_ok=True)
        (config / "btop.conf").write_text("update_ms = 1000\n")
        return "btop", "btop --utf-force"
    glances = REPO / "bench-out" / "glances-venv" / "bin" / "glances"
    if glances.exists() or shutil.which("glances"):
        return "glances", f"{glances if glances.exists() else 'glances'} -t 1"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=3, help="first-frame runs")
    parser.add_argument("--json", type=Path, default=REPO / "bench-out" / "tui_idle.json")
    parser.add_argument("--idle-only", action="store_true", help="skip the first-frame and torch checks")
    parser.add_argument(
        "--together",
        action="store_true",
        help="run the tools at once and measure them over the same window (for a machine others share)",
    )
    parser.add_argument(
        "--tools",
        default="gpuscope,gpuscope-demo,gpuscope-8gpu,reference",
        help="comma-separated idle runs to make",
    )
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        print("tmux is required", file=sys.stderr)
        return 1
    home = Path(tempfile.mkdtemp(prefix="gpuscope-bench-"))
    env = {
        "HOME": str(home),
        "GPUSCOPE_CONFIG_DIR": str(home / "gpuscope"),
        "TERM": "xterm-256color",
        "COLORTERM": "truecolor",
        "LANG": "C.UTF-8",
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(REPO),
    }
    results: dict[str, object] = {"machine": {"cores": os.cpu_count(), "load_1m_before": os.getloadavg()[0]}}
    eight = {**env, "GPUSCOPE_FAKE_NVML": "gpus=8xh200,links=18"}
    wanted = set(args.tools.split(","))
    if wanted & {"btop", "glances"}:  # the reference monitor by its name
        wanted.add("reference")
    planned: list[Planned] = [
        ("gpuscope", f"{PYTHON} -m gpuscope", env, SIZE),
        ("gpuscope-demo", f"{PYTHON} -m gpuscope --demo", env, SIZE),
        ("gpuscope-8gpu", f"{PYTHON} -m gpuscope", eight, ("160", "48")),
    ]
    stop_fleet: Callable[[], None] = lambda: None  # noqa: E731
    if "fleet-32gpu" in wanted:
        addresses, stop_fleet = fleet_exporters(env)
        fleet = f"{PYTHON} -m gpuscope fleet --interval 2 --hosts {','.join(addresses)}"
        planned.append(("fleet-32gpu", fleet, env, ("160", "48")))
    chosen = [run for run in planned if run[0] in wanted]
    reference = reference_command(home) if "reference" in wanted else None
    if reference is not None:
        chosen.append((reference[0], reference[1], env, SIZE))
    try:
        if args.together:
            runs = idle_cpu(chosen, args.warmup, args.seconds)
        else:
            runs = [run for one in chosen for run in idle_cpu([one], args.warmup, args.seconds)]
    finally:
        stop_fleet()
    if reference is None and "reference" in wanted:
        runs.append({"tool": "reference", "error": "neither btop nor glances could be found or installed"})
    results["idle"] = runs
    by_tool = {str(run["tool"]): run for run in runs if "cpu_core_percent" in run}
    reference_run = by_tool.get(reference[0]) if reference is not None else None
    if reference_run and reference_run["cpu_core_percent"]:
        for run in by_tool.values():
            run["ratio_to_reference"] = round(
                float(run["cpu_core_percent"]) / float(reference_run["cpu_core_percent"]), 2
            )
    budgets = {"gpuscope": CPU_ONLY_BUDGET_RATIO, "gpuscope-8gpu": EIGHT_GPU_BUDGET_RATIO}
    results["budgets"] = {
        tool: {"budget_ratio": budget, "ratio": by_tool[tool].get("ratio_to_reference")}
        for tool, budget in budgets.items()
        if tool in by_tool
    }
    eight_run, fleet_run = by_tool.get("gpuscope-8gpu"), by_tool.get("fleet-32gpu")
    if eight_run and fleet_run and eight_run["cpu_core_percent"]:
        fleet_ratio = round(float(fleet_run["cpu_core_percent"]) / float(eight_run["cpu_core_percent"]), 2)
        fleet_run["ratio_to_gpuscope_8gpu"] = fleet_ratio
        results["budgets"]["fleet-32gpu"] = {  # type: ignore[index]
            "budget_ratio_to_gpuscope_8gpu": FLEET_BUDGET_RATIO,
            "ratio": fleet_ratio,
        }
    frame: dict[str, float] = {"first_frame_s_median": float("nan"), "first_sample_shown_s_median": float("nan")}
    frame["runs"] = 0
    torch_seen = False
    if not args.idle_only:
        frame, torch_seen = first_frame(env, args.repeat), torch_imported()
    results["first_frame"], results["torch_imported_without_probe"] = frame, torch_seen
    results["machine"]["load_1m_after"] = os.getloadavg()[0]  # type: ignore[index]
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    for run in runs:
        if "cpu_core_percent" in run:
            ratio = f", x{run['ratio_to_reference']} of the reference" if "ratio_to_reference" in run else ""
            print(
                f"{run['tool']:<16} {run['cpu_core_percent']:6.2f} % of one core over {run['seconds']} s "
                f"({'2' if run['tool'] == 'fleet-32gpu' else '1'} s refresh, tmux {run['size']}{ratio})"
            )
        else:
            print(f"{run['tool']:<16} {run.get('error')}")
    print(
        f"first frame {frame['first_frame_s_median']} s, "
        f"first sample on screen {frame['first_sample_shown_s_median']} s (median of {frame['runs']})"
    )
    print(f"torch imported before any probe: {torch_seen}")
    print(f"(written to {args.json})")
    ok = True
    for tool, budget in budgets.items():
        measured = by_tool.get(tool, {}).get("ratio_to_reference")
        if measured is not None:
            met = float(measured) <= budget
            print(f"{tool}: x{measured} of the reference (budget x{budget}): {'met' if met else 'NOT met'}")
            ok = ok and met
    if fleet_run and "ratio_to_gpuscope_8gpu" in fleet_run:
        measured = float(fleet_run["ratio_to_gpuscope_8gpu"])
        met = measured <= FLEET_BUDGET_RATIO
        verdict = "met" if met else "NOT met"
        print(f"fleet-32gpu: x{measured} of gpuscope-8gpu (budget x{FLEET_BUDGET_RATIO}): {verdict}")
        ok = ok and met
    ok = ok and not frame["first_frame_s_median"] > 1.5 and not torch_seen  # nan (not measured) passes
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
