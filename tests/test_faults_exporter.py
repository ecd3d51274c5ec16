"""Faults while serving Prometheus (issue 16, class 8): anyone who can reach the port must not
stop the exporter or the sampler.

A real ``gpuscope serve`` under a lowered RLIMIT_NOFILE gets ~300 idle connections held open:
it holds at most a bounded number while their requests arrive (a new one pushes out the oldest),
drops idle ones after a few seconds, answers 503 only when whole requests queue up, keeps
sampling, and a scrape still succeeds. A /proc read that fails (out of file descriptors) is an
unavailable metric, not a crash.
"""

from __future__ import annotations

import errno
import os
import re
import resource
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import psutil
import pytest

REPO = Path(__file__).resolve().parent.parent
NOFILE = 256


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("GPUSCOPE_FAKE_NVML", None)
    return env


def _limit_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


def _scrape(url: str, timeout_s: float = 3.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 - our own loopback URL
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except (urllib.error.URLError, OSError):
        return 0, ""


def _sample_time(body: str) -> float:
    match = re.search(r"^gpuscope_sample_timestamp_seconds\{[^}]*\} (\S+)$", body, re.M)
    assert match, body[:500]
    return float(match.group(1))


@pytest.mark.slow
def test_idle_connections_cannot_stop_the_exporter_or_the_sampler(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuscope", "serve", "--listen", "127.0.0.1:0", "--no-gpu", "--interval", "0.2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp_path, preexec_fn=_limit_files,
    )  # fmt: skip
    sockets: list[socket.socket] = []
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        url = re.search(r"(http://\S+/metrics)", first)
        assert url, first
        host, port = re.match(r"http://([\d.]+):(\d+)/", url.group(1)).groups()  # type: ignore[union-attr]
        status, body = 0, ""
        deadline = time.monotonic() + 20
        while (status != 200 or "gpuscope_sample_timestamp_seconds{" not in body) and time.monotonic() < deadline:
            status, body = _scrape(url.group(1))  # the first scrape may come before the first sample
            time.sleep(0.1)
        before = _sample_time(body)
        for _ in range(300):  # more than the descriptor limit allows connections to be held
            try:
                sockets.append(socket.create_connection((host, int(port)), timeout=2))
            except OSError:
                pass
        time.sleep(0.5)
        assert process.poll() is None, process.stderr.read()
        held = psutil.Process(process.pid).num_fds()
        assert held < NOFILE - 8, f"{held} descriptors open: connections are not capped"
        status, body = 0, ""
        deadline = time.monotonic() + 30  # idle connections are dropped after a few seconds
        while status != 200 and time.monotonic() < deadline:
            status, body = _scrape(url.group(1))
            time.sleep(0.2)
        assert status == 200, "no scrape succeeded while idle connections were held"
        assert _sample_time(body) > before  # the sampler kept sampling
        assert process.poll() is None
    finally:
        for sock in sockets:
            sock.close()
        process.terminate()
        process.wait(timeout=20)
    assert process.returncode == 0
    stderr = process.stderr.read() if process.stderr else ""
    assert "Traceback" not in stderr and "Too many open files" not in stderr


def test_connection_cap_follows_the_descriptor_limit() -> None:
    from gpuscope.exporter.server import max_connections

    with mock.patch("resource.getrlimit", return_value=(1024, 4096)):
        assert max_connections() == 64
    with mock.patch("resource.getrlimit", return_value=(128, 4096)):
        assert max_connections() == 32
    with mock.patch("resource.getrlimit", return_value=(40, 40)):
        assert max_connections() == 4


def test_idle_clients_in_every_slot_do_not_lock_a_scrape_out() -> None:
    """With every connection slot taken by idle clients, a scrape still gets 200 at once: the
    oldest idle connection makes room (it is closed), and no worker waits on an idle client."""
    from support.samples import make_sample

    from gpuscope.exporter import start_exporter

    with mock.patch("gpuscope.exporter.server.max_connections", return_value=4):
        handle = start_exporter("127.0.0.1:0", process_metrics=False)
    try:
        handle.update(make_sample(0, gpus=1, cores=2))
        idle = [socket.create_connection(("127.0.0.1", handle.port), timeout=2) for _ in range(4)]
        time.sleep(0.2)
        status, _ = _scrape(handle.url)
        assert status == 200
        assert idle[0].recv(1) == b""  # the oldest idle connection was closed to make room
        for sock in idle:
            sock.close()
    finally:
        handle.close()


def test_busy_exporter_answers_503_and_keeps_serving() -> None:
    """When whole requests queue faster than the workers answer them (every worker stuck in a slow
    collector and the queue full), the next request gets 503 at once; afterwards scrapes succeed."""
    import threading

    from gpuscope.exporter import server as exporter_server
    from gpuscope.exporter import start_exporter

    release = threading.Event()
    answering: list[int] = []

    def slow_collect(self: object) -> Iterator[object]:
        answering.append(1)
        release.wait(10)
        return iter(())

    def send_request() -> None:
        sock = socket.create_connection(("127.0.0.1", handle.port), timeout=5)
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        stuck.append(sock)

    with mock.patch("gpuscope.exporter.server.max_connections", return_value=4):
        handle = start_exporter("127.0.0.1:0", process_metrics=False)
    stuck: list[socket.socket] = []
    try:
        with mock.patch.object(exporter_server.SampleCollector, "collect", slow_collect):
            for _ in range(exporter_server.WORKERS):
                send_request()
            deadline = time.monotonic() + 10
            while len(answering) < exporter_server.WORKERS and time.monotonic() < deadline:
                time.sleep(0.05)  # every worker is inside the slow collector
            for _ in range(4):  # then the queue (as long as the connection cap) fills
                send_request()
            time.sleep(0.3)
            status, _ = _scrape(handle.url)
            assert status == 503
            release.set()
        for sock in stuck:
            sock.close()
        deadline = time.monotonic() + 10
        while status != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
            status, _ = _scrape(handle.url)
        assert status == 200
    finally:
        release.set()
        handle.close()


def test_a_failed_proc_read_is_an_unavailable_metric() -> None:
    """Out of file descriptors, /proc/stat and /proc/meminfo cannot be opened: the host sample
    says CPU utilization is unavailable (and keeps the last memory reading), it does not raise."""
    from gpuscope.telemetry.host import HostCollector
    from gpuscope.telemetry.values import Unavailable

    collector = HostCollector()
    first = collector.sample()
    failure = OSError(errno.EMFILE, "Too many open files")
    # the collector reads its /proc files with os.pread (kept open); psutil where it falls back
    with mock.patch("os.pread", side_effect=failure), mock.patch("psutil.cpu_times", side_effect=failure):
        sample = collector.sample()
    assert isinstance(sample.cpu_utilization_percent, Unavailable)
    assert "Too many open files" in sample.cpu_utilization_percent.detail
    assert sample.memory_total_bytes == first.memory_total_bytes > 0  # the last reading
    assert collector.sample().cpu_utilization_percent is not None  # and it recovers
