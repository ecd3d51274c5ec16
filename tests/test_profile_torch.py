"""gpuscope.profile on real torch steps (CPU, small shapes): FLOPs against FlopCounterMode, every
matmul group exactly 2*M*N*K per call, results file, energy unavailable here, 80-column output."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from results_files import new_document as new_results  # noqa: E402
from results_files import results_json  # noqa: E402

from gpuscope.profiling.api import Profiler, profile  # noqa: E402
from gpuscope.profiling.examples import (  # noqa: E402
    build_convnet,
    build_transformer,
    convnet_train_step,
    transformer_step,
    transformer_train_step,
)
from gpuscope.profiling.render import render_chart, summary_lines, top_table  # noqa: E402

SMALL = {"d_model": 64, "heads": 4, "seq": 16, "batch": 2, "device": "cpu"}


def _flop_counter_total(step) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        step()
    return int(counter.get_total_flops())


def _matmul_flops_per_call(op: str, shapes: tuple[tuple[int, ...], ...]) -> int | None:
    """2*M*N*K from the tensor shapes of mm, addmm, bmm, baddbmm."""
    if op == "aten::mm":
        (m, k), (_, n) = shapes
        return 2 * m * n * k
    if op == "aten::addmm":
        (m, k), (_, n) = shapes[1], shapes[2]
        return 2 * m * n * k
    if op == "aten::bmm":
        (b, m, k), (_, _, n) = shapes
        return 2 * b * m * n * k
    if op == "aten::baddbmm":
        (b, m, k), (_, _, n) = shapes[1], shapes[2]
        return 2 * b * m * n * k
    return None


@pytest.fixture
def no_rapl(tmp_path: Path) -> Path:
    return tmp_path / "no-powercap"


@pytest.fixture
def cpu_roofs(tmp_path: Path) -> Path:
    """A probe results file for this host's CPU: fp32 50 GFLOP/s, DRAM 10 GB/s."""
    import socket

    document = new_results(system={"hostname": socket.gethostname()})
    document["devices"] = [{"device": "cpu", "type": "cpu"}]
    document["ceilings"] = [
        {
            "device": "cpu",
            "kind": "compute",
            "name": "fp32",
            "value": 50e9,
            "unit": "FLOP/s",
        },
        {
            "device": "cpu",
            "kind": "memory",
            "name": "dram.triad",
            "value": 10e9,
            "unit": "B/s",
        },
    ]
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize("train", [False, True], ids=["forward", "forward+backward"])
def test_transformer_flops_equal_flop_counter_and_matmuls_are_exact(
    train: bool, no_rapl: Path, cpu_roofs: Path
) -> None:
    step = (lambda: transformer_train_step(**SMALL)) if train else (lambda: transformer_step(**SMALL))
    build_transformer.cache_clear()
    result = profile(
        step,
        steps=2,
        warmup=1,
        device="cpu",
        powercap_root=no_rapl,
        roofs=[cpu_roofs],
        name="layer",
    )
    assert result.flop_counter_total == _flop_counter_total(step)
    assert result.counter_flops == result.flop_counter_total
    assert result.pointwise_flops > 0
    assert result.flops == result.flop_counter_total + result.pointwise_flops
    matmuls = [group for group in result.groups if _matmul_flops_per_call(group.op, group.shapes) is not None]
    assert len(matmuls) >= (6 if train else 3)
    for group in matmuls:
        assert group.counter_flops == _matmul_flops_per_call(group.op, group.shapes) * group.calls_per_step, group.label
        assert group.pointwise_flops == 0
    grouped_flops = sum(group.counter_flops for group in result.groups)
    assert grouped_flops == result.flop_counter_total  # every counted matmul found its timed twin
    modules = {module.path for module in result.modules}
    assert {
        "TransformerEncoderLayer",
        "TransformerEncoderLayer.self_attn",
        "TransformerEncoderLayer.linear1",
    } <= modules
    if train:
        assert any(group.backward for group in result.groups)
    verdicts = [v for v in result.verdicts if v.time_lost_s is not None]
    assert verdicts and all(v.roof_source == "measured" for v in verdicts)
    assert all(v.time_lost_s >= 0 and v.time_at_roof_s <= v.group.time_s * 1.05 or v.above_roof for v in verdicts)
    assert result.steps == 2 and len(result.step_times_s) == 2


