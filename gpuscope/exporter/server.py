"""Serve the latest telemetry sample over HTTP for Prometheus to scrape.

A custom collector converts the newest :class:`Sample` at scrape time, so an unavailable metric
is simply absent and an exporter nobody scrapes costs nothing beyond keeping one reference.

Anyone who can reach the port must not be able to stop the exporter or the sampler: at most
:func:`max_connections` connections are served at once (each on its own thread; more are
answered ``503`` and closed at once), a connection that sends nothing for
:data:`IDLE_TIMEOUT_S` seconds is closed, the listen backlog is :data:`LISTEN_BACKLOG`, and an
``accept`` that fails because file descriptors ran out waits a moment instead of spinning or
ending the server.
"""

from __future__ import annotations

import errno
import ipaddress
import re
import resource
import socket
import threading
import time
from collections.abc import Iterator
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client.core import CollectorRegistry, Metric
from prometheus_client.registry import Collector

from gpuscope.errors import ResourceError, UsageError
from gpuscope.exporter.metrics import XidTotals, count_xids, sample_to_families
from gpuscope.telemetry.records import Sample

__all__ = [
    "DEFAULT_LISTEN",
    "DEFAULT_PORT",
    "SampleCollector",
    "ExporterHandle",
    "parse_listen",
    "start_exporter",
    "max_connections",
    "IDLE_TIMEOUT_S",
    "LISTEN_BACKLOG",
]

DEFAULT_PORT = 9842
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"
#: A connection that sends nothing for this long is closed, seconds (Prometheus sends its
#: request at once and waits up to its scrape timeout, 10 s by default, for the answer).
IDLE_TIMEOUT_S = 5.0
#: Connections the kernel queues before gpuscope accepts them (Python's default is 5).
LISTEN_BACKLOG = 128
_PORT_RE = re.compile(r"[0-9]{1,5}")


def max_connections() -> int:
    """Connections served at once: 64, fewer when the file descriptor limit is low (half of
    what is left after 64 for gpuscope itself, at least 4)."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return 64
    if soft == resource.RLIM_INFINITY:
        return 64
    return max(4, min(64, (int(soft) - 64) // 2))


class _Handler(WSGIRequestHandler):
    """Quiet (no access log on stderr), and with a socket timeout: an idle client is dropped."""

    timeout = IDLE_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


_BUSY_RESPONSE = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
_OUT_OF_DESCRIPTORS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


class _Server(ThreadingMixIn, WSGIServer):
    """A thread per connection, at most ``slots`` at once."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, *args: Any, slots: int = 64, **kwargs: Any) -> None:
        self._slots = threading.BoundedSemaphore(slots)
        super().__init__(*args, **kwargs)

    def get_request(self) -> Any:
        try:
            return super().get_request()
        except OSError as exc:
            if exc.errno in _OUT_OF_DESCRIPTORS:
                time.sleep(0.05)  # the listening socket stays readable: do not spin
            raise  # socketserver drops this one connection attempt and goes on

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            try:
                request.settimeout(0.5)
                request.sendall(_BUSY_RESPONSE)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # e.g. RuntimeError: can't start new thread
            self._slots.release()
            self.shutdown_request(request)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out or reset the connection is not worth a traceback


class SampleCollector(Collector):
    """A prometheus-client collector that exposes the newest sample given to :meth:`update`."""

    def __init__(self, with_unavailable: bool = True) -> None:
        self._lock = threading.Lock()
        self._sample: Sample | None = None
        self._count = 0
        self._with_unavailable = with_unavailable
        self._xid_totals: XidTotals = {}

    def update(self, sample: Sample) -> None:
        """Make ``sample`` the one the next scrape shows (cheap: no conversion happens here)."""
        with self._lock:
            self._sample = sample
            self._count += 1
            count_xids(self._xid_totals, sample)  # a counter: every sample counts, not only the scraped ones

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            sample, count, xids = self._sample, self._count, dict(self._xid_totals)
        yield from sample_to_families(sample, count, self._with_unavailable, xids)

    def describe(self) -> list[Metric]:
        # An empty description stops the registry from calling collect() at registration.
        return []


