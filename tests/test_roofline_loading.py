"""Results files -> roofline model: measured and datasheet roofs, several files combined,
hosts kept apart, the JSON form."""

from __future__ import annotations

import json

import pytest
from support.roofline import ceiling, cpu_results, h200_results, results_document, typed, workload, write_results

from gpuscope.errors import BadInputError
from gpuscope.roofline.loading import build_model, load_model
from gpuscope.roofline.model import DATASHEET, MEASURED, DeviceKey
from gpuscope.roofline.model_json import model_to_json
from gpuscope.telemetry.cpuinfo import CpuInfo


def FakeCpu() -> CpuInfo:  # noqa: N802 - reads as the class it stands for
    """A CPU of 4 TFLOP/s fp32 and 2 TFLOP/s fp64 datasheet peak: 100 cores x 16 FLOP/cycle x 2.5 GHz."""
    return CpuInfo("Fake CPU 9000", "x", "x86_64", 100, 100, None, 2500.0, fp32_flop_per_cycle_per_core=16)


def build(*documents, datasheet=True, cpu=None):
    named = typed([(f"file{i}.json", doc) for i, doc in enumerate(documents)])
    return build_model(named, datasheet=datasheet, local_cpu=cpu or FakeCpu())


def test_measured_and_datasheet_roofs_of_one_file():
    model = build(h200_results())
    gpu = model.device(DeviceKey("gpu-node", None, "cuda:0"))
    assert gpu is not None and gpu.device_type == "gpu"
    assert gpu.datasheet == "H200 SXM"
    measured = {(r.kind, r.name) for r in gpu.roofs if r.source == MEASURED}
    assert measured == {
        ("compute", "bf16"),
        ("compute", "fp32"),
        ("memory", "dram.triad"),
        ("memory", "l2.triad"),
        ("transfer", "h2d.pinned"),
    }
    datasheet = {r.name: r.value for r in gpu.roofs if r.source == DATASHEET}
    assert datasheet["bf16"] == pytest.approx(989e12)
    assert datasheet["dram"] == pytest.approx(4.8e12)
    assert datasheet["pcie.h2d"] == pytest.approx(64e9)
    assert datasheet["nvlink"] == pytest.approx(450e9)
    assert "int8" not in datasheet  # OP/s, not a FLOP/s roof
    cpu = model.device(DeviceKey("gpu-node", None, "cpu"))
    assert {r.name: r.value for r in cpu.roofs if r.source == DATASHEET} == {"fp32": 4e12, "fp64": 2e12}


def test_points_are_placed():
    model = build(h200_results())
    by_name = {p.point.name: p for p in model.placements}
    assert by_name["matmul 8192 bf16"].bound == "compute"
    assert by_name["matmul 8192 bf16"].compute_roof.name == "bf16"
    assert by_name["matmul 8192 bf16"].efficiency == pytest.approx(1.1e12 / 0.0014 / 790e12)
    assert by_name["softmax"].bound == "memory"
    assert by_name["cpu gemm"].compute_roof.name == "fp32"
    assert by_name["cpu gemm"].point.key.device == "cpu"


def test_no_datasheet():
    model = build(h200_results(), datasheet=False)
    assert all(roof.source == MEASURED for device in model.devices for roof in device.roofs)


def test_cpu_datasheet_only_for_the_same_cpu():
    model = build(cpu_results())  # "Other CPU 42" is not this machine's "Fake CPU 9000"
    cpu = model.devices[0]
    assert not [r for r in cpu.roofs if r.source == DATASHEET]
    assert any("no CPU datasheet roof" in note for note in cpu.notes)


def test_two_files_from_two_hosts_combine_and_stay_apart():
    model = build(h200_results("node-a"), cpu_results("node-b"))
    keys = {device.key for device in model.devices}
    assert keys == {
        DeviceKey("node-a", None, "cuda:0"),
        DeviceKey("node-a", None, "cpu"),
        DeviceKey("node-b", None, "cpu"),
    }
    assert model.multi_host
    assert model.device_label(DeviceKey("node-b", None, "cpu")) == "node-b:cpu"
    assert len(model.points) == 4
    stencil = next(p for p in model.placements if p.point.name == "stencil")
    assert stencil.compute_roof.name == "fp64" and stencil.memory_roof.value == pytest.approx(23e9)
    assert model.sources == ["file0.json", "file1.json"]


