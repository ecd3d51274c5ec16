"""How ``roofline``, ``report`` and ``compare`` scale with the devices of a results file (issue 24,
"cost that grows faster than the work").

Builds two multi-node burn-in files per size, as ``gpuscope probe --distributed`` writes them
(8 H100s per node, one rank each): every rank's measurements (matmul bf16/fp16/fp32/fp64, STREAM
triad and copy on DRAM and triad on L2, pinned host<->device copies, two GEMM workloads) turned
into ceilings and workloads by the probe runner's own ``derive_ceilings``/``derive_workloads``,
merged by the real ``merge_rank_results`` (stragglers flagged: about 1% of ranks are 25% slow on
one roof) with the collective roofs of ``collective_records``, and checked by the real reader
(``read_results_file``). The second file of a size is the same fleet measured again (other noise,
other stragglers): what ``compare`` is given. Measurement records are kept lean (no timing,
version or telemetry detail): with them a 5,000-device file is about 160 MB (the reader takes up
to 256 MiB), and the lean files keep the benchmark's own build short.

Each command runs as its own process (``python -m gpuscope ...``, output to a scratch file); its
cost is the CPU time of that process (user + system, from ``wait4``: the machine is shared; wall
time in brackets), start-up included. Printed: time(large) / time(small) per command against the
linear ratio; the exit status is 1 when a ratio is over 6.

Usage: .venv/bin/python benchmarks/bench_scale_devices.py [--sizes 1000 5000] [--json out.json]
       [--commands roofline report-html ...] [--keep DIR] [--tree OTHER_CHECKOUT]
  --keep DIR reuses the files already built there (building the four takes about 30 s);
  --tree runs another source tree's gpuscope (``git archive <commit> gpuscope | tar -x -C DIR``).
  The whole run takes about 2 minutes of CPU.

Measured on the project's shared 2-core machine, load average 3-8 (CPU seconds):

  command         before: 1,000 / 5,000 devices        after: 1,000 / 5,000   ratio
  roofline           16.2 / -                                 1.03 / 3.28      3.18
  roofline --json     6.9 / 153.6   (ratio 22)                1.51 / 7.39      4.88
  report html        32.6 / -                                 3.43 / 11.1      3.24
  report json        12.7 / >100 (stopped, ratio > 7.9)       2.12 / 9.69      4.56
  report md          13.5 / -                                 3.07 / 13.5      4.40
  compare (2 files)  34.8 / >70 (stopped after 400 s wall)    1.59 / 6.73      4.24
  compare --json     34.2 / -                                 1.84 / 9.15      4.98
  compare (1 file)      - / -                                 1.14 / 5.59      4.91

  "before" is the code of commit 9b8b6a4 on the same files (user CPU seconds, each 5,000-device
  command measured once); the issue measured 9.6 s / over 120 s (roofline), 15 s / over 120 s
  (report) and 3 s / 71 s (compare) on its own files.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

GPUS_PER_NODE = 8
GPU_NAME = "NVIDIA H100 80GB HBM3"
#: time(large) / time(small) at most this for every command (linear: large / small = 5).
TARGET_RATIO = 6.0
#: Fraction of ranks given one slow roof (a straggler) in a generated file.
STRAGGLER_SHARE = 0.01

#: (dtype, best FLOP/s, GEMM edge): the matmul ceilings a rank measures.
_MATMUL = (("bf16", 780e12, 8192), ("fp16", 760e12, 8192), ("fp32", 51e12, 4096), ("fp64", 52e12, 4096))
#: (level, kernel, B/s, footprint bytes): the STREAM ceilings.
_MEMORY = (("dram", "triad", 3.0e12, 3 << 30), ("dram", "copy", 2.9e12, 2 << 30), ("l2", "triad", 9.5e12, 24 << 20))
#: (ceiling name, B/s): host<->device and device<->device copies.
_TRANSFER = (("h2d.pinned", 53e9), ("d2h.pinned", 55e9))
#: (workload name, dtype, M, N, K): the roofline points of every rank.
_WORKLOADS = (("gemm 8192 bf16", "bf16", 8192, 8192, 8192), ("mlp up fp32", "fp32", 4096, 16384, 4096))


def _measurement(number: int, device: str, kind: str, name: str, flops: float, nbytes: float, rate: float,
                 rng: random.Random, **extra: Any) -> dict[str, Any]:  # fmt: skip
    """One ok measurement timed at ``rate`` (FLOP/s, or B/s when ``flops`` is 0), as the runner records
    it less its detail (timing, versions, telemetry): a 5,000-device file must fit the reader's limit."""
    time_s = (flops or nbytes) / rate
    samples = [time_s, time_s * (1.0 + 0.01 * rng.random()), time_s * (1.0 + 0.02 * rng.random())]
    return {
        "id": f"m{number:04d}", "kind": kind, "name": name, "device": device, "status": "ok",
        "flops": flops, "bytes": nbytes, "statistic": "best", "samples_s": samples, "n": len(samples),
        "time_s": time_s, "time_median_s": sorted(samples)[1], "flop_per_s": flops / time_s,
        "bytes_per_s": nbytes / time_s, **extra,
    }  # fmt: skip


