"""Load: 8 fake H200 GPUs with 18 NVLink links each, sampled every 0.1 s for 10 minutes.

Does memory or the cost of one sample grow over a long run? Two modes:

- ``--mode log`` (default): the real ``gpuscope log --interval 0.1`` in a subprocess, its GPUs
  from the test-only ``GPUSCOPE_FAKE_NVML`` hook (gpuscope/testing/scenarios.py), writing JSON
  lines to a temporary file. RSS and CPU time are read from /proc every ``--poll`` seconds;
  per-sample collection time is each record's own ``sample_cost_s``; the tick spacing comes
  from the record timestamps.
- ``--mode inprocess``: the same collector and :class:`Sampler` in this process, with a
  600-sample history ring buffer (as the TUI keeps) and ``tracemalloc`` (slower: it traces
  every allocation), reporting traced Python memory as well as RSS.

The report compares the first and the last minute (after ``--warmup`` seconds) and fits a line
through every sample: a slope of ~0 MB/min and ~0 ms/min is "no growth".

Usage: .venv/bin/python benchmarks/bench_load_8gpu.py [--duration 600] [--mode log|inprocess]
       [--gpus 8] [--interval 0.1] [--json bench-out/load_8gpu.json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def _slope_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, per minute."""
    if len(points) < 2:
        return 0.0
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx * 60.0


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as handle:
        return int(handle.read().split()[1]) * PAGE_BYTES / 1e6


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def _window(values: list[tuple[float, float]], start: float, end: float) -> list[float]:
    return [v for t, v in values if start <= t < end]


def _summary(name: str, values: list[tuple[float, float]], warmup_s: float, scale: float = 1.0) -> dict[str, Any]:
    """First minute vs last minute (after warm-up) and the slope over the whole run."""
    if not values:
        return {"name": name}
    steady = [(t, v * scale) for t, v in values if t >= warmup_s]
    if not steady:
        steady = [(t, v * scale) for t, v in values]
    t0, t1 = steady[0][0], steady[-1][0]
    span = min(60.0, max(1.0, (t1 - t0) / 3))
    first = _window(steady, t0, t0 + span)
    last = _window(steady, t1 - span, t1 + 1e-9)
    return {
        "name": name,
        "first_mean": statistics.fmean(first) if first else None,
        "last_mean": statistics.fmean(last) if last else None,
        "first_p95": sorted(first)[int(0.95 * (len(first) - 1))] if first else None,
        "last_p95": sorted(last)[int(0.95 * (len(last) - 1))] if last else None,
        "max": max(v for _, v in steady),
        "slope_per_min": _slope_per_min(steady),
        "window_s": span,
    }


def _scenario(gpus: int) -> str:
    return f"gpus={gpus}xh200,links=18,busy=1"


def run_log_mode(args: argparse.Namespace) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="gpuscope-load-"))
    output = folder / "load.jsonl"
    env = {**os.environ, "GPUSCOPE_FAKE_NVML": _scenario(args.gpus), "PYTHONPATH": str(REPO)}
    command = [
        sys.executable,
        "-m",
        "gpuscope",
        "log",
        "--interval",
        str(args.interval),
        "--duration",
        str(args.duration),
        "--output",
        str(output),
    ]
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, cwd=folder, stderr=subprocess.PIPE, text=True)
    rss: list[tuple[float, float]] = []
    cpu: list[tuple[float, float]] = []
    previous_cpu = None
    try:
        while process.poll() is None:
            time.sleep(args.poll)
            now = time.monotonic() - started
            try:
                reading, total = _rss_mb(process.pid), _cpu_s(process.pid)
            except (FileNotFoundError, ProcessLookupError, IndexError):
                break
            if process.poll() is not None:
                break  # exiting: not a steady-state reading
            rss.append((now, reading))
            if previous_cpu is not None:
                cpu.append((now, (total - previous_cpu[1]) / (now - previous_cpu[0]) * 100.0))
            previous_cpu = (now, total)
    except KeyboardInterrupt:
        process.send_signal(signal.SIGINT)
    process.wait()
    stderr = process.stderr.read() if process.stderr else ""
    costs: list[tuple[float, float]] = []
    gaps: list[float] = []
    records = 0
    first_ts = previous_ts = None
    with open(output, "rb") as handle:
        for line in handle:
            record = json.loads(line)
            records += 1
            ts = record["timestamp"]
            if first_ts is None:
                first_ts = ts
            if previous_ts is not None:
                gaps.append(ts - previous_ts)
            previous_ts = ts
            costs.append((ts - first_ts, record["sample_cost_s"]))
            if records == 1:
                gpus = record["gpus"]
                links = len(gpus[0]["nvlink_links"]) if gpus else 0
    size_mb = output.stat().st_size / 1e6
    if not args.keep:
        output.unlink()
        folder.rmdir()
    return {
        "mode": "log",
        "command": " ".join(command[1:]),
        "exit_code": process.returncode,
        "stderr": stderr.strip().splitlines()[-3:],
        "records": records,
        "expected_records": int(args.duration / args.interval),
        "gpus": args.gpus,
        "links_per_gpu": links if records else None,
        "log_mb": round(size_mb, 1),
        "tick_spacing_s": {"mean": statistics.fmean(gaps) if gaps else None, "max": max(gaps) if gaps else None},
        "rss_mb": _summary("RSS (MB)", rss, args.warmup),
        "sample_ms": _summary("collection per sample (ms)", costs, args.warmup, scale=1e3),
        "cpu_percent_of_core": _summary("CPU (% of one core)", cpu, args.warmup),
    }


