"""The exporter off loopback (issue 38): the exporter-toolkit web configuration (TLS, mutual TLS,
bcrypt basic auth, reload), --insecure, --process-labels, /-/ready, build info and the refusal
and scrape-error counters. Certificates are made by ``openssl`` in the test; everything runs in
process on loopback. The real Prometheus scraping it: test_exporter_tls_prometheus.py."""

from __future__ import annotations

import base64
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.samples import make_sample
from support.tls import CLIENT_SAN, Pki, bcrypt_hash, client_context, have_openssl, make_pki

from gpuscope.cli import main
from gpuscope.errors import BadInputError, UsageError
from gpuscope.exporter import start_exporter
from gpuscope.exporter.metrics import sample_to_families
from gpuscope.exporter.webconfig import load_web_config

pytestmark = pytest.mark.skipif(not have_openssl(), reason="needs the openssl command")

PASSWORD = "s3cret-scrape"
HASH = bcrypt_hash(PASSWORD)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _write(folder: Path, text: str, name: str = "web.yml") -> str:
    """Write ``text`` atomically (a reload must never read half a file) and return the path."""
    path = folder / name
    partial = folder / f".{name}.part"
    partial.write_text(text)
    os.replace(partial, path)
    return str(path)


def _tls_yaml(pki: Pki, client_auth: str = "RequireAndVerifyClientCert", extra: str = "") -> str:
    return (
        "tls_server_config:\n"
        f"  cert_file: {pki.server_cert}\n"
        f"  key_file: {pki.server_key}\n"
        f"  client_auth_type: {client_auth}\n"
        f"  client_ca_file: {pki.ca_cert}\n"
        f"{extra}"
    )


def _users_yaml(hashed: str = HASH) -> str:
    return f"basic_auth_users:\n  prometheus: {hashed}\n"