def _rank_results(rank: int, host: str, local_rank: int, rng: random.Random, slow: str | None) -> dict[str, Any]:
    """One rank's own results document (one GPU); ``slow``: the ceiling name measured 25% low."""
    import msgspec

    from gpuscope.probing.derive import derive_ceilings, derive_workloads
    from gpuscope.schema.results import Measurement

    device = f"cuda:{local_rank}"

    def rate(name: str, value: float) -> float:
        return value * (0.75 if name == slow else 1.0) * (1.0 + 0.03 * (rng.random() - 0.5))

    records: list[dict[str, Any]] = []
    for dtype, flop_per_s, edge in _MATMUL:
        size = 2 if dtype in ("bf16", "fp16") else (1 if dtype == "fp8" else 4 if dtype != "fp64" else 8)
        name = f"matmul {dtype} {edge}x{edge}x{edge}"
        records.append(_measurement(
            len(records) + 1, device, "matmul", name, 2.0 * edge**3, 3.0 * edge * edge * size,
            rate(dtype, flop_per_s), rng, parameters={"role": "ceiling", "dtype": dtype, "m": edge, "n": edge,
            "k": edge}, library="torch", implementation="cuBLAS",
        ))  # fmt: skip
    for level, kernel, bytes_per_s, footprint in _MEMORY:
        name = f"{level}.{kernel}"
        records.append(_measurement(
            len(records) + 1, device, "memory", f"memory {kernel} {footprint} B ({level})", 0.0, float(footprint),
            rate(name, bytes_per_s), rng, level=level, implementation="torch elementwise",
            parameters={"kernel": kernel, "dtype": "fp32", "footprint_bytes": footprint, "level": level},
        ))  # fmt: skip
    for name, bytes_per_s in _TRANSFER:
        records.append(_measurement(
            len(records) + 1, device, "transfer", f"{name} 256 MiB", 0.0, float(1 << 28), rate(name, bytes_per_s),
            rng, ceiling_name=name, parameters={"size_bytes": 1 << 28},
        ))  # fmt: skip
    for workload, dtype, m, n, k in _WORKLOADS:
        size = 2 if dtype == "bf16" else 4
        record = _measurement(
            len(records) + 1, device, "matmul", f"matmul {dtype} {m}x{n}x{k}", 2.0 * m * n * k,
            float(size * (m * k + k * n + m * n)), rate(workload, 600e12 if dtype == "bf16" else 45e12), rng,
            parameters={"role": "workload", "dtype": dtype, "m": m, "n": n, "k": k}, workload_name=workload,
            counting_rule={"bytes": "distinct tensors"},
        )  # fmt: skip
        records.append(record)
    typed = msgspec.convert(records, list[Measurement])
    return {
        "schema": "gpuscope.results", "schema_version": 1, "gpuscope_version": "0.1.0", "created": 1_700_000_100.0,
        "system": {"hostname": host, "cpu_model": "Intel Xeon Platinum 8480+", "driver": "570.86.15",
                   "torch": "2.13.0+cu128", "cuda": "12.8", "logical_cores": 224, "physical_cores": 112},
        "devices": [{"device": device, "type": "gpu", "name": GPU_NAME, "memory_total_bytes": 85520809984,
                     "uuid": f"GPU-{rank:08x}-{rng.getrandbits(32):08x}", "multiprocessors": 132,
                     "compute_capability": "9.0", "l2_cache_bytes": 52428800}],
        "measurements": records,
        "ceilings": msgspec.to_builtins(derive_ceilings(typed)),
        "workloads": msgspec.to_builtins(derive_workloads(typed)),
        "warnings": [],
        "duration_s": 180.0,
    }  # fmt: skip


