"""Sampling 8 fake MI300X against sampling 8 fake H200, in the same run (issue 30's target).

Both sides run the real bindings on their fakes (``amdsmi`` on the fake ``libamd_smi.so``, pynvml on
the fake NVML), with process lists on, on a manual clock advanced one second a sample; each side's
thread CPU time a sample is the median of ``--rounds`` rounds of ``--samples`` samples, the two
sides alternating so a noisy machine loads both alike. Both include their fake's cost (Python
standing in for a C driver); the ratio is the number to read: AMD / NVIDIA <= 1.0 meets the target.

Usage: .venv/bin/python benchmarks/bench_amd_sampling.py [--samples 50] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from gpuscope.telemetry.amdsmi.collector import AmdSmiCollector
from gpuscope.telemetry.nvml.collector import NvmlCollector
from gpuscope.testing._fake_nvml_model import FakeClock
from gpuscope.testing.fake_amdsmi import AmdScenario, build_fake_amdsmi, install_fake_amdsmi
from gpuscope.testing.fake_nvml import FakeGpu, FakeNvml, install_fake_nvml


def _per_sample_s(sample: Callable[[], object], clock: FakeClock, samples: int) -> float:
    started = time.thread_time()
    for _ in range(samples):
        clock.advance(1.0)
        sample()
    return (time.thread_time() - started) / samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    amd_clock, nvidia_clock = FakeClock(), FakeClock()
    amd_fake = build_fake_amdsmi(AmdScenario(gpus="8xmi300x"), clock=amd_clock)
    nvidia_fake = FakeNvml.with_gpus([FakeGpu.h200() for _ in range(8)], clock=nvidia_clock)
    for index in range(8):
        nvidia_fake.set_load(index, gpu_util_percent=90, sm_activity_percent=80, power_w=600)
    amd_times: list[float] = []
    nvidia_times: list[float] = []
    with install_fake_amdsmi(amd_fake), install_fake_nvml(nvidia_fake):
        amd = AmdSmiCollector(clock=amd_clock)
        nvidia = NvmlCollector(clock=nvidia_clock)
        assert amd.open() is None and nvidia.open() is None
        for _ in range(3):  # warm both (rates, process identities)
            amd_clock.advance(1.0)
            nvidia_clock.advance(1.0)
            amd.sample()
            nvidia.sample()
        for _ in range(args.rounds):
            amd_times.append(_per_sample_s(amd.sample, amd_clock, args.samples))
            nvidia_times.append(_per_sample_s(nvidia.sample, nvidia_clock, args.samples))
        amd.close()
        nvidia.close()
    amd_s, nvidia_s = statistics.median(amd_times), statistics.median(nvidia_times)
    print(f"8 fake MI300X (AMD SMI): {amd_s * 1e3:.2f} ms CPU a sample (median of {args.rounds})")
    print(f"8 fake H200 (NVML):      {nvidia_s * 1e3:.2f} ms CPU a sample")
    verdict = "meets" if amd_s <= nvidia_s else "misses"
    print(f"AMD / NVIDIA: {amd_s / nvidia_s:.2f} ({verdict} the target <= 1.0)")


if __name__ == "__main__":
    main()
