"""GEMM probes: FLOP and byte counting, validation on real kernels, a wrong kernel fails."""

from __future__ import annotations

import pytest

from gpuscope.probing import matmul
from gpuscope.probing.context import ProbeContext
from gpuscope.probing.environment import MemoryBudget, parse_device
from gpuscope.probing.matmul import MatmulCase, matmul_bytes, matmul_flops, measure_matmul
from gpuscope.probing.timing import TimingPolicy
from gpuscope.probing.transformer import transformer_shapes
from gpuscope.schema.core import detail_map
from gpuscope.schema.results import Measurement
from gpuscope.schema.suites import MatmulShape, TransformerOptions

FAST = TimingPolicy(samples=3, target_sample_s=0.001, warmup_max_s=0.2)


def cpu_context(free_bytes: int = 1 << 34) -> ProbeContext:
    device = parse_device("cpu")
    return ProbeContext(
        device=device,
        budget=MemoryBudget(device, 0.5, lambda: free_bytes),
        ceiling_policy=FAST,
        workload_policy=FAST,
        contention_retries=0,
    )


def test_flops_are_two_b_m_n_k() -> None:
    assert matmul_flops(1, 2, 3, 4) == 48
    assert matmul_flops(7, 128, 256, 64) == 2 * 7 * 128 * 256 * 64


def test_bytes_read_a_and_b_once_and_write_c_once() -> None:
    assert matmul_bytes(1, 2, 3, 4, "fp32") == (2 * 4 + 4 * 3 + 2 * 3) * 4
    assert matmul_bytes(2, 8, 8, 8, "bf16") == 2 * (64 + 64 + 64) * 2
    assert matmul_bytes(1, 16, 16, 16, "fp8") == (256 + 256) * 1 + 256 * 2  # bf16 output


@pytest.mark.parametrize(
    "library,dtype", [("torch", "fp32"), ("torch", "fp64"), ("torch", "bf16"), ("numpy", "fp32"), ("numpy", "fp64")]
)
def test_real_gemm_validates_and_reports_rates(library: str, dtype: str) -> None:
    shape = MatmulShape(m=96, n=80, k=64, batch=2, transpose="tn")
    record = measure_matmul(shape, dtype, library, cpu_context(), "median", "workload")
    assert record.status == "ok", record.error
    assert record.flops == 2 * 2 * 96 * 80 * 64
    assert record.validation_error <= record.validation_tolerance
    assert record.flop_per_s == pytest.approx(record.flops / record.time_s)
    assert record.time_s == record.time_median_s
    assert detail_map(record.parameters)["transpose"] == "tn"


def test_wrong_kernel_is_a_failed_probe_without_a_number(monkeypatch: pytest.MonkeyPatch) -> None:
    real_build = matmul.build_matmul

    def corrupted(shape: MatmulShape, dtype: str, library: str, ctx: ProbeContext) -> MatmulCase:
        case = real_build(shape, dtype, library, ctx)
        good_run = case.run

        def wrong() -> object:
            out = good_run()
            out[0, 0] += 1.0  # one wrong element in the sampled corner
            return out

        case.run = wrong
        return case

    monkeypatch.setattr(matmul, "build_matmul", corrupted)
    record = measure_matmul(MatmulShape(64, 64, 64), "fp32", "torch", cpu_context(), "best", "ceiling")
    assert record.status == "failed"
    assert "validation failed" in record.error
    assert record.flop_per_s is None and record.time_s is None
    assert record.validation_error > record.validation_tolerance


def test_memory_budget_skips_a_gemm_that_does_not_fit() -> None:
    record = measure_matmul(
        MatmulShape(512, 512, 512), "fp32", "torch", cpu_context(free_bytes=1000), "best", "ceiling"
    )
    assert record.status == "skipped"
    assert "budget" in record.error and "--memory-fraction" in record.error


def test_out_of_memory_is_skipped_and_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    def out_of_memory(*args: object, **kwargs: object) -> object:
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(matmul, "_build_torch", out_of_memory)
    record = measure_matmul(MatmulShape(64, 64, 64), "fp32", "torch", cpu_context(), "best", "ceiling")
    assert record.status == "skipped"
    assert record.error.startswith("out of memory")


def test_unsupported_dtypes_are_skipped_with_a_reason() -> None:
    ctx = cpu_context()
    assert "GPU" in matmul.dtype_support("tf32", ctx)
    assert "GPU" in matmul.dtype_support("fp8", ctx)
    assert "numpy" in matmul.dtype_support("bf16", ctx, "numpy")
    record = measure_matmul(MatmulShape(32, 32, 32), "fp8", "torch", ctx, "best", "ceiling")
    assert record.status == "skipped"


def test_ceiling_search_keeps_the_best_and_skips_too_slow_shapes() -> None:
    ctx = cpu_context()
    ctx.max_call_s = 0.5
    emitted: list[Measurement] = []
    shapes = [MatmulShape(128, 128, 128), MatmulShape(64, 64, 64), MatmulShape(100_000, 100_000, 100_000)]
    best = matmul.matmul_ceiling("fp32", shapes, ["torch", "numpy"], ctx, emitted.append)
    ok = [r for r in emitted if r.status == "ok"]
    assert best is not None and best.flop_per_s == max(r.flop_per_s for r in ok)
    assert {r.library for r in ok} == {"torch", "numpy"}
    huge = [r for r in emitted if detail_map(r.parameters).get("m") == 100_000]
    assert len(huge) == 2 and all(r.status == "skipped" for r in huge)


def test_transformer_layer_shapes() -> None:
    options = TransformerOptions(hidden=4096, ffn=14336, heads=32, kv_heads=8, context=2048, tokens=[1, 512])
    shapes = transformer_shapes(options)
    by_label = {s.label: s for s in shapes}
    qkv = by_label["T=1 decode qkv_proj"]
    assert (qkv.m, qkv.n, qkv.k) == (1, 4096 + 2 * 8 * 128, 4096)
    assert by_label["T=512 prefill down_proj"].k == 14336
    scores = by_label["T=1 decode attn_scores L=2048"]
    assert (scores.batch, scores.m, scores.n, scores.k) == (32, 1, 2048, 128)
    assert by_label["T=512 prefill attn_values L=512"].k == 512
