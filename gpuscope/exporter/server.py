"""Serve the latest telemetry sample over HTTP or HTTPS for Prometheus to scrape.

A custom collector converts the newest :class:`Sample` at scrape time, so an unavailable metric
is simply absent and an exporter nobody scrapes costs nothing beyond keeping one reference.
How connections are read without letting idle or trickling clients hold a thread, and the TLS
handshake: :mod:`gpuscope.exporter.connections`. Auth, the rate limit, ``/-/healthy`` and
``/-/ready``: :mod:`gpuscope.exporter.gate`. The ``--web-config`` file:
:mod:`gpuscope.exporter.webconfig`.

Off loopback the exporter refuses to start with neither TLS nor basic auth unless told
``insecure``, and process names and users stay on the node unless ``process_labels="full"``.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import platform
import re
import resource
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any
from wsgiref.simple_server import make_server

from prometheus_client.core import CollectorRegistry, CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from gpuscope.errors import ResourceError, UsageError
from gpuscope.exporter.connections import (
    IDLE_TIMEOUT_S,
    LISTEN_BACKLOG,
    MAX_REQUEST_BYTES,
    WORKERS,
    ExporterServer,
    RequestHandler,
    TlsSource,
)
from gpuscope.exporter.counters import CounterState
from gpuscope.exporter.gate import ConfigWatcher, ExporterStats, Gate
from gpuscope.exporter.metrics import (
    AUTH_REFUSALS,
    BUILD_INFO,
    PROCESS_LABEL_LEVELS,
    SCRAPE_ERRORS,
    XidTotals,
    count_xids,
    sample_to_families,
)
from gpuscope.exporter.webconfig import WebConfig, load_web_config
from gpuscope.telemetry.records import Sample
from gpuscope.version import __version__

__all__ = [
    "DEFAULT_LISTEN",
    "DEFAULT_PORT",
    "SampleCollector",
    "SelfCollector",
    "ExporterHandle",
    "parse_listen",
    "start_exporter",
    "start_exporter_for",
    "max_connections",
    "is_loopback",
    "IDLE_TIMEOUT_S",
    "LISTEN_BACKLOG",
    "WORKERS",
    "MAX_REQUEST_BYTES",
]

DEFAULT_PORT = 9842
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"
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


class SampleCollector(Collector):
    """A prometheus-client collector that exposes the newest sample given to :meth:`update`.

    ``process_labels`` is one of :data:`~gpuscope.exporter.metrics.PROCESS_LABEL_LEVELS`; a
    sample that fails to convert is counted in ``stats`` and left out of that scrape."""

    def __init__(
        self, with_unavailable: bool = True, process_labels: str = "full", stats: ExporterStats | None = None
    ) -> None:
        self._lock = threading.Lock()
        self._sample: Sample | None = None
        self._count = 0
        self._with_unavailable = with_unavailable
        self._xid_totals: XidTotals = {}
        self._counters = CounterState()
        self.process_labels = process_labels
        self.stats = stats or ExporterStats()

    @property
    def ready(self) -> bool:
        """True once a sample has arrived (``/-/ready``)."""
        return self._sample is not None

    def update(self, sample: Sample) -> None:
        """Make ``sample`` the one the next scrape shows (cheap: no conversion happens here)."""
        with self._lock:
            self._sample = sample
            self._count += 1
            count_xids(self._xid_totals, sample)  # a counter: every sample counts, not only the scraped ones
            self._counters.add(sample)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            sample, count, xids = self._sample, self._count, dict(self._xid_totals)
            totals = self._counters.snapshot()
        try:
            families = sample_to_families(sample, count, self._with_unavailable, xids, self.process_labels, totals)
        except Exception:  # noqa: BLE001 - a sample that cannot be converted is counted, not a dead exporter
            self.stats.scrape_error()
            families = []
        yield from families

    def describe(self) -> list[Metric]:
        # An empty description stops the registry from calling collect() at registration.
        return []


class SelfCollector(Collector):
    """The exporter's own series: ``gpuscope_build_info``, the scrape-error and auth-refusal
    counters (served before the first sample too)."""

    def __init__(self, stats: ExporterStats) -> None:
        self._stats = stats
        self._host = socket.gethostname()

    def collect(self) -> Iterator[Metric]:
        host = self._host
        info = BUILD_INFO.family()
        info.add_metric([host, __version__, platform.python_version()], 1.0)
        yield info
        errors, refusals = self._stats.snapshot()
        family = SCRAPE_ERRORS.family()
        assert isinstance(family, CounterMetricFamily)
        family.add_metric([host], float(errors))
        yield family
        family = AUTH_REFUSALS.family()
        for reason, count in refusals.items():
            family.add_metric([host, reason], float(count))
        yield family

    def describe(self) -> list[Metric]:
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


def is_loopback(host: str) -> bool:
    """True when ``host`` (an address as bound) is a loopback address (127.0.0.0/8, ::1)."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