def parse_listen(text: str) -> tuple[str, int]:
    """Split ``HOST:PORT`` (``[v6]:PORT``, ``:PORT`` or ``PORT`` mean host 127.0.0.1).

    Raises :class:`UsageError` with one line when the text is not an address and port 0..65535.
    """
    raw = text.strip()
    if not raw:
        raise UsageError("--listen: empty address; expected HOST:PORT such as 127.0.0.1:9842")
    if raw.startswith("["):
        host, sep, port_text = raw[1:].partition("]:")
        if not sep:
            raise UsageError(f"--listen {text!r}: expected [IPV6]:PORT such as [::1]:9842")
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise UsageError(f"--listen {text!r}: {host!r} is not an IPv6 address") from None
    elif ":" in raw:
        host, _, port_text = raw.rpartition(":")
        if ":" in host:
            raise UsageError(f"--listen {text!r}: write an IPv6 address in brackets, e.g. [::1]:9842")
    else:
        host, port_text = "", raw
    host = host or "127.0.0.1"
    if not _PORT_RE.fullmatch(port_text):  # ASCII digits only: "²".isdigit() is true
        raise UsageError(
            f"--listen {text!r}: port {port_text!r} is not a number; expected HOST:PORT such as 127.0.0.1:9842"
        )
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise UsageError(f"--listen {text!r}: port {port} is out of range 0..65535")
    return host, port


class ExporterHandle:
    """A running exporter. Feed it samples with :meth:`update`; stop it with :meth:`close`."""

    def __init__(self, server: object, thread: threading.Thread, collector: SampleCollector, host: str) -> None:
        self._server = server
        self._thread = thread
        self.collector = collector
        self.host = host
        address = server.socket.getsockname()  # type: ignore[attr-defined]
        self.port: int = int(address[1])

    @property
    def url(self) -> str:
        """The scrape URL, e.g. ``http://127.0.0.1:9842/metrics``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def update(self, sample: Sample) -> None:
        """Expose ``sample`` from the next scrape on (thread-safe)."""
        self.collector.update(sample)

    def close(self) -> None:
        """Stop serving and release the port. Safe to call twice."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()  # type: ignore[attr-defined]
        server.server_close()  # type: ignore[attr-defined]
        self._thread.join(timeout=5.0)

    def __enter__(self) -> ExporterHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_exporter(
    listen: str = DEFAULT_LISTEN, *, process_metrics: bool = True, with_unavailable: bool = True
) -> ExporterHandle:
    """Serve Prometheus metrics on ``listen`` (``HOST:PORT``; port 0 picks a free port) in a
    daemon thread. ``process_metrics`` adds the standard ``process_*`` series of this process
    (gpuscope's own CPU and memory). Raises :class:`UsageError` for a malformed or non-local
    address and :class:`ResourceError` when the port is taken.
    """
    from prometheus_client import make_wsgi_app
    from prometheus_client.process_collector import ProcessCollector

    host, port = parse_listen(listen)
    registry = CollectorRegistry(auto_describe=False)
    collector = SampleCollector(with_unavailable)
    registry.register(collector)
    if process_metrics:
        ProcessCollector(registry=registry)
    try:
        server, thread = _serve(host, port, make_wsgi_app(registry))
    except socket.gaierror:
        raise UsageError(
            f"--listen {listen!r}: cannot resolve host {host!r}; use an IP address of this machine"
        ) from None
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ResourceError(
                f"cannot listen on {host}:{port}: port already in use; choose another with HOST:PORT"
            ) from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise UsageError(f"--listen {listen!r}: {host} is not an address of this machine") from None
        if exc.errno == errno.EACCES:
            raise ResourceError(
                f"cannot listen on {host}:{port}: permission denied (ports below 1024 need privileges)"
            ) from None
        raise ResourceError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return ExporterHandle(server, thread, collector, host)


def _serve(host: str, port: int, app: Any) -> tuple[_Server, threading.Thread]:
    """Bind ``host:port`` and serve ``app`` from a daemon thread."""
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]

    slots = max_connections()

    class Server(_Server):
        address_family = family

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, slots=slots, **kwargs)

    server = make_server(str(address[0]), port, app, server_class=Server, handler_class=_Handler)
    thread = threading.Thread(target=server.serve_forever, name="gpuscope-exporter", daemon=True)
    thread.start()
    return server, thread
