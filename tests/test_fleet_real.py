"""The fleet with real parts (issue 29): four ``gpuscope serve`` exporters on fake GPUs (8 H200s
each: one plain, one with a straggler GPU, one with an Xid, one that loses a GPU), a real
Prometheus (Debian's ``prometheus``) scraping them on loopback with its own config and data
folder, and the same four read directly with ``--hosts``. Both sources must tell the same story;
then one exporter is stopped and both show its row as down. Skipped without ``prometheus``."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from gpuscope.cli import main
from gpuscope.fleet.hosts import HostsSource, parse_hosts
from gpuscope.fleet.http import HttpOptions
from gpuscope.fleet.prometheus import PrometheusSource
from gpuscope.fleet.snapshot import FleetNode, FleetSnapshot

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = {
    "plain": "gpus=8xh200",
    "slow": "gpus=8xh200,slow=3",
    "xid": "gpus=8xh200,xid=79@0.5:2",
    "lost": "gpus=8xh200,lose=5@1.0",
}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="needs Debian's prometheus on PATH"),
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Cluster:
    """Four exporters (name -> process, instance) and a Prometheus on ``prometheus_port``."""

    def __init__(self) -> None:
        self.exporters: dict[str, tuple[subprocess.Popen[str], str]] = {}
        self.prometheus: subprocess.Popen[str] | None = None
        self.prometheus_port = 0

    @property
    def hosts(self) -> str:
        return ",".join(instance for _, instance in self.exporters.values())

    def instance(self, name: str) -> str:
        return self.exporters[name][1]


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def _targets(port: int) -> list[dict[str, object]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/targets", timeout=5) as response:  # noqa: S310
        return list(json.load(response)["data"]["activeTargets"])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    folder = tmp_path_factory.mktemp("fleet")
    found = Cluster()
    try:
        for name, scenario in SCENARIOS.items():
            env = dict(os.environ, PYTHONPATH=str(REPO), GPUSCOPE_FAKE_NVML=scenario)
            process = subprocess.Popen(
                [sys.executable, "-m", "gpuscope", "serve", "--listen", "127.0.0.1:0", "--interval", "0.5"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=folder, env=env,
            )  # fmt: skip
            found.exporters[name] = (process, "")
        for name, (process, _) in found.exporters.items():
            assert process.stderr is not None
            line = process.stderr.readline()
            match = re.search(r"http://(127\.0\.0\.1:\d+)/metrics", line)
            assert match, line
            found.exporters[name] = (process, match.group(1))
        targets = ", ".join(f"'{instance}'" for _, instance in found.exporters.values())
        (folder / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n"
            f"  - job_name: gpu\n    static_configs:\n      - targets: [{targets}]\n"
        )
        found.prometheus_port = _free_port()
        found.prometheus = subprocess.Popen(
            ["prometheus", f"--config.file={folder / 'prometheus.yml'}", f"--storage.tsdb.path={folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{found.prometheus_port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, cwd=folder,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.5)
            try:
                if sum(1 for t in _targets(found.prometheus_port) if t.get("health") == "up") == len(SCENARIOS):
                    break
            except OSError:
                continue
        else:
            pytest.fail("prometheus did not scrape the four exporters within 60 s")
        time.sleep(2.5)  # the lost GPU (1 s) and the Xid (0.5 s) are in the exporters and scraped
        yield found
    finally:
        if found.prometheus is not None:
            _stop(found.prometheus)
        for process, _ in found.exporters.values():
            _stop(process)


def _by_instance(snapshot: FleetSnapshot) -> dict[str, FleetNode]:
    return {node.instance: node for node in snapshot.nodes}


def _check_story(snapshot: FleetSnapshot, cluster: Cluster) -> None:
    nodes = {node.instance: node for node in snapshot.nodes}
    assert set(nodes) == {cluster.instance(name) for name in SCENARIOS}
    assert all(node.state == "up" and len(node.gpus) == 8 for node in nodes.values())
    assert snapshot.gpu_count == 32
    slow = nodes[cluster.instance("slow")]
    assert [gpu.index for gpu in slow.gpus if gpu.straggler] == [3]
    assert {(s.instance, s.gpu) for s in snapshot.stragglers if s.gpu is not None} == {(cluster.instance("slow"), 3)}
    assert [gpu.index for gpu in nodes[cluster.instance("lost")].gpus if gpu.lost] == [5]
    assert [gpu.index for gpu in nodes[cluster.instance("xid")].gpus if gpu.xid_events_total] == [2]
    kinds = {(a.instance, a.kind, a.gpu) for a in snapshot.alerts}
    assert (cluster.instance("lost"), "lost", 5) in kinds and (cluster.instance("xid"), "xid", 2) in kinds
    assert (cluster.instance("slow"), "straggler", 3) in kinds
    plain = nodes[cluster.instance("plain")].gpus[0]
    assert plain.sm_activity_percent == pytest.approx(70.0, rel=0.05)
    assert plain.power_w is not None and plain.power_w > 300 and plain.memory_total_bytes


def test_hosts_read_the_four_exporters(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "--hosts", cluster.hosts, "--once", "--json"]) == 0
    snapshot = msgspec.json.decode(capsys.readouterr().out, type=FleetSnapshot)
    assert snapshot.source == "hosts" and snapshot.queries == 4
    _check_story(snapshot, cluster)
    assert main(["fleet", "--hosts", cluster.hosts, "--once"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all(" up | 8 GPUs | " in line for line in lines)
    assert any("straggler GPU 3 (SM activity, power)" in line for line in lines)


def test_prometheus_tells_the_same_story_in_two_queries(cluster: Cluster) -> None:
    source = PrometheusSource(f"http://127.0.0.1:{cluster.prometheus_port}", HttpOptions(), job="gpu")
    try:
        snapshot = source.refresh()
        assert snapshot.source == "prometheus" and snapshot.queries == 2  # 4 nodes, 21 metrics: still 2 queries
        _check_story(snapshot, cluster)
        assert source.refresh_history() == 4
        points = source.node_history(cluster.instance("plain"), "sm_activity_percent")
        assert points and points[-1].value == pytest.approx(70.0, rel=0.05)
    finally:
        source.close()
    default = PrometheusSource(f"http://127.0.0.1:{cluster.prometheus_port}", HttpOptions())  # no --job: by metric
    try:
        assert len(default.refresh().nodes) == 4
    finally:
        default.close()


def test_a_stopped_exporter_is_a_down_row_in_both_sources(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    process, instance = cluster.exporters["plain"]
    _stop(process)
    hosts = HostsSource(parse_hosts(cluster.hosts), HttpOptions(timeout_s=2))
    try:
        rows = _by_instance(hosts.refresh())
    finally:
        hosts.close()
    assert rows[instance].state == "down" and "connection refused" in str(rows[instance].error)
    assert all(rows[other].state == "up" for other in rows if other != instance)
    source = PrometheusSource(f"http://127.0.0.1:{cluster.prometheus_port}", HttpOptions(), job="gpu")
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            snapshot = source.refresh()
            node = _by_instance(snapshot)[instance]
            if node.state == "down":
                break
            time.sleep(0.5)
        assert node.state == "down" and "connection refused" in str(node.error), node
        assert snapshot.queries == 3  # the grid, up, and the targets page for the down node's error
        assert (instance, "down", None) in {(a.instance, a.kind, a.gpu) for a in snapshot.alerts}
    finally:
        source.close()
    assert main(["fleet", "--prometheus", f"http://127.0.0.1:{cluster.prometheus_port}", "--job", "gpu", "--once"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and sum(" DOWN: " in line for line in lines) == 1
