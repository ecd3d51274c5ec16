"""The exporter's CPU per scrape with TLS and basic auth against plain HTTP, in the same run.

Each configuration runs in its own child process (``start_exporter`` fed one 8-GPU, 64-core
sample); this process scrapes them in interleaved rounds, with the headers Prometheus sends (so
the answer is gzipped OpenMetrics, as in production), and reads each child's CPU time
(utime + stime from /proc) before and after a round, so the numbers are the exporter's own work:
accept, TLS handshake, basic auth, converting the sample, writing the answer.

Every scrape is a fresh connection: the exporter closes a connection after its answer, and
Prometheus cannot keep one open across a 15 s scrape interval anyway (idle connections close after
5 s), so at a 15 s interval each TLS scrape pays a full handshake. The interval itself changes
nothing else per scrape (the sample is converted at scrape time), so the scrapes run back to back.
bcrypt runs on the first authenticated request only (its verdict is cached); that first
request's CPU is reported apart, and so is a ``/-/healthy`` request (connection, handshake and
auth without the metrics) for each configuration.

Configurations: ``plain`` (loopback, no web config), ``tls+auth`` (ECDSA P-256 server key, bcrypt
cost 10), ``mtls+auth`` (the same plus a verified client certificate), ``tls-rsa+auth`` (RSA 2048).
Target (issue 38): tls+auth <= 1.3x plain (median of the rounds' CPU per scrape).

Usage: .venv/bin/python benchmarks/bench_exporter_tls.py [--rounds 4] [--scrapes 40] [--json OUT]
Stops starting rounds after --budget-s (30 s; at least 2 rounds), so it stays near a minute on 2 busy cores.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # tests/support

from support.tls import Pki, bcrypt_hash, make_pki  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
#: What Prometheus 2.x sends with a scrape (so the answer is OpenMetrics, gzipped, as it would be).
_PROMETHEUS_HEADERS = (
    "User-Agent: Prometheus/2.42.0\r\n"
    "Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n"
    "Accept-Encoding: gzip\r\n"
    "X-Prometheus-Scrape-Timeout-Seconds: 10\r\n"
)
PASSWORD = "bench-password"
TARGET_RATIO = 1.3

_CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + "/tests")
from support.samples import make_sample
from gpuscope.exporter import start_exporter
web = sys.argv[2] or None
handle = start_exporter("127.0.0.1:0", web_config=web, process_metrics=False)
handle.update(make_sample(1, gpus=8, cores=64))
handle.update(make_sample(2, gpus=8, cores=64))
print(handle.port, flush=True)
sys.stdin.read()
handle.close()
"""


