"""gpuscope.profile on a zoo of real models (tests/support/zoo.py), each in a training step, eval under
no_grad (fused fast paths) and inference_mode (composites recorded whole), against an independent
reference: FlopCounterMode's own formulas on the decomposed path (autograd enabled, math attention,
MoE experts as a loop of matmuls), an analytic convolution backward, and the pointwise table.

Checked per model and mode: total FLOPs within 2% of the reference, coverage >= 99% of op time, no
`memory` verdict on an op without a FLOP count."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from results_files import new_document as new_results  # noqa: E402
from support import zoo  # noqa: E402
from support.zoo import reference_flops  # noqa: E402

from gpuscope.profiling.api import profile  # noqa: E402
from gpuscope.profiling.result import ProfileResult  # noqa: E402

CASES = [(name, mode) for name in zoo.MODELS for mode in zoo.MODES]


@pytest.fixture(scope="module")
def cpu_roofs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A probe results file for this host's CPU: fp32 50 GFLOP/s, DRAM 10 GB/s."""
    document = new_results(system={"hostname": socket.gethostname()})
    document["devices"] = [{"device": "cpu", "type": "cpu"}]
    document["ceilings"] = [
        {"device": "cpu", "kind": "compute", "name": "fp32", "value": 50e9, "unit": "FLOP/s"},
        {"device": "cpu", "kind": "compute", "name": "fp64", "value": 25e9, "unit": "FLOP/s"},
        {"device": "cpu", "kind": "memory", "name": "dram.triad", "value": 10e9, "unit": "B/s"},
    ]
    path = tmp_path_factory.mktemp("roofs") / "probe.json"
    path.write_text(json.dumps(document))
    return path


def profile_case(case: zoo.ZooCase, roofs: Path, tmp: Path) -> ProfileResult:
    case.step()  # optimizer state, caches
    return profile(case.step, steps=1, warmup=1, device="cpu", powercap_root=tmp / "no-powercap", roofs=[roofs],
                   name=f"{case.name} {case.mode}")  # fmt: skip


def check(result: ProfileResult, reference: int) -> None:
    assert result.flops == pytest.approx(reference, rel=0.02), (result.flops, reference, result.uncounted_ops)
    assert not result.uncounted_ops, result.uncounted_ops
    unknown = [group.label for group in result.groups if not group.flops_known]
    assert result.coverage is not None and result.coverage >= 0.99, (result.coverage, unknown)
    for verdict in result.verdicts:
        if not verdict.group.flops_known:
            assert verdict.bound != "memory", verdict.group.label


@pytest.mark.parametrize(("name", "mode"), CASES, ids=[f"{name}-{mode}" for name, mode in CASES])
def test_zoo_flops_match_the_reference_and_every_op_is_counted(
    name: str, mode: str, cpu_roofs: Path, tmp_path: Path
) -> None:
    case = zoo.build(name, mode)
    result = profile_case(case, cpu_roofs, tmp_path)
    check(result, reference_flops(zoo.build(name, mode)))


@pytest.mark.parametrize("name", ["vit", "vit_mha"])
def test_fast_paths_are_counted_like_the_decomposed_path(name: str, cpu_roofs: Path, tmp_path: Path) -> None:
    """Eval runs the fused kernel (one op where the decomposed path runs a dozen), and counts the same."""
    case = zoo.build(name, "eval")
    result = profile_case(case, cpu_roofs, tmp_path)
    fused = {"vit": "aten::_transformer_encoder_layer_fwd", "vit_mha": "aten::_native_multi_head_attention"}[name]
    groups = [group for group in result.groups if group.op == fused]
    assert groups and all(group.counter_flops > 0 for group in groups)
    assert all(verdict.bound != "memory" for verdict in result.verdicts if verdict.group.op == fused)


def test_depthwise_backward_is_not_overcounted(cpu_roofs: Path, tmp_path: Path) -> None:
    """MobileNet's training step: torch's own formula would count the depthwise backward (groups+1)/2
    times too much; the corrected total stays within 2% of the analytic count."""
    from torch.utils.flop_counter import FlopCounterMode

    case = zoo.build("mobilenet", "train")
    result = profile_case(case, cpu_roofs, tmp_path)
    upstream = FlopCounterMode(display=False)
    with upstream:
        case.step()
    assert upstream.get_total_flops() > 3 * result.flop_counter_total  # torch's count, uncorrected
    assert result.flops == pytest.approx(reference_flops(zoo.build("mobilenet", "train")), rel=0.02)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet", "vit"])
def test_zoo_at_realistic_size_in_eval(name: str, cpu_roofs: Path, tmp_path: Path) -> None:
    case = zoo.build(name, "inference", scale="real")
    result = profile_case(case, cpu_roofs, tmp_path)
    check(result, reference_flops(zoo.build(name, "inference", scale="real")))
