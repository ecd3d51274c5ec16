"""Compiled models (torch.compile, Inductor's C++ backend) profiled as they run, and left as they were.

One compiled fixture per model and mode for the whole module: compiling is the slow part."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from support.compiled import CompiledCase, compiled_region_events, make_case  # noqa: E402

from gpuscope.measuring.measure import measure  # noqa: E402
from gpuscope.profiling.api import profile  # noqa: E402
from gpuscope.profiling.compiled import eager_counting, kernel_ops, read_graph_source  # noqa: E402
from gpuscope.profiling.record import count_step  # noqa: E402

CASES = [("block", "infer"), ("block", "train"), ("convnet", "infer"), ("convnet", "train"),
         ("breaking", "infer"), ("breaking", "train")]  # fmt: skip


def _dynamo_stats() -> dict[str, int]:
    from torch._dynamo.utils import counters  # read only: how many frames Dynamo compiled

    return dict(counters["stats"])


@pytest.fixture(scope="module")
def cases() -> dict[str, CompiledCase]:
    built = {name: make_case(name) for name in ("block", "convnet", "breaking")}
    for case in built.values():  # compiled once for inference and once for training, here
        case.infer()
        case.train()
    return built


@pytest.fixture(scope="module")
def profiles(cases: dict[str, CompiledCase]) -> dict[tuple[str, str], tuple[object, int, list[str], list[str], dict]]:
    """Each case profiled once: (result, eager FLOPs of the same step, region events before and after)."""
    found = {}
    for name, mode in CASES:
        case = cases[name]
        step = case.infer if mode == "infer" else case.train
        before_events = compiled_region_events(step)
        stats = _dynamo_stats()
        result = profile(step, steps=2, warmup=1, device="cpu", energy=False)
        after_events = compiled_region_events(step)
        with eager_counting():
            eager = count_step(step)
        found[(name, mode)] = (
            result, eager.flop_counter_total + eager.pointwise_flops, before_events, after_events,
            {"before": stats, "after": _dynamo_stats()},
        )  # fmt: skip
    return found


@pytest.mark.slow
@pytest.mark.parametrize(("name", "mode"), CASES)
def test_compiled_profile_matches_the_eager_count(profiles: dict, name: str, mode: str) -> None:
    result, eager_flops, before, after, stats = profiles[(name, mode)]
    assert result.compiled is not None, "the compiled regions were seen"
    assert result.compiled.fused_kernels >= 1
    grouped = sum(group.flops for group in result.groups)
    assert eager_flops > 0
    assert abs(grouped - eager_flops) <= 0.02 * eager_flops, (grouped, eager_flops)
    assert abs(result.flops - eager_flops) <= 0.02 * eager_flops
    assert result.coverage is not None and result.coverage >= 0.99, [
        (group.label, group.time_s) for group in result.groups if not group.flops_known
    ]
    kernels = [group for group in result.groups if group.op.startswith("inductor::")]
    assert kernels and all(group.time_s > 0 for group in kernels)
    assert any(group.fused for group in kernels), "each kernel names the eager ops it holds"
    assert all(group.bytes > 0 for group in kernels)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "mode"), CASES)
def test_profiling_leaves_the_model_compiled(profiles: dict, name: str, mode: str) -> None:
    result, _, before, after, stats = profiles[(name, mode)]
    assert any(event.startswith("Torch-Compiled Region") for event in before)
    assert any("CompiledFxGraph" in event for event in before)
    assert sorted(after) == sorted(before), "the same compiled regions and graphs run after profiling"
    assert stats["after"] == stats["before"], "no frame recompiled or newly compiled"


@pytest.mark.slow
def test_graph_breaks_are_listed_with_where(profiles: dict) -> None:
    for mode in ("infer", "train"):
        compiled = profiles[("breaking", mode)][0].compiled
        assert len(compiled.regions) == 2
        assert any("compiled.py" in where and "forward" in where for where in compiled.graph_breaks)
    assert profiles[("block", "infer")][0].compiled.graph_breaks == []


@pytest.mark.slow
def test_compiled_profile_json_and_summary(profiles: dict) -> None:
    from gpuscope.profiling.render import summary_lines
    from gpuscope.profiling.stored import read_profile

    result = profiles[("block", "train")][0]
    stored = read_profile(result.profile_json())
    assert stored is not None and stored.compiled is not None
    assert stored.compiled["fused_kernels"] >= 1
    fused = [group for group in stored.groups if group.fused_ops]
    assert fused and all(group.op.startswith("inductor::") for group in fused)
    text = "\n".join(summary_lines(result))
    assert "compiled" in text
    from gpuscope.profiling.view import compiled_text  # what the report and the TUI print

    assert compiled_text(stored).startswith("compiled: 1 region, ")
    breaking = read_profile(profiles[("breaking", "infer")][0].profile_json())
    assert "1 graph break (compiled.py:" in compiled_text(breaking)
    assert compiled_text(read_profile(result.profile_json()) or stored) != ""


@pytest.mark.slow
def test_cli_compare_eager(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from gpuscope.cli import main

    sizes = json.dumps({"kwargs": {"d_model": 32, "heads": 2, "seq": 8, "batch": 2, "device": "cpu"}})
    output = tmp_path / "results.json"
    argv = ["profile", "gpuscope.profiling.compiled_examples:transformer_train_step", "--args-json", sizes,
            "--device", "cpu", "--steps", "1", "--warmup", "1", "--no-energy", "--compare-eager", "--no-chart",
            "--output", str(output)]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "eager vs compiled" in text and "whole step" in text and "compiled  1 region" in text
    workloads = json.loads(output.read_text())["workloads"]
    names = [workload["name"] for workload in workloads]
    assert len(names) == 2 and names[1].endswith("(eager)")
    # the comparison is kept in the compiled profile, as the terminal printed it
    stored = workloads[0]["profile"]["compiled"]["compare_eager"]
    printed = {line.split()[0] for line in text.split("eager vs compiled")[1].splitlines()[2:] if line.strip()}
    assert stored[0]["region"] == "whole step" and {row["region"].split()[0] for row in stored} <= printed
    report = tmp_path / "report.md"
    assert main(["report", "--probes", str(output), "--output", str(report)]) == 0
    capsys.readouterr()
    markdown = report.read_text()
    assert markdown.count("; compiled: 1 region, ") == 1, "the compiled profile says so, the eager not"
    assert markdown.count("| region | compiled ms | eager ms | speed-up | FLOPs c/e |") == 1
    whole = stored[0]
    row = f"| whole step | {whole['compiled_s'] * 1e3:.3f} | {whole['eager_s'] * 1e3:.3f} | {whole['speedup']:.2f}x |"
    assert row in markdown
    html = tmp_path / "report.html"
    assert main(["report", "--probes", str(output), "--output", str(html)]) == 0
    capsys.readouterr()
    assert 'id="table-profile-1-compare-eager"' in html.read_text()
    assert main([*argv[:-2], "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["compiled"]["profile"]["compiled"]["fused_kernels"] >= 1
    assert document["eager"]["profile"].get("compiled") is None, "the eager side ran eager"
    rows = {row["region"]: row for row in document["compare_eager"]}
    assert 0.98 <= rows["whole step"]["compiled_flops"] / rows["whole step"]["eager_flops"] <= 1.02
    assert rows["step, unprofiled"]["compiled_s"] > 0 and rows["step, unprofiled"]["eager_s"] > 0


def test_compare_eager_keeps_the_compiled_profile_when_the_eager_side_fails(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The compiled profile is written even when the eager run raises (one error line, exit 1)."""
    import json

    from gpuscope.cli import main

    (tmp_path / "fails_later.py").write_text(
        "import torch\n"
        "calls = 0\n"
        "def step():\n"
        "    global calls\n"
        "    calls += 1\n"
        "    if calls > 3:  # warm-up, counting and one profiled step run; the eager profile's first call fails\n"
        "        raise RuntimeError('eager side broke')\n"
        "    return torch.ones(8, 8) @ torch.ones(8, 8)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    output = tmp_path / "results.json"
    code = main(["profile", "fails_later:step", "--device", "cpu", "--steps", "1", "--warmup", "1", "--no-energy",
                 "--no-telemetry", "--compare-eager", "--no-chart", "--output", str(output)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and "eager side broke" in err and len(err.strip().splitlines()) == 1
    (workload,) = json.loads(output.read_text())["workloads"]
    assert workload["name"] == "fails_later:step" and workload["flops"] == 2 * 8 * 8 * 8


@pytest.mark.slow
def test_measure_leaves_a_compiled_function_compiled(cases: dict[str, CompiledCase]) -> None:
    case = cases["block"]
    before, stats = compiled_region_events(case.infer), _dynamo_stats()
    measured = measure(case.infer, device="cpu", samples=3, max_time_s=0.5, warmup_max_s=0.1, energy=False)
    assert measured.flops > 0
    assert sorted(compiled_region_events(case.infer)) == sorted(before)
    assert _dynamo_stats() == stats


@pytest.mark.slow
def test_nothing_of_the_user_changes(cases: dict[str, CompiledCase]) -> None:
    """Mode, requires_grad, hooks, RNG state and grad mode are as they were after profile and measure."""
    case = cases["convnet"]
    model = case.model
    model.eval()  # the user's choice, kept
    model.features[0].weight.requires_grad_(False)

    def hook(*_: object) -> None:  # a no-op: a hook with state would recompile the model on every call
        return None

    handle = model.head.register_forward_hook(hook)
    try:
        modes = {name: module.training for name, module in model.named_modules()}
        grads = {name: p.requires_grad for name, p in model.named_parameters()}
        hooks = (dict(model.head._forward_hooks), dict(model._forward_pre_hooks), dict(model._backward_hooks))
        torch.manual_seed(1234)

        def step() -> None:
            with torch.no_grad():
                case.compiled(case.inputs)

        step()  # recompiles for eval mode, the hook and the new requires_grad: before the check, not after
        stats, events = _dynamo_stats(), compiled_region_events(step)
        rng = torch.get_rng_state()
        torch.set_grad_enabled(False)
        try:
            profile(step, steps=1, warmup=0, device="cpu", energy=False)
            measure(step, device="cpu", samples=3, max_time_s=0.3, warmup_max_s=0.05, energy=False)
            assert torch.is_grad_enabled() is False
        finally:
            torch.set_grad_enabled(True)
        profile(step, steps=1, warmup=0, device="cpu", energy=False)
        assert torch.is_grad_enabled() is True
        assert torch.equal(torch.get_rng_state(), rng), "gpuscope draws no random numbers"
        assert {name: module.training for name, module in model.named_modules()} == modes
        assert {name: p.requires_grad for name, p in model.named_parameters()} == grads
        assert (dict(model.head._forward_hooks), dict(model._forward_pre_hooks), dict(model._backward_hooks)) == hooks
        assert not torch.nn.modules.module._global_forward_hooks, "the counting step's global hooks are gone"
        assert sorted(compiled_region_events(step)) == sorted(events)
        assert _dynamo_stats() == stats
    finally:
        handle.remove()
        model.features[0].weight.requires_grad_(True)
        model.train()


def test_kernel_names_split_into_aten_ops() -> None:
    vocabulary = frozenset({"gelu", "native_layer_norm", "add", "_softmax", "view", "native_layer_norm_backward"})
    assert kernel_ops("cpp_fused_gelu_native_layer_norm_0", vocabulary) == (("gelu", "native_layer_norm"), "")
    assert kernel_ops("cpp_fused__softmax_add_12", vocabulary) == (("_softmax", "add"), "")
    assert kernel_ops("triton_poi_fused_add_native_layer_norm_backward_3", vocabulary) == (
        ("add", "native_layer_norm_backward"), "")  # fmt: skip
    assert kernel_ops("cpp_fused_0", vocabulary) == ((), "")
    assert kernel_ops("cpp_fused_mystery_op_1", vocabulary)[1] == "mystery_op"


def test_generated_source_gives_kernels_and_buffers(tmp_path) -> None:
    source = tmp_path / "cabc.py"
    source.write_text(
        "# AOT ID: ['0_backward']\n"
        "cpp_fused_add_0 = async_compile.cpp_pybinding(['float*'], r'''\n"
        'extern "C" void kernel(const float* in_ptr0, float* out_ptr0) {\n'
        "    auto tmp0 = in_ptr0[x0];\n    auto tmp1 = tmp0 + tmp0;\n    out_ptr0[x0] = tmp1;\n}\n''')\n"
        "class Runner:\n"
        "    def call(self, args):\n"
        "        primals_1, = args\n"
        "        buf0 = empty_strided_cpu((8, 64), (64, 1), torch.float32)\n"
        "        extern_kernels.mm(primals_1, primals_1, out=buf0)\n"
        "        buf1 = empty_strided_cpu((8, 64), (64, 1), torch.float32)\n"
        "        cpp_fused_add_0(buf0, buf1)\n"
        "        return (buf1, )\n"
        "runner = Runner()\n"
        "def get_args():\n"
        "    primals_1 = rand_strided((8, 8), (8, 1), device='cpu', dtype=torch.float32)\n"
    )
    graph = read_graph_source(str(source))
    assert graph is not None and graph.backward
    assert [kernel.name for kernel in graph.kernels] == ["mm", "cpp_fused_add_0"]
    fused = graph.fused[0]
    assert fused.bytes == 2 * 8 * 64 * 4 and fused.elements == 8 * 64
    assert "cpp_fused_add_0" not in graph.copy_only


@pytest.mark.slow
def test_a_compiled_function_stays_compiled() -> None:
    weight = torch.randn(16, 16)

    @torch.compile
    def layer(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x @ weight).sum()

    x = torch.randn(8, 16)
    layer(x)
    events, stats = compiled_region_events(lambda: layer(x)), _dynamo_stats()
    result = profile(layer, x, steps=1, warmup=0, device="cpu", energy=False)
    assert result.compiled is not None and result.compiled.fused_kernels >= 1
    assert sorted(compiled_region_events(lambda: layer(x))) == sorted(events)
    assert _dynamo_stats() == stats


class _Event:
    """A profiler event as the attribution reads it (times in microseconds)."""

    def __init__(self, name: str, start: float, total_us: float, children: tuple[_Event, ...] = (), shapes=()) -> None:
        from types import SimpleNamespace

        self.name, self.cpu_time_total, self.self_cpu_time_total = name, total_us, total_us
        self.device_time_total = 0.0
        self.input_shapes = list(shapes)
        self.time_range = SimpleNamespace(start=start)
        self.cpu_children = list(children)
        self.cpu_parent = None
        for child in children:
            child.cpu_parent = self

    def all(self) -> list[_Event]:
        return [self, *(event for child in self.cpu_children for event in child.all())]


def test_fused_kernels_get_the_eager_ops_they_hold(tmp_path) -> None:
    """Without compiling: a generated module, its events and a counting step's records."""
    from gpuscope.profiling.attribution import claim_events, join_counts
    from gpuscope.profiling.compiled_attribution import attribute_compiled
    from gpuscope.profiling.record import CountedStep, OpRecord

    source = tmp_path / "cgen.py"
    source.write_text(
        "# AOT ID: ['0_forward']\n"
        "class Runner:\n"
        "    def call(self, args):\n"
        "        primals_1, primals_2 = args\n"
        "        buf0 = empty_strided_cpu((8, 64), (64, 1), torch.float32)\n"
        "        extern_kernels.mm(primals_1, primals_2, out=buf0)\n"
        "        buf1 = empty_strided_cpu((8, 64), (64, 1), torch.float32)\n"
        "        cpp_fused_gelu_native_layer_norm_0(buf0, buf1)\n"
        "        buf2 = empty_strided_cpu((8, 64), (64, 1), torch.float32)\n"
        "        cpp_fused_mystery_1(buf1, buf2)\n"
        "        return (buf2, )\n"
        "runner = Runner()\n"
        "def get_args():\n"
        "    primals_1 = rand_strided((8, 32), (32, 1), device='cpu', dtype=torch.float32)\n"
        "    primals_2 = rand_strided((32, 64), (64, 1), device='cpu', dtype=torch.float32)\n"
    )

    def record(name: str, shapes: tuple, counter: int, pointwise: int, module: str) -> OpRecord:
        return OpRecord(name, shapes, "fp32", counter, pointwise, 2048, module, False, False)

    records = [
        record("aten::mm", ((8, 32), (32, 64)), 32768, 0, "net.fc"),
        record("aten::gelu", ((8, 64),), 0, 4096, "net.act"),
        record("aten::native_layer_norm", ((8, 64), (64,), (64,)), 0, 3584, "net.norm"),
    ]
    counted = CountedStep(records=records, flop_counter_total=32768, wall_s=0.0)
    mm = _Event("aten::mm", 3, 20, shapes=([8, 32], [32, 64], [8, 64]))
    kernel0, kernel1 = _Event("<built-in function kernel>", 5, 7), _Event("<built-in function kernel>", 6, 3)
    call = _Event(f"{source}(3): call", 2, 40, (mm, kernel0, kernel1))
    graph = _Event("## Call CompiledFxGraph abc ##", 1, 41, (call,))
    region = _Event("Torch-Compiled Region: 0/0", 0, 50, (graph,))
    events = region.all()
    step = claim_events(events, counted.names, "cpu")
    join_counts(step, counted)
    assert step.ops[0].record is None  # the out= buffer keeps the extern kernel from its twin ...
    found = attribute_compiled(events, step, counted, "cpu")
    assert step.ops[0].record is records[0]  # ... until the key leaves it out
    assert [region.region for region in found.regions] == ["0/0"]
    first, second = found.kernels
    assert first.name == "inductor::cpp_fused_gelu_native_layer_norm_0" and first.time_s == pytest.approx(7e-6)
    assert first.record.fused == ("gelu", "native_layer_norm")
    assert first.record.pointwise_flops == 4096 + 3584 and not first.record.no_formula
    assert first.record.bytes == 2 * 8 * 64 * 4
    assert second.record.no_formula, "a name gpuscope cannot read is unknown, never guessed"
    assert second.record.flops == 0
    assert found.unplaced_ops == 0
    assert sum(op.record.flops for op in step.ops if op.record) == 32768 + 4096 + 3584
