"""Issue 12 items 2, 4 and 5 on the CPU: TF32 detection with torch's new precision API, no
CUDA-graph capture of transfers, and a Hopper-sized GPU L2 working set checked against the
GPU's DRAM counter."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from gpuscope.probing.context import NEVER_GRAPHED_KINDS, graph_decision
from gpuscope.probing.memory import (
    GPU_L2_FRACTION,
    CacheSizes,
    classify,
    dram_check,
    plan_working_sets,
)
from gpuscope.schema.core import DetailMap, as_detail, detail_map
from gpuscope.schema.results import Measurement

H200_L2_BYTES = 50 * 1024 * 1024  # what torch reports as L2_cache_size on H100/H200 SXM


# --- item 2: TF32 -----------------------------------------------------------------------------


def test_tf32_detection_survives_the_new_precision_api() -> None:
    """torch >= 2.9: after ``matmul.fp32_precision = "tf32"`` the legacy readers raise. In a
    subprocess: the setting cannot be undone in this process."""
    torch = pytest.importorskip("torch")
    if not hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        pytest.skip(f"torch {torch.__version__} has no fp32_precision API")
    code = textwrap.dedent(
        """
        import torch
        from gpuscope.measuring.counting import tf32_allowed, torch_dtype_roof_name
        assert torch_dtype_roof_name(torch.float32, "cuda") == "fp32"
        torch.backends.cuda.matmul.fp32_precision = "tf32"
        try:
            torch.backends.cuda.matmul.allow_tf32
        except RuntimeError:
            pass  # the legacy reader raises: the case being tested
        assert torch_dtype_roof_name(torch.float32, "cuda") == "tf32"
        assert torch_dtype_roof_name(torch.float32, "cpu") == "fp32"
        torch.backends.cuda.matmul.fp32_precision = "ieee"
        assert torch_dtype_roof_name(torch.float32, "cuda") == "fp32"
        torch.backends.cudnn.conv.fp32_precision = "ieee"
        assert not tf32_allowed("conv")
        torch.backends.cudnn.conv.fp32_precision = "tf32"
        assert torch_dtype_roof_name(torch.float32, "cuda", "conv") == "tf32"
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


# --- item 4: no graph capture of transfers ----------------------------------------------------


@pytest.mark.parametrize("graphable", [None, True, False])
def test_transfers_and_collectives_are_never_captured(graphable: bool | None) -> None:
    for kind in ("transfer", "collective"):
        allowed, why = graph_decision(kind, graphable)
        assert not allowed and "never captured" in why
    assert NEVER_GRAPHED_KINDS >= {"transfer", "collective"}


def test_graph_decision_for_kernels() -> None:
    assert graph_decision("matmul", None) == (
        True,
        "short calls are replayed from a CUDA graph",
    )
    assert graph_decision("memory", True)[0]
    assert graph_decision("memory", False) == (
        False,
        "the probe marked this call not capturable",
    )
    assert graph_decision("matmul", None, enabled=False)[0] is False
    assert graph_decision("matmul", None, is_gpu=False)[0] is False


def test_transfer_probe_says_not_capturable() -> None:
    """The transfer probe passes ``graphable=False`` explicitly (not only by its kind)."""
    import inspect

    from gpuscope.probing import transfer

    assert "graphable=False" in inspect.getsource(transfer)


def test_measure_records_why_a_call_was_not_graphed() -> None:
    """On a GPU device the launch record says why no graph was tried (no CUDA needed: the
    decision comes before any capture)."""
    from gpuscope.probing.context import ProbeContext
    from gpuscope.probing.environment import DeviceSpec, MemoryBudget
    from gpuscope.probing.timing import CpuClock

    device = DeviceSpec("cuda:0", "gpu", 0)
    ctx = ProbeContext(
        device=device,
        budget=MemoryBudget(device, free_bytes=lambda: 1 << 30),
        clock_factory=CpuClock,
    )
    ctx.synchronize = lambda: None  # type: ignore[method-assign]
    record = Measurement(kind="transfer", name="h2d pageable", device="cuda:0", flops=0, bytes=1024)
    result = ctx.measure(lambda: None, statistic="best", validate=None, record=record, graphable=False)
    assert _launch(result)["mode"] == "eager"
    assert "never captured" in str(_launch(result)["cuda_graph"])


