"""Topology: the fake NVML's nodes read through the real pynvml wrappers, a made-up sysfs tree,
the records joined, link health and the ``nvidia-smi topo -m`` matrix."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.sysfs import make_sysfs

from gpuscope.telemetry.topology import (
    format_cpulist,
    level_from_paths,
    parse_cpulist,
    pcie_bytes_per_s,
)
from gpuscope.telemetry.topology_health import link_findings, link_rates
from gpuscope.telemetry.topology_read import read_topology
from gpuscope.telemetry.topology_render import matrix_rows, render_topology
from gpuscope.telemetry.topology_sysfs import parse_ib_rate_bytes_per_s, read_nics, read_numa_nodes
from gpuscope.testing._fake_nvml_topology import hgx_h200_8, pcie_pairs_4
from gpuscope.testing.fake_nvml import FakeClock, FakeGpu, FakeNvml, install_fake_nvml


@pytest.fixture
def sysfs(tmp_path: Path) -> Path:
    return make_sysfs(tmp_path / "sys")


def _read(gpus: list[FakeGpu], sysfs: Path, *, busy: bool = True, advance_s: float = 0.0):  # type: ignore[no-untyped-def]
    clock = FakeClock()
    fake = FakeNvml.with_gpus(gpus, clock=clock)
    for index in range(len(gpus)):
        fake.set_load(index, gpu_util_percent=80.0 if busy else 0.0)
    with install_fake_nvml(fake):
        before = read_topology(sysfs)
        clock.advance(advance_s)
        after = read_topology(sysfs) if advance_s else before
    return before, after


def test_pcie_rates_cpulists_and_ib_rates() -> None:
    assert pcie_bytes_per_s(5, 16) == pytest.approx(63.0e9, rel=1e-3)
    assert pcie_bytes_per_s(4, 8) == pytest.approx(15.75e9, rel=1e-3)
    assert pcie_bytes_per_s(3, 16) == pytest.approx(15.75e9, rel=1e-3)
    assert pcie_bytes_per_s(None, 16) is None and pcie_bytes_per_s(9, 16) is None
    assert parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert format_cpulist([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"
    with pytest.raises(ValueError):
        parse_cpulist("3-1")
    assert parse_ib_rate_bytes_per_s("200 Gb/sec (4X HDR)") == 25e9
    assert parse_ib_rate_bytes_per_s("garbage") is None


def test_levels_from_pci_paths() -> None:
    switch = ["pci0000:00", "0000:00:01.0", "0000:01:00.0"]
    gpu0, gpu1 = [*switch, "0000:02:00.0", "0000:03:00.0"], [*switch, "0000:02:01.0", "0000:04:00.0"]
    nested = [*switch, "0000:02:02.0", "0000:05:00.0", "0000:06:00.0", "0000:07:00.0"]
    other_port = ["pci0000:00", "0000:00:03.0", "0000:08:00.0"]
    assert level_from_paths(gpu0, gpu1) == "PIX"
    assert level_from_paths(gpu0, nested) == "PXB"
    assert level_from_paths(gpu0, other_port) == "PHB"
    assert level_from_paths(gpu0, ["pci0000:80", "0000:80:01.0", "0000:81:00.0"], 0, 0) == "NODE"
    assert level_from_paths(gpu0, ["pci0000:80", "0000:80:01.0", "0000:81:00.0"], 0, 1) == "SYS"
    assert level_from_paths(gpu0, ["pci0000:80", "0000:81:00.0"]) == "?"
    assert level_from_paths([], gpu0) == "?"


def test_sysfs_tree_numa_nodes_and_nics(sysfs: Path) -> None:
    assert [(node.node, format_cpulist(node.cpus)) for node in read_numa_nodes(sysfs)] == [(0, "0-7"), (1, "8-15")]
    nics = {nic.name: nic for nic in read_nics(sysfs)}
    assert list(nics) == ["mlx5_0", "eth0", "eth1"]  # HCAs first; lo (virtual) and ib0 (the HCA's) left out
    hca = nics["mlx5_0"]
    assert hca.kind == "infiniband" and hca.pci_address == "0000:85:00.0" and hca.numa_node == 1
    assert [(port.port, port.active) for port in hca.ports] == [(1, True), (2, False)]
    assert hca.rate_bytes_per_s == 25e9 and hca.netdevs == ["ib0"]
    assert nics["eth0"].rate_bytes_per_s == 25000e6 / 8 and nics["eth0"].numa_node == 0
    assert nics["eth1"].state == "down"
    assert read_nics(sysfs / "nowhere") == [] and read_numa_nodes(sysfs / "nowhere") == []


def test_pcie4_node_matrix_and_affinity(sysfs: Path) -> None:
    topology, _ = _read(pcie_pairs_4(), sysfs)
    columns, rows = matrix_rows(topology)
    assert columns == ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1", "NIC2"]
    assert rows[0] == ["GPU0", "X", "NV12", "SYS", "SYS", "SYS", "PIX", "SYS"]
    assert rows[2] == ["GPU2", "SYS", "SYS", "X", "NV11", "PIX", "SYS", "PHB"]  # one bridge link down
    assert rows[4][:5] == ["NIC0", "SYS", "SYS", "PIX", "PIX"]
    gpu1 = topology.gpus[1]
    assert (gpu1.pcie.generation, gpu1.pcie.width, gpu1.pcie.max_generation, gpu1.pcie.max_width) == (4, 8, 5, 16)
    assert format_cpulist(topology.gpus[2].cpu_affinity) == "8-15" and topology.gpus[2].numa_nodes == [1]
    pair = topology.pair(3, 2)
    assert pair is not None and pair.pcie_level == "PIX" and pair.nvlink_links == 11 and not pair.via_nvswitch
    assert pair.expected_bytes_per_s == 12 * 25e9  # what the bridge should carry; NV11: what is active
    far = topology.pair(0, 2)
    assert far is not None and far.expected_bytes_per_s == pytest.approx(63.0e9, rel=1e-3)


def test_hgx8_is_nv18_everywhere_and_fits_80_columns(sysfs: Path) -> None:
    topology, _ = _read(hgx_h200_8(), sysfs)
    _, rows = matrix_rows(topology)
    for g, row in enumerate(rows[:8]):
        assert row[1 : 1 + 8] == ["X" if h == g else "NV18" for h in range(8)]
    assert all(pair.via_nvswitch and pair.expected_bytes_per_s == 450e9 for pair in topology.gpu_pairs)
    text = render_topology(topology, width=80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    for row in rows:  # every cell whole on the row's line
        line = next(line for line in lines if line.startswith(row[0] + " "))
        assert line.split()[: len(row)] == row
    assert "0-55,112-167" in text and "56-111,168-223" in text  # affinity in its own table, uncut
    assert "NIC0: mlx5_0 (infiniband, 0000:85:00.0, NUMA 1, 200 Gb/s, ACTIVE)" in text


def test_pcie4_findings_name_the_downtrained_link_and_the_nvlink_down(sysfs: Path) -> None:
    before, after = _read(pcie_pairs_4(), sysfs, advance_s=0.25)
    findings = link_findings(before, after, window_s=0.25, process_cpus=set(range(16)))
    kinds = [(finding.kind, finding.subject) for finding in findings]
    assert kinds == [("pcie_width", "GPU1 PCIe"), ("nvlink_down", "GPU2-GPU3 NVLink"), ("ib_port", "mlx5_0 port 2")]
    assert "x8 Gen4 under its x16 Gen5 maximum" in findings[0].line
    assert "11 of 12 links active (down: GPU 2 link 5, GPU 3 link 5)" in findings[1].line


def test_generation_below_max_only_counts_while_busy(sysfs: Path) -> None:
    resting = [FakeGpu.h100(pcie_generation=1, pcie_max_generation=5)]
    idle, _ = _read(resting, sysfs, busy=False)
    assert [f for f in link_findings(idle, process_cpus=set(range(16))) if f.kind.startswith("pcie")] == []
    busy, _ = _read([FakeGpu.h100(pcie_generation=1, pcie_max_generation=5)], sysfs)
    assert [f.kind for f in link_findings(busy, process_cpus=set(range(16))) if f.kind.startswith("pcie")] == [
        "pcie_generation"
    ]


def test_rising_counters_need_two_reads(sysfs: Path) -> None:
    before, after = _read(hgx_h200_8(), sysfs, advance_s=0.5)
    assert [f.kind for f in link_findings(before, process_cpus=set(range(16)))] == ["ib_port"]
    rising = [f for f in link_findings(before, after, window_s=0.5) if f.kind == "nvlink_errors"]
    assert [f.subject for f in rising] == ["GPU5 NVLink 3"] and "CRC flit +25" in rising[0].line
    replays, replayed = _read([FakeGpu.l4(pcie_replay_per_s=10.0)], sysfs, advance_s=1.0)
    assert [f.kind for f in link_findings(replays, replayed, window_s=1.0) if f.kind == "pcie_replays"] == [
        "pcie_replays"
    ]


def test_numa_far_devices_for_a_confined_process(sysfs: Path) -> None:
    topology, _ = _read(pcie_pairs_4(), sysfs)
    far = [f.subject for f in link_findings(topology, process_cpus=set(range(8))) if f.kind == "numa_far"]
    assert far == ["GPU2", "GPU3", "mlx5_0", "eth1"]
    assert not [f for f in link_findings(topology, process_cpus=set(range(16))) if f.kind == "numa_far"]


def test_link_rates_expected_and_present(sysfs: Path) -> None:
    topology, _ = _read(pcie_pairs_4(), sysfs)
    rates = {rate.subject: rate for rate in link_rates(topology)}
    assert rates["GPU2 NVLink"].expected_bytes_per_s == 300e9 and rates["GPU2 NVLink"].present_bytes_per_s == 275e9
    assert rates["GPU1 PCIe"].present_bytes_per_s == pytest.approx(15.75e9, rel=1e-3)
    assert rates["eth1"].present_bytes_per_s == 0.0 and rates["mlx5_0"].expected_bytes_per_s == 25e9


def test_nvml_errors_leave_values_unknown_not_raised(sysfs: Path) -> None:
    gpus = pcie_pairs_4()
    gpus[0].errors.update(
        {"nvmlDeviceGetTopologyCommonAncestor": "Unknown", "nvmlDeviceGetCpuAffinity": "NoPermission"}
    )
    fake = FakeNvml.with_gpus(gpus, clock=FakeClock())
    fake.remove_symbols("nvmlDeviceGetNvLinkRemoteDeviceType")  # an old driver: kinds inferred
    fake.lose_gpu(3)
    with install_fake_nvml(fake):
        topology = read_topology(sysfs)
    assert topology.pair(0, 1).pcie_level == "?"  # type: ignore[union-attr]
    assert topology.pair(0, 1).connection == "NV12"  # type: ignore[union-attr]
    assert topology.gpus[0].cpu_affinity == [] and any("permission" in u for u in topology.gpus[0].unavailable)
    assert topology.gpus[3].unavailable and topology.pair(0, 3) is None
    assert render_topology(topology).count("?") >= 1


def test_no_driver_still_shows_the_host_side(sysfs: Path) -> None:
    from gpuscope.testing.fake_nvml import no_nvml_library

    with no_nvml_library():
        topology = read_topology(sysfs)
    assert topology.gpus == [] and "no NVIDIA driver" in (topology.gpu_unavailable or "")
    text = render_topology(topology)
    assert "no GPUs:" in text and "NIC0" in text
