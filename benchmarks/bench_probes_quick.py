"""Benchmark: the quick suite on this CPU, twice: each run's wall time (target <= 60 s) and
how well the two runs agree on every ceiling (target: within 5 %, i.e. |a - b| / max(a, b) <= 0.05).

    .venv/bin/python benchmarks/bench_probes_quick.py [--device cpu] [--runs 2] [--keep FOLDER]

Two things beside each ceiling tell external variation from the probe's own:
- ``contention``: the percent of all cores other processes (and steal) took while the
  measurement behind the ceiling ran, per run (the harness records it; over 10 % the ceiling
  is not comparable, and the row is marked);
- a STREAM C reference (benchmarks/stream.c, same DRAM array size) run just after each quick
  run: how much this machine's DRAM bandwidth itself moved between the runs (a KVM guest's
  bandwidth shifts with its neighbours). Without gcc the reference is left out, with a note.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_once(device: str, output: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    start = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuscope",
            "probe",
            "--device",
            device,
            "--suite",
            "quick",
            "--output",
            str(output),
            "--quiet",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"gpuscope probe exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return elapsed


STREAM_KERNELS = ("copy", "scale", "add", "triad")
CONTENDED_PERCENT = 10.0


def build_stream(folder: Path) -> Path | None:
    """Compile benchmarks/stream.c into ``folder``; None (with a note) when that fails."""
    binary = folder / "stream"
    try:
        subprocess.run(
            [
                os.environ.get("CC", "gcc"),
                "-O3",
                "-march=native",
                "-fopenmp",
                str(ROOT / "benchmarks" / "stream.c"),
                "-o",
                str(binary),
            ],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"note: no STREAM C reference ({exc})", flush=True)
        return None
    return binary


def run_stream(binary: Path, elements: int) -> dict[str, float]:
    """Best B/s of each STREAM kernel over 10 repetitions, one thread per core."""
    threads = os.cpu_count() or 1
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_PROC_BIND="spread")
    out = subprocess.run([str(binary), str(elements), "10"], capture_output=True, text=True, check=True, env=env)
    data = json.loads(out.stdout)
    return {f"dram.{k}": data[f"{k}_bytes_per_s"] for k in STREAM_KERNELS}


def contention_by_ceiling(data: dict) -> dict[str, float | None]:
    """Host contention (percent of all cores) while each ceiling's measurement ran."""
    by_id = {m.get("id"): m for m in data.get("measurements", [])}
    return {c["name"]: by_id.get(c.get("measurement_id"), {}).get("host_contention_percent") for c in data["ceilings"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--keep", default=None, help="folder to keep the results files in")
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=60.0,
        metavar="S",
        help="before each run wait up to S seconds for an idle CPU",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _quiet import wait_for_quiet

    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="gpuscope-quick-"))
    folder.mkdir(parents=True, exist_ok=True)
    times, ceilings, contention, streams = [], [], [], []
    stream_binary = build_stream(folder) if args.device == "cpu" else None
    dram_elements = None
    for index in range(args.runs):
        output = folder / f"quick-{index + 1}.json"
        busy = wait_for_quiet(args.wait_quiet)
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"run {index + 1}: CPU {busy}% busy before it, load average {load:.2f}", flush=True)
        times.append(run_once(args.device, output))
        data = json.loads(output.read_text())
        ceilings.append({c["name"]: c["value"] for c in data["ceilings"]})
        contention.append(contention_by_ceiling(data))
        if stream_binary is not None:  # right after each run, on the DRAM arrays that run used
            if dram_elements is None:
                dram = [c for c in data["ceilings"] if c["name"] == "dram.triad" and c.get("footprint_bytes")]
                dram_elements = dram[0]["footprint_bytes"] // 3 // 8 if dram else 16 * 1024 * 1024
            streams.append(run_stream(stream_binary, dram_elements))
        print(f"run {index + 1}: {times[-1]:.1f} s, {len(ceilings[-1])} ceilings", flush=True)
    names = sorted(set.intersection(*(set(c) for c in ceilings)))
    worst = 0.0
    rows = []
    print(
        f"\n{'ceiling':<20}"
        + "".join(f"{'run ' + str(i + 1):>14}" for i in range(args.runs))
        + f"{'difference':>12}  contention % per run"
    )
    contended_over = []
    for name in names:
        values = [c[name] for c in ceilings]
        difference = (max(values) - min(values)) / max(values)
        worst = max(worst, difference)
        scale, unit = (1e9, "G") if True else (1, "")
        busy = [c.get(name) for c in contention]
        contended = any(b is not None and b > CONTENDED_PERCENT for b in busy)
        if contended and difference > 0.05:
            contended_over.append(name)
        rows.append({"name": name, "values": values, "difference": difference, "host_contention_percent": busy})
        note = ("  <-- over 5%" + (" (contended)" if contended else "")) if difference > 0.05 else ""
        print(
            f"{name:<20}"
            + "".join(f"{v / scale:>13.1f}{unit}" for v in values)
            + f"{difference * 100:>11.1f}%  "
            + " ".join("-" if b is None else f"{b:.0f}" for b in busy)
            + note
        )
    stream_rows = []
    if len(streams) >= 2:
        print("\nSTREAM C reference (same DRAM arrays, run right after each quick run): the machine's own drift")
        for kernel in sorted(streams[0]):
            values = [s_[kernel] for s_ in streams]
            difference = (max(values) - min(values)) / max(values)
            stream_rows.append({"name": kernel, "values": values, "difference": difference})
            print(f"{kernel:<20}" + "".join(f"{v / 1e9:>13.1f}G" for v in values) + f"{difference * 100:>11.1f}%")
    missing = sorted(set.union(*(set(c) for c in ceilings)) - set(names))
    time_ok = max(times) <= 60.0
    agree_ok = worst <= 0.05 and not missing
    print(f"\nwall time: {', '.join(f'{t:.1f} s' for t in times)} (target <= 60 s: {'met' if time_ok else 'NOT met'})")
    print(
        f"largest difference between runs: {worst * 100:.1f}% (target <= 5%: {'met' if agree_ok else 'NOT met'})"
        + (f"; ceilings in only some runs: {missing}" if missing else "")
    )
    if contended_over:
        print(
            f"over 5% while other processes took > {CONTENDED_PERCENT:.0f}% of the cores "
            f"(external, not comparable): {', '.join(contended_over)}"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "times_s": times,
                    "ceilings": rows,
                    "worst_difference": worst,
                    "missing": missing,
                    "contended_over_5_percent": contended_over,
                    "stream_c_reference": stream_rows,
                },
                indent=2,
            )
        )
    return 0 if time_ok and agree_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