def _launch(result: Measurement) -> DetailMap:
    return detail_map(detail_map(result.timing).get("launch"))


# --- item 5: GPU L2 working set -----------------------------------------------------------------


def test_gpu_l2_working_set_is_a_quarter_of_reported_l2() -> None:
    caches = CacheSizes(None, None, H200_L2_BYTES, 1, gpu=True)
    plan = plan_working_sets("copy", "auto", caches)
    l2 = [ws for ws in plan if ws.level == "l2"]
    assert len(l2) == 1 and l2[0].footprint_bytes <= H200_L2_BYTES // 4
    assert l2[0].footprint_bytes == int(H200_L2_BYTES * GPU_L2_FRACTION)
    assert plan[-1].level == "dram"


def test_half_of_l2_is_not_classified_l2_on_a_gpu() -> None:
    """Half of Hopper's reported L2 is about all of one partition: it mixes in DRAM traffic."""
    from gpuscope.probing.memory import WorkingSet

    caches = CacheSizes(None, None, H200_L2_BYTES, 1, gpu=True)
    assert classify(WorkingSet("copy", H200_L2_BYTES // 2, None), caches) is None
    assert classify(WorkingSet("copy", H200_L2_BYTES // 4, None), caches) == "l2"


def _result(level: str, probe: float, reported: float | None) -> Measurement:
    during: DetailMap = {"available": True, "n": 10}
    if reported is not None:
        during["dram_bandwidth_bytes_per_s_mean"] = reported
    return Measurement(level=level, bytes_per_s=probe, telemetry_during=as_detail(during))


def test_dram_check_of_l2_and_dram_ceilings() -> None:
    quiet = dram_check(_result("l2", 10e12, 0.05e12))
    assert quiet.ok is True and quiet.near_zero is True and quiet.ratio == pytest.approx(0.005)
    leaky = dram_check(_result("l2", 10e12, 2.5e12))  # half of L2 on Hopper: DRAM traffic
    assert leaky.ok is False and leaky.near_zero is False
    assert dram_check(_result("dram", 4.5e12, 4.6e12)).ok is True
    assert dram_check(_result("dram", 4.5e12, 3.0e12)).ok is False
    missing = dram_check(_result("dram", 4.5e12, None))
    assert missing.ok is None and "no DRAM bandwidth" in (missing.reason or "")


def test_a_failed_capture_turns_graphs_off_for_the_rest_of_the_run() -> None:
    """A failed capture may leave capture state behind: later calls are not captured again."""
    from gpuscope.probing.context import ProbeContext
    from gpuscope.probing.environment import DeviceSpec, MemoryBudget
    from gpuscope.probing.timing import CpuClock

    device = DeviceSpec("cuda:0", "gpu", 0)
    ctx = ProbeContext(device=device, budget=MemoryBudget(device, free_bytes=lambda: 1 << 30))
    tries: list[int] = []
    synced: list[int] = []

    def failing_capture(fn):  # type: ignore[no-untyped-def]
        tries.append(1)
        raise RuntimeError("operation not permitted when stream is capturing")

    ctx._graphed = failing_capture  # type: ignore[method-assign]
    ctx.clock = CpuClock  # type: ignore[method-assign,assignment]
    ctx.synchronize = lambda: synced.append(1)  # type: ignore[method-assign]
    record = Measurement(kind="matmul", name="mm", device="cuda:0", flops=2, bytes=0, counting_rule="x")
    first = ctx.measure(lambda: None, statistic="best", validate=None, record=record)
    assert "stream is capturing" in str(_launch(first)["cuda_graph_error"]) and synced
    second = ctx.measure(lambda: None, statistic="best", validate=None, record=record)
    assert len(tries) == 1 and "CUDA graphs turned off" in str(_launch(second)["cuda_graph"])
