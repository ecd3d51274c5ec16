"""The GPU side of the memory probes: one torch op per call on the probe stream over arrays of
the requested size, and each result checked against the GPU's own DRAM counter (``dram_check``:
``l2.*`` must show DRAM traffic near zero, ``dram.*`` must agree with the probe's B/s).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from gpuscope.probing.context import ProbeContext
from gpuscope.probing.environment import oom_guard
from gpuscope.probing.memory_plan import (
    DTYPE_BYTES,
    FLOAT64_REFERENCE,
    KERNEL_ARRAYS,
    WorkingSet,
    stream_bytes,
    torch_ops,
)
from gpuscope.probing.validation import check_close, elementwise_tolerance
from gpuscope.schema.core import as_detail, detail_map
from gpuscope.schema.results import DramCheck, Measurement

if TYPE_CHECKING:
    import torch

__all__ = ["L2_DRAM_NEAR_ZERO_FRACTION", "DRAM_AGREEMENT_FRACTION", "gpu_measure", "dram_check"]

#: ``l2.*``: DRAM traffic is "near zero" below this fraction of the probe's B/s.
L2_DRAM_NEAR_ZERO_FRACTION = 0.1
#: ``dram.*``: the GPU's DRAM counter and the probe's B/s agree within this fraction.
DRAM_AGREEMENT_FRACTION = 0.10


def gpu_measure(ws: WorkingSet, dtype: str, ctx: ProbeContext, record: Measurement) -> Measurement:
    import torch

    tdtype = {"fp64": torch.float64, "fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    element_bytes = DTYPE_BYTES[dtype]
    narrays = KERNEL_ARRAYS[ws.kernel][0]
    elements = max(1024, ws.footprint_bytes // (narrays * element_bytes))
    ctx.budget.check(elements * element_bytes * narrays, f"memory {ws.kernel} working set")
    device = ctx.device.torch_device
    with oom_guard(f"memory {ws.kernel} {ws.footprint_bytes} B", ctx.device):
        arrays = [torch.rand(elements, dtype=tdtype, device=device).add_(0.5) for _ in range(narrays)]
        holder: dict[str, torch.Tensor] = {}
        kernel = ws.kernel
        run: Callable[[], object]
        if kernel == "read":
            sums = torch.empty((), dtype=torch.float32 if dtype != "fp64" else torch.float64, device=device)

            def run() -> None:
                torch.sum(arrays[0], dim=0, dtype=sums.dtype, out=sums)
                holder["sum"] = sums

            implementation = "torch.sum(out=)"
        else:
            implementation, op = torch_ops()[kernel]
            run = lambda: op(arrays)  # noqa: E731

    def validate() -> tuple[float, float]:
        import numpy as np

        if kernel == "read":
            read_tolerance = 1e-10 if dtype == "fp64" else 1e-3
            got, expected = float(holder["sum"].item()), float(arrays[0].double().sum().item())
            return check_close(np.array([got]), np.array([expected]), read_tolerance, "read"), read_tolerance
        tolerance = elementwise_tolerance(dtype)
        idx = torch.linspace(0, elements - 1, steps=min(elements, 257), device=device).long()
        output, reference = FLOAT64_REFERENCE[kernel]([a[idx].double().cpu().numpy() for a in arrays])
        return check_close(output, reference, tolerance, kernel), tolerance

    record = msgspec.structs.replace(
        record,
        bytes=stream_bytes(kernel, elements, element_bytes),
        parameters=as_detail(
            detail_map(record.parameters) | {"elements": elements, "array_bytes": elements * element_bytes}
        ),
        implementation=implementation,
    )
    try:
        result = ctx.measure(run, statistic="best", validate=validate, record=record)
        return msgspec.structs.replace(result, dram_check=dram_check(result))
    finally:
        # empty the list rather than `del arrays`: run/validate close over the name, and the
        # tensors must go before empty_cache can hand their memory back
        arrays.clear()
        torch.cuda.empty_cache()


def dram_check(result: Measurement) -> DramCheck:
    """What the GPU's DRAM counter (telemetry during the measurement, GPM DRAM_BW_UTIL x peak)
    said next to the probe's own B/s: for ``l2`` whether DRAM traffic stayed near zero (below
    :data:`L2_DRAM_NEAR_ZERO_FRACTION` of the probe's B/s), for ``dram`` whether the two agree
    within :data:`DRAM_AGREEMENT_FRACTION`. ``ok`` is None when it could not be checked."""
    level = result.level or detail_map(result.parameters).get("level")
    level = level if isinstance(level, str) else None
    probe = result.bytes_per_s
    during = detail_map(result.telemetry_during)
    reported = during.get("dram_bandwidth_bytes_per_s_mean")
    if not isinstance(reported, (int, float)) or isinstance(reported, bool):
        reported = None
    check = DramCheck(level=level, probe_bytes_per_s=probe, reported_dram_bytes_per_s=reported)
    if probe is None or probe <= 0 or reported is None:
        reason = during.get("reason")
        check.reason = (
            reason
            if isinstance(reason, str) and reason
            else "no DRAM bandwidth in the telemetry during the measurement"
        )
        return check
    check.ratio = ratio = reported / probe
    if level == "l2":
        check.near_zero = ok = ratio < L2_DRAM_NEAR_ZERO_FRACTION
        check.rule = f"l2: DRAM traffic below {L2_DRAM_NEAR_ZERO_FRACTION:.0%} of the probe's B/s"
    elif level == "dram":
        ok = abs(ratio - 1.0) <= DRAM_AGREEMENT_FRACTION
        check.rule = f"dram: the GPU's DRAM counter within {DRAM_AGREEMENT_FRACTION:.0%} of the probe's B/s"
    else:
        check.reason = "between levels: nothing to check"
        return check
    check.ok = bool(ok)
    return check
