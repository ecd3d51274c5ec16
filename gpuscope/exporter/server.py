"""Serve the latest telemetry sample over HTTP for Prometheus to scrape.

A custom collector converts the newest :class:`Sample` at scrape time, so an unavailable metric
is simply absent and an exporter nobody scrapes costs nothing beyond keeping one reference.

Anyone who can reach the port must not be able to stop the exporter, the sampler or a scrape.
One thread accepts connections and reads their requests through a selector, so a connection
that sends nothing, or trickles its request a byte at a time, holds no worker: only a request
that has arrived whole is handed to one of :data:`WORKERS` threads. A connection must deliver
its request within :data:`IDLE_TIMEOUT_S` seconds of connecting; at most :func:`max_connections`
are held while they do, and a new one pushes out the oldest, so idle connections can never lock a
scraper out. ``503`` answers only when whole requests queue faster than the workers serve them.
The listen backlog is :data:`LISTEN_BACKLOG`, and an ``accept`` that fails because file
descriptors ran out closes the oldest waiting connection (or waits a moment) instead of spinning
or ending the server.
"""

from __future__ import annotations

import errno
import io
import ipaddress
import queue
import re
import resource
import selectors
import socket
import threading
import time
from collections.abc import Iterator
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
    "WORKERS",
    "MAX_REQUEST_BYTES",
]

DEFAULT_PORT = 9842
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"
#: A connection that has not sent a whole request this long after connecting is closed, seconds
#: (Prometheus sends its request at once and waits up to its scrape timeout, 10 s by default, for
#: the answer); also the limit on writing an answer to a client that does not read it.
IDLE_TIMEOUT_S = 5.0
#: Connections the kernel queues before gpuscope accepts them (Python's default is 5).
LISTEN_BACKLOG = 128
#: Threads that answer whole requests (an answer takes milliseconds).
WORKERS = 4
#: The longest request head accepted, bytes (a scrape's is about 200).
MAX_REQUEST_BYTES = 16 * 1024
_PORT_RE = re.compile(r"[0-9]{1,5}")