def test_convnet_counts_convolutions(no_rapl: Path) -> None:
    kwargs = {"batch": 2, "size": 8, "channels": 4, "device": "cpu"}
    build_convnet.cache_clear()
    result = profile(
        convnet_train_step,
        kwargs=kwargs,
        steps=1,
        warmup=0,
        device="cpu",
        powercap_root=no_rapl,
    )
    assert result.flop_counter_total == _flop_counter_total(lambda: convnet_train_step(**kwargs))
    convolutions = [group for group in result.groups if "convolution" in group.op]
    assert convolutions and all(group.counter_flops > 0 for group in convolutions)
    assert sum(group.counter_flops for group in result.groups) == result.flop_counter_total


def test_energy_unavailable_without_powercap_never_zero(no_rapl: Path, tmp_path: Path) -> None:
    x = torch.randn(32, 32)
    output = tmp_path / "results.json"
    result = profile(torch.matmul, x, x, steps=1, warmup=0, powercap_root=no_rapl, results=output)
    lines = summary_lines(result)
    assert any("unavailable: no powercap interface" in line for line in lines)
    assert not any(" 0 J" in line for line in lines)
    document = results_json(output)
    (workload,) = document["workloads"]
    assert workload["source"] == "profile"
    assert workload["pointwise_rule"].startswith("pointwise ops: FLOPs per element")  # how its FLOPs were counted
    assert workload.get("energy_j") is None and workload.get("flop_per_j") is None  # nulls are left out
    assert workload["energy_unavailable"].startswith("not_supported: no powercap interface")
    assert workload["flops"] == 2 * 32**3
    groups = workload["profile"]["groups"]
    assert [group["op"] for group in groups if group["flops"]] == ["aten::mm"]
    assert math.isclose(workload["profile"]["step_s"], workload["time_s"])


def test_with_block_form_skips_warmup_and_counts_once(no_rapl: Path) -> None:
    x = torch.randn(16, 16)
    prof = profile(name="loop", device="cpu", steps=2, warmup=2, powercap_root=no_rapl)
    assert isinstance(prof, Profiler)
    phases = []
    for _ in range(7):
        phases.append(prof.phase)
        with prof:
            torch.mm(x, x).relu_()
    assert phases == ["warmup", "warmup", "count", "profile", "profile", "done", "done"]
    result = prof.result
    assert result is not None and result.steps == 2 and result.warmup == 2
    mm = next(group for group in result.groups if group.op == "aten::mm")
    assert mm.calls_per_step == 1 and mm.counter_flops == 2 * 16**3
    relu = next(group for group in result.groups if group.op.startswith("aten::relu"))
    assert relu.pointwise_flops == 16 * 16


def test_step_marks_boundaries_inside_one_block(no_rapl: Path) -> None:
    x = torch.randn(8, 8)
    prof = profile(name="inner loop", device="cpu", steps=1, warmup=1, powercap_root=no_rapl)
    with prof:
        for index in range(4):
            if index:
                prof.step()
            torch.mm(x, x)
    assert prof.result is not None and prof.result.steps == 1


def test_a_failing_step_is_not_counted(no_rapl: Path) -> None:
    prof = profile(name="fails", device="cpu", steps=1, warmup=0, powercap_root=no_rapl)
    with pytest.raises(ValueError), prof:
        raise ValueError("boom")
    assert prof.phase == "count"


