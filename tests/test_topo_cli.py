"""``gpuscope topo``, the interconnect lines of ``gpuscope doctor`` and the topology in
``snapshot --json``, on the fake NVML's nodes and a made-up sysfs tree."""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec
import pytest
from support.sysfs import make_sysfs

from gpuscope.cli import main
from gpuscope.telemetry.topology import Topology
from gpuscope.testing._fake_nvml_topology import hgx_h200_8, pcie_pairs_4
from gpuscope.testing.fake_nvml import FakeGpu, FakeNvml, install_fake_nvml


def _busy(gpus: list[FakeGpu]) -> FakeNvml:
    """A fake on the real clock (doctor's GPM window is real time) with every GPU busy."""
    fake = FakeNvml.with_gpus(gpus)
    for index in range(len(gpus)):
        fake.set_load(index, gpu_util_percent=80.0)
    return fake


def test_topo_draws_the_8_gpu_matrix_at_80_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    sysfs = make_sysfs(tmp_path / "sys")
    with install_fake_nvml(_busy(hgx_h200_8())):
        assert main(["topo", "--sysfs", str(sysfs)]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "GPU7  NV18  NV18  NV18  NV18  NV18  NV18  NV18  X     NODE  SYS   NODE" in out


def test_topo_json_is_the_typed_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sysfs = make_sysfs(tmp_path / "sys")
    with install_fake_nvml(_busy(pcie_pairs_4())):
        assert main(["topo", "--json", "--sysfs", str(sysfs)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "gpuscope.topology"
    topology = msgspec.convert(document["topology"], Topology)
    assert [pair.connection for pair in topology.gpu_pairs] == ["NV12", "SYS", "SYS", "SYS", "SYS", "NV11"]
    assert topology.gpu_nic[0] == ["SYS", "PIX", "SYS"] and topology.sysfs_root == str(sysfs)


def test_bad_sysfs_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topo", "--sysfs", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuscope: error: --sysfs ") and err.count("\n") == 1


def test_hostile_nic_names_are_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sysfs = make_sysfs(tmp_path / "sys")
    os.rename(sysfs / "class" / "net" / "eth0", sysfs / "class" / "net" / "eth\x1b[31mred")
    with install_fake_nvml(_busy([FakeGpu.l4()])):
        assert main(["topo", "--sysfs", str(sysfs)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "eth\\x1b[31mred" in out


def test_doctor_names_the_downtrained_link_and_the_nvlink_down_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "sys"  # no NICs, no NUMA nodes: only the GPUs' links are judged
    empty.mkdir()
    with install_fake_nvml(_busy(pcie_pairs_4())):
        assert main(["doctor", "--no-torch", "--json", "--sysfs", str(empty)]) == 1
    report = json.loads(capsys.readouterr().out)
    problems = [
        (section["title"], check["detail"])
        for section in report["sections"]
        for check in section["checks"]
        if check["status"] == "problem"
    ]
    assert report["problems"] == 2 and [title for title, _ in problems] == ["interconnect", "interconnect"]
    assert problems[0][1].startswith("GPU 1 PCIe trained at x8 Gen4 under its x16 Gen5 maximum")
    assert problems[1][1].startswith("NVLink GPU 2 - GPU 3: 11 of 12 links active")


def test_doctor_with_the_sysfs_tree_adds_the_ib_port(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sysfs = make_sysfs(tmp_path / "sys")
    with install_fake_nvml(_busy(pcie_pairs_4())):
        assert main(["doctor", "--no-torch", "--sysfs", str(sysfs)]) == 1
    out = capsys.readouterr().out
    lines = [line.strip() for line in out.splitlines() if line.strip().startswith("!!  link")]
    assert len(lines) == 3 and lines[2].endswith("mlx5_0 port 2 not active (state 1: DOWN)")


def test_doctor_healthy_links_are_one_ok_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with install_fake_nvml(_busy([FakeGpu.h200(), FakeGpu.h200()])):
        assert main(["doctor", "--no-torch", "--sysfs", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "OK  links            2 GPU(s) and 0 NIC(s): every link at its expected state and rate" in out


def test_snapshot_json_carries_the_topology(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sysfs = make_sysfs(tmp_path / "sys")
    with install_fake_nvml(_busy(pcie_pairs_4())):
        assert main(["snapshot", "--json", "--wait", "0.1", "--sysfs", str(sysfs)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert set(document) >= {"schema", "record", "topology"}
    assert document["topology"]["gpu_pairs"][0]["connection"] == "NV12"
    assert [nic["name"] for nic in document["topology"]["nics"]] == ["mlx5_0", "eth0", "eth1"]
