"""The fleet's parts without a cluster: series to nodes, the straggler rule, exposition parsing,
hosts lists, credential files, the one-line errors of the HTTP client against small local
servers (refused, 404, HTML, 401, TLS not trusted), sorting and filtering, ``--once`` text and
``report --fleet``."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fleet_data import fleet_snapshot, node_series

from gpuscope.cli import main
from gpuscope.errors import BadInputError, UsageError
from gpuscope.fleet.assemble import assemble
from gpuscope.fleet.hosts import HostsSource, parse_exposition, parse_hosts, read_hosts_file
from gpuscope.fleet.http import FetchError, HttpOptions, read_basic_auth, read_bearer_token
from gpuscope.fleet.prometheus import PrometheusSource, grid_query
from gpuscope.fleet.series import WANTED, build_node
from gpuscope.fleet.snapshot import FleetSnapshot
from gpuscope.fleet.stragglers import DEFAULT_MARGIN, flag_stragglers
from gpuscope.fleet.text import node_line, node_names
from gpuscope.fleet.view import order_nodes
from gpuscope.probing.cluster import DEFAULT_STRAGGLER_MARGIN
from gpuscope.schema.core import encode_json
from gpuscope.testing.scenarios import parse_scenario


def test_a_node_is_built_from_its_series() -> None:
    node = build_node("10.0.0.1:9842", node_series("node01", gpus=4, lost=1, xid=2))
    assert node.hostname == "node01" and [gpu.index for gpu in node.gpus] == [0, 1, 2, 3]
    assert node.gpus[1].lost and node.gpus[1].power_w is None
    assert node.gpus[0].sm_activity_percent == pytest.approx(70.0) and node.gpus[0].utilization_percent == 80.0
    assert node.gpus[2].xid_events_total == 1.0
    assert node.nic_rx_bytes_per_s == pytest.approx(1.25e9)  # loopback's 9e9 is not east-west traffic
    assert node.infiniband_tx_bytes_per_s == pytest.approx(21e9)
    assert node.nvlink_tx_bytes_per_s == pytest.approx(3 * 90e9)  # the lost GPU adds nothing


def test_the_straggler_rule_is_probe_distributed_s() -> None:
    assert DEFAULT_MARGIN == DEFAULT_STRAGGLER_MARGIN
    snapshot = fleet_snapshot(nodes=4)
    slow = [(s.instance, s.gpu, s.metric) for s in snapshot.stragglers]
    assert slow == [("10.0.0.3:9842", 3, "power_w"), ("10.0.0.3:9842", 3, "sm_activity_percent")]
    node03 = next(node for node in snapshot.nodes if node.hostname == "node03")
    assert node03.gpus[3].straggler and sorted(node03.gpus[3].straggler_metrics) == ["power_w", "sm_activity_percent"]
    assert not any(gpu.straggler for node in snapshot.nodes for gpu in node.gpus if node is not node03)
    assert snapshot.stragglers[1].below_median_percent == pytest.approx(75.0, abs=2.0)


def test_an_idle_fleet_has_no_stragglers_and_a_small_gap_is_not_one() -> None:
    idle = [build_node(f"h{i}:1", node_series(f"h{i}", gpus=4, slow=0)) for i in range(2)]
    for node in idle:
        for gpu in node.gpus:
            gpu.sm_activity_percent = 5.0 if gpu.index else 1.0
    assert flag_stragglers(idle) == []
    close = [build_node(f"h{i}:1", node_series(f"h{i}", gpus=4)) for i in range(2)]
    close[0].gpus[0].sm_activity_percent = 0.95 * 70.0  # 5% below: inside the 10% margin
    assert [s for s in flag_stragglers(close) if s.metric == "sm_activity_percent"] == []
    close[0].gpus[0].sm_activity_percent = 0.85 * 70.0
    assert [(s.gpu, s.metric) for s in flag_stragglers(close, margin=0.10)][:1] == [(0, "sm_activity_percent")]


def _exposition(node_host: str = "n1") -> bytes:
    lines = ["# HELP gpuscope_gpu_power_watts Power draw.", "# TYPE gpuscope_gpu_power_watts gauge"]
    for series in node_series(node_host, gpus=2, timestamp_s=time.time()):
        labels = ",".join(f'{key}="{value}"' for key, value in series.labels.items())
        lines.append(f"{series.name}{{{labels}}} {series.value}")
    lines.append('gpuscope_cpu_core_utilization_ratio{host="n1",core="0"} 0.5')  # not read: dropped before parsing
    return ("\n".join(lines) + "\n").encode()


def test_exposition_is_parsed_and_garbage_is_named() -> None:
    series = parse_exposition(_exposition())
    assert {s.name for s in series} <= WANTED and any(s.name == "gpuscope_gpu_power_watts" for s in series)
    node = build_node("n1:9842", series)
    assert len(node.gpus) == 2 and node.gpus[0].power_w == pytest.approx(450.0)
    with pytest.raises(ValueError, match="not gpuscope metrics.*<html>"):
        parse_exposition(b"<html><body>hello</body></html>")
    with pytest.raises(ValueError, match="not Prometheus exposition"):
        parse_exposition(b'gpuscope_sample_timestamp_seconds{host="x" 1\n')


def test_hosts_lists(tmp_path: Path) -> None:
    assert parse_hosts("a:1, b  https://c:9443") == ["http://a:1", "http://b:9842", "https://c:9443"]
    with pytest.raises(UsageError, match="x:port"):
        parse_hosts("x:port")
    listed = tmp_path / "hosts.txt"
    listed.write_text("# the rack\nnode01:9842\nnode02  # spare\n")
    assert read_hosts_file(listed) == ["http://node01:9842", "http://node02:9842"]
    listed.write_text("node01:99999\n")
    with pytest.raises(BadInputError, match="line 1"):
        read_hosts_file(listed)


def test_credentials_come_from_files(tmp_path: Path) -> None:
    auth = tmp_path / "auth"
    auth.write_text("prometheus:s3cret\n")
    assert read_basic_auth(auth) == "Basic cHJvbWV0aGV1czpzM2NyZXQ="
    token = tmp_path / "token"
    token.write_text("abc.def\n")
    assert read_bearer_token(token) == "Bearer abc.def"
    auth.write_text("no colon here\n")
    with pytest.raises(BadInputError, match="USER:PASSWORD"):
        read_basic_auth(auth)


class _Handler(http.server.BaseHTTPRequestHandler):
    answers: dict[str, tuple[int, str, bytes]] = {}

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        status, kind, body = self.answers.get(self.path.split("?")[0], (404, "text/plain", b"404 page not found"))
        if self.path.startswith("/auth") and self.headers.get("Authorization") != "Bearer t0ken":
            status, kind, body = 401, "text/plain", b"Unauthorized"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_one_line_errors_for_what_is_not_prometheus(server: str) -> None:
    _Handler.answers = {
        "/html/api/v1/query": (200, "text/html", b"<html>Grafana</html>"),
        "/json/api/v1/query": (200, "application/json", b'{"hello": "world"}'),
        "/auth/api/v1/query": (
            200,
            "application/json",
            b'{"status":"success","data":{"resultType":"vector","result":[]}}',
        ),
    }
    options = HttpOptions(timeout_s=2)
    cases = {
        f"http://{server}/wrong": "HTTP 404: not a Prometheus server",
        f"http://{server}/html": "not the Prometheus query API: is this a Prometheus URL",
        f"http://{server}/json": "answers JSON, but not the Prometheus query API's",
        f"http://{server}/auth": "refused with HTTP 401 (give --basic-auth-file or --bearer-token-file)",
        "http://127.0.0.1:1": "connection refused",
        f"https://{server}": "TLS",
    }
    for url, message in cases.items():
        with pytest.raises(FetchError, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
            PrometheusSource(url, options).refresh()
        assert "\n" not in str(caught.value)
    fine = PrometheusSource(f"http://{server}/auth", HttpOptions(timeout_s=2, authorization="Bearer t0ken"))
    assert fine.refresh().nodes == [] and fine.refresh().queries == 2


def test_a_host_that_answers_garbage_or_nothing_is_a_row(server: str) -> None:
    _Handler.answers = {"/metrics": (200, "text/plain; version=0.0.4", _exposition()), "/": (200, "text/html", b"<p>")}
    source = HostsSource(parse_hosts(f"{server},127.0.0.1:1"), HttpOptions(timeout_s=2))
    try:
        snapshot = source.refresh()
        states = {node.instance: (node.state, node.error) for node in snapshot.nodes}
        assert states[server] == ("up", None) and states["127.0.0.1:1"][0] == "down"
        assert "connection refused" in str(states["127.0.0.1:1"][1])
        source.path = "/"
        garbage = {node.instance: node for node in source.refresh().nodes}[server]
        assert garbage.state == "garbage" and "not gpuscope metrics" in str(garbage.error)
    finally:
        source.close()


def test_one_grid_query_whatever_the_number_of_nodes() -> None:
    query = grid_query()
    assert query.count("__name__") == 1 and all(name in query for name in WANTED)
    assert 'job=~"train.*"' in grid_query("train.*")


def test_sort_filter_and_the_once_line() -> None:
    snapshot = fleet_snapshot(nodes=8)
    names = node_names(snapshot.nodes)
    by_sm = order_nodes(snapshot, "sm", names=names)
    assert by_sm[0].state == "down" and names[by_sm[1].instance] == "node03"  # down first, then the straggler's node
    problems = [names[n.instance] for n in order_nodes(snapshot, "name", problems_only=True, names=names)]
    assert problems == ["10.0.0.8:9842", "node03", "node05", "node06"]
    assert [names[n.instance] for n in order_nodes(snapshot, text="DE04", names=names)] == ["node04"]
    line = node_line(next(n for n in snapshot.nodes if n.hostname == "node05"), "node05")
    assert line.startswith("node05 (10.0.0.5:9842) up | 8 GPUs |") and "LOST GPU 5" in line
    hostile = build_node("h:1", node_series("evil\x1b]0;x\x07", gpus=1))
    assert "\x1b" not in node_names([hostile])["h:1"]


def test_report_fleet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = fleet_snapshot(nodes=4)
    snapshot.nodes[0].hostname = "<script>x</script>"
    source = tmp_path / "snapshot.json"
    source.write_bytes(encode_json(snapshot))
    for suffix in ("md", "html", "json"):
        out = tmp_path / f"fleet.{suffix}"
        assert main(["report", "--fleet", str(source), "-o", str(out)]) == 0
        text = out.read_text()
        assert "<script>" not in text or suffix == "json"
        assert "node03" in text
    assert "straggler" in (tmp_path / "fleet.md").read_text().lower()
    assert (
        "stragglers" in FleetSnapshot.__struct_fields__
        and json.loads((tmp_path / "fleet.json").read_text())["schema"] == "gpuscope.fleet/1"
    )
    (tmp_path / "bad.json").write_text('{"schema": "gpuscope.fleet/1"}')
    assert main(["report", "--fleet", str(tmp_path / "bad.json"), "-o", str(tmp_path / "x.md")]) == 3
    assert "not a fleet snapshot" in capsys.readouterr().err


def test_fleet_command_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["fleet", "--prometheus", "http://127.0.0.1:1", "--once"]) == 4
    assert capsys.readouterr().err.strip().splitlines() == [
        "gpuscope: error: http://127.0.0.1:1: connection refused (nothing listens there)"
    ]
    assert main(["fleet", "--hosts", "127.0.0.1:1", "--json"]) == 2
    missing = tmp_path / "nope"
    assert main(["fleet", "--hosts", "a:1", "--once", "--basic-auth-file", str(missing)]) == 3
    assert "cannot read the basic auth" in capsys.readouterr().err


def test_the_straggler_scenario_of_the_fake_nvml() -> None:
    assert parse_scenario("gpus=8xh200,slow=3;5").slow == [3, 5]
    with pytest.raises(UsageError, match="slow names GPU 9"):
        parse_scenario("gpus=2xh200,slow=9")


def test_a_node_whose_sample_is_old_is_stale() -> None:
    node = build_node("h:1", node_series("h", gpus=1))
    assert node.sample_timestamp_s is not None
    snapshot = assemble("hosts", "1 host", node.sample_timestamp_s + 120.0, [node], [], 1)
    assert snapshot.nodes[0].state == "stale" and "120 s old" in str(snapshot.nodes[0].error)
    assert [alert.kind for alert in snapshot.alerts] == ["stale"]
