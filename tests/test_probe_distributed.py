"""Multi-rank probes: merging, stragglers, network roofs, missing ranks; then real torchrun jobs
with gloo on loopback (2-3 CPU processes, one torch thread each), including a rank killed midway,
a rank that hangs, and a node that dies under a two-agent (multi-node style) launch."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from results_files import results_json

from gpuscope.cli import main
from gpuscope.errors import UsageError
from gpuscope.fileio import write_json_atomic
from gpuscope.probing.cluster import RankReport, collective_records, merge_rank_results
from gpuscope.probing.collective import CollectiveTiming, group_sizes
from gpuscope.probing.distributed import Launch
from gpuscope.results import empty_results
from gpuscope.schema.results import Ceiling, Device, Measurement, Results, SuiteRef, System

ROOT = Path(__file__).resolve().parents[1]
#: Runs gpuscope on every rank and breaks one rank on purpose (``kill:R``, ``hang:R``).
FAULTS = Path(__file__).with_name("_distributed_faults.py")

TINY = """\
[suite]
name = "tiny"
samples = 3
target_sample_s = 0.002
warmup_max_s = 0.2

[[probe]]
kind = "matmul"
dtypes = ["fp32"]
shapes = [[96, 96, 96]]
libraries = ["torch"]

[[probe]]
kind = "memory"
kernels = ["copy", "triad"]
working_sets = ["32KiB"]

