"""Benchmark: gpuscope's CPU ceilings against likwid-bench, STREAM and (rows added by others)
numpy's BLAS, interleaved in one run on the same working sets and thread counts.

Rows and targets (issue 26):
- copy, triad, read at the L1, L2, LLC and DRAM working sets: >= 0.90x likwid-bench's matching
  kernel (copy_avx512, stream_avx512_fma, load_avx512; AVX2 or SSE versions on older CPUs);
- DRAM copy and triad: >= 0.95x STREAM;
- every gpuscope kernel monotone from L1 to DRAM (no level slower than a farther one);
- more rows (GEMM vs numpy, FMA peaks vs likwid-bench peakflops) come from the functions in
  ROW_PROVIDERS: append one (``def rows(args, rounds) -> list[Row]``) to add yours.

Working sets are those of ``gpuscope probe``'s ``auto`` plan (half of each cache per core, LLC/2,
DRAM arrays at least 4x the LLC), all arrays of all threads, one thread per physical core. The
byte counts agree: gpuscope and STREAM count the arrays named in the kernel once each, and
likwid-bench counts each stream of its kernel once per element (copy 16 B, triad 24 B, load 8 B
per fp64 element); none counts write-allocate traffic. likwid-bench's ``-W N:<size>:<threads>``
size is the same "all streams, all threads" footprint (given in kB = 1000 B; likwid rounds it
down to whole loop iterations and prints the size it used, which this script reports).

STREAM: McCalpin's stream.c (https://github.com/jeffhammond/STREAM, file stream.c) is not in
this repository (its licence asks that modified results be labelled); download it yourself and
pass ``--stream-source PATH/stream.c``. It is built with ``gcc -O3 -march=native -fopenmp
-DSTREAM_ARRAY_SIZE=<elements> -DNTIMES=10`` at the DRAM array size. Without it the project's
STREAM-style reference (benchmarks/stream.c, same kernels and byte counting) is used, and the
row says so.

Timing differs in one way: likwid-bench times each thread's own loop and reports the volume over
the slowest thread's time, so two threads that ran one after the other (a busy machine hands out
one core at a time) still count as parallel; gpuscope times the team from the first start to the
last finish. On a busy machine the 2-thread likwid figures are therefore optimistic: compare on a
quiet machine, or on one thread (``--threads 1``), where the two agree.

Each round runs every cell in turn (gpuscope, then the references, order alternating between
rounds) so that a noisy neighbour hits all of them; each side keeps its best over the rounds.

    .venv/bin/python benchmarks/bench_ceilings_vs_references.py [--rounds 3] [--levels l1,l2,llc,dram]
        [--kernels copy,triad,read] [--stream-source stream.c] [--json out.json] [--wait-quiet 60]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

LEVELS = ("l1", "l2", "llc", "dram")
LIKWID_TARGET = 0.90
STREAM_TARGET = 0.95
#: gpuscope kernel -> likwid-bench kernel stem (the ISA suffix is added per CPU)
LIKWID_KERNELS = {"copy": "copy", "triad": "stream", "read": "load"}
STREAM_NAMES = {"copy": "Copy", "scale": "Scale", "add": "Add", "triad": "Triad"}


@dataclass
class Row:
    """One comparison: gpuscope's best and the reference's best (same units), their ratio."""

    what: str  # "l1 copy"
    reference: str  # "likwid-bench copy_avx512"
    gpuscope: float | None
    reference_value: float | None
    unit: str = "B/s"
    target: float | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if not self.gpuscope or not self.reference_value:
            return None
        return self.gpuscope / self.reference_value

    @property
    def verdict(self) -> str:
        ratio = self.ratio
        if ratio is None:
            return "n/a"
        if self.target is None:
            return ""
        return "PASS" if ratio >= self.target else "FAIL"


#: other helpers' rows (GEMM vs numpy, FMA vs likwid peakflops): each gets the parsed arguments
#: and the round count, and returns its rows (run interleaved by itself, best of the rounds)
ROW_PROVIDERS: list[Callable[[argparse.Namespace, int], list[Row]]] = []


def _peak_rows(args: argparse.Namespace, rounds: int) -> list[Row]:
    """GEMM fp32/fp64 vs numpy.matmul (>= 0.95), FMA peaks fp32/fp64 vs likwid-bench peakflops
    (>= 0.90), interleaved per row: benchmarks/ceilings_peaks.py (the peaks helper's rows)."""
    from ceilings_peaks import peak_rows

    return [
        Row(row["row"], row["reference_name"], row["gpuscope"], row["reference"], unit="FLOP/s",
            target=row["target"], note=f"{row['threads']} threads")
        for row in peak_rows(rounds)
    ]  # fmt: skip


ROW_PROVIDERS.append(_peak_rows)


# --- gpuscope ---------------------------------------------------------------------------------


def _caches(threads: int | None = None) -> object:
    """The probe's cache sizes; ``threads`` (``--threads``) replaces its one-per-physical-core
    team size for gpuscope and likwid-bench alike (a busy machine: compare on 1 thread)."""
    import dataclasses

    from gpuscope.probing import memory
    from gpuscope.probing.environment import parse_device

    class _Ctx:
        device = parse_device("cpu")

    caches = memory.cache_sizes(_Ctx())  # type: ignore[arg-type]
    if threads:
        caches = dataclasses.replace(caches, threads=threads)
        memory.cache_sizes = lambda ctx: caches  # the bench's team size
    return caches


def footprints(kernel: str, caches: object) -> dict[str, int]:
    """level -> working set (bytes, all arrays of all threads), as ``probe``'s auto plan makes them."""
    from gpuscope.probing.memory import plan_working_sets

    return {ws.level: ws.footprint_bytes for ws in plan_working_sets(kernel, "auto", caches) if ws.level}  # type: ignore[arg-type]


def run_gpuscope(kernel: str, footprint: int, samples: int, sample_s: float) -> tuple[float | None, str]:
    """gpuscope's probe as shipped (the fastest implementation wins): best B/s and implementation."""
    from gpuscope.probing.context import ProbeContext
    from gpuscope.probing.environment import MemoryBudget, parse_device
    from gpuscope.probing.memory import memory_probe
    from gpuscope.probing.timing import TimingPolicy

    device = parse_device("cpu")
    ctx = ProbeContext(
        device=device,
        budget=MemoryBudget(device),
        ceiling_policy=TimingPolicy(samples=samples, target_sample_s=sample_s, warmup_max_s=1.0),
        cancel=threading.Event(),
        contention_retries=0,
    )
    records: list[Any] = []
    memory_probe([kernel], [footprint], "fp64", ctx, records.append)
    ctx.close()
    record = records[0]
    if record.status != "ok":
        return None, f"{record.status}: {record.error}"
    return record.bytes_per_s, str(record.implementation)


# --- likwid-bench -----------------------------------------------------------------------------


def likwid_suffix() -> str:
    flags = ""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        pass
    return "_avx512" if "avx512f" in flags else "_avx" if " avx " in flags or "avx2" in flags else "_sse"


def likwid_kernel(kernel: str) -> str:
    stem, suffix = LIKWID_KERNELS[kernel], likwid_suffix()
    if kernel == "triad" and suffix != "_sse":
        return f"{stem}{suffix}_fma"
    return stem + suffix


#: likwid-bench runs per cell (best kept). Its own ``-s`` calibration is not used: on the
#: project's KVM guest it settled on 10 iterations (52 us at 1 MB), a burst no preemption can
#: touch, where a 0.2 s run of the same kernel gave a quarter of the rate. Instead a 10-iteration
#: run gives a rate, and the timed runs get the iterations that last ``--sample-s`` at that rate
#: (as long as gpuscope's timed samples, or longer)
LIKWID_RUNS = 5


def _likwid_once(command: list[str]) -> tuple[float | None, str, str]:
    """(B/s, size used, problem) of one likwid-bench run."""
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, "?", f"likwid-bench failed: {exc}"
    rate = re.search(r"^MByte/s:\s+([0-9.]+)", out, re.M)
    size = re.search(r"^Size \(Byte\):\s+([0-9]+)", out, re.M)
    if rate is None:
        return None, "?", out.strip().splitlines()[-1] if out.strip() else "no output"
    return float(rate.group(1)) * 1e6, size.group(1) if size else "?", ""


def run_likwid(kernel: str, footprint: int, threads: int, sample_s: float) -> tuple[float | None, str]:
    """likwid-bench's best B/s (its MByte/s, MB = 1e6 B) of :data:`LIKWID_RUNS` runs that each
    last about ``sample_s``, and the size it used."""
    binary = shutil.which("likwid-bench")
    if binary is None:
        return None, "likwid-bench not installed (Debian: apt-get install likwid)"
    command = [binary, "-t", likwid_kernel(kernel), "-W", f"N:{max(1, footprint // 1000)}kB:{threads}", "-i"]
    burst, used, problem = _likwid_once([*command, "10"])
    if burst is None:
        return None, f"likwid-bench printed no MByte/s: {problem}"
    iterations = max(10, math.ceil(sample_s * burst / footprint))
    best = None
    for _ in range(LIKWID_RUNS):
        rate, used, problem = _likwid_once([*command, str(iterations)])
        if rate is not None:
            best = max(best or 0.0, rate)
    if best is None:
        return None, f"likwid-bench printed no MByte/s: {problem}"
    return best, f"likwid size {used} B, {iterations} iterations (>= {sample_s:g} s), best of {LIKWID_RUNS}"


# --- STREAM -----------------------------------------------------------------------------------


def build_stream(source: Path | None, elements: int, folder: Path) -> tuple[Path | None, str]:
    """The STREAM binary: McCalpin's from ``source`` (array size and NTIMES set at build time),
    else the project's STREAM-style benchmarks/stream.c (array size on the command line)."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        return None, "no C compiler"
    binary = folder / "stream"
    if source is not None:
        flags = [f"-DSTREAM_ARRAY_SIZE={elements}", "-DNTIMES=10", "-mcmodel=medium"]
        label = f"STREAM ({source.name}, -O3 -march=native -fopenmp)"
    else:
        source, flags, label = ROOT / "benchmarks" / "stream.c", [], "STREAM-style benchmarks/stream.c"
    done = subprocess.run(
        [compiler, "-O3", "-march=native", "-fopenmp", *flags, str(source), "-o", str(binary)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        return None, f"building {source} failed: {done.stderr.strip()[:200]}"
    return binary, label


def run_stream(binary: Path, official: bool, elements: int, threads: int) -> dict[str, float]:
    """Best rate per kernel in B/s."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_PROC_BIND="spread")
    command = [str(binary)] if official else [str(binary), str(elements), "10"]
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=env, timeout=600).stdout
    if not official:
        data = json.loads(out)
        return {k: data[f"{k}_bytes_per_s"] for k in STREAM_NAMES if f"{k}_bytes_per_s" in data}
    rates = {}
    for kernel, name in STREAM_NAMES.items():
        found = re.search(rf"^{name}:\s+([0-9.]+)", out, re.M)
        if found:
            rates[kernel] = float(found.group(1)) * 1e6  # STREAM's MB/s, MB = 1e6 B
    return rates


