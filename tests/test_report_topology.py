"""The topology in results files and in the report: a results file carrying the hgx8 or pcie4
topology (read from the fake NVML and the made-up sysfs tree) reads back typed, and the HTML and
Markdown reports show its matrix, CPU/NUMA affinity, links and findings; hostile NIC names stay
text."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import msgspec
import pytest
from support.reports import make_results, write_results
from support.topo_view import HOSTILE_NIC, read_twice

from gpuscope.report import write_report
from gpuscope.results import read_results_file, to_results
from gpuscope.telemetry.topology import Topology


def _document(topology: Topology) -> dict:  # type: ignore[type-arg]
    doc = make_results()
    doc["topology"] = msgspec.to_builtins(topology)
    return doc


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    """node -> (HTML, Markdown) of a report made from a results file with that node's topology
    (pcie4 with its first NIC given a hostile name)."""
    out = {}
    for node in ("hgx8", "pcie4"):
        folder = tmp_path_factory.mktemp(node)
        topology = read_twice(node, folder / "sys")[1]
        if node == "pcie4":
            topology.nics[0].name = HOSTILE_NIC
        results = folder / "results.json"
        write_results(results, _document(topology))
        html, md = folder / "report.html", folder / "report.md"
        write_report(html, [results])
        write_report(md, [results])
        out[node] = (html.read_text(encoding="utf-8"), md.read_text(encoding="utf-8"))
    return out


def test_results_file_carries_the_topology_typed(tmp_path: Path) -> None:
    topology = read_twice("pcie4", tmp_path / "sys")[0]
    path = tmp_path / "results.json"
    write_results(path, _document(topology))
    results = read_results_file(str(path))[0]
    assert isinstance(results.topology, Topology)
    assert [gpu.index for gpu in results.topology.gpus] == [0, 1, 2, 3]
    assert results.topology.pair(2, 3).connection == "NV11"  # type: ignore[union-attr]
    assert results.topology.gpus[1].pcie.width == 8
    # an older file (no topology) still reads
    assert to_results(make_results(), "old").topology is None


def _section(html: str) -> str:
    start = html.index('<section id="topology">')
    return html[start : html.index("</section>", start)]


def test_hgx8_matrix_affinity_and_no_rising_counters_from_one_read(reports) -> None:  # type: ignore[no-untyped-def]
    html, md = reports["hgx8"]
    section = _section(html)
    # the 8x8 matrix: NV18 in every off-diagonal cell, CPU and NUMA affinity per GPU
    assert section.count("<td>NV18</td>") == 8 * 7
    assert section.count("<td>X</td>") == 8 + 3  # GPUs and the three NICs
    assert "<th>CPU Affinity</th>" in section and "<td>0-55,112-167</td>" in section
    assert "<td>56-111,168-223</td>" in section
    # one read: GPU 5's CRC counter is not judged; the IB port down is
    assert "CRC" not in section and "mlx5_0 port 2 not active" in section
    assert "## Topology" in md and "| GPU0 | X | NV18 |" in md.replace("  ", " ")


def test_pcie4_findings_and_flagged_links(reports) -> None:  # type: ignore[no-untyped-def]
    html, md = reports["pcie4"]
    section = _section(html)
    assert "GPU 1 PCIe trained at x8 Gen4 under its x16 Gen5 maximum" in section
    assert "NVLink GPU 2 - GPU 3: 11 of 12 links active" in section
    assert '<tr class="low"><td>GPU1 PCIe</td>' in section
    assert '<tr class="low"><td>GPU2 NVLink</td>' in section  # both ends of the pair's bridge
    assert '<tr class="low"><td>GPU3 NVLink</td>' in section
    assert '<tr class="low"><td>GPU0 NVLink</td>' not in section and '<tr class="low"><td>GPU0 PCIe</td>' not in section
    for cell in ("<td>NV12</td>", "<td>NV11</td>", "<td>SYS</td>"):
        assert cell in section
    assert "GPU 1 PCIe trained at x8 Gen4" in md and "NV11" in md


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.handlers: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):  # type: ignore[no-untyped-def]
        self.tags.append(tag)
        self.handlers.extend(name for name, _ in attrs if name.startswith("on"))

    def handle_data(self, data):  # type: ignore[no-untyped-def]
        self.text.append(data)


def test_hostile_nic_name_stays_text(reports) -> None:  # type: ignore[no-untyped-def]
    html, md = reports["pcie4"]
    parser = _Elements()
    parser.feed(_section(html))
    assert "img" not in parser.tags and parser.handlers == []
    visible = "".join(parser.text)
    assert "\x1b" not in html and "\x1b" not in md
    assert "eth\\x1b[31m[bold red]X[/]<img src=x onerror=alert(1)>" in visible
    assert "<img" not in md and "&lt;img" in md


def test_probe_runner_reads_the_topology_when_telemetry_is_on() -> None:
    from gpuscope.probing.runner import ProbeRunner
    from gpuscope.probing.suite import parse_suite

    suite = parse_suite('[suite]\nname = "t"\n\n[[probe]]\nkind = "memory"\nkernels = ["copy"]\n', "t.toml")
    topology = ProbeRunner(suite, "cpu", telemetry_factory=lambda: None)._topology()  # type: ignore[arg-type,return-value]
    assert isinstance(topology, Topology)
    assert topology.gpus == [] and topology.gpu_unavailable  # a CPU run: the host side only
    assert ProbeRunner(suite, "cpu", telemetry=False)._topology() is None