def burn_in_results(devices: int, seed: int) -> dict[str, Any]:
    """The merged results of a ``devices``-GPU burn-in (``devices / 8`` nodes), stragglers flagged."""
    from gpuscope.probing.cluster import RankReport, collective_records, merge_rank_results
    from gpuscope.probing.collective import CollectiveTiming, group_sizes
    from gpuscope.results import to_results
    from gpuscope.schema.core import encode_json
    from gpuscope.schema.results import SuiteRef
    from gpuscope.schema.suites import OPS

    rng = random.Random(seed)
    slow_names = [dtype for dtype, *_ in _MATMUL[:2]] + ["dram.triad", "h2d.pinned"]
    reports = []
    for rank in range(devices):
        host, local_rank = f"node-{rank // GPUS_PER_NODE:04d}", rank % GPUS_PER_NODE
        slow = rng.choice(slow_names) if rng.random() < STRAGGLER_SHARE else None
        reports.append(RankReport(
            rank=rank, host=host, status="ok",
            results=to_results(_rank_results(rank, host, local_rank, rng, slow), f"rank {rank}"),
            local_rank=local_rank, device=f"cuda:{local_rank}",
        ))  # fmt: skip
    hosts = {report.rank: report.host for report in reports}
    items = [
        CollectiveTiming(op=op, size_bytes=size, group_size=n, ranks=list(range(n)), iters=20, validation_error=0.0,
                         samples_s=[size / 4e11 * (1 + 0.1 * n.bit_length()) * (1 + 0.01 * i) for i in range(5)])
        for op in OPS for n in group_sizes(devices)
        for size in (1 << 20, 1 << 28)
    ]  # fmt: skip
    measurements, ceilings = collective_records(
        items, device="cuda:0", host=hosts[0], hosts_by_rank=hosts, backend="nccl"
    )
    merged = merge_rank_results(
        reports, world_size=devices, suite=SuiteRef(name="burn-in"), backend="nccl",
        collective_measurements=measurements, collective_ceilings=ceilings,
    )  # fmt: skip
    merged.created = 1_700_000_200.0 + seed
    plain: dict[str, Any] = json.loads(encode_json(merged))  # as the file holds it
    return plain


def write_burn_in(path: Path, devices: int, seed: int) -> int:
    """Write a burn-in file, check it with the real reader; returns its size in bytes."""
    from gpuscope.results import read_results_file

    path.write_text(json.dumps(burn_in_results(devices, seed)), encoding="utf-8")
    results, raw = read_results_file(path)
    if len(results.devices) != devices:
        raise SystemExit(f"{path}: the reader found {len(results.devices)} devices, expected {devices}")
    return len(raw)


#: name -> the arguments after ``gpuscope`` ({a}, {b}: the two files of a size; {out}: a scratch folder).
COMMANDS: dict[str, list[str]] = {
    "roofline": ["roofline", "--probes", "{a}", "--width", "120", "--height", "40", "--no-color"],
    "roofline-json": ["roofline", "--probes", "{a}", "--json"],
    "report-html": ["report", "--probes", "{a}", "-o", "{out}/report.html", "--force"],
    "report-json": ["report", "--probes", "{a}", "-o", "{out}/report.json", "--force"],
    "report-md": ["report", "--probes", "{a}", "-o", "{out}/report.md", "--force"],
    "compare": ["compare", "{a}", "{b}"],
    "compare-json": ["compare", "{a}", "{b}", "--format", "json"],
    "compare-ranks": ["compare", "{a}"],
}