# --- the run ----------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--levels", default=",".join(LEVELS))
    parser.add_argument("--kernels", default="copy,triad,read")
    parser.add_argument("--samples", type=int, default=10, help="gpuscope's timed samples per measurement")
    parser.add_argument(
        "--sample-s", type=float, default=0.02, help="length of one timed sample, both sides (default 0.02 s)"
    )
    parser.add_argument("--threads", type=int, default=None, help="threads for all (default: one per physical core)")
    parser.add_argument("--stream-source", type=Path, default=None, help="McCalpin's stream.c (see the docstring)")
    parser.add_argument("--no-likwid", action="store_true")
    parser.add_argument("--no-stream", action="store_true")
    parser.add_argument("--no-peaks", action="store_true", help="leave out the ROW_PROVIDERS rows (GEMM, FMA)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--wait-quiet", type=float, default=0.0, help="wait up to S seconds for a quiet machine")
    args = parser.parse_args()
    from _quiet import wait_for_quiet

    from gpuscope.probing.jit import jit_versions
    from gpuscope.roofline.hierarchy import out_of_order

    levels = [level for level in args.levels.split(",") if level]
    kernels = [kernel for kernel in args.kernels.split(",") if kernel]
    caches = _caches(args.threads)
    threads = caches.threads  # type: ignore[attr-defined]
    cells = [(level, kernel, footprints(kernel, caches)[level]) for kernel in kernels for level in levels]
    best: dict[tuple[str, str, str], float] = {}
    notes: dict[tuple[str, str, str], str] = {}

    def keep(key: tuple[str, str, str], value: float | None, note: str) -> None:
        notes.setdefault(key, note)
        if value is not None and value > best.get(key, 0.0):
            best[key] = value
            notes[key] = note

    stream_binary, stream_label, official = None, "", args.stream_source is not None
    dram_elements = 0
    if "dram" in levels and not args.no_stream:
        dram_footprint = footprints("triad", caches)["dram"]
        dram_elements = dram_footprint // (3 * 8)  # elements per array, as gpuscope's DRAM triad
        folder = Path(tempfile.mkdtemp(prefix="gpuscope-bench-stream-"))
        stream_binary, stream_label = build_stream(args.stream_source, dram_elements, folder)
    started = time.monotonic()
    print(f"gpuscope {jit_versions()}, {threads} threads, levels {levels}, kernels {kernels}", flush=True)
    for round_index in range(args.rounds):
        if args.wait_quiet:
            wait_for_quiet(args.wait_quiet)
        order = cells if round_index % 2 == 0 else list(reversed(cells))
        for level, kernel, footprint in order:
            sides = ["gpuscope"] + (["likwid"] if not args.no_likwid and kernel in LIKWID_KERNELS else [])
            for side in sides if round_index % 2 == 0 else reversed(sides):
                if side == "gpuscope":
                    keep((level, kernel, side), *run_gpuscope(kernel, footprint, args.samples, args.sample_s))
                else:
                    keep((level, kernel, side), *run_likwid(kernel, footprint, threads, args.sample_s))
        if stream_binary is not None:
            for kernel, rate in run_stream(stream_binary, official, dram_elements, threads).items():
                keep(("dram", kernel, "stream"), rate, stream_label)
        print(f"  round {round_index + 1}/{args.rounds} done at {time.monotonic() - started:.0f} s", flush=True)

    rows: list[Row] = []
    for kernel in kernels:
        for level in levels:
            ours = best.get((level, kernel, "gpuscope"))
            implementation = notes.get((level, kernel, "gpuscope"), "")
            if kernel in LIKWID_KERNELS and not args.no_likwid:
                rows.append(
                    Row(f"{level} {kernel}", f"likwid-bench {likwid_kernel(kernel)}", ours,
                        best.get((level, kernel, "likwid")), target=LIKWID_TARGET,
                        note=f"{implementation}; {notes.get((level, kernel, 'likwid'), '')}")
                )  # fmt: skip
            if level == "dram" and kernel in STREAM_NAMES and stream_binary is not None:
                rows.append(
                    Row(f"dram {kernel}", stream_label, ours, best.get(("dram", kernel, "stream")),
                        target=STREAM_TARGET if kernel in ("copy", "triad") else None, note=implementation)
                )  # fmt: skip
    for provider in [] if args.no_peaks else ROW_PROVIDERS:
        rows.extend(provider(args, args.rounds))

    monotone: dict[str, str] = {}
    for kernel in kernels:
        rates = {level: best.get((level, kernel, "gpuscope")) for level in levels}
        flags = out_of_order(rates, kernel)
        monotone[kernel] = "monotone" if not flags else "; ".join(flags.values())

    print()
    head = f"{'what':<14} {'gpuscope':>10} {'reference':>10} {'unit':<8} {'ratio':>6} {'target':>6}"
    print(f"{head}  verdict  reference / note")
    for row in rows:
        scale = 1e9
        mine = f"{row.gpuscope / scale:.1f}" if row.gpuscope else "-"
        theirs = f"{row.reference_value / scale:.1f}" if row.reference_value else "-"
        ratio = f"{row.ratio:.2f}" if row.ratio is not None else "-"
        target = f"{row.target:.2f}" if row.target is not None else ""
        numbers = f"{row.what:<14} {mine:>10} {theirs:>10} {'G' + row.unit:<8} {ratio:>6} {target:>6}  {row.verdict:<7}"
        print(f"{numbers}  {row.reference}; {row.note}")
    for kernel, text in monotone.items():
        print(f"hierarchy {kernel}: {text}")
    print(f"total {time.monotonic() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "rows": [asdict(row) | {"ratio": row.ratio, "verdict": row.verdict} for row in rows],
                    "monotone": monotone,
                    "threads": threads,
                    "rounds": args.rounds,
                    "jit": jit_versions(),
                },
                indent=2,
            )
        )
    failed = any(row.verdict == "FAIL" for row in rows) or any(text != "monotone" for text in monotone.values())
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