def _cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` in seconds (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class Child:
    """One exporter configuration in its own process."""

    def __init__(self, name: str, web_config: str | None, context: ssl.SSLContext | None, auth: bool) -> None:
        self.name = name
        self.context = context
        self.auth = auth
        self.process = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(REPO), web_config or ""],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())
        self.per_scrape_s: list[float] = []
        self.first_s = 0.0
        self.handshake_s: list[float] = []
        self.body_bytes = 0

    def scrape(self, path: str = "/metrics") -> int:
        """One request on a fresh connection; the status code."""
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        sock = raw if self.context is None else self.context.wrap_socket(raw, server_hostname="127.0.0.1")
        head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{_PROMETHEUS_HEADERS}"
        if self.auth:
            head += "Authorization: Basic " + base64.b64encode(f"bench:{PASSWORD}".encode()).decode() + "\r\n"
        with sock:
            sock.sendall((head + "\r\n").encode())
            answer = bytearray()
            while chunk := sock.recv(1 << 16):
                answer += chunk
        if path == "/metrics":
            self.body_bytes = len(answer)
        return int(answer[9:12])

    def round(self, scrapes: int, path: str = "/metrics") -> float:
        """CPU seconds of the child per request over ``scrapes`` requests."""
        before = _cpu_s(self.process.pid)
        for _ in range(scrapes):
            status = self.scrape(path)
            assert status == 200, (self.name, status)
        return (_cpu_s(self.process.pid) - before) / scrapes

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=20)


def _web_config(folder: Path, pki: Pki, name: str, mutual: bool) -> str:
    text = f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
    if mutual:
        text += f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {pki.ca_cert}\n"
    text += f"basic_auth_users:\n  bench: {bcrypt_hash(PASSWORD, cost=10)}\n"
    path = folder / f"{name}.yml"
    path.write_text(text)
    return str(path)


def _context(pki: Pki, mutual: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    if mutual:
        context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    return context


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--scrapes", type=int, default=40, help="requests per configuration per round")
    parser.add_argument("--budget-s", type=float, default=30.0, help="no new round after this many seconds")
    parser.add_argument("--json", default=None, help="write the numbers here too")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpuscope-bench-tls-") as folder_name:
        folder = Path(folder_name)
        ec, rsa = make_pki(folder / "ec", "ec"), make_pki(folder / "rsa", "rsa")
        children = [
            Child("plain", None, None, False),
            Child("tls+auth", _web_config(folder, ec, "tls", False), _context(ec, False), True),
            Child("mtls+auth", _web_config(folder, ec, "mtls", True), _context(ec, True), True),
            Child("tls-rsa+auth", _web_config(folder, rsa, "rsa", False), _context(rsa, False), True),
        ]
        try:
            for child in children:  # the first request pays bcrypt (once), and warms imports
                before = _cpu_s(child.process.pid)
                assert child.scrape() == 200
                child.first_s = _cpu_s(child.process.pid) - before
                child.round(3)
            for done in range(args.rounds):  # interleaved: load changes hit every configuration alike
                if done >= 2 and time.monotonic() - started > args.budget_s:
                    break
                for child in children:
                    child.per_scrape_s.append(child.round(args.scrapes))
                    child.handshake_s.append(child.round(args.scrapes, "/-/healthy"))
        finally:
            for child in children:
                child.close()
    plain = statistics.median(children[0].per_scrape_s)
    rows = []
    rounds = len(children[0].per_scrape_s)
    print(f"exporter CPU per scrape, fresh connection each, {rounds} rounds x {args.scrapes} scrapes")
    print(f"(8-GPU, 64-core sample; answer {children[0].body_bytes} bytes; CPU from /proc, {CLK_TCK} ticks/s)")
    print(f"{'configuration':<14} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'x plain':>8} "
          f"{'/-/healthy ms':>14} {'first request ms':>17}")  # fmt: skip
    for child in children:
        median = statistics.median(child.per_scrape_s)
        overhead = statistics.median(child.handshake_s) if child.handshake_s else 0.0
        rows.append(
            {
                "configuration": child.name,
                "cpu_per_scrape_s_median": median,
                "cpu_per_scrape_s_min": min(child.per_scrape_s),
                "cpu_per_scrape_s_max": max(child.per_scrape_s),
                "ratio_to_plain": median / plain if plain else None,
                "cpu_per_healthy_request_s_median": overhead,
                "first_request_cpu_s": child.first_s,
            }
        )
        print(
            f"{child.name:<14} {median * 1e3:10.2f} {min(child.per_scrape_s) * 1e3:8.2f} "
            f"{max(child.per_scrape_s) * 1e3:8.2f} {median / plain:8.2f} "
            f"{overhead * 1e3:14.2f} {child.first_s * 1e3:17.1f}"
        )
    ratio = statistics.median(children[1].per_scrape_s) / plain
    verdict = "met" if ratio <= TARGET_RATIO else "MISSED"
    took_s = time.monotonic() - started
    print(f"target: tls+auth <= {TARGET_RATIO}x plain: {ratio:.2f}x ({verdict}); took {took_s:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "ratio": ratio, "target": TARGET_RATIO}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
