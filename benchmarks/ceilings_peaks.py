"""The FLOP rows of bench_ceilings_vs_references.py: gpuscope's GEMM ceilings against numpy's
matmul, and its FMA peaks against likwid-bench's ``peakflops`` kernels, interleaved in one run on
the same sizes and thread counts; each ratio printed (targets: GEMM >= 0.95, FMA >= 0.90).

- GEMM: gpuscope's ceiling search (:func:`gpuscope.probing.matmul.matmul_ceiling`, torch and numpy
  BLAS, the faster wins) on square 1024 and 2048 against numpy.matmul alone on the same shapes, best
  of 5 calls each, numpy's BLAS threads as they are (one per core by default).
- FMA: :func:`gpuscope.probing.peaks.fma_peak` (one thread per physical core) against
  ``likwid-bench -t peakflops_[sp_]<isa>_fma -W N:<KiB>kB:<threads>`` (the widest FMA kernel
  ``likwid-bench -a`` lists), an L1-resident working set split over the same threads. likwid
  counts 2 FLOP per FMA as gpuscope does; its kernels also load one operand per update.

    .venv/bin/python benchmarks/ceilings_peaks.py [--rounds 2] [--json out.json]

``peak_rows(rounds)`` returns the rows for bench_ceilings_vs_references.py.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

GEMM_TARGET = 0.95
FMA_TARGET = 0.90
GEMM_SIZES = (1024, 2048)
_LIKWID = {"fp64": "peakflops{isa}_fma", "fp32": "peakflops_sp{isa}_fma"}


def _context() -> Any:
    from gpuscope.probing.context import ProbeContext
    from gpuscope.probing.environment import DeviceSpec, MemoryBudget
    from gpuscope.probing.timing import TimingPolicy

    device = DeviceSpec("cpu", "cpu")
    policy = TimingPolicy(samples=5, target_sample_s=0.02, warmup_max_s=0.5)
    return ProbeContext(device=device, budget=MemoryBudget(device), ceiling_policy=policy, max_call_s=2.0,
                        contention_retries=0)  # fmt: skip


def numpy_gemm(dtype: str) -> float:
    """numpy.matmul's best FLOP/s over :data:`GEMM_SIZES`, best of 5 calls each."""
    import numpy as np

    best = 0.0
    for n in GEMM_SIZES:
        np_dtype = np.float32 if dtype == "fp32" else np.float64
        a = np.random.default_rng(0).random((n, n), dtype=np_dtype) + 0.5
        b = np.random.default_rng(1).random((n, n), dtype=np_dtype) + 0.5
        c = np.empty_like(a)
        np.matmul(a, b, out=c)
        for _ in range(5):
            started = time.perf_counter()
            np.matmul(a, b, out=c)
            best = max(best, 2 * n**3 / (time.perf_counter() - started))
    return best


def gpuscope_gemm(dtype: str) -> float:
    from gpuscope.probing.matmul import matmul_ceiling
    from gpuscope.schema.suites import MatmulShape

    shapes = [MatmulShape(n, n, n) for n in GEMM_SIZES]
    best = matmul_ceiling(dtype, shapes, ["torch", "numpy"], _context(), lambda m: None)
    return float(best.flop_per_s or 0.0) if best is not None else 0.0


def gpuscope_fma(dtype: str) -> float:
    from gpuscope.probing.peaks import fma_peak

    measurement = fma_peak(dtype, _context(), lambda m: None)
    return float(measurement.flop_per_s or 0.0) if measurement.status == "ok" else 0.0


def likwid_kernel(dtype: str) -> str | None:
    """The widest FMA ``peakflops`` kernel this likwid-bench has, or None."""
    if shutil.which("likwid-bench") is None:
        return None
    listing = subprocess.run(["likwid-bench", "-a"], capture_output=True, text=True, timeout=30).stdout
    names = {line.split(" - ")[0].strip() for line in listing.splitlines() if " - " in line}
    for isa in ("_avx512", "_avx", ""):
        name = _LIKWID[dtype].format(isa=isa)
        if name in names:
            return name
    return None


def likwid_fma(kernel: str, threads: int, kib_per_thread: int = 16) -> float:
    """likwid-bench's FLOP/s (MFlops/s x 1e6) for ``kernel`` over ``threads`` threads."""
    out = subprocess.run(
        ["likwid-bench", "-t", kernel, "-W", f"N:{kib_per_thread * threads}kB:{threads}"],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    match = re.search(r"MFlops/s:\s*([\d.]+)", out)
    return float(match.group(1)) * 1e6 if match else 0.0


def peak_rows(rounds: int = 2) -> list[dict[str, Any]]:
    """One row per (kind, dtype): gpuscope's best, the reference's best, the ratio and the target."""
    from _quiet import wait_for_quiet

    from gpuscope.probing.peaks import peak_threads

    threads = peak_threads()
    rows: list[dict[str, Any]] = []
    for dtype in ("fp32", "fp64"):
        ours = ref = 0.0
        for _ in range(rounds):  # interleaved: the same load on both
            wait_for_quiet(5.0)
            ref = max(ref, numpy_gemm(dtype))
            ours = max(ours, gpuscope_gemm(dtype))
        rows.append({"row": f"GEMM {dtype}", "gpuscope": ours, "reference": ref, "reference_name": "numpy.matmul",
                     "ratio": ours / ref if ref else None, "target": GEMM_TARGET, "threads": threads})  # fmt: skip
        kernel = likwid_kernel(dtype)
        ours = ref = 0.0
        for _ in range(rounds):
            wait_for_quiet(5.0)
            if kernel is not None:
                ref = max(ref, likwid_fma(kernel, threads))
            ours = max(ours, gpuscope_fma(dtype))
        rows.append({"row": f"FMA peak {dtype}", "gpuscope": ours, "reference": ref or None,
                     "reference_name": kernel or "likwid-bench not installed", "ratio": ours / ref if ref else None,
                     "target": FMA_TARGET, "threads": threads})  # fmt: skip
    return rows


def format_rows(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'row':<16}{'gpuscope':>16}{'reference':>16}  {'ratio':>6}  target  reference"]
    for row in rows:
        ratio = f"{row['ratio']:.2f}" if row["ratio"] is not None else "-"
        ref = f"{row['reference'] / 1e9:,.1f} GFLOP/s" if row["reference"] else "-"
        verdict = "" if row["ratio"] is None else ("ok" if row["ratio"] >= row["target"] else "BELOW")
        lines.append(
            f"{row['row']:<16}{row['gpuscope'] / 1e9:>10,.1f} GFLOP/s{ref:>16}  {ratio:>6}  "
            f">={row['target']:.2f} {verdict:<5} {row['reference_name']} ({row['threads']} threads)"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = peak_rows(args.rounds)
    print(format_rows(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