def _get(
    url: str, context: ssl.SSLContext | None = None, password: str | None = PASSWORD, user: str = "prometheus"
) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if password is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as response:  # noqa: S310 - loopback
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _series(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for item in family.samples:
            out.setdefault(item.name, []).append((item.labels, item.value))
    return out


def _refusals(text: str) -> dict[str, float]:
    return {labels["reason"]: value for labels, value in _series(text).get("gpuscope_exporter_auth_refusals_total", [])}


# --- the web configuration file -------------------------------------------------------------------


def test_the_exporter_toolkit_documentation_example_loads(pki: Pki, tmp_path: Path) -> None:
    """exporter-toolkit's docs/web-config.yml (cert_file, key_file, two bcrypt users with $2y$
    hashes), then every field of docs/web-configuration.md at once."""
    (tmp_path / "server.crt").write_bytes(pki.server_cert.read_bytes())
    (tmp_path / "server.key").write_bytes(pki.server_key.read_bytes())
    example = (
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        "basic_auth_users:\n"
        "  alice: $2y$10$mDwo.lAisC94iLAyP81MCesa29IzH37oigHC/42V2pdJlUprsJPze\n"
        "  bob: $2y$10$hLqFl9jSjoAAy95Z/zw8Ye8wkdMBM8c5Bn1ptYqP/AXyV0.oy0S8m\n"
    )
    config = load_web_config(_write(tmp_path, example))
    assert config.tls is not None and set(config.users) == {"alice", "bob"}
    assert config.describe() == "TLS, basic auth (2 users)"
    everything = (
        "tls_server_config:\n"
        f"  cert: |\n    {pki.server_cert.read_text().strip().replace(chr(10), chr(10) + '    ')}\n"
        f"  key: |\n    {pki.server_key.read_text().strip().replace(chr(10), chr(10) + '    ')}\n"
        f"  client_ca_file: {pki.ca_cert}\n"
        "  client_auth_type: RequireAndVerifyClientCert\n"
        f"  client_allowed_sans: [{CLIENT_SAN}]\n"
        "  min_version: TLS12\n  max_version: TLS13\n"
        "  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256]\n"
        "  prefer_server_cipher_suites: false\n"
        "  curve_preferences: [X25519, CurveP256]\n"
        "http_server_config:\n  http2: false\n"
        "  headers:\n    X-Frame-Options: deny\n    X-Content-Type-Options: nosniff\n"
        f"{_users_yaml()}"
        "rate_limit:\n  interval: 100ms\n  burst: 5\n"
    )
    config = load_web_config(_write(tmp_path, everything))
    assert config.tls is not None and config.tls.verify_mode == ssl.CERT_REQUIRED
    assert config.client_allowed_sans == (CLIENT_SAN,)
    assert dict(config.headers) == {"X-Frame-Options": "deny", "X-Content-Type-Options": "nosniff"}
    assert config.rate_interval_s == pytest.approx(0.1) and config.rate_burst == 5
    assert not config.tls.options & ssl.OP_CIPHER_SERVER_PREFERENCE


@pytest.mark.parametrize(
    ("case", "text", "words"),
    [
        ("unknown field", "tls_server_config:\n  cert_fil: x\n", "unknown field 'cert_fil'"),
        ("unknown top field", "auth_excluded_paths: [/metrics]\n", "unknown field 'auth_excluded_paths'"),
        ("wrong hash", "basic_auth_users:\n  prometheus: plaintext-password\n", "not a bcrypt hash"),
        ("not yaml", "basic_auth_users: [\n", "line"),
        ("unreadable key", "tls_server_config:\n  cert_file: CERT\n  key_file: /nonexistent/key.pem\n", "key_file"),
        ("key not the cert's", "tls_server_config:\n  cert_file: CERT\n  key_file: STRANGER_KEY\n", "pair"),
        ("encrypted key", "tls_server_config:\n  cert_file: CERT\n  key_file: ENCRYPTED_KEY\n", "encrypted"),
        ("unverified client cert", "TLS  client_auth_type: RequireAnyClientCert\n", "not supported"),
        ("ca without auth type", "TLS  client_ca_file: CA\n", "without a client_auth_type"),
        ("verify without ca", "TLS  client_auth_type: RequireAndVerifyClientCert\n", "needs client_ca_file"),
        ("tls version", "TLS  min_version: TLS14\n", "min_version"),
        ("cipher", "TLS  cipher_suites: [RC4]\n", "unknown cipher"),
        ("curve", "TLS  curve_preferences: [CurveP999]\n", "curve_preferences"),
        ("header", "http_server_config:\n  headers:\n    X-Powered-By: me\n", "can not be configured"),
        ("sans without verify", "TLS  client_allowed_sans: [a]\n", "client_allowed_sans"),
        ("rate", "rate_limit:\n  interval: soon\n", "rate_limit.interval"),
    ],
)
def test_a_bad_web_config_is_one_line_and_exit_3(
    case: str, text: str, words: str, pki: Pki, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tls = f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n  "
    text = text.replace("TLS  ", tls)
    text = text.replace("STRANGER_KEY", str(pki.stranger_key)).replace("CERT", str(pki.server_cert))
    text = text.replace("CA\n", f"{pki.ca_cert}\n")
    if "ENCRYPTED_KEY" in text:  # no prompt on the terminal: a one-line error
        encrypted = tmp_path / "encrypted.key"
        subprocess.run(
            ["openssl", "pkey", "-in", str(pki.server_key), "-aes256", "-passout", "pass:x", "-out", str(encrypted)],
            check=True,
            capture_output=True,
        )
        text = text.replace("ENCRYPTED_KEY", str(encrypted))
    path = _write(tmp_path, text)
    assert main(["serve", "--listen", "127.0.0.1:0", "--no-gpu", "--duration", "0.1", "--web-config", path]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"gpuscope: error: --web-config {path}: "), err
    assert words in err, err
    assert "Traceback" not in err and "$2" not in err


def test_a_missing_web_config_is_exit_3(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="cannot read"):
        start_exporter("127.0.0.1:0", web_config=str(tmp_path / "absent.yml"))


# --- off loopback -----------------------------------------------------------------------------------


def test_off_loopback_needs_tls_auth_or_insecure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UsageError, match="--insecure") as info:
        start_exporter("0.0.0.0:0", process_metrics=False)
    assert "\n" not in str(info.value)
    assert main(["serve", "--listen", "0.0.0.0:0", "--no-gpu", "--duration", "0.1"]) == 2
    assert "nothing protects it" in capsys.readouterr().err
    with start_exporter("0.0.0.0:0", process_metrics=False, insecure=True) as handle:
        assert handle.insecure and handle.collector.process_labels == "pid"  # the cautious default off loopback
        assert "UNPROTECTED (--insecure)" in handle.announce and "process labels: pid" in handle.announce
        assert _get(f"http://127.0.0.1:{handle.port}/-/healthy", password=None)[0] == 200
    auth = _write(tmp_path, _users_yaml())
    with start_exporter("0.0.0.0:0", process_metrics=False, web_config=auth) as handle:
        assert not handle.insecure and "basic auth (1 user)" in handle.announce
        assert "without TLS" in handle.announce  # a password in clear text is said so
    with start_exporter("127.0.0.1:0", process_metrics=False) as handle:  # loopback: unchanged
        assert handle.announce == handle.url and handle.collector.process_labels == "full"


def test_serve_start_line_says_unprotected(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--listen", "0.0.0.0:0", "--no-gpu", "--duration", "0.1", "--insecure"]) == 0
    first = capsys.readouterr().err.splitlines()[0]
    assert "UNPROTECTED" in first and "process labels: pid" in first


# --- HTTPS, basic auth, mutual TLS ------------------------------------------------------------------


@pytest.fixture()
def mtls(pki: Pki, tmp_path: Path) -> Iterator[tuple[str, object]]:
    """An exporter with mutual TLS and basic auth on loopback, one sample in: (url, handle)."""
    path = _write(tmp_path, _tls_yaml(pki) + _users_yaml())
    with start_exporter("127.0.0.1:0", process_metrics=False, web_config=path) as handle:
        handle.update(make_sample(1, gpus=1, cores=2))
        yield handle.url, handle


def test_https_with_client_certificate_and_password_scrapes(pki: Pki, mtls: tuple[str, object]) -> None:
    url, handle = mtls
    assert url.startswith("https://127.0.0.1:")
    context = client_context(pki)
    for _ in range(5):
        status, body = _get(url, context)
        assert status == 200 and "gpuscope_gpu_power_watts" in body
    assert handle.gate.passwords.bcrypt_calls == 1  # type: ignore[attr-defined]  # once, then cached


def test_a_wrong_password_is_refused_counted_and_sees_no_metrics(pki: Pki, mtls: tuple[str, object]) -> None:
    url, handle = mtls
    context = client_context(pki)
    for _ in range(3):
        status, body = _get(url, context, password="wrong")
        assert status == 401 and "gpuscope_" not in body
    status, body = _get(url, context, password=None)
    assert status == 401 and "gpuscope_" not in body
    status, body = _get(url.replace("/metrics", "/-/ready"), context, user="mallory")
    assert status == 401
    assert handle.gate.passwords.bcrypt_calls == 2  # type: ignore[attr-defined]  # a repeated wrong one is cached
    refusals = _refusals(_get(url, context)[1])
    assert refusals["wrong_credentials"] == 4 and refusals["no_credentials"] == 1


def test_no_client_certificate_fails_the_handshake_and_is_counted(pki: Pki, mtls: tuple[str, object]) -> None:
    url, _ = mtls
    for context in (client_context(pki, with_certificate=False), _stranger(pki)):
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            _get(url, context)
    for version in (ssl.TLSVersion.TLSv1_2,):  # TLS 1.2: the handshake itself fails at the client
        context = client_context(pki, with_certificate=False)
        context.maximum_version = version
        with pytest.raises((ssl.SSLError, urllib.error.URLError)):
            _get(url, context)
    refusals = _refusals(_get(url, client_context(pki))[1])
    assert refusals["tls_handshake"] >= 3


def _stranger(pki: Pki) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    context.load_cert_chain(str(pki.stranger_cert), str(pki.stranger_key))
    return context


def test_client_allowed_sans(pki: Pki, tmp_path: Path) -> None:
    allowed = _write(tmp_path, _tls_yaml(pki, extra=f"  client_allowed_sans: [{CLIENT_SAN}]\n"), "ok.yml")
    other = _write(tmp_path, _tls_yaml(pki, extra="  client_allowed_sans: [somebody.else]\n"), "no.yml")
    with start_exporter("127.0.0.1:0", process_metrics=False, web_config=allowed) as handle:
        assert _get(handle.url, client_context(pki), password=None)[0] == 200
    with start_exporter("127.0.0.1:0", process_metrics=False, web_config=other) as handle:
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError, OSError)):
            _get(handle.url, client_context(pki), password=None)
        assert handle.stats.snapshot()[1]["client_san"] == 1