def max_connections() -> int:
    """Connections held at once while their requests arrive: 64, fewer when the file descriptor
    limit is low (half of what is left after 64 for gpuscope itself, at least 4)."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return 64
    if soft == resource.RLIM_INFINITY:
        return 64
    return max(4, min(64, (int(soft) - 64) // 2))


class _Handler(WSGIRequestHandler):
    """Quiet (no access log on stderr); parses the request head the server already read."""

    timeout = IDLE_TIMEOUT_S

    def __init__(self, request: socket.socket, client_address: Any, server: Any, head: bytes) -> None:
        self._head = head
        super().__init__(request, client_address, server)

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the socket's own reader: the head is already here
        self.rfile = io.BytesIO(self._head)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


_BUSY_RESPONSE = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
_OUT_OF_DESCRIPTORS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_HEAD_ENDS = (b"\r\n\r\n", b"\n\n")


class _Pending:
    """A connection whose request has not arrived whole yet."""

    __slots__ = ("address", "deadline_s", "head")

    def __init__(self, address: Any, deadline_s: float) -> None:
        self.address = address
        self.deadline_s = deadline_s
        self.head = bytearray()


class _Server(WSGIServer):
    """Reads requests on the serving thread (a selector over every waiting connection) and answers
    whole ones on :data:`WORKERS` threads; holds at most ``slots`` waiting connections."""

    allow_reuse_address = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, *args: Any, slots: int = 64, **kwargs: Any) -> None:
        self._slots = slots
        self._pending: dict[socket.socket, _Pending] = {}  # oldest first (one deadline rule for all)
        self._selector = selectors.DefaultSelector()
        self._wake_read, self._wake_write = socket.socketpair()
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._requests: queue.Queue[tuple[socket.socket, Any, bytes] | None] = queue.Queue(maxsize=slots)
        self._workers = [
            threading.Thread(target=self._answer, name=f"gpuscope-exporter-{n}", daemon=True) for n in range(WORKERS)
        ]
        super().__init__(*args, **kwargs)  # last: a failed bind calls server_close, which needs the above

    # --- the serving thread -----------------------------------------------------------------

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self.socket.setblocking(False)
        self._selector.register(self.socket, selectors.EVENT_READ)
        self._wake_read.setblocking(False)
        self._selector.register(self._wake_read, selectors.EVENT_READ)
        for worker in self._workers:
            worker.start()
        try:
            while not self._stop.is_set():
                oldest = next(iter(self._pending.values()), None)
                timeout = None if oldest is None else max(0.0, oldest.deadline_s - time.monotonic())
                for key, _ in self._selector.select(timeout):
                    if key.fileobj is self.socket:
                        self._accept()
                    elif key.fileobj is self._wake_read:
                        self._wake_read.recv(64)
                    else:
                        self._read(key.fileobj)  # type: ignore[arg-type]  # only sockets are registered
                self._expire(time.monotonic())
        finally:
            for connection in list(self._pending):
                self._drop(connection)
            for _ in self._workers:
                self._requests.put(None)
            self._stopped.set()

    def _accept(self) -> None:
        try:
            connection, address = self.socket.accept()
        except BlockingIOError:
            return
        except OSError as exc:
            if exc.errno in _OUT_OF_DESCRIPTORS:
                if self._pending:
                    self._drop(next(iter(self._pending)))  # free a descriptor for the next one
                else:
                    time.sleep(0.05)  # the listening socket stays readable: do not spin
            return  # this one connection attempt is lost; serving goes on
        if len(self._pending) >= self._slots:
            self._drop(next(iter(self._pending)))  # the oldest waiter makes room: idle ones never lock others out
        try:
            connection.setblocking(False)
            self._selector.register(connection, selectors.EVENT_READ)
        except (OSError, ValueError):  # out of memory for the selector: this one connection is lost
            self.shutdown_request(connection)
            return
        self._pending[connection] = _Pending(address, time.monotonic() + IDLE_TIMEOUT_S)

    def _read(self, connection: socket.socket) -> None:
        pending = self._pending.get(connection)
        if pending is None:
            return
        try:
            chunk = connection.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk or len(pending.head) + len(chunk) > MAX_REQUEST_BYTES:
            self._drop(connection)
            return
        pending.head += chunk
        if not any(end in pending.head for end in _HEAD_ENDS):
            return
        self._selector.unregister(connection)
        del self._pending[connection]
        try:
            self._requests.put_nowait((connection, pending.address, bytes(pending.head)))
        except queue.Full:
            try:
                connection.send(_BUSY_RESPONSE)
            except OSError:
                pass
            self.shutdown_request(connection)

    def _expire(self, now_s: float) -> None:
        """Close the waiting connections past their deadline (the oldest come first)."""
        while self._pending:
            connection, pending = next(iter(self._pending.items()))
            if pending.deadline_s > now_s:
                return
            self._drop(connection)

    def _drop(self, connection: socket.socket) -> None:
        self._pending.pop(connection, None)
        try:
            self._selector.unregister(connection)
        except (KeyError, ValueError):
            pass
        self.shutdown_request(connection)

    # --- the workers --------------------------------------------------------------------------

    def _answer(self) -> None:
        while True:
            item = self._requests.get()
            if item is None:
                return
            connection, address, head = item
            try:
                connection.setblocking(True)
                connection.settimeout(IDLE_TIMEOUT_S)
                _Handler(connection, address, self, head)
            except Exception:  # noqa: BLE001 - a client that timed out or reset is not worth a traceback
                pass
            finally:
                self.shutdown_request(connection)

    # --- stopping -----------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` and its workers (waits at most a few seconds)."""
        self._stop.set()
        try:
            self._wake_write.send(b"x")
        except OSError:
            pass
        self._stopped.wait(timeout=5.0)
        for worker in self._workers:
            if worker.is_alive():
                worker.join(timeout=IDLE_TIMEOUT_S)

    def server_close(self) -> None:
        super().server_close()
        self._selector.close()
        self._wake_read.close()
        self._wake_write.close()


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