def test_cpu_run_and_gpu_run_of_one_host_share_the_host():
    gpu_only = results_document(
        "node-a",
        [{"device": "cuda:0", "type": "gpu", "name": "NVIDIA L4"}],
        [ceiling("cuda:0", "compute", "bf16", 100e12)],
    )
    cpu_only = results_document(
        "node-a", [{"device": "cpu", "type": "cpu", "name": "Fake CPU 9000"}], [ceiling("cpu", "compute", "fp32", 1e12)]
    )
    model = build(gpu_only, cpu_only)
    assert not model.multi_host
    assert {device.key.device for device in model.devices} == {"cuda:0", "cpu"}


def test_same_roof_in_two_files_keeps_the_best():
    first = results_document("n", [], [ceiling("cpu", "compute", "fp32", 1e12)])
    second = results_document("n", [], [ceiling("cpu", "compute", "fp32", 1.5e12)])
    model = build(first, second, datasheet=False)
    (roof,) = model.devices[0].roofs
    assert roof.value == 1.5e12 and roof.origin == "file1.json"


def test_multi_node_roofs_group_by_host_and_rank():
    document = results_document(
        "launcher",
        [],
        [
            ceiling("cuda:0", "compute", "bf16", 700e12, host="n1", rank=0),
            ceiling("cuda:0", "compute", "bf16", 650e12, host="n2", rank=1),
            ceiling("cuda:0", "collective", "allreduce.busbw", 300e9, host="n1", rank=0),
        ],
    )
    model = build(document, datasheet=False)
    labels = sorted(model.device_label(device.key) for device in model.devices)
    assert labels == ["n1/r0:cuda:0", "n2/r1:cuda:0"]
    n1 = model.device(DeviceKey("n1", 0, "cuda:0"))
    assert n1.collective[0].name == "allreduce.busbw"


def test_wrong_unit_and_failed_ceilings_are_ignored_with_a_warning():
    document = results_document(
        "n",
        [],
        [
            ceiling("cpu", "compute", "fp32", 1e12),
            {"device": "cpu", "kind": "memory", "name": "dram.triad", "value": 1e10, "unit": "FLOP/s"},
            ceiling("cpu", "compute", "fp64", 5e11, status="failed"),
        ],
    )
    model = build(document, datasheet=False)
    assert [roof.name for roof in model.devices[0].roofs] == ["fp32"]
    assert len(model.warnings) == 2


def test_gpu_without_a_name_or_unknown_model_notes_why():
    document = results_document(
        "n",
        [{"device": "cuda:1", "type": "gpu", "name": "NVIDIA Mystery 9"}],
        [ceiling("cuda:0", "compute", "bf16", 1e14)],
    )
    model = build(document)
    notes = {device.key.device: device.notes for device in model.devices}
    assert any("no device name" in note for note in notes["cuda:0"])
    assert any("not in the datasheet" in note for note in notes["cuda:1"])


def test_model_json_round_trip(tmp_path):
    path = write_results(tmp_path / "r.json", h200_results())
    model = load_model([path], local_cpu=FakeCpu())
    data = json.loads(json.dumps(model_to_json(model), allow_nan=False))
    assert data["schema"] == "gpuscope.roofline"
    gpu = next(device for device in data["devices"] if device["device"] == "cuda:0")
    assert gpu["datasheet"] == "H200 SXM"
    ridge = next(
        r
        for r in gpu["ridge_points"]
        if (r["compute"], r["compute_source"], r["memory"]) == ("bf16", "measured", "dram.triad")
    )
    assert ridge["intensity_flop_per_byte"] == pytest.approx(790e12 / 4.3e12)
    point = next(p for p in data["points"] if p["name"] == "softmax")
    assert point["bound"] == "memory" and 0 < point["efficiency"] <= 1
    assert point["memory_roof"]["name"] == "dram.triad"


def test_load_model_reports_bad_files_as_bad_input(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema": "gpuscope.results", "schema_version": 1, "ceilings": [', encoding="utf-8")
    with pytest.raises(BadInputError, match="broken.json"):
        load_model([broken])


def test_workload_warm_flag_from_cache_state():
    document = results_document("n", [], [], [workload("w", "cpu", 1e9, 1e6, 1.0, cache_state="warm")])
    model = build(document, datasheet=False)
    assert model.points[0].warm is True
