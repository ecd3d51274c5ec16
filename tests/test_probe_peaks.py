"""FLOP peaks (gpuscope.probing.peaks): the clock estimate's arithmetic, the FMA closed form the
kernels are validated against, the numba FMA-chain probe on this CPU (validated, counted, one
thread per physical core), its ceiling beside the GEMM roof, and the suite/runner wiring.
No timing assertions: rates and clocks are only checked to be the arithmetic of what was timed."""

from __future__ import annotations

import dataclasses
import math

import msgspec
import numpy as np
import pytest
from support.roofline import ceiling, results_document, typed, workload

from gpuscope.probing import peaks
from gpuscope.probing.context import ProbeContext
from gpuscope.probing.derive import derive_ceilings
from gpuscope.probing.environment import DeviceSpec, MemoryBudget
from gpuscope.probing.errors import ValidationFailed
from gpuscope.probing.jit import load_numba
from gpuscope.probing.runner import ProbeRunner, _contention
from gpuscope.probing.suite import parse_suite
from gpuscope.probing.timing import TimingPolicy
from gpuscope.roofline.layout import envelope_roofs, layout_roofline
from gpuscope.roofline.loading import build_model
from gpuscope.roofline.model import DeviceKey, dtype_roof
from gpuscope.schema.results import Measurement, Results
from gpuscope.telemetry.values import Unavailable

needs_numba = pytest.mark.skipif(isinstance(load_numba(), Unavailable), reason="numba is not usable here")


def _ctx() -> ProbeContext:
    device = DeviceSpec("cpu", "cpu")
    policy = TimingPolicy(samples=2, target_sample_s=0.002, warmup_max_s=0.01)
    return ProbeContext(device=device, budget=MemoryBudget(device), ceiling_policy=policy, contention_retries=0,
                        energy=False)  # fmt: skip


# --- arithmetic ----------------------------------------------------------------------------------


def test_clock_from_a_dependent_chain():
    # 1e6 iterations x 8 one-cycle ops in 2.5 ms: 3.2e9 cycles per second
    assert peaks.clock_mhz_from_chain(1_000_000, 8, 2.5e-3) == pytest.approx(3200.0)
    # a 3-cycle op (an fp add) triples the cycles counted
    assert peaks.clock_mhz_from_chain(1_000_000, 4, 5e-3, cycles_per_op=3) == pytest.approx(2400.0)
    for bad in ((0, 8, 1.0), (10, 0, 1.0), (10, 8, 0.0), (10, 8, -1.0)):
        with pytest.raises(ValueError):
            peaks.clock_mhz_from_chain(*bad)


def test_fma_flops_count_two_per_fma():
    assert peaks.fma_flops(threads=2, lanes=512, chain=16, reps=10) == 2 * 2 * 512 * 16 * 10


def test_fma_constants_halve_the_distance_to_the_fixed_point():
    a, b = peaks.fma_constants(1024)
    assert a**1024 == pytest.approx(0.5)
    assert b / (1 - a) == pytest.approx(1.0)


def test_closed_form_matches_the_loop():
    a, b = peaks.fma_constants(40)
    x0 = np.array([0.0, 0.25, 0.5])
    x = x0.copy()
    for _ in range(40):
        x = x * a + b
    assert np.allclose(peaks.fma_expected(x0, a, b, 40), x, rtol=1e-12)
    assert np.allclose(peaks.fma_expected(x0, a, b, 40), 1 + (x0 - 1) * 0.5)


def test_peak_threads_is_one_per_physical_core():
    from gpuscope.telemetry.cpuinfo import cpu_info

    info = cpu_info()
    assert 1 <= peaks.peak_threads() <= (info.physical_cores or info.logical_cores)


# --- the kernels on this CPU ---------------------------------------------------------------------


@needs_numba
def test_measured_clock_is_the_arithmetic_of_its_fastest_chain():
    estimate = peaks.measure_clock(samples=2, sample_s=0.002)
    assert isinstance(estimate, peaks.ClockEstimate)
    assert estimate.threads == peaks.peak_threads()
    assert len(estimate.samples_s) == 2 * estimate.threads
    expected = peaks.clock_mhz_from_chain(estimate.iterations, estimate.ops_per_iteration, min(estimate.samples_s))
    assert estimate.mhz == pytest.approx(expected)
    assert "1 cycle latency" in estimate.rule


@needs_numba
@pytest.mark.parametrize("dtype", ["fp32", "fp64"])
def test_cpu_fma_peak_is_validated_and_counted(dtype):
    emitted: list[Measurement] = []
    result = peaks.fma_peak(dtype, _ctx(), emitted.append)
    assert emitted == [result]
    assert result.status == "ok", result.error
    assert result.kind == "peak"
    assert result.validation_error is not None and result.validation_error <= result.validation_tolerance
    p = result.parameters
    assert p["threads"] == peaks.peak_threads() and p["lanes"] == peaks.LANES[dtype]
    assert result.flops == peaks.fma_flops(p["threads"], p["lanes"], p["chain"], p["reps"])
    assert result.flop_per_s == pytest.approx(result.flops / result.time_s)
    assert "one per physical core" in result.implementation
    (roof,) = derive_ceilings([msgspec.structs.replace(result, id="m1")])
    assert (roof.kind, roof.name, roof.dtype, roof.unit) == ("compute", f"{dtype}.fma", dtype, "FLOP/s")
    assert roof.value == result.flop_per_s