def test_plain_http_against_tls_gets_nothing(mtls: tuple[str, object]) -> None:
    url, handle = mtls
    port = handle.port  # type: ignore[attr-defined]
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except OSError:
            pass
    assert b"gpuscope_" not in answer


def test_headers_and_rate_limit(pki: Pki, tmp_path: Path) -> None:
    text = (
        _tls_yaml(pki, client_auth="NoClientCert").replace(f"  client_ca_file: {pki.ca_cert}\n", "")
        + "http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n"
        + "rate_limit:\n  interval: 1h\n  burst: 2\n"
    )
    with start_exporter("127.0.0.1:0", process_metrics=False, web_config=_write(tmp_path, text)) as handle:
        context = client_context(pki, with_certificate=False)
        with urllib.request.urlopen(handle.url, timeout=5, context=context) as response:  # noqa: S310
            assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert _get(handle.url, context, password=None)[0] == 200
        assert _get(handle.url, context, password=None)[0] == 429


# --- reload -------------------------------------------------------------------------------------------


def test_the_web_config_reloads_and_a_bad_reload_keeps_the_old(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("gpuscope.exporter.gate.RELOAD_CHECK_S", 0.0)
    path = _write(tmp_path, _tls_yaml(pki) + _users_yaml())
    with start_exporter("127.0.0.1:0", process_metrics=False, web_config=path) as handle:
        context = client_context(pki)
        assert _get(handle.url, context)[0] == 200
        _write(tmp_path, _tls_yaml(pki) + _users_yaml(bcrypt_hash("new-password")))
        assert _get(handle.url, context)[0] == 401  # the old password is gone
        assert _get(handle.url, context, password="new-password")[0] == 200
        _write(tmp_path, _tls_yaml(pki) + "basic_auth_users:\n  prometheus: not-a-hash\n")
        for _ in range(3):
            assert _get(handle.url, context, password="new-password")[0] == 200  # the previous stays
        _write(tmp_path, _users_yaml())  # TLS off needs a restart
        assert _get(handle.url, context, password="new-password")[0] == 200
    err = capsys.readouterr().err
    assert err.count("reload failed, the previous web configuration stays") == 1  # once per change
    assert "not a bcrypt hash" in err and "not-a-hash" not in err
    assert "needs a restart" in err and "reloaded" in err


def test_a_renewed_certificate_is_served_from_the_next_connection(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key pair is replaced in place (as a certificate renewal does): the web configuration
    file itself is unchanged, and the next connection gets the new certificate."""
    monkeypatch.setattr("gpuscope.exporter.gate.RELOAD_CHECK_S", 0.0)
    renewed = make_pki(tmp_path / "renewed")
    cert, key = tmp_path / "live.crt", tmp_path / "live.key"
    cert.write_bytes(pki.server_cert.read_bytes())
    key.write_bytes(pki.server_key.read_bytes())
    path = _write(tmp_path, f"tls_server_config:\n  cert_file: {cert.name}\n  key_file: {key.name}\n")
    with start_exporter("127.0.0.1:0", process_metrics=False, web_config=path) as handle:
        old_ca = client_context(pki, with_certificate=False)
        new_ca = ssl.create_default_context(cafile=str(renewed.ca_cert))
        assert _get(handle.url, old_ca, password=None)[0] == 200
        _write(tmp_path, renewed.server_key.read_text(), key.name)
        _write(tmp_path, renewed.server_cert.read_text(), cert.name)
        time.sleep(0.05)
        assert _get(handle.url, new_ca, password=None)[0] == 200
        with pytest.raises((ssl.SSLError, urllib.error.URLError)):
            _get(handle.url, old_ca, password=None)


def test_log_prometheus_takes_the_same_protection(pki: Pki, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.jsonl"
    base = ["log", "--no-gpu", "--duration", "0.2", "-o", str(out), "--prometheus"]
    assert main([*base, "0.0.0.0:0"]) == 2
    assert "nothing protects it" in capsys.readouterr().err and not out.exists()
    path = _write(tmp_path, _tls_yaml(pki) + _users_yaml())
    assert main([*base, "127.0.0.1:0", "--web-config", path, "--process-labels", "none"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"https://127\.0\.0\.1:\d+/metrics \(TLS, client certificates required, basic auth", err), err
    assert "process labels: none" in err and out.exists()


# --- health, identity, counters -----------------------------------------------------------------------


def test_ready_healthy_build_info_and_scrape_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    with start_exporter("127.0.0.1:0", process_metrics=False) as handle:
        base = handle.url.removesuffix("/metrics")
        assert _get(base + "/-/healthy", password=None)[0] == 200
        assert _get(base + "/-/ready", password=None)[0] == 503  # no sample yet
        series = _series(_get(handle.url, password=None)[1])
        [(labels, value)] = series["gpuscope_build_info"]
        from gpuscope.version import __version__

        assert value == 1 and labels["version"] == __version__
        assert series["gpuscope_exporter_scrape_errors_total"][0][1] == 0
        handle.update(make_sample(1, gpus=1, cores=2))
        assert _get(base + "/-/ready", password=None)[0] == 200

        def broken(*args: object, **kwargs: object) -> list[object]:
            raise ValueError("a sample that cannot be converted")

        monkeypatch.setattr("gpuscope.exporter.server.sample_to_families", broken)
        status, body = _get(handle.url, password=None)
        assert status == 200
        series = _series(body)
        assert series["gpuscope_exporter_scrape_errors_total"][0][1] == 1
        assert "gpuscope_gpu_power_watts" not in series and "gpuscope_build_info" in series


# --- process labels -----------------------------------------------------------------------------------


def test_process_label_levels() -> None:
    sample = make_sample(1, gpus=1, cores=2)

    def of(level: str) -> dict[str, list[tuple[dict[str, str], float]]]:
        from prometheus_client.exposition import generate_latest
        from prometheus_client.registry import CollectorRegistry

        class One:
            def collect(self) -> object:
                return sample_to_families(sample, 1, True, {}, level)

        registry = CollectorRegistry(auto_describe=False)
        registry.register(One())  # type: ignore[arg-type]
        return _series(generate_latest(registry).decode())

    full, pid, none = of("full"), of("pid"), of("none")
    [(labels, _)] = full["gpuscope_gpu_process_memory_bytes"]
    assert labels["process"] and labels["user"] and labels["pid"]
    [(labels, _)] = pid["gpuscope_gpu_process_memory_bytes"]
    assert "process" not in labels and "user" not in labels and labels["pid"]
    assert "gpuscope_gpu_process_memory_bytes" not in none and "gpuscope_gpu_process_sm_utilization_ratio" not in none
    for level in (full, pid, none):
        assert level["gpuscope_gpu_processes"][0][1] == 1
        assert level["gpuscope_gpu_processes_memory_bytes"][0][1] == full["gpuscope_gpu_process_memory_bytes"][0][1]
    text = str(none)
    process = sample.gpus[0].processes[0]  # type: ignore[index]
    assert process.name not in text and str(process.user) not in text


def test_serve_process_labels_option(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["serve", "--listen", "127.0.0.1:0", "--no-gpu", "--duration", "0.1", "--process-labels", "none"]
    assert main(args) == 0
    assert "process labels: none" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main([*args[:-1], "names"])
    assert info.value.code == 2


# --- abuse with TLS on: idle, stalled handshakes, trickling requests -----------------------------------


def test_idle_and_stalled_handshakes_do_not_lock_a_tls_scrape_out(pki: Pki, tmp_path: Path) -> None:
    """Every slot held by connections that never start their handshake, then by ones that trickle
    a ClientHello a byte at a time: a TLS scrape still gets 200 at once."""
    path = _write(tmp_path, _tls_yaml(pki) + _users_yaml())
    with mock.patch("gpuscope.exporter.server.max_connections", return_value=4):
        handle = start_exporter("127.0.0.1:0", process_metrics=False, web_config=path)
    try:
        handle.update(make_sample(1, gpus=1, cores=2))
        context = client_context(pki)
        idle = [socket.create_connection(("127.0.0.1", handle.port), timeout=2) for _ in range(8)]
        time.sleep(0.2)
        assert _get(handle.url, context)[0] == 200
        hello = _client_hello(handle.port)
        stop = threading.Event()
        slow = [socket.create_connection(("127.0.0.1", handle.port), timeout=2) for _ in range(8)]

        def trickle() -> None:
            for position in range(len(hello)):
                for sock in slow:
                    try:
                        sock.send(hello[position : position + 1])
                    except OSError:
                        pass
                if stop.wait(0.02):
                    return

        thread = threading.Thread(target=trickle, daemon=True)
        thread.start()
        try:
            time.sleep(0.3)
            for _ in range(3):
                assert _get(handle.url, context)[0] == 200
        finally:
            stop.set()
            thread.join(timeout=5)
        for sock in idle + slow:
            sock.close()
    finally:
        handle.close()


def _client_hello(port: int) -> bytes:
    """The first bytes a TLS client sends (captured from a real handshake attempt)."""
    incoming = ssl.MemoryBIO()
    outgoing = ssl.MemoryBIO()
    context = ssl.create_default_context()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def test_a_tls_request_trickled_after_the_handshake_is_served_or_dropped(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request head sent a byte at a time after the handshake still arrives whole; one that
    never ends is closed at the deadline, while scrapes go on."""
    monkeypatch.setattr("gpuscope.exporter.connections.IDLE_TIMEOUT_S", 1.0)
    path = _write(tmp_path, _tls_yaml(pki))
    with start_exporter("127.0.0.1:0", process_metrics=False, web_config=path) as handle:
        handle.update(make_sample(1, gpus=1, cores=2))
        context = client_context(pki)
        raw = socket.create_connection(("127.0.0.1", handle.port), timeout=3)
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            for byte in b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n":
                tls.send(bytes([byte]))
            answer = tls.recv(64)
        assert answer.startswith(b"HTTP/1.")
        raw = socket.create_connection(("127.0.0.1", handle.port), timeout=3)
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.send(b"GET /metrics HTTP/1.1\r\n")
            assert _get(handle.url, context, password=None)[0] == 200
            deadline = time.monotonic() + 10
            closed = False
            while not closed and time.monotonic() < deadline:
                try:
                    tls.send(b"a")
                    tls.settimeout(0.2)
                    closed = tls.recv(1) == b""
                except TimeoutError:
                    continue
                except OSError:
                    closed = True
            assert closed


@pytest.mark.slow
def test_a_real_serve_with_mutual_tls_holds_against_idle_and_trickling_clients(pki: Pki, tmp_path: Path) -> None:
    """``gpuscope serve`` with mutual TLS and basic auth: 200 silent connections, then 64 that
    trickle a ClientHello byte by byte: a scrape with the client certificate still gets 200."""
    path = _write(tmp_path, _tls_yaml(pki) + _users_yaml())
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    env.pop("GPUSCOPE_FAKE_NVML", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuscope", "serve", "--listen", "127.0.0.1:0", "--no-gpu", "--interval", "0.2",
         "--web-config", path],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    sockets: list[socket.socket] = []
    stop = threading.Event()
    try:
        assert process.stderr is not None
        match = re.search(r"https://127\.0\.0\.1:(\d+)/metrics", process.stderr.readline())
        assert match
        port = int(match.group(1))
        url = f"https://127.0.0.1:{port}/metrics"
        context = client_context(pki)
        deadline = time.monotonic() + 20
        while _get(url, context)[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        for _ in range(200):
            sockets.append(socket.create_connection(("127.0.0.1", port), timeout=3))
        status, body = _get(url, context)
        assert status == 200 and "gpuscope_cpu_logical_cores" in body
        hello = _client_hello(port)
        slow = [socket.create_connection(("127.0.0.1", port), timeout=3) for _ in range(64)]
        sockets += slow

        def trickle() -> None:
            for position in range(len(hello)):
                for sock in slow:
                    try:
                        sock.send(hello[position : position + 1])
                    except OSError:
                        pass
                if stop.wait(0.05):
                    return

        thread = threading.Thread(target=trickle, daemon=True)
        thread.start()
        time.sleep(0.5)
        for _ in range(3):
            assert _get(url, context)[0] == 200
        stop.set()
        thread.join(timeout=5)
        assert process.poll() is None
    finally:
        stop.set()
        for sock in sockets:
            sock.close()
        process.terminate()
        process.wait(timeout=20)
    assert process.returncode == 0
