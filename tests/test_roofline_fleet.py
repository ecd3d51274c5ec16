"""A fleet on the roofline chart: a multi-node results file with more devices than the chart can
tell apart (``gpuscope probe --distributed`` on many nodes) is drawn as one median device per
hardware model plus its worst stragglers; the tables and ``--json`` keep every device. And the
lookups that made a 5,000-device file take minutes (benchmarks/bench_scale_devices.py times them)
stay right when the model's lists change."""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path
from typing import Any

import msgspec
import pytest
from support.roofline import typed

from gpuscope.cli import main
from gpuscope.report import build
from gpuscope.report.compare import FLEET_COLUMNS, _LeaveOneOut, compare_results, render_compare_text
from gpuscope.report.model import FLEET_HOSTS
from gpuscope.report.tables import system_table
from gpuscope.roofline.layout import layout_roofline
from gpuscope.roofline.layout_fleet import FLEET_DEVICES, FLEET_STRAGGLERS
from gpuscope.roofline.loading import build_model
from gpuscope.roofline.model import DeviceKey, DeviceRoofs, Roof, RooflineModel

GPU = "NVIDIA H100 80GB HBM3"
RANKS, PER_NODE = 40, 4
SLOW = {5: "bf16", 17: "dram.triad"}  # rank -> its straggler roof


def _rank(rank: int, rng: random.Random) -> dict[str, Any]:
    host, device = f"node-{rank // PER_NODE}", f"cuda:{rank % PER_NODE}"

    def value(name: str, typical: float) -> float:
        return typical * (0.75 if SLOW.get(rank) == name else 1.0) * (1 + 0.02 * (rng.random() - 0.5))

    ceilings = [
        {"device": device, "kind": "compute", "name": "bf16", "value": value("bf16", 780e12), "unit": "FLOP/s"},
        {"device": device, "kind": "compute", "name": "fp32", "value": value("fp32", 51e12), "unit": "FLOP/s"},
        {"device": device, "kind": "memory", "name": "dram.triad", "value": value("dram.triad", 3e12), "unit": "B/s"},
    ]
    workloads = [
        {"name": "gemm bf16", "device": device, "dtype": "bf16", "flops": 1.1e12, "bytes": 4e8, "time_s": 0.0019},
        {"name": "mlp fp32", "device": device, "dtype": "fp32", "flops": 5.5e11, "bytes": 6e8, "time_s": 0.012},
    ]
    return {
        "schema": "gpuscope.results", "schema_version": 1, "system": {"hostname": host},
        "devices": [{"device": device, "type": "gpu", "name": GPU}], "measurements": [],
        "ceilings": ceilings, "workloads": workloads, "warnings": [],
    }  # fmt: skip


def fleet_document() -> dict[str, Any]:
    """40 H100s on 10 nodes merged as ``probe --distributed`` merges them; ranks 5 and 17 are stragglers."""
    from gpuscope.probing.cluster import RankReport, merge_rank_results
    from gpuscope.results import to_results
    from gpuscope.schema.results import SuiteRef

    rng = random.Random(7)
    reports = [
        RankReport(rank=rank, host=f"node-{rank // PER_NODE}", status="ok",
                   results=to_results(_rank(rank, rng), f"rank {rank}"), local_rank=rank % PER_NODE,
                   device=f"cuda:{rank % PER_NODE}")
        for rank in range(RANKS)
    ]  # fmt: skip
    merged: dict[str, Any] = msgspec.to_builtins(
        merge_rank_results(reports, world_size=RANKS, suite=SuiteRef(name="burn-in"))
    )
    return merged


@pytest.fixture
def fleet_path(tmp_path: Path) -> Path:
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(fleet_document()), encoding="utf-8")
    return path


