"""The roofline model on hand-made roofs: ridge points, attainable FLOP/s, classification,
efficiency against the bounding roof, and the above-roof flag."""

from __future__ import annotations

import math

import pytest

from gpuscope.roofline.model import (
    ABOVE_ROOF_TOLERANCE,
    DATASHEET,
    MEASURED,
    DeviceKey,
    DeviceRoofs,
    Point,
    Roof,
    attainable_flop_per_s,
    compute_roof_for,
    memory_level,
    memory_roof_for,
    place_point,
    ridge_point_flop_per_byte,
    ridge_points,
)

KEY = DeviceKey(host="h", rank=None, device="cuda:0")


def roof(kind: str, name: str, value: float, source: str = MEASURED) -> Roof:
    return Roof(KEY, kind, name, value, "FLOP/s" if kind == "compute" else "B/s", source)


def device(*roofs: Roof) -> DeviceRoofs:
    return DeviceRoofs(key=KEY, device_type="gpu", name="test", roofs=list(roofs))


def point(flops: float, bytes_: float, time_s: float, **extra) -> Point:
    return Point(name="p", key=KEY, flops=flops, bytes=bytes_, time_s=time_s, **extra)


# A machine with round numbers: 100 TFLOP/s bf16, 10 TFLOP/s fp32, 1 TB/s DRAM, 5 TB/s L2.
MACHINE = device(
    roof("compute", "bf16", 100e12),
    roof("compute", "fp32", 10e12),
    roof("memory", "dram.triad", 1e12),
    roof("memory", "l2.triad", 5e12),
    roof("compute", "bf16", 120e12, DATASHEET),
    roof("memory", "dram", 1.2e12, DATASHEET),
)


def test_ridge_point_is_compute_over_bandwidth():
    assert ridge_point_flop_per_byte(100e12, 1e12) == pytest.approx(100.0)
    assert ridge_point_flop_per_byte(10e12, 1e12) == pytest.approx(10.0)


def test_attainable_is_min_of_compute_and_intensity_times_bandwidth():
    assert attainable_flop_per_s(1.0, 100e12, 1e12) == pytest.approx(1e12)  # memory side
    assert attainable_flop_per_s(50.0, 100e12, 1e12) == pytest.approx(50e12)
    assert attainable_flop_per_s(100.0, 100e12, 1e12) == pytest.approx(100e12)  # the ridge
    assert attainable_flop_per_s(1000.0, 100e12, 1e12) == pytest.approx(100e12)  # compute side


def test_attainable_rejects_bad_roofs():
    with pytest.raises(ValueError):
        attainable_flop_per_s(1.0, 0.0, 1e12)
    with pytest.raises(ValueError):
        ridge_point_flop_per_byte(1e12, -1)


def test_ridge_points_cover_every_pair():
    ridges = ridge_points(MACHINE)
    assert len(ridges) == 3 * 3  # three compute roofs x three memory roofs
    found = {(r.compute.name, r.compute.source, r.memory.name): r.intensity_flop_per_byte for r in ridges}
    assert found[("bf16", MEASURED, "dram.triad")] == pytest.approx(100.0)
    assert found[("fp32", MEASURED, "l2.triad")] == pytest.approx(2.0)
    assert found[("bf16", DATASHEET, "dram")] == pytest.approx(100.0)


def test_memory_level_names():
    assert memory_level("dram.triad") == "dram"
    assert memory_level("hbm") == "dram"
    assert memory_level("l2.copy") == "l2"
    assert memory_level("l3.read") == "llc"
    assert memory_level("llc.copy") == "llc"


def test_roof_selection_prefers_measured_roof_of_the_points_dtype():
    assert compute_roof_for(MACHINE, "bf16").value == 100e12
    assert compute_roof_for(MACHINE, "bf16").source == MEASURED
    assert compute_roof_for(MACHINE, "fp32").value == 10e12
    # Unknown dtype, or a dtype without a roof: the highest roof of any source.
    assert compute_roof_for(MACHINE, None).value == 120e12
    assert compute_roof_for(MACHINE, "fp8").value == 120e12
    assert memory_roof_for(MACHINE).name == "dram.triad"
    only_datasheet = device(roof("compute", "fp32", 1e12, DATASHEET), roof("memory", "dram", 2e11, DATASHEET))
    assert memory_roof_for(only_datasheet).source == DATASHEET


def test_fp64_points_use_the_fp64_tensor_roof_when_higher():
    machine = device(roof("compute", "fp64", 30e12, DATASHEET), roof("compute", "fp64.tensor", 60e12, DATASHEET))
    assert compute_roof_for(machine, "fp64").name == "fp64.tensor"


def test_memory_bound_point_and_its_efficiency():
    # 1 FLOP/byte at 0.5 TFLOP/s: left of the bf16 ridge (100), roof there = 1 TFLOP/s.
    placement = place_point(point(1e9, 1e9, 1e9 / 0.5e12, dtype="bf16"), MACHINE)
    assert placement.bound == "memory"
    assert placement.memory_roof.name == "dram.triad"
    assert placement.bounding_roof is placement.memory_roof
    assert placement.ridge_flop_per_byte == pytest.approx(100.0)
    assert placement.attainable_flop_per_s == pytest.approx(1e12)
    assert placement.efficiency == pytest.approx(0.5)
    assert not placement.above_roof


