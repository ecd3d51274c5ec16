"""Attribution and verdicts on hand-made profiler events and roofs (no torch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from gpuscope.profiling.attribution import (
    OpGroup,
    StepEvents,
    TimedOp,
    claim_events,
    group_ops,
    join_counts,
    module_rollup,
)
from gpuscope.profiling.record import CountedStep, OpRecord, match_key
from gpuscope.profiling.verdict import judge_group, judge_groups, roofs_statement
from gpuscope.roofline.model import DATASHEET, MEASURED, DeviceKey, DeviceRoofs, Roof

KEY = DeviceKey(host="h", rank=None, device="cpu")


@dataclass
class Event:
    name: str
    self_us: float
    children: list[Event] = field(default_factory=list)
    input_shapes: list[Any] = field(default_factory=list)
    start: float = 0.0
    cpu_parent: Any = None
    device_type: str = "DeviceType.CPU"
    kernel_us: float = 0.0  # GPU kernels launched by this event (joined by correlation id)

    def __post_init__(self) -> None:
        for child in self.children:
            child.cpu_parent = self

    @property
    def cpu_children(self) -> list[Event]:
        return self.children

    @property
    def self_cpu_time_total(self) -> float:
        return self.self_us

    @property
    def cpu_time_total(self) -> float:
        return self.self_us + sum(child.cpu_time_total for child in self.children)

    @property
    def self_device_time_total(self) -> float:
        return self.kernel_us

    @property
    def device_time_total(self) -> float:
        return self.kernel_us + sum(child.device_time_total for child in self.children)

    @property
    def time_range(self) -> Any:
        return type("R", (), {"start": self.start})()


def flatten(events: list[Event]) -> list[Event]:
    out: list[Event] = []
    for event in events:
        out.append(event)
        out.extend(flatten(event.children))
    return out


def record(
    name: str,
    shapes: tuple[tuple[int, ...], ...],
    flops: int = 0,
    pointwise: int = 0,
    nbytes: int = 0,
    module: str = "",
) -> OpRecord:
    return OpRecord(name, shapes, "fp32", flops, pointwise, nbytes, module, False, False)


def _step_events() -> list[Event]:
    # aten::linear (composite, not counted) -> aten::t (counted; claims its child) + aten::addmm
    linear = Event(
        "aten::linear",
        5,
        [
            Event(
                "aten::t",
                2,
                [Event("aten::transpose", 1, [Event("aten::as_strided", 1)])],
                [[8, 4]],
                start=1,
            ),
            Event(
                "aten::addmm",
                100,
                [Event("aten::copy_", 20, input_shapes=[[2, 8], [2, 8]])],
                [[8], [2, 4], [4, 8], [], []],
                start=2,
            ),
        ],
        [[2, 4], [8, 4], [8]],
    )
    engine = Event(
        "autograd::engine::evaluate_function: AddBackward0",
        3,
        [Event("aten::add_", 30, input_shapes=[[2, 8], [2, 8], []], start=4)],
        start=3,
    )
    return flatten([linear, engine])


def _counted() -> CountedStep:
    records = [
        record("aten::t", ((8, 4),), module="net.fc"),
        record(
            "aten::addmm",
            ((8,), (2, 4), (4, 8)),
            flops=2 * 2 * 4 * 8,
            nbytes=1000,
            module="net.fc",
        ),
        record(
            "aten::add", ((2, 8), (2, 8)), pointwise=16, nbytes=192, module="net"
        ),  # the dispatch mode saw add, the profiler add_
    ]
    return CountedStep(records, flop_counter_total=128, wall_s=0.001)


def test_first_counted_event_claims_its_subtree() -> None:
    counted = _counted()
    step = claim_events(_step_events(), counted.names, "cpu")
    assert [(op.name, op.time_s) for op in step.ops] == [
        ("aten::t", pytest.approx(4e-6)),
        ("aten::addmm", pytest.approx(120e-6)),
        ("aten::add_", pytest.approx(30e-6)),
    ]
    assert step.traced_s == pytest.approx(162e-6)  # every self time: wrappers and engine too
    assert join_counts(step, counted) == 0
    assert [op.record.module for op in step.ops if op.record] == [
        "net.fc",
        "net.fc",
        "net",
    ]


def test_cuda_time_is_the_kernels_launched_inside_the_claiming_op() -> None:
    launch = Event("cudaLaunchKernel", 5, kernel_us=70.0)
    addmm = Event(
        "aten::addmm",
        10,
        [launch, Event("cudaLaunchKernel", 5, kernel_us=30.0)],
        [[8], [2, 4], [4, 8], [], []],
    )
    engine = Event(
        "autograd::engine::evaluate_function: AccumulateGrad",
        2,
        [Event("cudaLaunchKernel", 1, kernel_us=4.0)],
    )
    step = claim_events(
        flatten([Event("aten::linear", 3, [addmm]), engine]),
        frozenset({"aten::addmm"}),
        "cuda",
    )
    assert [(op.name, op.time_s) for op in step.ops] == [("aten::addmm", pytest.approx(100e-6))]
    assert step.traced_s == pytest.approx(104e-6)  # every kernel, inside an op or not


def test_match_key_joins_in_place_forms_and_ignores_scalars() -> None:
    assert match_key("aten::add_", [[2, 8], [2, 8], []]) == match_key("aten::add", ((2, 8), (2, 8)))
    assert match_key("aten::cat", [[[2, 3], [2, 3]], []]) == (
        "aten::cat",
        ((2, 3), (2, 3)),
    )
    assert match_key("aten::mm", [[2, 4], [4, 8]]) != match_key("aten::mm", [[4, 8], [8, 2]])


def test_nth_event_takes_nth_record() -> None:
    records = [record("aten::mm", ((2, 2), (2, 2)), flops=16, module=f"layer{i}") for i in range(3)]
    counted = CountedStep(records, 48, 0.0)
    step = StepEvents([TimedOp("aten::mm", [[2, 2], [2, 2]], 1.0) for _ in range(4)], traced_s=4.0)
    assert join_counts(step, counted) == 0
    assert [op.record.module if op.record else None for op in step.ops] == [
        "layer0",
        "layer1",
        "layer2",
        None,
    ]


def test_groups_are_per_step_means_and_modules_roll_up() -> None:
    counted = _counted()
    steps = []
    for _ in range(2):
        step = claim_events(_step_events(), counted.names, "cpu")
        join_counts(step, counted)
        steps.append(step)
    groups = {group.op: group for group in group_ops(steps)}
    assert groups["aten::addmm"].calls_per_step == 1
    assert groups["aten::addmm"].time_s == pytest.approx(120e-6)
    assert groups["aten::addmm"].counter_flops == 128
    assert groups["aten::add"].pointwise_flops == 16 and groups["aten::add"].counter_flops == 0
    assert groups["aten::addmm"].label == "addmm fp32 8, 2x4, 4x8"
    modules = {total.path: total for total in module_rollup(steps)}
    assert modules["net"].time_s == pytest.approx(154e-6)  # net.fc's ops included
    assert modules["net.fc"].time_s == pytest.approx(124e-6)
    assert modules["net"].flops == 144


def _roofs(memory: bool = True) -> DeviceRoofs:
    roofs = [
        Roof(KEY, "compute", "fp32", 100e9, "FLOP/s", MEASURED),
        Roof(KEY, "compute", "fp32", 150e9, "FLOP/s", DATASHEET),
    ]
    if memory:
        roofs.append(Roof(KEY, "memory", "dram.triad", 20e9, "B/s", MEASURED))
    return DeviceRoofs(KEY, "cpu", "test cpu", roofs=roofs)


def group(flops: int, nbytes: int, time_s: float, counted: bool = True, pointwise: int = 0) -> OpGroup:
    return OpGroup(
        "aten::mm",
        ((64, 64), (64, 64)),
        "fp32",
        1,
        time_s,
        flops,
        pointwise,
        nbytes,
        counted,
        False,
    )


def test_compute_bound_verdict_against_the_measured_roof() -> None:
    verdict = judge_group(
        group(flops=2_000_000_000, nbytes=10_000_000, time_s=0.04),
        _roofs(),
        step_s=0.1,
        key=KEY,
    )
    assert verdict.bound == "compute" and verdict.roof_source == MEASURED and verdict.roof_name == "fp32"
    assert verdict.time_at_roof_s == pytest.approx(0.02)  # 2 GFLOP at 100 GFLOP/s
    assert verdict.time_lost_s == pytest.approx(0.02)
    assert verdict.efficiency == pytest.approx(0.5)
    assert verdict.step_speedup == pytest.approx(0.1 / 0.08)


def test_memory_bound_and_data_movement_verdicts() -> None:
    pointwise = judge_group(
        group(flops=0, pointwise=1_000_000, nbytes=12_000_000, time_s=0.002),
        _roofs(),
        0.1,
        KEY,
    )
    assert pointwise.bound == "memory" and pointwise.roof_name == "dram.triad"
    assert pointwise.time_at_roof_s == pytest.approx(12e6 / 20e9)
    copy = judge_group(group(flops=0, nbytes=40_000_000, time_s=0.004), _roofs(), 0.1, KEY)
    assert (
        copy.bound == "memory"
        and copy.time_at_roof_s == pytest.approx(0.002)
        and copy.time_lost_s == pytest.approx(0.002)
    )


def test_no_verdict_without_counts_or_memory_roof() -> None:
    assert judge_group(group(1, 1, 0.01, counted=False), _roofs(), 0.1, KEY).time_lost_s is None
    assert judge_group(group(0, 100, 0.01), _roofs(memory=False), 0.1, KEY).time_lost_s is None
    assert "no DRAM roof" in roofs_statement(_roofs(memory=False), ["fp32"])
    assert "fp32 100 GFLOP/s (measured)" in roofs_statement(_roofs(), ["fp32"])


def test_verdicts_rank_by_time_lost() -> None:
    groups = [
        group(2_000_000_000, 10_000_000, 0.021),
        group(2_000_000_000, 10_000_000, 0.05),
        group(1, 1, 0.09, counted=False),
    ]
    ranked = judge_groups(groups, _roofs(), 0.2, KEY)
    assert [v.group.time_s for v in ranked] == [0.05, 0.021, 0.09]