def test_fleet_is_drawn_as_its_median_device_and_its_stragglers() -> None:
    """40 devices of one model: one median envelope, the two stragglers on their own, 80 points."""
    assert RANKS > FLEET_DEVICES and len(SLOW) <= FLEET_STRAGGLERS
    model = build_model(typed([("fleet.json", fleet_document())]), local_cpu=None)
    layout = layout_roofline(model)
    group, *own = layout.legend
    assert group.label == f"{RANKS} devices"
    assert f"median of {RANKS} devices: bf16" in group.text
    assert any(note.startswith(f"{RANKS} devices: across them bf16") for note in layout.notes)
    assert [entry.label for entry in own] == ["node-1/r5:cuda:1", "node-4/r17:cuda:1"]
    assert all(entry.name == f"{entry.label} ({GPU})" for entry in own)
    # the group's bf16 peak is the median of its members' bf16 roofs
    bf16 = [r.value for device in model.devices for r in device.roofs if (r.name, r.source) == ("bf16", "measured")]
    drawn = {segment.roof.value for segment in layout.segments if segment.device == 0 and segment.roof.name == "bf16"}
    assert drawn == {statistics.median(bf16)}
    # lines per legend entry, not per device; every point still drawn, tagged only on the stragglers
    assert len(layout.segments) <= 4 * len(layout.legend)
    assert len(layout.points) == 2 * RANKS
    tagged = {mark.placement.point.key.rank for mark in layout.points if mark.tag}
    assert tagged == set(SLOW)
    assert {mark.device for mark in layout.points if mark.placement.point.key.rank == 17} == {2}
    every = layout_roofline(model, all_roofs=True)
    assert len(every.legend) == 3 and {s.roof.name for s in every.segments if s.device == 0} >= {"fp32", "tf32", "dram"}


