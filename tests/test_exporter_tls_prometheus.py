"""A real Prometheus (Debian's ``prometheus``) scraping a real ``gpuscope serve`` over mutual TLS
with basic auth (issue 38): its targets page says up; with a wrong password, down, and the
exporter's refusal counter rises; ``curl`` without a client certificate fails the handshake;
``promtool check metrics`` accepts what the exporter serves. Skipped where prometheus, promtool,
curl or openssl is missing."""

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
from typing import Any

import pytest
from support.tls import Pki, bcrypt_hash, make_pki

REPO = Path(__file__).resolve().parent.parent
PASSWORD = "correct horse battery staple"
TOOLS = ("prometheus", "promtool", "curl", "openssl")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(any(shutil.which(tool) is None for tool in TOOLS), reason=f"needs {', '.join(TOOLS)} on PATH"),
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def serve(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """``gpuscope serve`` on fake GPUs with mutual TLS and basic auth; its port."""
    folder = tmp_path_factory.mktemp("serve")
    config = folder / "web.yml"
    config.write_text(
        "tls_server_config:\n"
        f"  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
        f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {pki.ca_cert}\n"
        f"basic_auth_users:\n  prometheus: {bcrypt_hash(PASSWORD, cost=10)}\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO), GPUSCOPE_FAKE_NVML="gpus=2xh200")
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuscope", "serve", "--listen", "127.0.0.1:0", "--interval", "0.5",
         "--web-config", str(config)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=folder, env=env,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        match = re.search(r"https://127\.0\.0\.1:(\d+)/metrics", line)
        assert match, line
        assert "client certificates required" in line and "basic auth" in line
        yield int(match.group(1))
        assert process.poll() is None, "serve ended"
    finally:
        process.terminate()
        process.wait(timeout=20)


def _curl(pki: Pki, port: int, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["curl", "-sS", "--max-time", "10", "--cacert", str(pki.ca_cert), "-u", f"prometheus:{PASSWORD}",
         *extra, f"https://127.0.0.1:{port}/metrics"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip


def _refused_wrong_password(pki: Pki, port: int) -> float:
    answer = _curl(pki, port, "--cert", str(pki.client_cert), "--key", str(pki.client_key))
    assert answer.returncode == 0, answer.stderr
    match = re.search(r'^gpuscope_exporter_auth_refusals_total\{[^}]*reason="wrong_credentials"[^}]*\} (\S+)$',
                      answer.stdout, re.M)  # fmt: skip
    assert match, answer.stdout[-2000:]
    return float(match.group(1))


def test_curl_without_a_client_certificate_fails_and_promtool_accepts_the_metrics(pki: Pki, serve: int) -> None:
    for extra in ((), ("--tls-max", "1.2")):
        answer = _curl(pki, serve, *extra)
        assert answer.returncode != 0 and "gpuscope_" not in answer.stdout, (extra, answer.returncode)
    assert _curl(pki, serve, "--tls-max", "1.2").returncode == 35  # the handshake itself fails
    good = _curl(pki, serve, "--cert", str(pki.client_cert), "--key", str(pki.client_key))
    assert good.returncode == 0 and "gpuscope_gpu_power_watts" in good.stdout
    lint = subprocess.run(["promtool", "check", "metrics"], input=good.stdout, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def _targets(port: int) -> dict[str, dict[str, Any]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/targets", timeout=5) as response:  # noqa: S310
        document = json.load(response)
    return {target["labels"]["job"]: target for target in document["data"]["activeTargets"]}


def test_prometheus_scrapes_over_mutual_tls_with_basic_auth(pki: Pki, serve: int, tmp_path: Path) -> None:
    before = _refused_wrong_password(pki, serve)
    job = (
        "  - job_name: {name}\n    scheme: https\n"
        f"    tls_config:\n      ca_file: {pki.ca_cert}\n      cert_file: {pki.client_cert}\n"
        f"      key_file: {pki.client_key}\n"
        "    basic_auth:\n      username: prometheus\n      password: '{password}'\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{serve}']\n"
    )
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n"
        + job.format(name="good", password=PASSWORD)
        + job.format(name="wrong", password="not the password")
    )
    port = _free_port()
    prometheus = subprocess.Popen(
        ["prometheus", f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        targets: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline:
            time.sleep(0.5)
            try:
                targets = _targets(port)
            except OSError:
                continue  # still starting
            if {targets.get(name, {}).get("health") for name in ("good", "wrong")} == {"up", "down"}:
                break
        assert targets["good"]["health"] == "up", targets.get("good")
        assert targets["wrong"]["health"] == "down", targets.get("wrong")
        assert "401" in targets["wrong"]["lastError"], targets["wrong"]["lastError"]
        assert targets["good"]["scrapeUrl"].startswith("https://")
    finally:
        prometheus.terminate()
        try:
            prometheus.wait(timeout=20)
        except subprocess.TimeoutExpired:
            prometheus.kill()
            prometheus.wait(timeout=5)
    assert _refused_wrong_password(pki, serve) > before
