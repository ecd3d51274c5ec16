"""Probe suites small enough for a test: a CPU run of TINY_SUITE takes about a second."""

from __future__ import annotations

#: One matmul ceiling and one memory kernel, three samples each, no contention retries.
TINY_SUITE = """\
[suite]
name = "tiny"
samples = 3
target_sample_s = 0.002
warmup_max_s = 0.2
contention_retries = 0

[[probe]]
kind = "matmul"
dtypes = ["fp32"]
shapes = [[96, 96, 96]]

[[probe]]
kind = "memory"
kernels = ["copy"]
working_sets = ["32KiB"]
"""