def test_table_and_chart_fit_80_columns(no_rapl: Path, cpu_roofs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_transformer.cache_clear()
    result = profile(
        transformer_train_step,
        kwargs=SMALL,
        steps=1,
        warmup=0,
        device="cpu",
        powercap_root=no_rapl,
        roofs=[cpu_roofs],
        name="a transformer layer with a long name",
    )
    table = top_table(result, limit=10, width=80)
    chart = render_chart(result, width=80, height=20)
    assert len(table) == 1 + 10 + 2
    for line in table + chart.splitlines() + summary_lines(result):
        assert len(line) <= 80, line
    assert "lost" in table[0] and "gain" in table[0]
    assert "DRAM" in chart and "fp32" in chart
    # a slow machine writes wider times: the name column gives way, the header stays whole
    import gpuscope.profiling.view as view  # the one number rule of profile tables

    monkeypatch.setattr(view, "format_ms", lambda seconds: "-" if seconds is None else "1234567890")
    slow = top_table(result, limit=10, width=80)
    assert all(len(line) <= 80 for line in slow), slow
    assert slow[0].split()[-2:] == ["lost", "gain"] and "1234567890" in slow[1]


def test_bad_arguments_are_one_line_errors() -> None:
    from gpuscope.errors import UsageError

    with pytest.raises(UsageError):
        profile(name="x", steps=0)
    with pytest.raises(UsageError):
        profile(None, 1)
    with pytest.raises(UsageError):
        profile(42)


def test_step_energy_and_flop_per_joule_exact_with_a_fake_powercap_tree(
    tmp_path: Path,
) -> None:
    root = tmp_path / "powercap"
    package = root / "intel-rapl:0"
    dram = package / "intel-rapl:0:0"
    for zone, name in ((package, "package-0"), (dram, "dram")):
        zone.mkdir(parents=True)
        (zone / "name").write_text(name)
        (zone / "max_energy_range_uj").write_text("1000000000")
    counters = {
        package: 999_000_000,
        dram: 5_000_000,
    }  # the package wraps during the profile
    for zone, value in counters.items():
        (zone / "energy_uj").write_text(str(value))
    x = torch.ones(16, 16)

    def step() -> None:  # each step: 2.5 J package + 0.5 J DRAM, as RAPL would count them
        torch.mm(x, x)
        for zone, joules in ((package, 2.5), (dram, 0.5)):
            counters[zone] = (counters[zone] + int(joules * 1e6)) % 1_000_000_000
            (zone / "energy_uj").write_text(str(counters[zone]))

    result = profile(step, steps=3, warmup=1, device="cpu", powercap_root=root)
    assert result.energy is not None
    assert result.energy.joules == pytest.approx(3.0, abs=1e-9)
    assert result.energy.domains_j == pytest.approx({"package-0": 2.5, "package-0/dram": 0.5})
    assert result.flops == 2 * 16**3
    assert result.flop_per_j == pytest.approx(2 * 16**3 / 3.0)
    workload = result.to_workload()
    assert workload.energy_j == pytest.approx(3.0) and workload.flop_per_j == pytest.approx(2 * 16**3 / 3.0)
    assert any("3 J per step" in line for line in summary_lines(result))


def test_profile_and_measure_share_one_device_identity() -> None:
    from gpuscope.errors import ResourceError, UsageError
    from gpuscope.probing.environment import tensor_device, torch_device, torch_device_name
    from gpuscope.telemetry.cpuinfo import cpu_info

    tensors = {"x": [1, (torch.zeros(2),)]}
    assert tensor_device(tensors) == torch.device("cpu") and tensor_device([1, "a"]) is None
    assert torch_device(None, tensors) == torch.device("cpu") == torch_device("cpu")
    assert torch_device_name(torch.device("cpu")) == cpu_info().model
    with pytest.raises(UsageError, match="not a torch device"):
        torch_device("gpu:0")
    if not torch.cuda.is_available():
        with pytest.raises(ResourceError, match="CUDA is not available"):
            torch_device("cuda:0")