[[probe]]
kind = "collective"
ops = ["allreduce", "allgather"]
sizes = ["64KiB"]
"""


# --- pure parts ---------------------------------------------------------------------------------


def _rank_doc(rank: int, fp32: float, copy: float) -> Results:
    measurements = [
        Measurement(id="m0001", kind="matmul", name="gemm", device="cpu", status="ok", flop_per_s=fp32),
        Measurement(id="m0002", kind="memory", name="copy", device="cpu", status="ok", bytes_per_s=copy),
    ]
    return empty_results(
        system=System(hostname=f"node{rank // 2}"),
        devices=[Device(device="cpu", type="cpu", name="Test CPU", host=f"node{rank // 2}", rank=0)],
        measurements=measurements,
        ceilings=[
            Ceiling(
                device="cpu", kind="compute", name="fp32", value=fp32, unit="FLOP/s", measurement_id="m0001", rank=0
            ),
            Ceiling(
                device="cpu", kind="memory", name="dram.copy", value=copy, unit="B/s", measurement_id="m0002", rank=0
            ),
        ],
        warnings=["noisy"],
        duration_s=1.0,
    )


def _reports(values: list[tuple[float, float]]) -> list[RankReport]:
    return [
        RankReport(
            rank=r, host=f"node{r // 2}", status="ok", results=_rank_doc(r, fp32, copy), local_rank=r % 2, device="cpu"
        )
        for r, (fp32, copy) in enumerate(values)
    ]


def test_group_sizes() -> None:
    assert group_sizes(1) == []
    assert group_sizes(2) == [2]
    assert group_sizes(3) == [2, 3]
    assert group_sizes(8) == [2, 4, 8]
    assert group_sizes(12) == [2, 4, 8, 12]


def test_merge_tags_every_entry_with_host_and_rank(tmp_path: Path) -> None:
    merged = merge_rank_results(_reports([(100e9, 20e9)] * 4), world_size=4, suite=SuiteRef(name="t"))
    assert merged.partial is False and merged.partial_reason is None
    assert len(merged.devices) == 4 and len(merged.ceilings) == len(merged.measurements) == 8
    for entry in [*merged.devices, *merged.ceilings, *merged.measurements]:
        assert entry.rank is not None and entry.host == f"node{entry.rank // 2}"
    ids = [m.id for m in merged.measurements]
    assert len(ids) == len(set(ids)) and "r3.m0002" in ids
    assert {c.measurement_id for c in merged.ceilings} == set(ids)
    assert merged.distributed is not None
    assert merged.distributed.world_size == 4 and merged.distributed.hosts == ["node0", "node1"]
    assert merged.warnings[0] == "rank 0 (node0): noisy"
    write_json_atomic(tmp_path / "r.json", merged)
    assert results_json(tmp_path / "r.json")["stragglers"] == []


def test_straggler_below_margin_is_flagged_and_within_is_not() -> None:
    # fp32: rank 2 is 20% below the median (flagged); copy: rank 3 is 5% below (not flagged at 10%)
    merged = merge_rank_results(
        _reports([(100e9, 20e9), (101e9, 20e9), (80e9, 20e9), (99e9, 19e9)]), world_size=4, suite=None
    )
    assert merged.stragglers is not None
    assert [(s.rank, s.name) for s in merged.stragglers] == [(2, "fp32")]
    item = merged.stragglers[0]
    assert item.host == "node1" and item.median == pytest.approx(99.5e9)
    assert item.below_median_percent == pytest.approx((1 - 80 / 99.5) * 100)
    flags = {(c.rank, c.name): c.straggler for c in merged.ceilings}
    assert flags[(2, "fp32")] is True and flags[(3, "dram.copy")] is False and flags[(0, "fp32")] is False
    assert [d.straggler for d in merged.devices] == [False, False, True, False]
    assert [m.id for m in merged.measurements if m.straggler] == ["r2.m0001"]
    # a tighter margin catches rank 3's copy too; the margin is recorded
    tight = merge_rank_results(
        _reports([(100e9, 20e9), (101e9, 20e9), (80e9, 20e9), (99e9, 19e9)]), world_size=4, suite=None, margin=0.03
    )
    assert [(s.rank, s.name) for s in tight.stragglers or []] == [(2, "fp32"), (3, "dram.copy")]
    assert tight.straggler_margin == 0.03


def test_different_device_models_are_not_compared() -> None:
    reports = _reports([(100e9, 20e9), (10e9, 2e9)])
    assert reports[1].results is not None
    reports[1].results.devices[0].name = "Other CPU"
    assert merge_rank_results(reports, world_size=2, suite=None).stragglers == []


def test_missing_rank_is_named_and_keeps_what_it_published() -> None:
    reports = _reports([(100e9, 20e9), (100e9, 20e9)])
    published = _rank_doc(2, 90e9, 20e9).measurements[:1]
    for m in published:
        m.parameters = {"role": "ceiling", "dtype": "fp32"}
    reports.append(
        RankReport(rank=2, host="node1", status="missing", reason="died or was killed (no heartbeat for 10 s)",
                   measurements=published, device_entry=Device(device="cpu", type="cpu", name="Test CPU"))
    )  # fmt: skip
    merged = merge_rank_results(reports, world_size=4, suite=None, notes=["collectives not measured"])
    assert merged.partial is True
    reason = merged.partial_reason or ""
    assert reason.startswith("rank 2 (node1) missing: died or was killed")
    assert "rank 3 (host unknown) missing: never reported" in reason and "collectives not measured" in reason
    assert merged.distributed is not None and merged.distributed.missing_ranks == [2, 3]
    rank2 = [c for c in merged.ceilings if c.rank == 2]
    assert [(c.name, c.measurement_id) for c in rank2] == [("fp32", "r2.m0001")]
    statuses = {r.rank: r.status for r in merged.distributed.ranks or []}
    assert statuses == {0: "ok", 1: "ok", 2: "missing", 3: "missing"}


def test_collective_timings_become_network_roofs_per_group_size() -> None:
    items = [
        CollectiveTiming(op="allreduce", group_size=2, ranks=[0, 1], size_bytes=1 << 20, iters=4,
                         samples_s=[0.002, 0.001], validation_error=0.0),
        CollectiveTiming(op="allreduce", group_size=2, ranks=[0, 1], size_bytes=1 << 24, iters=1, samples_s=[0.01],
                         validation_error=0.0),
        CollectiveTiming(op="allreduce", group_size=4, ranks=[0, 1, 2, 3], size_bytes=1 << 20, iters=4,
                         samples_s=[0.004], validation_error=0.0),
        CollectiveTiming(op="allgather", group_size=4, ranks=[0, 1, 2, 3], size_bytes=1 << 20, iters=4,
                         samples_s=[0.004], validation_error=0.5),
    ]  # fmt: skip
    hosts: dict[int, str | None] = {0: "a", 1: "a", 2: "b", 3: "b"}
    measurements, ceilings = collective_records(items, device="cpu", host="a", hosts_by_rank=hosts, backend="gloo")
    assert [m.status for m in measurements] == ["ok", "ok", "ok", "failed"]
    assert all(c.kind == "collective" and c.unit == "B/s" and c.rank == 0 and c.host == "a" for c in ceilings)
    by_name = {c.name: c for c in ceilings}
    assert set(by_name) == {"allreduce.busbw.2ranks", "allreduce.busbw.4ranks"}
    # best busbw of the two sizes for 2 ranks: 16 MiB / 10 ms x 2(n-1)/n = 1.68 GB/s beats 1 MiB / 1 ms = 1.05
    assert by_name["allreduce.busbw.2ranks"].value == pytest.approx((1 << 24) / 0.01 * 1.0)
    assert by_name["allreduce.busbw.4ranks"].value == pytest.approx((1 << 20) / 0.004 * 1.5)
    assert by_name["allreduce.busbw.4ranks"].group_hosts == ["a", "b"]
    merged = merge_rank_results(
        _reports([(1e9, 1e9)] * 4),
        world_size=4,
        suite=None,
        collective_measurements=measurements,
        collective_ceilings=ceilings,
    )
    assert by_name["allreduce.busbw.2ranks"].straggler is None  # shared by a group: never compared
    assert {c.name for c in merged.ceilings if c.kind == "collective"} == set(by_name)


def test_launch_needs_torchrun() -> None:
    with pytest.raises(UsageError) as info:
        Launch.from_env({})
    assert "torchrun" in str(info.value) and "\n" not in str(info.value)
    launch = Launch.from_env(
        {
            "RANK": "3",
            "WORLD_SIZE": "4",
            "LOCAL_RANK": "1",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "h",
            "MASTER_PORT": "1",
        }
    )
    assert (launch.rank, launch.world_size, launch.local_rank, launch.local_world_size) == (3, 4, 1, 2)
    with pytest.raises(UsageError):
        Launch.from_env({"RANK": "4", "WORLD_SIZE": "4", "MASTER_ADDR": "h", "MASTER_PORT": "1"})


def test_distributed_without_torchrun_is_one_line_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    assert main(["probe", "--distributed", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "torchrun" in err


def test_distributed_bad_margin_is_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "1")
    assert main(["probe", "--distributed", "--straggler-margin", "1.5"]) == 2
    assert "--straggler-margin" in capsys.readouterr().err


# --- real torchrun jobs (gloo over loopback) ----------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}


def _gpuscope(fault: str | None) -> list[str]:
    """torchrun's program: gpuscope itself, or gpuscope behind the fault launcher."""
    return [str(FAULTS), fault] if fault else ["-m", "gpuscope"]