@needs_numba
def test_validation_catches_a_kernel_that_skips_fmas():
    import numpy as np

    from gpuscope.probing.cpu_kernels.fma import fma_chains

    def lazy(acc, a, b, reps):  # half the repetitions: half the FMAs
        return fma_chains(acc, a, b, reps // 2)

    a, b = (np.float64(v) for v in peaks.fma_constants(peaks.VALIDATION_REPS * 16))
    with pytest.raises(ValidationFailed):
        peaks._validate(lazy, np.float64, a, b, 64, "fp64")
    error, tolerance = peaks._validate(fma_chains, np.float64, a, b, 64, "fp64")
    assert error <= tolerance


@needs_numba
def test_bf16_dot_products_where_the_cpu_has_them(monkeypatch):
    from gpuscope.telemetry.cpuinfo import cpu_info

    if "avx512_bf16" in cpu_info().flags:
        result = peaks.fma_peak("bf16", _ctx(), lambda m: None)
        assert result.status == "ok", result.error
        assert result.validation_error <= result.validation_tolerance
        p = result.parameters
        assert result.flops == p["threads"] * p["accumulators"] * p["chain"] * 64 * p["reps"]
        assert "VDPBF16PS" in result.implementation
    monkeypatch.setattr(peaks, "cpu_info", lambda: dataclasses.replace(cpu_info(), flags=frozenset({"avx2", "fma"})))
    result = peaks.fma_peak("bf16", _ctx(), lambda m: None)
    assert result.status == "skipped"
    assert "AVX512_BF16" in result.error


def test_bf16_bits_are_the_top_half_of_float32():
    assert peaks.bf16_bits([1.0, 2.0**-8, -2.0]).tolist() == [0x3F80, 0x3B80, 0xC000]


def test_without_the_jit_the_peak_is_skipped_not_slow(monkeypatch):
    monkeypatch.setenv("NUMBA_DISABLE_JIT", "1")
    result = peaks.fma_peak("fp32", _ctx(), lambda m: None)
    assert result.status == "skipped"
    assert result.error.startswith("unavailable, because NUMBA_DISABLE_JIT")
    assert isinstance(peaks.measure_clock(), Unavailable)


# --- beside the GEMM roof ------------------------------------------------------------------------


def _cpu_doc(gemm: float, fma: float) -> dict:
    return results_document(
        "laptop", devices=[{"device": "cpu", "type": "cpu", "name": "Other CPU 42"}],
        ceilings=[ceiling("cpu", "compute", "fp32", gemm), ceiling("cpu", "compute", "fp32.fma", fma),
                  ceiling("cpu", "memory", "dram.triad", 20e9)],
        workloads=[workload("gemm", "cpu", 2e9, 1.2e7, 0.02, dtype="fp32")],
    )  # fmt: skip


@pytest.mark.parametrize(("gemm", "fma", "envelope"), [(180e9, 230e9, "fp32.fma"), (240e9, 230e9, "fp32")])
def test_the_envelope_takes_the_higher_roof_and_names_it(gemm, fma, envelope):
    model = build_model(typed([("a.json", _cpu_doc(gemm, fma))]), datasheet=False)
    device = model.device(DeviceKey("laptop", None, "cpu"))
    assert dtype_roof(device, "fp32").name == envelope
    peak, _dram, _others = envelope_roofs(model, device)
    assert peak.name == envelope
    (entry,) = layout_roofline(model).legend
    assert entry.envelope_text.startswith(envelope + " ")
    assert {roof.name for roof in device.compute} == {"fp32", "fp32.fma"}


# --- suites and the runner -----------------------------------------------------------------------


def test_peak_probe_in_a_suite_plans_one_step_per_dtype():
    suite = parse_suite('[[probe]]\nkind = "peak"\ndtypes = ["fp64", "fp32"]\nkernels = ["fma", "l2"]\n', "t.toml")
    runner = ProbeRunner(suite, "cpu")
    assert [step.label for step in runner.steps] == ["peak fp64", "peak fp32"]  # l2/dram: GPU only
    with pytest.raises(Exception, match="kernels"):
        parse_suite('[[probe]]\nkind = "peak"\nkernels = ["l3"]\n', "t.toml")


def test_shipped_quick_suite_has_cpu_and_gpu_peaks():
    from gpuscope.probing.suite import load_suite

    kinds = [(p.kind, p.devices) for p in load_suite("quick").probes]
    assert ("peak", ("cpu",)) in kinds and ("peak", ("cuda",)) in kinds


def test_runner_records_contention_as_a_typed_field():
    results = Results(schema="gpuscope.results", schema_version=1, warnings=[
        "the CPU was 51% busy before the run (other processes); numbers may be low and noisy",
        "36 measurement(s) ran while other processes used more than 10% of the cores (up to 74%; ...)",
        "telemetry unavailable: no NVML"])  # fmt: skip
    record = _contention(results, 10.0, [74.0, 20.0], 51.0)
    assert record is not None
    assert (record.cpu_busy_percent_before, record.contended_measurements, record.max_percent) == (51.0, 2, 74.0)
    assert len(record.notes) == 2 and all("telemetry" not in note for note in record.notes)
    quiet = Results(schema="gpuscope.results", schema_version=1, warnings=["telemetry unavailable: no NVML"])
    assert _contention(quiet, 10.0, [], None) is None
    assert math.isclose(record.threshold_percent, 10.0)


def test_the_roofs_table_says_which_compute_roof_the_envelope_uses():
    from gpuscope.roofline.tables import roofs_table

    model = build_model(typed([("a.json", _cpu_doc(180e9, 230e9))]), datasheet=False)
    text = "\n".join(roofs_table(model, 160))
    assert "envelope compute roof: cpu fp32.fma (FMA peak)" in text
    gemm_only = results_document("laptop", devices=[{"device": "cpu", "type": "cpu"}],
                                 ceilings=[ceiling("cpu", "compute", "fp32", 1e11)])  # fmt: skip
    assert "envelope compute roof" not in "\n".join(roofs_table(build_model(typed([("b", gemm_only)])), 160))