class ExporterHandle:
    """A running exporter. Feed it samples with :meth:`update`; stop it with :meth:`close`."""

    def __init__(
        self,
        server: ExporterServer,
        thread: threading.Thread,
        collector: SampleCollector,
        host: str,
        *,
        web_config: WebConfig | None = None,
        insecure: bool = False,
        gate: Gate | None = None,
    ) -> None:
        self._server: ExporterServer | None = server
        self._thread = thread
        self.collector = collector
        self.host = host
        self.web_config = web_config
        self.gate = gate
        address = server.socket.getsockname()
        self.port: int = int(address[1])
        self.loopback = is_loopback(str(address[0]))
        self.insecure = insecure and not self.loopback and not (web_config is not None and web_config.protected)

    @property
    def scheme(self) -> str:
        """``https`` when the web configuration turns TLS on, else ``http``."""
        return "https" if self.web_config is not None and self.web_config.tls is not None else "http"

    @property
    def url(self) -> str:
        """The scrape URL, e.g. ``http://127.0.0.1:9842/metrics``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}/metrics"

    @property
    def stats(self) -> ExporterStats:
        """The exporter's own counters."""
        return self.collector.stats

    def security(self) -> str:
        """What protects the port, for the start line; empty on loopback with no web config
        and every process label (the default there, unchanged)."""
        parts = []
        if self.web_config is not None:
            parts.append(self.web_config.describe())
            if self.web_config.users and self.web_config.tls is None and not self.loopback:
                parts.append("WARNING: basic auth without TLS: passwords and metrics cross the network in clear text")
        if self.insecure:
            parts.append("UNPROTECTED (--insecure): no TLS, no auth; anyone who reaches the port reads the metrics")
        if not (self.loopback and self.collector.process_labels == "full"):
            parts.append(f"process labels: {self.collector.process_labels}")
        return "; ".join(parts)

    @property
    def announce(self) -> str:
        """The URL and, where there is something to say, what protects it (for the start line)."""
        security = self.security()
        return f"{self.url} ({security})" if security else self.url

    def update(self, sample: Sample) -> None:
        """Expose ``sample`` from the next scrape on (thread-safe)."""
        self.collector.update(sample)

    def close(self) -> None:
        """Stop serving and release the port. Safe to call twice."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        self._thread.join(timeout=5.0)

    def __enter__(self) -> ExporterHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_exporter(
    listen: str = DEFAULT_LISTEN,
    *,
    process_metrics: bool = True,
    with_unavailable: bool = True,
    web_config: str | None = None,
    insecure: bool = False,
    process_labels: str | None = None,
) -> ExporterHandle:
    """Serve Prometheus metrics on ``listen`` (``HOST:PORT``; port 0 picks a free port) in a
    daemon thread. ``process_metrics`` adds the standard ``process_*`` series of this process
    (gpuscope's own CPU and memory). ``web_config`` is an exporter-toolkit web configuration
    file (TLS, client certificates, basic auth). Off loopback, serving with neither TLS nor basic
    auth needs ``insecure``. ``process_labels`` (``full``, ``pid``, ``none``) defaults to
    ``full`` on loopback and ``pid`` elsewhere.

    Raises :class:`UsageError` for a malformed or non-local address, or an unprotected one off
    loopback; :class:`BadInputError` for a bad web configuration; :class:`ResourceError` when
    the port is taken.
    """
    from prometheus_client import make_wsgi_app
    from prometheus_client.process_collector import ProcessCollector

    host, port = parse_listen(listen)
    if process_labels is not None and process_labels not in PROCESS_LABEL_LEVELS:
        raise UsageError(f"--process-labels {process_labels!r}: expected one of {', '.join(PROCESS_LABEL_LEVELS)}")
    config = load_web_config(web_config) if web_config is not None else None
    watcher = ConfigWatcher(config) if config is not None else None
    stats = ExporterStats()
    registry = CollectorRegistry(auto_describe=False)
    collector = SampleCollector(with_unavailable, process_labels or "full", stats)
    registry.register(collector)
    registry.register(SelfCollector(stats))
    if process_metrics:
        ProcessCollector(registry=registry)
    gate = Gate(make_wsgi_app(registry), watcher, stats, lambda: collector.ready)
    tls: TlsSource | None = None
    if config is not None and config.tls is not None and watcher is not None:
        tls = _tls_source(watcher)
    try:
        server = _bind(host, port, gate, tls, stats)
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
    loopback = is_loopback(str(server.socket.getsockname()[0]))
    if not loopback and not insecure and not (config is not None and config.protected):
        server.server_close()
        raise UsageError(
            f"--listen {listen!r} reaches beyond this machine and nothing protects it: give --web-config FILE "
            "(TLS and/or basic auth; see docs/prometheus.md) or --insecure to serve the metrics to anyone"
        )
    collector.process_labels = process_labels or ("full" if loopback else "pid")
    thread = threading.Thread(target=server.serve_forever, name="gpuscope-exporter", daemon=True)
    thread.start()
    return ExporterHandle(server, thread, collector, host, web_config=config, insecure=insecure, gate=gate)


def start_exporter_for(listen: str, args: argparse.Namespace) -> ExporterHandle:
    """:func:`start_exporter` with the command line's ``--web-config``, ``--insecure`` and
    ``--process-labels`` (absent options keep their defaults)."""
    return start_exporter(
        listen,
        web_config=getattr(args, "web_config", None),
        insecure=bool(getattr(args, "insecure", False)),
        process_labels=getattr(args, "process_labels", None),
    )


def _tls_source(watcher: ConfigWatcher) -> TlsSource:
    """The TLS context (and allowed client SANs) of the current web configuration."""

    def current() -> tuple[ssl.SSLContext, tuple[str, ...]] | None:
        config = watcher.current()
        return None if config.tls is None else (config.tls, config.client_allowed_sans)

    return current


def _bind(host: str, port: int, app: Any, tls: TlsSource | None, stats: ExporterStats) -> ExporterServer:
    """Bind ``host:port`` for ``app`` (not serving yet)."""
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]

    slots = max_connections()

    class Server(ExporterServer):
        address_family = family

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, slots=slots, tls=tls, stats=stats, **kwargs)

    return make_server(str(address[0]), port, app, server_class=Server, handler_class=RequestHandler)
