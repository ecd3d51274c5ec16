"""Eager against compiled, region by region (``gpuscope profile --compare-eager``).

The same step is profiled twice in one process: as it runs (compiled) and under
``torch.compiler.set_stance("force_eager")`` (:func:`gpuscope.profiling.compiled.run_eager`), which
runs every compiled callable's original code without touching its caches. Both counting steps are
eager, so both profiles name the same modules: a region is a module of the model (the top-level
module's children), and its time is the time of the ops or fused kernels attributed to it. No torch.

Module paths of a compiled module read ``OptimizedModule.qkv``: the counting step drops the
wrapper's ``_orig_mod`` (:mod:`gpuscope.profiling.record`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from gpuscope.profiling.compiled_attribution import RegionDiff
from gpuscope.profiling.result import ProfileResult
from gpuscope.profiling.view import COMPARE_HEADERS, compare_rows
from gpuscope.roofline.tables import format_table

__all__ = ["RegionDiff", "compare_eager", "compare_lines", "time_unprofiled"]


def compare_eager(
    compiled: ProfileResult, eager: ProfileResult, unprofiled_s: tuple[float, float] | None = None
) -> list[RegionDiff]:
    """The step, then each region (module) found in either profile, most eager time first.
    ``unprofiled_s``: (compiled, eager) median wall time of the step run without a profiler, a row
    of its own (the profiler records the Python stack of compiled code, which costs time)."""
    depth = 1  # the top-level module's children
    rows = [RegionDiff("whole step", compiled.step_s, eager.step_s, compiled.flops, eager.flops)]
    if unprofiled_s is not None:
        rows.append(RegionDiff("step, unprofiled", unprofiled_s[0], unprofiled_s[1], 0, 0))
    ours = {total.path: total for total in compiled.modules if total.depth == depth}
    theirs = {total.path: total for total in eager.modules if total.depth == depth}
    regions = []
    for path in sorted(set(ours) | set(theirs)):
        mine, other = ours.get(path), theirs.get(path)
        regions.append(
            RegionDiff(
                region=path.split(".", 1)[-1],
                compiled_s=mine.time_s if mine else 0.0,
                eager_s=other.time_s if other else 0.0,
                compiled_flops=mine.flops if mine else 0,
                eager_flops=other.flops if other else 0,
            )
        )
    regions.sort(key=lambda row: -row.eager_s)
    outside = RegionDiff(
        "outside ops", compiled.outside_ops_s, eager.outside_ops_s, 0, 0
    )  # Python, wrappers, the compiled regions' own bookkeeping
    return [*rows, *regions, outside]


def compare_lines(rows: list[RegionDiff], width: int = 80) -> list[str]:
    """The table ``--compare-eager`` prints (times per step in ms), fitted to ``width`` by the one
    column rule (region names shorten, numbers are whole or left out)."""
    return ["eager vs compiled (same step, same process; time per step)"] + [
        f"  {line}" for line in format_table(COMPARE_HEADERS, compare_rows(rows), width - 2, shrink=[0], note=True)
    ]


def time_unprofiled(step: Callable[[], object], repeats: int, synchronize: Callable[[], object]) -> float:
    """Median wall time (seconds) of ``repeats`` plain calls of ``step``."""
    times = []
    for _ in range(max(repeats, 1)):
        synchronize()
        started = time.perf_counter()
        step()
        synchronize()
        times.append(time.perf_counter() - started)
    return statistics.median(times)
