"""The Triton GPU kernels (gpuscope.probing.triton_kernels) run in Triton's interpreter
(``TRITON_INTERPRET=1``, numpy on CPU tensors): the FMA chains reach the closed form, the
bandwidth kernels compute what they claim, bytes follow the STREAM rule. Skipped when Triton is
not installed. bf16 is not checked here: Triton 3.9's interpreter has no bf16 arithmetic (numpy
has no bf16; it returns garbage), so bf16 is left to the GPU run."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from gpuscope.probing.context import ProbeContext  # noqa: E402
from gpuscope.probing.environment import DeviceSpec, MemoryBudget  # noqa: E402
from gpuscope.probing.peaks import fma_constants, fma_expected  # noqa: E402
from gpuscope.probing.timing import TimingPolicy  # noqa: E402


@pytest.fixture
def tk(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from gpuscope.probing import triton_kernels

    assert triton_kernels.interpreting()
    return triton_kernels


def _ctx() -> ProbeContext:
    device = DeviceSpec("cpu", "cpu")
    policy = TimingPolicy(samples=1, target_sample_s=0.001, warmup_max_s=0.001)
    return ProbeContext(device=device, budget=MemoryBudget(device), ceiling_policy=policy, contention_retries=0,
                        energy=False)  # fmt: skip


@pytest.mark.parametrize("dtype", ["fp64", "fp32", "fp16"])
def test_fma_peak_kernel_is_validated_and_counted(tk, dtype):
    result = tk.gpu_fma_peak(dtype, _ctx())
    assert result.status == "ok", result.error
    assert result.validation_error <= result.validation_tolerance
    p = result.parameters
    assert result.flops == 2 * p["lanes"] * tk.ACCUMULATORS * tk.CHAIN * p["reps"]
    assert result.library == "triton" and result.kind == "peak"


def test_fma_kernel_runs_exactly_the_chain_it_claims(tk):
    a, b = fma_constants(2 * tk.CHAIN)
    lanes = tk.fma_lanes(2)
    ab = torch.tensor([a, b], dtype=torch.float64)
    start = torch.linspace(0.0, 0.5, lanes, dtype=torch.float64)
    out = torch.zeros(tk.ACCUMULATORS * lanes, dtype=torch.float64)
    out[:lanes] = start
    tk.launch_fma(out, ab, 2, 2)  # two repetitions of the chain
    got = out.reshape(tk.ACCUMULATORS, lanes).numpy()
    for index in range(tk.ACCUMULATORS):
        expected = fma_expected(start.numpy() + 0.125 * index, a, b, 2 * tk.CHAIN)
        assert abs(got[index] - expected).max() < 1e-12
        assert abs(got[index] - fma_expected(start.numpy() + 0.125 * index, a, b, tk.CHAIN)).max() > 1e-3


@pytest.mark.parametrize("kernel", ["read", "copy", "triad"])
@pytest.mark.parametrize("level", ["l2", "dram"])
def test_bandwidth_kernels_validate_and_count_stream_bytes(tk, kernel, level):
    result = tk.gpu_bandwidth(kernel, level, _ctx())
    assert result.status == "ok", result.error
    assert result.validation_error <= result.validation_tolerance
    p = result.parameters
    assert result.bytes == tk.stream_bytes(kernel, p["elements"], 4, p["reps"])
    assert result.level == level and result.library == "triton"
    assert result.bytes_per_s == pytest.approx(result.bytes / result.time_s)


def test_the_kernels_themselves(tk):
    x = torch.arange(10_000, dtype=torch.float32)
    partial = torch.zeros(tk.partial_elements(2), dtype=torch.float32)
    tk.launch_bandwidth("read", [x], 3, 2, partial)
    assert float(partial.sum()) == pytest.approx(3 * float(x.sum()), rel=1e-6)
    dst = torch.zeros_like(x)
    tk.launch_bandwidth("copy", [x, dst], 2, 2)
    assert torch.equal(dst, x)
    a, c = torch.zeros_like(x), torch.full_like(x, 2.0)
    tk.launch_bandwidth("triad", [a, x, c], 1, 2)
    assert torch.allclose(a, x + 6.0)
    assert tk.stream_bytes("triad", 10, 4, 2) == 3 * 10 * 4 * 2