def test_fleet_chart_in_the_terminal_and_every_device_in_json(
    fleet_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`roofline` on a fleet: a legend of three entries within the width; --json keeps all 40 devices."""
    assert main(["roofline", "--probes", str(fleet_path), "--width", "100", "--height", "24", "--no-color"]) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 100 for line in out.splitlines())
    legend = [line for line in out.splitlines() if line.startswith("━━ GPU")]
    assert len(legend) == 3 and f"median of {RANKS} devices" in legend[0]
    assert main(["roofline", "--probes", str(fleet_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["devices"]) == RANKS and len(data["points"]) == 2 * RANKS


def test_a_few_devices_are_each_drawn() -> None:
    """At most FLEET_DEVICES devices: one legend entry each, as before fleets were grouped."""
    document = fleet_document()
    keep = {(d["host"], d["rank"]) for d in document["devices"][:FLEET_DEVICES]}
    for field in ("devices", "ceilings", "workloads"):
        document[field] = [item for item in document[field] if (item.get("host"), item.get("rank")) in keep]
    layout = layout_roofline(build_model(typed([("few.json", document)]), local_cpu=None))
    labels = [f"node-{rank // PER_NODE}/r{rank}:cuda:{rank % PER_NODE}" for rank in range(FLEET_DEVICES)]
    assert [entry.label for entry in layout.legend] == labels
    assert all(mark.tag for mark in layout.points)


def test_fleet_tables_have_a_row_per_model_then_the_stragglers(
    fleet_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`roofline` tables of a fleet: one workload row per model (medians) and the stragglers' own rows."""
    assert main(["roofline", "--probes", str(fleet_path), "--width", "120", "--no-color"]) == 0
    out = capsys.readouterr().out
    devices = out[: out.index("Stragglers")].splitlines()
    assert devices[0].startswith(f"{RANKS} devices: gpu · {GPU}") and "2 STRAGGLERS" in devices[0]
    workloads = out[out.index("Workloads") : out.index("Roofs:")].splitlines()
    grouped = [line for line in workloads if line.split()[:1] == ["-"]]
    assert [line.split()[1:3] for line in grouped] == [["gemm", "bf16"], ["mlp", "fp32"]]
    assert all(f"{RANKS} devices" in line for line in grouped)
    assert sum(1 for line in workloads if "node-1/r5:cuda:1" in line) == 2  # its two points, tagged
    roofs = out[out.index("Roofs:") :].splitlines()
    bf16 = next(
        line for line in roofs if line.startswith(f"{RANKS} devices") and " bf16 " in line and "measured" in line
    )
    assert "STRAGGLER" in bf16 and "-" in bf16.split("measured")[1]  # its range across the devices


def test_fleet_report_and_compare_summarize_hosts_and_ranks(fleet_path: Path) -> None:
    """The report's summary and System table give one entry to hosts that read alike; compare's
    text has one column per results file (median and range) instead of one per rank."""
    assert RANKS // PER_NODE > FLEET_HOSTS and RANKS > FLEET_COLUMNS
    report, _ = build([str(fleet_path)])
    hosts = [line for line in report.summary or [] if "hosts (" in line]
    assert hosts == [
        f"{RANKS // PER_NODE} hosts (node-0 … node-{RANKS // PER_NODE - 1}): CPU unknown, {PER_NODE}× {GPU}."
    ]
    assert system_table(report).headers[1].startswith(f"{RANKS // PER_NODE} hosts (")
    assert report.title.endswith(f"{RANKS // PER_NODE} hosts (node-0 … node-{RANKS // PER_NODE - 1})")
    result = compare_results(typed([("fleet.json", json.loads(fleet_path.read_text(encoding="utf-8")))]))
    assert len(result["runs"]) == RANKS  # the JSON keeps every rank
    text = render_compare_text(result)
    header = text.splitlines()[1]
    assert header.split()[-2:] == ["(40", "runs)"]
    bf16 = [
        line for line in text.splitlines() if line.startswith("cuda:1") and " compute " in line and " bf16 " in line
    ]
    assert len(bf16) == 1 and "1× [straggler]" in bf16[0] and "TFLOP/s [" in bf16[0]  # rank 5, and the range


def test_device_lookup_follows_the_device_list() -> None:
    """The model's index by device key sees a device appended, and a list replaced."""
    first = DeviceRoofs(key=DeviceKey("a", 0, "cuda:0"), device_type="gpu")
    model = RooflineModel(devices=[first])
    assert model.device(first.key) is first and not model.multi_host
    second = DeviceRoofs(key=DeviceKey("b", 1, "cuda:0"), device_type="gpu")
    model.devices.append(second)
    assert model.device(second.key) is second and model.multi_host
    model.devices = [second]
    assert model.device(first.key) is None and not model.multi_host
    roof = Roof(second.key, "compute", "bf16", 1.0, "FLOP/s", "measured")
    duplicate = DeviceRoofs(key=second.key, device_type="gpu", roofs=[roof])
    model.devices.append(duplicate)
    assert model.device(second.key) is second  # the first with the key, as the scan returned


@pytest.mark.parametrize("count", [2, 3, 4, 7, 10])
def test_leave_one_out_median_is_statistics_median_of_the_others(count: int) -> None:
    """compare's peer median (each value against the median of the others) is exactly
    statistics.median of the list less that value, duplicates included."""
    rng = random.Random(count)
    values = [float(rng.choice([1, 2, 2, 3, 5, 8])) + rng.random() * (index % 2) for index in range(count)]
    ranked = _LeaveOneOut(values)
    for position in range(count):
        assert ranked.median_without(position) == statistics.median(values[:position] + values[position + 1 :])


def test_few_collections_restores_the_thresholds(fleet_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The batch commands collect garbage rarely while they read, and give the defaults back
    (a test run or the TUI keeps them), after an error too."""
    import gc

    from gpuscope.batchgc import BATCH_THRESHOLDS, few_collections

    before = gc.get_threshold()
    with pytest.raises(RuntimeError), few_collections():
        assert gc.get_threshold() == BATCH_THRESHOLDS
        raise RuntimeError("a bad file")
    assert gc.get_threshold() == before
    for argv in (["roofline", "--probes", str(fleet_path), "--json"], ["compare", str(fleet_path)]):
        assert main(argv) == 0
        assert gc.get_threshold() == before
    capsys.readouterr()


def test_few_collections_nested_and_in_threads_restore_once() -> None:
    """Blocks entered in two threads, left in either order: the defaults come back after the last."""
    import gc
    import threading

    from gpuscope.batchgc import BATCH_THRESHOLDS, few_collections

    before = gc.get_threshold()
    entered, release = threading.Event(), threading.Event()

    def worker() -> None:
        with few_collections():
            entered.set()
            release.wait(10)

    thread = threading.Thread(target=worker)
    with few_collections():
        thread.start()
        assert entered.wait(10)
    assert gc.get_threshold() == BATCH_THRESHOLDS  # the worker's block is still open
    release.set()
    thread.join(10)
    assert gc.get_threshold() == before
