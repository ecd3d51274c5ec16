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
from dataclasses import dataclass

from gpuscope.profiling.result import ProfileResult
from gpuscope.telemetry.records import JsonObject

__all__ = ["RegionDiff", "compare_eager", "compare_lines", "time_unprofiled"]


@dataclass(frozen=True)
class RegionDiff:
    """One region's time per step (seconds) and FLOPs, compiled and eager."""

    region: str
    compiled_s: float
    eager_s: float
    compiled_flops: int
    eager_flops: int

    @property
    def speedup(self) -> float | None:
        """Eager time / compiled time (> 1: compiling made it faster)."""
        return self.eager_s / self.compiled_s if self.compiled_s > 0 else None

    def to_json(self) -> JsonObject:
        return {
            "region": self.region, "compiled_s": self.compiled_s, "eager_s": self.eager_s,
            "speedup": self.speedup, "compiled_flops": self.compiled_flops, "eager_flops": self.eager_flops,
        }  # fmt: skip


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
    """The table ``--compare-eager`` prints (times per step in ms)."""
    name_width = max(12, min(width - 44, max(len(row.region) for row in rows)))
    lines = [
        "eager vs compiled (same step, same process; time per step)",
        f"  {'region':{name_width}s} {'compiled':>10s} {'eager':>10s} {'speed-up':>8s} {'FLOPs c/e':>9s}",
    ]
    for row in rows:
        speedup = f"{row.speedup:.2f}x" if row.speedup is not None else "-"
        flops = f"{row.compiled_flops / row.eager_flops:.3f}" if row.eager_flops else "-"
        name = row.region if len(row.region) <= name_width else row.region[: name_width - 1] + "~"
        lines.append(
            f"  {name:{name_width}s} {row.compiled_s * 1e3:8.3f}ms {row.eager_s * 1e3:8.3f}ms {speedup:>8s} {flops:>9s}"
        )
    return lines


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
