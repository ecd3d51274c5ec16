"""Instruction counts of one telemetry sample: gpuscope's own code, the fake NVML's apart.

The idle cost that matters is the product's, not the fake NVML's (Python standing in for the
driver). This counts instructions with ``valgrind --tool=callgrind`` (deterministic on a shared,
noisy machine) in three runs of one process layout, and subtracts:

- ``base``: 8 fake H200 x 18 NVLink links (``GPUSCOPE_FAKE_NVML``'s busy scenario, a manual
  clock), collector A opened with every C call recorded and ``--samples`` samples recorded,
  then collector B opened on the fake directly, as the TUI opens it (NVLink totals only, process
  lists in the background) and warmed up;
- ``product``: base, then ``--samples`` samples of B, one fake second apart;
- ``fake``: base, then the C calls A made in its samples replayed on the fake (the fake's share).

gpuscope's cost a sample = (product - base - (fake - base)) / samples. ``--host`` does the same
for the host collector alone (no fake involved: (host - base) / samples). ``--native`` runs the
loops without valgrind and prints the thread CPU time a sample, to turn instructions into time.

Usage: .venv/bin/python benchmarks/bench_telemetry_cost.py [--samples 20] [--gpus 8]
       [--python .venv/bin/python] [--pythonpath DIR]   (DIR: another checkout to compare)
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _stage(stage: str, samples: int, gpus: int) -> float:
    """Run one layout in this process; returns the thread CPU seconds of the last stage."""
    import pynvml

    from gpuscope.telemetry.host import HostCollector
    from gpuscope.telemetry.nvml.collector import NvmlCollector
    from gpuscope.testing.fake_nvml import FakeClock, install_fake_nvml
    from gpuscope.testing.scenarios import build_fake, parse_scenario

    if stage in ("host-base", "host"):
        host = HostCollector()
        host.sample()
        started = time.thread_time()
        for _ in range(samples if stage == "host" else 0):
            host.sample()
        return time.thread_time() - started

    clock = FakeClock()
    fake = build_fake(parse_scenario(f"gpus={gpus}xh200"), clock=clock)
    recorded: list[tuple[Any, tuple[Any, ...]]] = []

    class Recorder:
        """pynvml's library for collector A: the fake's symbols, each call kept."""

        def __getattr__(self, name: str) -> Any:
            symbol = getattr(fake, name)

            def record(*args: Any) -> Any:
                recorded.append((symbol, args))
                return symbol(*args)

            return record

    def tui_collector() -> Any:
        collector = NvmlCollector(clock=clock, nvlink_per_link=False)
        assert collector.open() is None
        collector.set_processes_shown(False)
        return collector

    with install_fake_nvml(Recorder()):  # type: ignore[arg-type]
        first = tui_collector()
        for _ in range(3):
            clock.advance(1.0)
            first.sample()
        recorded.clear()
        for _ in range(samples):
            clock.advance(1.0)
            first.sample()
        calls = list(recorded)
        with pynvml.libLoadLock:  # collector B talks to the fake directly
            pynvml.nvmlLib = fake
            pynvml._nvmlGetFunctionPointer_cache.clear()
        second = tui_collector()
        for _ in range(3):
            clock.advance(1.0)
            second.sample()
        per_sample = len(calls) // max(1, samples)
        started = time.thread_time()
        if stage == "product":
            for _ in range(samples):
                clock.advance(1.0)
                second.sample()
        elif stage == "fake":
            for number, (symbol, args) in enumerate(calls):
                if number % per_sample == 0:
                    clock.advance(1.0)
                symbol(*args)
        spent = time.thread_time() - started
        second.close()
        first.close()
    return spent


_COLLECTED = re.compile(r"Collected\s*:\s*([0-9]+)")


def _instructions(python: str, pythonpath: str, stage: str, samples: int, gpus: int) -> int:
    with tempfile.TemporaryDirectory() as scratch:
        result = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={scratch}/callgrind.out",
                python,
                __file__,
                "--stage",
                stage,
                "--samples",
                str(samples),
                "--gpus",
                str(gpus),
            ],
            env={**os.environ, "PYTHONPATH": pythonpath, "GPUSCOPE_CONFIG_DIR": scratch},
            capture_output=True,
            text=True,
            check=False,
        )
    found = _COLLECTED.findall(result.stderr)
    if result.returncode != 0 or not found:
        raise SystemExit(f"{stage}: callgrind run failed:\n{result.stderr[-3000:]}")
    return int(found[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--pythonpath", default=str(REPO))
    parser.add_argument("--host", action="store_true", help="the host collector alone")
    parser.add_argument("--native", action="store_true", help="thread CPU time a sample, no valgrind")
    parser.add_argument("--stage", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stage:
        spent_s = _stage(args.stage, args.samples, args.gpus)
        print(f"{args.stage}: {spent_s / max(1, args.samples) * 1e3:.3f} ms thread CPU a sample")
        return
    if args.native:
        for stage in ("host", "product", "fake"):
            spent_s = _stage(stage, args.samples, args.gpus)
            print(f"{stage}: {spent_s / args.samples * 1e3:.3f} ms thread CPU a sample")
        return
    stages = ("host-base", "host") if args.host else ("base", "product", "fake")
    counts = {stage: _instructions(args.python, args.pythonpath, stage, args.samples, args.gpus) for stage in stages}
    if args.host:
        print(
            f"host collector: {(counts['host'] - counts['host-base']) / args.samples / 1e6:.2f} M instructions a sample"
        )
        return
    total = (counts["product"] - counts["base"]) / args.samples
    fake = (counts["fake"] - counts["base"]) / args.samples
    print(f"{args.gpus} GPUs, {args.samples} samples ({args.pythonpath})")
    print(f"  collector with the fake: {total / 1e6:.2f} M instructions a sample")
    print(f"  the fake's replayed calls: {fake / 1e6:.2f} M")
    print(f"  gpuscope's own: {(total - fake) / 1e6:.2f} M")


if __name__ == "__main__":
    main()
