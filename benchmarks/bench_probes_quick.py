"""Benchmark: the quick suite on this CPU, twice: each run's wall time (target <= 60 s) and
how well the two runs agree on every ceiling (target: within 5 %, i.e. |a - b| / max(a, b) <= 0.05).

    .venv/bin/python benchmarks/bench_probes_quick.py [--device cpu] [--runs 2] [--keep FOLDER]
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
    done = subprocess.run([sys.executable, "-m", "gpuscope", "probe", "--device", device, "--suite", "quick", "--output", str(output), "--quiet"], env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"gpuscope probe exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--keep", default=None, help="folder to keep the results files in")
    parser.add_argument("--json", default=None)
    parser.add_argument("--wait-quiet", type=float, default=60.0, metavar="S", help="before each run wait up to S seconds for an idle CPU")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _quiet import wait_for_quiet

    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="gpuscope-quick-"))
    folder.mkdir(parents=True, exist_ok=True)
    times, ceilings = [], []
    for index in range(args.runs):
        output = folder / f"quick-{index + 1}.json"
        busy = wait_for_quiet(args.wait_quiet)
        print(f"run {index + 1}: CPU {busy}% busy before it", flush=True)
        times.append(run_once(args.device, output))
        data = json.loads(output.read_text())
        ceilings.append({c["name"]: c["value"] for c in data["ceilings"]})
        print(f"run {index + 1}: {times[-1]:.1f} s, {len(ceilings[-1])} ceilings", flush=True)
    names = sorted(set.intersection(*(set(c) for c in ceilings)))
    worst = 0.0
    rows = []
    print(f"\n{'ceiling':<20}" + "".join(f"{'run ' + str(i + 1):>14}" for i in range(args.runs)) + f"{'difference':>12}")
    for name in names:
        values = [c[name] for c in ceilings]
        difference = (max(values) - min(values)) / max(values)
        worst = max(worst, difference)
        scale, unit = (1e9, "G") if True else (1, "")
        rows.append({"name": name, "values": values, "difference": difference})
        print(f"{name:<20}" + "".join(f"{v / scale:>13.1f}{unit}" for v in values) + f"{difference * 100:>11.1f}%" + ("  <-- over 5%" if difference > 0.05 else ""))
    missing = sorted(set.union(*(set(c) for c in ceilings)) - set(names))
    time_ok = max(times) <= 60.0
    agree_ok = worst <= 0.05 and not missing
    print(f"\nwall time: {', '.join(f'{t:.1f} s' for t in times)} (target <= 60 s: {'met' if time_ok else 'NOT met'})")
    print(f"largest difference between runs: {worst * 100:.1f}% (target <= 5%: {'met' if agree_ok else 'NOT met'})" + (f"; ceilings in only some runs: {missing}" if missing else ""))
    if args.json:
        Path(args.json).write_text(json.dumps({"times_s": times, "ceilings": rows, "worst_difference": worst, "missing": missing}, indent=2))
    return 0 if time_ok and agree_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