def run_command(args: list[str], timeout_s: float, tree: Path) -> tuple[float, float]:
    """Run ``python -m gpuscope *args`` from the source tree ``tree``; returns (CPU seconds of the
    process, user + system, and wall seconds). Its output goes to a scratch file."""
    env = {**os.environ, "COLUMNS": "120", "LINES": "50", "NO_COLOR": "1", "PYTHONPATH": str(tree)}
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        start = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "gpuscope", *args], stdout=stdout, stderr=stderr, env=env)
        deadline = start + timeout_s
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                process.kill()
                os.wait4(process.pid, 0)
                raise SystemExit(f"gpuscope {' '.join(args)}: over {timeout_s:g} s, stopped")
            time.sleep(0.02)
        wall_s = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            stderr.seek(0)
            error = stderr.read().decode(errors="replace").strip()[-400:]
            raise SystemExit(f"gpuscope {' '.join(args)}: exit {process.returncode}: {error}")
        return usage.ru_utime + usage.ru_stime, wall_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[1000, 5000], metavar=("SMALL", "LARGE"))
    parser.add_argument("--commands", nargs="+", choices=sorted(COMMANDS), default=list(COMMANDS))
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per command before it is stopped")
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    parser.add_argument("--keep", type=Path, help="build the files in this folder, or reuse the ones there")
    parser.add_argument(
        "--tree", type=Path, default=REPO, help="run gpuscope from this source tree (e.g. an older commit's)"
    )
    args = parser.parse_args(argv)
    small, large = args.sizes
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="gpuscope-scale-") as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        files: dict[int, tuple[Path, Path]] = {}
        for devices in (small, large):
            pair = (folder / f"burn-in-{devices}-a.json", folder / f"burn-in-{devices}-b.json")
            for seed, path in enumerate(pair):
                if not path.exists():
                    start = time.perf_counter()
                    size = write_burn_in(path, devices, seed)
                    print(f"built {path.name}: {devices} devices, {size / 1e6:.1f} MB "
                          f"({time.perf_counter() - start:.1f} s)", flush=True)  # fmt: skip
            files[devices] = pair
        rows: list[dict[str, Any]] = []
        print(f"gpuscope from {args.tree}; CPU seconds per process (wall in brackets)")
        print(f"{'command':<14} {f'{small} devices':>16} {f'{large} devices':>16}  ratio (linear {large / small:g})")
        for name in args.commands:
            times: dict[int, tuple[float, float]] = {}
            for devices in (small, large):
                a, b = files[devices]
                command = [part.format(a=a, b=b, out=scratch) for part in COMMANDS[name]]
                times[devices] = run_command(command, args.timeout, args.tree)
            ratio = times[large][0] / times[small][0]
            cells = [f"{times[d][0]:.2f} ({times[d][1]:.1f})" for d in (small, large)]
            verdict = "" if ratio <= TARGET_RATIO else f"  over {TARGET_RATIO:g}"
            print(f"{name:<14} {cells[0]:>16} {cells[1]:>16}  {ratio:5.2f}{verdict}", flush=True)
            rows.append({
                "command": name, "argv": COMMANDS[name], "cpu_s": {str(d): times[d][0] for d in times},
                "wall_s": {str(d): times[d][1] for d in times}, "ratio": ratio,
            })  # fmt: skip
    report = {
        "tree": str(args.tree), "sizes": [small, large], "linear_ratio": large / small, "target_ratio": TARGET_RATIO,
        "load_average": [load_before, os.getloadavg()[0]], "commands": rows,
    }  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0 if all(row["ratio"] <= TARGET_RATIO for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