def test_compute_bound_point_and_its_efficiency():
    # 1000 FLOP/byte at 80 TFLOP/s against the 100 TFLOP/s measured bf16 roof.
    placement = place_point(point(1e12, 1e9, 1e12 / 80e12, dtype="bf16"), MACHINE)
    assert placement.bound == "compute"
    assert placement.bounding_roof.name == "bf16"
    assert placement.efficiency == pytest.approx(0.8)


def test_classification_uses_the_dtype_ridge():
    # 50 FLOP/byte is compute-bound for fp32 (ridge 10) but memory-bound for bf16 (ridge 100).
    fp32 = place_point(point(50e9, 1e9, 1.0, dtype="fp32"), MACHINE)
    bf16 = place_point(point(50e9, 1e9, 1.0, dtype="bf16"), MACHINE)
    assert fp32.bound == "compute" and fp32.ridge_flop_per_byte == pytest.approx(10)
    assert bf16.bound == "memory" and bf16.ridge_flop_per_byte == pytest.approx(100)


def test_point_above_its_roof_is_flagged_as_a_counting_error():
    # 1 FLOP/byte at 2 TFLOP/s: twice the DRAM roof allows.
    placement = place_point(point(1e9, 1e9, 0.5e-3, dtype="bf16"), MACHINE)
    assert placement.above_roof
    assert placement.efficiency == pytest.approx(2.0)
    assert "counting error" in placement.note
    # Under the L2 roof (5 TB/s at 1 FLOP/byte): the note says it may come from cache.
    assert "l2.triad" in placement.note


def test_above_roof_tolerance():
    # 1 FLOP/byte: the DRAM roof allows 1 TFLOP/s; run slightly faster than that.
    just_under = place_point(point(1e12, 1e12, 1 / (1 + ABOVE_ROOF_TOLERANCE * 0.5), dtype="bf16"), MACHINE)
    just_over = place_point(point(1e12, 1e12, 1 / (1 + ABOVE_ROOF_TOLERANCE * 2), dtype="bf16"), MACHINE)
    assert not just_under.above_roof
    assert just_over.above_roof


def test_compute_above_roof():
    placement = place_point(point(1e15, 1e9, 1.0 / 150, dtype="bf16"), MACHINE)  # 150 TFLOP/s > 100
    assert placement.bound == "compute" and placement.above_roof


def test_measured_dram_bytes_decide_the_x_position():
    # Counted bytes say 100 FLOP/byte; the GPU actually moved 10x more.
    placement = place_point(point(1e11, 1e9, 1.0, dtype="bf16", dram_bytes_measured=1e10), MACHINE)
    assert placement.intensity_basis == "DRAM bytes measured"
    assert placement.intensity_flop_per_byte == pytest.approx(10.0)
    assert placement.bound == "memory"


def test_points_without_roofs_or_bytes():
    lonely = place_point(point(1e9, 1e6, 1.0), None)
    assert lonely.bound == "unknown" and lonely.efficiency is None and not lonely.above_roof
    no_bytes = place_point(point(50e12, 0, 1.0, dtype="bf16"), MACHINE)
    assert no_bytes.bound == "compute" and no_bytes.efficiency == pytest.approx(0.5)
    assert no_bytes.intensity_flop_per_byte is None
    no_time = place_point(point(1e9, 1e6, 0.0), MACHINE)
    assert no_time.bound == "unknown"


def test_device_key_labels():
    assert DeviceKey("node1", None, "cuda:0").label() == "cuda:0"
    assert DeviceKey("node1", None, "cuda:0").label(with_host=True) == "node1:cuda:0"
    assert DeviceKey("node1", 3, "cuda:0").label(with_host=True) == "node1/r3:cuda:0"
    assert DeviceKey(None, 3, "cpu").label(with_host=True) == "r3:cpu"
    assert math.isfinite(ridge_point_flop_per_byte(1, 1))


def test_roof_name_variants_serve_their_dtype():
    machine = device(
        roof("compute", "bf16.mma", 90e12), roof("compute", "fp32", 10e12), roof("memory", "dram.read", 1e12)
    )
    assert compute_roof_for(machine, "bf16").name == "bf16.mma"
    assert compute_roof_for(machine, "bf1").name == "bf16.mma"  # no such dtype: the highest roof


def test_a_point_with_nothing_counted_gets_no_verdict():
    """A step with time but no FLOPs and no bytes (nothing ran inside ops) is not "compute-bound at
    0%": 0 FLOP/s is no evidence. Bytes without FLOPs have no intensity on a log axis either."""
    empty = place_point(point(0.0, 0.0, 1e-3, dtype="bf16"), MACHINE)
    assert empty.bound == "unknown" and empty.efficiency is None
    assert empty.note == "nothing counted: no FLOPs and no bytes"
    copy = place_point(point(0.0, 1e9, 2e-3, dtype="bf16"), MACHINE)
    assert copy.bound == "unknown" and copy.note == "zero FLOPs counted"
    flops_only = place_point(point(1e9, 0.0, 1e-3, dtype="bf16"), MACHINE)
    assert flops_only.bound == "compute" and flops_only.efficiency == pytest.approx(1e12 / 100e12)