def _torchrun(
    tmp_path: Path, nproc: int, *extra: str, fault: str | None = None, timeout_s: float = 90
) -> tuple[subprocess.CompletedProcess[str], Path]:
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY)
    output = tmp_path / "results.json"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
        *_gpuscope(fault), "probe", "--distributed", "--device", "cpu", "--suite", str(suite),
        "--output", str(output), "--no-telemetry", *extra,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=_env(), cwd=tmp_path)
    return done, output


@pytest.mark.slow
def test_three_ranks_one_results_file(tmp_path: Path) -> None:
    done, output = _torchrun(tmp_path, 3)
    assert done.returncode == 0, done.stderr[-3000:]
    results = results_json(output)
    assert results["partial"] is False
    assert results["distributed"]["world_size"] == 3
    assert [r["status"] for r in results["distributed"]["ranks"]] == ["ok", "ok", "ok"]
    host = socket.gethostname()
    for key in ("devices", "ceilings", "measurements"):
        assert {entry["rank"] for entry in results[key]} == {0, 1, 2}
        assert all(entry["host"] == host for entry in results[key])
    per_rank = {(c["rank"], c["name"]) for c in results["ceilings"] if c["kind"] != "collective"}
    assert {name for _, name in per_rank} >= {"fp32"} and len(per_rank) % 3 == 0
    network = {c["name"]: c for c in results["ceilings"] if c["kind"] == "collective"}
    assert set(network) == {
        "allreduce.busbw.2ranks",
        "allreduce.busbw.3ranks",
        "allgather.busbw.2ranks",
        "allgather.busbw.3ranks",
    }
    assert (
        network["allreduce.busbw.3ranks"]["group_ranks"] == [0, 1, 2] and network["allreduce.busbw.3ranks"]["value"] > 0
    )
    assert isinstance(results["stragglers"], list) and results["straggler_margin"] == 0.1
    assert all("straggler" in c for c in results["ceilings"] if c["kind"] != "collective")
    assert "3 rank(s) on 1 host(s)" in done.stdout


@pytest.mark.slow
def test_rank_killed_midway_leaves_the_others_results(tmp_path: Path) -> None:
    done, output = _torchrun(tmp_path, 3, fault="kill:1")
    assert done.returncode != 0
    results = results_json(output)
    assert results["partial"] is True
    assert results["distributed"]["missing_ranks"] == [1], (results["partial_reason"], done.stderr[-3000:])
    assert results["partial_reason"].startswith(f"rank 1 ({socket.gethostname()}) missing: died or was killed")
    ranks = {r["rank"]: r for r in results["distributed"]["ranks"]}
    assert ranks[1]["status"] == "missing" and ranks[1]["measurements"] == 1  # what it published before dying
    assert 1 in {c["rank"] for c in results["ceilings"]}  # from the measurement rank 1 published before it died
    assert {ranks[0]["status"], ranks[2]["status"]} <= {"ok", "partial"}  # stopped by torchrun's SIGTERM, or done
    assert not [c for c in results["ceilings"] if c["kind"] == "collective"]
    assert "collectives not measured: they need every rank" in results["warnings"]


