"""Self-overhead of ``gpuscope log`` next to a reference monitor, measured the same way.

For each run: start the logger writing to a file, wait ``--warmup`` seconds (start-up is not
steady-state cost), read utime+stime from /proc/<pid>/stat, wait ``--seconds``, read them again
and VmHWM (peak RSS) from /proc/<pid>/status, then stop it with SIGINT. CPU is reported as a
fraction of one core over the measured window; "with start-up" counts from process start.

The reference is glances CSV export at 1 s (pin: ``glances==4.5.8``, installed in its own venv:
``python3 -m venv bench-out/glances-venv && bench-out/glances-venv/bin/pip install glances==4.5.8``).
Without glances the reference is ``python -c`` running a psutil loop at 1 s that reads the same
host counters (stated in the output).

Also times ``gpuscope --help`` against ``python -c pass`` (median of several runs).

Targets (issue 2): <= 0.5 % of a core at 1 s, <= 3 % at 0.1 s, peak RSS <= 60 MB, --help < 0.3 s.

Usage: .venv/bin/python benchmarks/bench_log_overhead.py [--seconds 30] [--glances PATH] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")

_PSUTIL_REFERENCE = r"""
import csv, sys, time, psutil
out = csv.writer(open(sys.argv[1], "w", newline=""))
next_at = time.monotonic()
while True:
    row = [
        time.time(),
        psutil.cpu_percent(),
        *psutil.cpu_percent(percpu=True),
        *psutil.virtual_memory(),
        *psutil.swap_memory(),
    ]
    for name, io in psutil.net_io_counters(pernic=True).items():
        row += [name, io.bytes_recv, io.bytes_sent]
    out.writerow(row)
    next_at += 1.0
    time.sleep(max(0.0, next_at - time.monotonic()))
"""


@dataclass
class Run:
    tool: str
    interval_s: float
    seconds: float
    cpu_core_percent: float  # steady state, % of one core
    cpu_core_percent_with_startup: float
    peak_rss_mb: float
    records: int


def _cpu_ticks(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)


def _start_time_s(pid: int) -> float:
    """Seconds since boot when ``pid`` started."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[19]) / CLK_TCK


def _uptime_s() -> float:
    return float(Path("/proc/uptime").read_text().split()[0])


def _vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _count_records(path: Path, header_lines: int) -> int:
    try:
        return max(0, path.read_bytes().count(b"\n") - header_lines)
    except OSError:
        return 0


def measure(
    tool: str, command: list[str], output: Path, interval_s: float, seconds: float, warmup_s: float, header_lines: int
) -> Run:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO)
    try:
        time.sleep(warmup_s)
        if process.poll() is not None:
            raise SystemExit(f"{tool} exited early: {process.stderr.read().decode() if process.stderr else ''}")
        ticks0, wall0 = _cpu_ticks(process.pid), time.monotonic()
        time.sleep(seconds)
        ticks1, wall1 = _cpu_ticks(process.pid), time.monotonic()
        peak_mb = _vm_hwm_mb(process.pid)
        lived_s = _uptime_s() - _start_time_s(process.pid)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    steady = (ticks1 - ticks0) / CLK_TCK / (wall1 - wall0)
    with_startup = ticks1 / CLK_TCK / max(lived_s, 1e-9)
    return Run(
        tool,
        interval_s,
        round(wall1 - wall0, 2),
        100 * steady,
        100 * with_startup,
        peak_mb,
        _count_records(output, header_lines),
    )


def _median_wall_s(command: list[str], repeats: int) -> float:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    times = []
    for _ in range(repeats + 1):
        began = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env, cwd=REPO)
        times.append(time.perf_counter() - began)
    return statistics.median(times[1:])  # the first run warms the page cache


def _find_glances(explicit: str | None) -> str | None:
    if explicit:
        return explicit
    local = REPO / "bench-out" / "glances-venv" / "bin" / "glances"
    if local.exists():
        return str(local)
    return shutil.which("glances")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="measured window per run (default 30)")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds before the window starts (default 3)")
    parser.add_argument("--glances", default=None, help="glances executable (default: bench-out/glances-venv or PATH)")
    parser.add_argument("--help-repeats", type=int, default=9)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()

    python = sys.executable
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="gpuscope-bench-") as tmp:
        tmpdir = Path(tmp)
        for interval in (1.0, 0.1):
            out = tmpdir / f"gpuscope-{interval}.jsonl"
            command = [python, "-m", "gpuscope", "log", "--interval", str(interval), "--output", str(out)]
            runs.append(measure("gpuscope log (jsonl)", command, out, interval, args.seconds, args.warmup, 0))
        out = tmpdir / "gpuscope-csv.csv"
        command = [python, "-m", "gpuscope", "log", "--interval", "1", "--format", "csv", "--output", str(out)]
        runs.append(measure("gpuscope log (csv)", command, out, 1.0, args.seconds, args.warmup, 1))

        glances = _find_glances(args.glances)
        if glances:
            first_line = subprocess.run([glances, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
            version = "glances " + first_line.split()[-1] if first_line.strip() else "glances"
            out = tmpdir / "glances.csv"
            command = [glances, "--export", "csv", "--export-csv-file", str(out), "-t", "1", "--quiet"]
            reference = measure(f"reference: {version} CSV", command, out, 1.0, args.seconds, args.warmup, 1)
        else:
            out = tmpdir / "psutil-loop.csv"
            command = [python, "-c", _PSUTIL_REFERENCE, str(out)]
            reference = measure(
                "reference: plain psutil loop (no glances)", command, out, 1.0, args.seconds, args.warmup, 0
            )
        runs.append(reference)

    help_s = _median_wall_s([python, "-m", "gpuscope", "--help"], args.help_repeats)
    pass_s = _median_wall_s([python, "-c", "pass"], args.help_repeats)

    print(
        f"gpuscope log overhead: {args.seconds:g} s windows after {args.warmup:g} s warm-up; "
        f"{os.cpu_count()} CPUs; python {sys.version.split()[0]}"
    )
    print(f"{'tool':42} {'interval':>8} {'%core':>7} {'+start':>7} {'RSS MB':>7} {'records':>8} {'vs ref':>7}")
    for run in runs:
        ratio = run.cpu_core_percent / reference.cpu_core_percent if reference.cpu_core_percent > 0 else float("nan")
        print(
            f"{run.tool:42} {run.interval_s:>7g}s {run.cpu_core_percent:>6.2f}% "
            f"{run.cpu_core_percent_with_startup:>6.2f}% "
            f"{run.peak_rss_mb:>7.1f} {run.records:>8d} {ratio:>6.2f}x"
        )
    print(
        f"gpuscope --help: {help_s * 1000:.0f} ms median wall "
        f"(python -c pass: {pass_s * 1000:.0f} ms; difference {1000 * (help_s - pass_s):.0f} ms)"
    )
    at_1 = runs[0]
    at_01 = runs[1]
    checks = {
        "<= 0.5% of a core at 1 s": at_1.cpu_core_percent <= 0.5,
        "<= 3% of a core at 0.1 s": at_01.cpu_core_percent <= 3.0,
        "peak RSS <= 60 MB": max(at_1.peak_rss_mb, at_01.peak_rss_mb) <= 60.0,
        "--help < 0.3 s": help_s < 0.3,
    }
    for name, ok in checks.items():
        print(f"  {'PASS' if ok else 'FAIL'}  {name}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"runs": [asdict(r) for r in runs], "help_s": help_s, "python_pass_s": pass_s, "checks": checks},
                indent=2,
            )
        )
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
