"""One machine identity across results files, the CPU's datasheet clock and where it came from,
the model's JSON read back, and the interconnect table (bandwidth against message size)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.roofline import ceiling, fleet_results, results_document, typed, workload

from gpuscope.roofline.loading import build_model
from gpuscope.roofline.model_json import model_from_json, model_to_json
from gpuscope.roofline.tables import bandwidth_table
from gpuscope.telemetry.cpuinfo import read_cpu_info


def _gpu_doc(host: str, device: str, uuid: str | None, rank: int | None = None, **extra: object) -> dict:
    entry = {"device": device, "type": "gpu", "name": "NVIDIA H200", "host": host, "rank": rank}
    if uuid:
        entry["uuid"] = uuid
    return results_document(
        host,
        [entry],
        [
            ceiling(device, "compute", "bf16", 790e12, rank=rank),
            ceiling(device, "memory", "dram.triad", 4.3e12, rank=rank),
        ],
        **extra,
    )


def test_a_gpu_is_its_uuid_in_every_file() -> None:
    probe = _gpu_doc("node", "cuda:0", "GPU-1234", rank=0)
    measured = results_document(
        "node", [{"device": "cuda:1", "type": "gpu", "name": "NVIDIA H200", "host": "node", "uuid": "gpu-1234"}], [],
        [workload("gemm", "cuda:1", 1e12, 1e9, 0.002, dtype="bf16")],
    )  # fmt: skip
    model = build_model(typed([("probe.json", probe), ("measure.json", measured)]), datasheet=False)
    assert [device.key.device for device in model.devices] == ["cuda:0"]
    (placement,) = model.placements
    assert placement.compute_roof is not None and placement.compute_roof.source == "measured"


def test_ranks_of_a_multi_rank_file_stay_apart_without_uuid_but_cpus_of_one_host_merge() -> None:
    doc = results_document(
        "node",
        [{"device": "cuda:0", "type": "gpu", "name": "NVIDIA H200", "rank": r} for r in (0, 1)]
        + [{"device": "cpu", "type": "cpu", "name": "X", "rank": r} for r in (0, 1)],
        [ceiling("cuda:0", "compute", "bf16", v, rank=r) for r, v in ((0, 790e12), (1, 780e12))]
        + [ceiling("cpu", "compute", "fp32", v, rank=r) for r, v in ((0, 1e11), (1, 9e10))],
    )
    model = build_model(typed([("multi.json", doc)]), datasheet=False)
    keys = sorted((d.key.device, d.key.rank) for d in model.devices)
    assert keys == [("cpu", None), ("cuda:0", 0), ("cuda:0", 1)]
    cpu = next(d for d in model.devices if d.device_type == "cpu")
    assert [roof.value for roof in cpu.roofs] == [1e11]  # one CPU: its best measurement


def test_cpu_clock_sources(tmp_path: Path) -> None:
    proc = tmp_path / "cpuinfo"
    sys_cpu = tmp_path / "sys"
    (sys_cpu / "cpu0").mkdir(parents=True)
    text = (
        "processor\t: 0\nmodel name\t: AMD EPYC 7763 64-Core Processor\ncpu MHz\t\t: 2445.4\n"
        "flags\t\t: avx2 fma\ncpu cores\t: 2\nphysical id\t: 0\n"
    )
    proc.write_text(text)
    assert read_cpu_info(proc, sys_cpu).clock_source == "3500 MHz (boost clock table)"
    (sys_cpu / "cpu0" / "cpufreq").mkdir()
    (sys_cpu / "cpu0" / "cpufreq" / "cpuinfo_max_freq").write_text("3600000\n")
    info = read_cpu_info(proc, sys_cpu)
    assert info.clock_source == "3600 MHz (cpufreq cpuinfo_max_freq)"
    assert info.peak_flop_per_s("fp32") == pytest.approx(2 * 32 * 3.6e9)
    proc.write_text(text.replace("EPYC 7763 64-Core Processor", "EPYC"))
    (sys_cpu / "cpu0" / "cpufreq" / "cpuinfo_max_freq").unlink()
    assert "current clock" in read_cpu_info(proc, sys_cpu).clock_source


def test_model_json_reads_back_to_the_same_placements() -> None:
    model = build_model(typed([("fleet.json", fleet_results())]), local_cpu=None)
    data = json.loads(json.dumps(model_to_json(model)))
    again = model_from_json(data)
    assert [(p.bound, round(p.efficiency or 0, 6)) for p in again.placements] == [
        (p.bound, round(p.efficiency or 0, 6)) for p in model.placements
    ]
    assert data["devices"][0]["envelope"]["compute"]["name"] == "bf16"
    assert "STREAM triad" in data["dram_rule"]


def test_bandwidth_table_by_message_size() -> None:
    doc = results_document(
        "n",
        [{"device": "cpu", "type": "cpu", "name": "X"}],
        [ceiling("cpu", "collective", "allreduce.busbw", 1.6e9, size_bytes=16777216)],
    )
    doc["measurements"] = [
        {
            "id": f"m{i}",
            "kind": "collective",
            "name": f"allreduce {s}",
            "device": "cpu",
            "status": "ok",
            "parameters": {"op": "allreduce", "size_bytes": s},
            "busbw_bytes_per_s": v,
        }
        for i, (s, v) in enumerate(((1048576, 0.7e9), (16777216, 1.6e9)))
    ]
    model = build_model(typed([("c.json", doc)]), datasheet=False)
    header, row = bandwidth_table(model, 100)[:2]
    assert header.split() == ["device", "link", "best", "datasheet", "1.05", "MB", "16.8", "MB"]
    assert row.split()[:2] == ["cpu", "allreduce"] and "700 MB/s" in row and row.endswith("1.6 GB/s")
    assert model_from_json(json.loads(json.dumps(model_to_json(model)))).bandwidths == model.bandwidths
