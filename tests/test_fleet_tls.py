"""``gpuscope fleet --hosts`` against a real ``gpuscope serve`` behind mutual TLS and basic auth
(issue 38's --web-config; certificates from tests/support/tls.py): with the CA, the client
certificate and the credentials file it reads the node; without --ca-file the certificate is not
trusted; with a wrong password the row says 401. Skipped without openssl."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from support.tls import Pki, bcrypt_hash, have_openssl, make_pki

from gpuscope.cli import main
from gpuscope.fleet.snapshot import FleetSnapshot

REPO = Path(__file__).resolve().parent.parent
PASSWORD = "correct horse battery staple"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not have_openssl(), reason="needs openssl")]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def exporter(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``https://127.0.0.1:PORT`` of a ``gpuscope serve`` requiring a client certificate and basic auth."""
    folder = tmp_path_factory.mktemp("serve")
    config = folder / "web.yml"
    config.write_text(
        "tls_server_config:\n"
        f"  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
        f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {pki.ca_cert}\n"
        f"basic_auth_users:\n  fleet: {bcrypt_hash(PASSWORD, cost=4)}\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO), GPUSCOPE_FAKE_NVML="gpus=2xh200")
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuscope", "serve", "--listen", "127.0.0.1:0", "--interval", "0.5",
         "--web-config", str(config)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=folder, env=env,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        match = re.search(r"https://127\.0\.0\.1:(\d+)/metrics", process.stderr.readline())
        assert match
        yield f"https://127.0.0.1:{match.group(1)}"
    finally:
        process.terminate()
        process.wait(timeout=20)


def _read(capsys: pytest.CaptureFixture[str], *argv: str) -> FleetSnapshot:
    assert main(["fleet", "--once", "--json", *argv]) == 0
    return msgspec.json.decode(capsys.readouterr().out, type=FleetSnapshot)


def test_fleet_reads_an_exporter_over_mutual_tls_with_basic_auth(
    exporter: str, pki: Pki, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    auth = tmp_path / "auth"
    auth.write_text(f"fleet:{PASSWORD}\n")
    tls = ["--cert-file", str(pki.client_cert), "--key-file", str(pki.client_key)]
    node = _read(
        capsys, "--hosts", exporter, "--ca-file", str(pki.ca_cert), *tls, "--basic-auth-file", str(auth)
    ).nodes[0]
    assert node.state == "up" and len(node.gpus) == 2, node
    untrusted = _read(capsys, "--hosts", exporter, *tls, "--basic-auth-file", str(auth)).nodes[0]
    assert untrusted.state == "down" and "TLS certificate not trusted" in str(untrusted.error)
    auth.write_text("fleet:not the password\n")
    refused = _read(capsys, "--hosts", exporter, "--ca-file", str(pki.ca_cert), *tls, "--basic-auth-file", str(auth))
    assert refused.nodes[0].state == "down" and "refused with HTTP 401" in str(refused.nodes[0].error)
