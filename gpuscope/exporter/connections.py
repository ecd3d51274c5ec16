"""The exporter's HTTP(S) server: one thread reads every waiting connection through a selector,
:data:`WORKERS` threads answer whole requests.

Anyone who can reach the port must not be able to stop the exporter, the sampler or a scrape.
A connection that sends nothing, or trickles its request a byte at a time, holds no worker: only
a request that has arrived whole is handed to a worker. A connection must deliver its request
within :data:`IDLE_TIMEOUT_S` seconds of connecting; at most ``slots`` are held while they do, and
a new one pushes out the oldest, so idle connections can never lock a scraper out. ``503``
answers only when whole requests queue faster than the workers serve them. An ``accept`` that
fails because file descriptors ran out closes the oldest waiting connection (or waits a moment).

With TLS the handshake is part of "delivering the request": it runs non-blocking on the selector
thread (``do_handshake`` resumed whenever the socket is ready), under the same deadline, so a
client that stalls its handshake holds no thread either. A failed handshake (no client
certificate, an unknown CA) and a client certificate whose SANs are not allowed are counted as
refusals.
"""

from __future__ import annotations

import errno
import io
import ipaddress
import queue
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from gpuscope.exporter.gate import ExporterStats

__all__ = [
    "ExporterServer",
    "RequestHandler",
    "TlsSource",
    "san_allowed",
    "IDLE_TIMEOUT_S",
    "LISTEN_BACKLOG",
    "WORKERS",
    "MAX_REQUEST_BYTES",
]

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

#: Gives the TLS context and allowed client SANs for a new connection; None: plain HTTP.
TlsSource = Callable[[], "tuple[ssl.SSLContext, tuple[str, ...]] | None"]


class RequestHandler(WSGIRequestHandler):
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
    """A connection whose request has not arrived whole yet (nor its TLS handshake ended)."""

    __slots__ = ("address", "deadline_s", "head", "handshaking", "sans", "events")

    def __init__(self, address: Any, deadline_s: float, sans: tuple[str, ...] | None) -> None:
        self.address = address
        self.deadline_s = deadline_s
        self.head = bytearray()
        self.handshaking = sans is not None
        self.sans = sans or ()
        self.events = selectors.EVENT_READ


def san_allowed(certificate: dict[str, Any] | None, allowed: tuple[str, ...]) -> bool:
    """True when one of the certificate's subjectAltName values (DNS, IP, email, URI) is in
    ``allowed`` (IP addresses compared as addresses, whatever their spelling)."""
    if not certificate:
        return False
    allowed_ips = set()
    for text in allowed:
        try:
            allowed_ips.add(ipaddress.ip_address(text))
        except ValueError:
            pass
    for kind, value in certificate.get("subjectAltName", ()):
        if kind == "IP Address":
            try:
                if ipaddress.ip_address(value.strip()) in allowed_ips:
                    return True
            except ValueError:
                continue
        elif value in allowed:
            return True
    return False


class ExporterServer(WSGIServer):
    """Reads requests on the serving thread (a selector over every waiting connection) and answers
    whole ones on :data:`WORKERS` threads; holds at most ``slots`` waiting connections; speaks TLS
    when ``tls`` gives a context."""

    allow_reuse_address = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self,
        *args: Any,
        slots: int = 64,
        tls: TlsSource | None = None,
        stats: ExporterStats | None = None,
        **kwargs: Any,
    ) -> None:
        self._slots = slots
        self._tls = tls
        self.stats = stats or ExporterStats()
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
        sans: tuple[str, ...] | None = None
        try:
            connection.setblocking(False)
            tls = self._tls() if self._tls is not None else None
            if tls is not None:
                context, sans = tls
                connection = context.wrap_socket(connection, server_side=True, do_handshake_on_connect=False)
            self._selector.register(connection, selectors.EVENT_READ)
        except (OSError, ValueError):  # out of memory for the selector: this one connection is lost
            self.shutdown_request(connection)
            return
        self._pending[connection] = _Pending(address, time.monotonic() + IDLE_TIMEOUT_S, sans)

    def _read(self, connection: socket.socket) -> None:
        pending = self._pending.get(connection)
        if pending is None:
            return
        if pending.handshaking and not self._handshake(connection, pending):
            return
        while True:
            try:
                chunk = connection.recv(4096)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return
            except OSError:
                chunk = b""
            if not chunk or len(pending.head) + len(chunk) > MAX_REQUEST_BYTES:
                self._drop(connection)
                return
            pending.head += chunk
            if any(end in pending.head for end in _HEAD_ENDS):
                break
            if not isinstance(connection, ssl.SSLSocket) or not connection.pending():
                return  # the rest arrives later: the selector says when
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

    def _handshake(self, connection: socket.socket, pending: _Pending) -> bool:
        """Advance the TLS handshake; True once it is done (and the client's SANs allowed)."""
        assert isinstance(connection, ssl.SSLSocket)
        try:
            connection.do_handshake()
        except ssl.SSLWantReadError:
            self._watch(connection, pending, selectors.EVENT_READ)
            return False
        except ssl.SSLWantWriteError:
            self._watch(connection, pending, selectors.EVENT_WRITE)
            return False
        except ssl.SSLEOFError:  # the client left (a port scan, a health check that only connects)
            self._drop(connection)
            return False
        except ssl.SSLError:
            self.stats.refused("tls_handshake")
            self._drop(connection)
            return False
        except OSError:
            self._drop(connection)
            return False
        pending.handshaking = False
        self._watch(connection, pending, selectors.EVENT_READ)
        if pending.sans and not san_allowed(connection.getpeercert(), pending.sans):
            self.stats.refused("client_san")
            self._drop(connection)
            return False
        return True

    def _watch(self, connection: socket.socket, pending: _Pending, events: int) -> None:
        if pending.events != events:
            self._selector.modify(connection, events)
            pending.events = events

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
                RequestHandler(connection, address, self, head)
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