@pytest.mark.slow
def test_rank_that_hangs_is_named_after_the_rank_timeout(tmp_path: Path) -> None:
    done, output = _torchrun(tmp_path, 2, "--rank-timeout", "3", fault="hang:1")
    assert done.returncode != 0
    results = results_json(output)
    assert results["partial"] is True
    assert (
        "rank 1" in results["partial_reason"]
        and "did not finish within --rank-timeout 3 s" in results["partial_reason"]
    )
    assert [r["status"] for r in results["distributed"]["ranks"]] == ["ok", "missing"], (
        results["partial_reason"],
        done.stderr[-3000:],
    )
    assert "partial results in" in done.stderr


@pytest.mark.slow
def test_node_that_dies_under_multi_node_launch(tmp_path: Path) -> None:
    """Two torchrun agents (nnodes 2, c10d rendezvous on 127.0.0.1): the agent of the dead rank
    does not stop rank 0, so rank 0 finds the death through the missing heartbeat."""
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY)
    output = tmp_path / "results.json"
    port = _free_port()
    agents = []
    for node in (0, 1):
        command = [
            sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
            "--node-rank", str(node), "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
            "--rdzv-id", "gpuscope-test",
            *_gpuscope("kill:1"), "probe", "--distributed", "--device", "cpu", "--suite", str(suite),
            "--output", str(output),
            "--no-telemetry", "--rank-timeout", "60",
        ]  # fmt: skip
        agents.append(
            subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=_env(),
                cwd=tmp_path,
            )
        )
    try:
        outputs = [agent.communicate(timeout=90) for agent in agents]
    finally:
        for agent in agents:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
    assert all(agent.returncode != 0 for agent in agents)
    results = results_json(output)
    assert results["distributed"]["missing_ranks"] == [1], outputs[0][1][-2000:]
    assert "rank 1 (" in results["partial_reason"] and "died or was killed (no heartbeat" in results["partial_reason"]
    # rank 0 finds the death by the heartbeat, unless its own agent stopped it first (SIGTERM): both are fine
    assert [r["status"] for r in results["distributed"]["ranks"]] in (["ok", "missing"], ["partial", "missing"])
    assert json.dumps(results)  # plain JSON all the way down


class _DictStore:
    """The four store calls Mailbox uses, on a dict (TCPStore semantics: add creates at 0)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def set(self, key: str, value: str) -> None:
        self.data[key] = value.encode() if isinstance(value, str) else value

    def get(self, key: str) -> bytes:
        return self.data[key]

    def check(self, keys: list[str]) -> bool:
        return all(key in self.data for key in keys)

    def add(self, key: str, amount: int) -> int:
        value = int(self.data.get(key, b"0")) + amount
        self.data[key] = str(value).encode()
        return value


def test_mailbox_and_liveness_on_a_store() -> None:
    from gpuscope.probing.rendezvous import Liveness, Mailbox

    store = _DictStore()
    mailbox = Mailbox(store, "gpuscope/probe/0/")
    assert mailbox.get("result/1", dict) is None
    mailbox.put("result/1", {"status": "ok", "value": float("inf")})
    assert mailbox.get("result/1", dict) == {"status": "ok", "value": None}  # as JSON holds it
    assert all(key.startswith("gpuscope/probe/0/") for key in store.data)
    assert mailbox.clone() is mailbox  # a store without clone() shares the connection
    liveness = Liveness(mailbox, [1, 2])
    mailbox.bump("hb/1")
    liveness.poll(every_s=0)
    assert liveness.ever_beat(1) and not liveness.ever_beat(2)
    assert liveness.silent_s(1) < liveness.silent_s(2) + 1e-9


def test_rank_summary_names_the_median_the_slowest_rank_and_the_stragglers() -> None:
    import io

    from gpuscope.commands.probe import print_rank_summary

    merged = merge_rank_results(
        _reports([(100e9, 20e9), (101e9, 20e9), (80e9, 20e9), (99e9, 19e9)]), world_size=4, suite=None
    )
    out = io.StringIO()
    print_rank_summary(merged, Path("r.json"), out)
    lines = out.getvalue().splitlines()
    fp32 = next(line for line in lines if line.startswith("compute") and " fp32 " in line)
    assert "median 99.5 GFLOP/s" in " ".join(fp32.split()) and "slowest 80.0 GFLOP/s on node1/r2" in fp32
    assert "4 rank(s) on 2 host(s); results in r.json" in lines
    assert [line for line in lines if line.startswith("straggler:")] == [
        "straggler: node1/r2 cpu compute fp32 80.0 GFLOP/s is 20% below the median 99.5 GFLOP/s"
    ]