def run_inprocess_mode(args: argparse.Namespace) -> dict[str, Any]:
    import tracemalloc

    os.environ["GPUSCOPE_FAKE_NVML"] = _scenario(args.gpus)
    sys.path.insert(0, str(REPO))
    from gpuscope.telemetry.collector import TelemetryCollector
    from gpuscope.telemetry.logfile import open_log_writer
    from gpuscope.telemetry.sampler import Sampler

    tracemalloc.start()
    collector = TelemetryCollector()
    collector.open()
    writer = open_log_writer(os.devnull, "jsonl")
    costs: list[tuple[float, float]] = []
    traced: list[tuple[float, float]] = []
    rss: list[tuple[float, float]] = []
    started = time.monotonic()
    last_poll = [started]

    def on_sample(sample: Any) -> None:
        begin = time.perf_counter()
        writer.write(sample)
        now = time.monotonic()
        costs.append((now - started, sample.sample_cost_s + time.perf_counter() - begin))
        if now - last_poll[0] >= args.poll:
            last_poll[0] = now
            traced.append((now - started, tracemalloc.get_traced_memory()[0] / 1e6))
            rss.append((now - started, _rss_mb(os.getpid())))

    sampler = Sampler(collector.sample, args.interval, on_sample=on_sample, history=600, duration_s=args.duration)
    try:
        sampler.run()
    except KeyboardInterrupt:
        pass
    collector.close()
    writer.close()
    return {
        "mode": "inprocess (tracemalloc on; 600-sample history)",
        "records": sampler.samples_taken,
        "expected_records": int(args.duration / args.interval),
        "ticks_skipped": sampler.ticks_skipped,
        "gpus": args.gpus,
        "rss_mb": _summary("RSS (MB)", rss, args.warmup),
        "traced_mb": _summary("tracemalloc current (MB)", traced, args.warmup),
        "sample_ms": _summary("collect + write per sample (ms)", costs, args.warmup, scale=1e3),
    }


def _row(summary: dict[str, Any]) -> str:
    def f(value: Any) -> str:
        return "-" if value is None else f"{value:.3g}"

    return (
        f"| {summary['name']} | {f(summary.get('first_mean'))} | {f(summary.get('last_mean'))} | "
        f"{f(summary.get('first_p95'))} | {f(summary.get('last_p95'))} | {f(summary.get('slope_per_min'))} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds (default 600)")
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between samples (default 0.1)")
    parser.add_argument("--gpus", type=int, default=8, help="fake H200 GPUs (default 8)")
    parser.add_argument("--mode", choices=("log", "inprocess"), default="log")
    parser.add_argument("--poll", type=float, default=5.0, help="seconds between RSS/CPU readings (default 5)")
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds left out of the first window (default 20)")
    parser.add_argument("--keep", action="store_true", help="keep the log file (log mode)")
    parser.add_argument("--json", type=Path, default=None, help="also write the result as JSON here")
    args = parser.parse_args()
    result = run_log_mode(args) if args.mode == "log" else run_inprocess_mode(args)
    result["duration_s"] = args.duration
    result["interval_s"] = args.interval
    result["machine"] = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    print(
        f"{result['mode']}: {result['gpus']} GPUs, "
        f"{result['records']} records of {result['expected_records']} expected, "
        f"{args.duration:g} s at {args.interval:g} s"
    )
    print("| quantity | first window | last window | first p95 | last p95 | slope per minute |")
    print("|---|---|---|---|---|---|")
    for key in ("rss_mb", "traced_mb", "sample_ms", "cpu_percent_of_core"):
        if key in result:
            print(_row(result[key]))
    if "tick_spacing_s" in result:
        print(
            f"tick spacing: mean {result['tick_spacing_s']['mean']:.4f} s, max {result['tick_spacing_s']['max']:.3f} s"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result.get("exit_code", 0) == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
