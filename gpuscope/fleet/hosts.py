"""Direct scrapes of ``gpuscope serve`` exporters (``gpuscope fleet --hosts``): bounded
concurrency, a timeout per host, and a host that is down or answers garbage is a row that says
so. The exposition text is parsed with prometheus_client's parser, after the lines the fleet
does not read are dropped (per-core and per-process series are most of an exporter's text)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from gpuscope.errors import BadInputError, UsageError
from gpuscope.fleet.assemble import assemble
from gpuscope.fleet.history import NodeHistory
from gpuscope.fleet.http import Connection, FetchError, HttpOptions, split_url
from gpuscope.fleet.series import WANTED, Series, alerts_of, build_node
from gpuscope.fleet.snapshot import FleetAlert, FleetNode, FleetSnapshot, HistoryPoint
from gpuscope.fleet.stragglers import DEFAULT_MARGIN
from gpuscope.textsafe import safe_text

__all__ = ["HostsSource", "parse_hosts", "read_hosts_file", "parse_exposition", "DEFAULT_PORT"]

#: ``gpuscope serve``'s default port (gpuscope.exporter.DEFAULT_LISTEN).
DEFAULT_PORT = 9842
MAX_HOSTS = 4096
_TIMESTAMP = b"gpuscope_sample_timestamp_seconds"


def parse_hosts(text: str, where: str = "--hosts") -> list[str]:
    """``HOST:PORT`` items (comma or whitespace separated; a URL keeps its scheme; the port
    defaults to 9842) as base URLs. Raises :class:`UsageError` naming the item."""
    items = [item for item in text.replace(",", " ").split() if item]
    urls: list[str] = []
    for item in items:
        scheme, host, port, prefix = split_url(item, DEFAULT_PORT)
        shown = f"[{host}]" if ":" in host else host
        urls.append(f"{scheme}://{shown}:{port}{prefix}")
    if not urls:
        raise UsageError(f"{where}: no HOST:PORT given")
    if len(urls) > MAX_HOSTS:
        raise UsageError(f"{where}: {len(urls)} hosts; at most {MAX_HOSTS}")
    return list(dict.fromkeys(urls))


def read_hosts_file(path: Path) -> list[str]:
    """Hosts from a file: one or more per line, ``#`` starts a comment."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"{safe_text(path)}: cannot read the hosts file: {safe_text(exc)}") from None
    urls: list[str] = []
    for number, line in enumerate(lines, 1):
        text = line.partition("#")[0].strip()
        if text:
            try:
                urls.extend(parse_hosts(text))
            except UsageError as exc:
                raise BadInputError(f"{safe_text(path)}: line {number}: {exc}") from None
    if not urls:
        raise BadInputError(f"{safe_text(path)}: no hosts in the file")
    return list(dict.fromkeys(urls))


def parse_exposition(body: bytes) -> list[Series]:
    """The series the fleet reads from an exporter's ``/metrics`` text. Raises ``ValueError``
    (one line) when the text is not Prometheus exposition or holds no gpuscope sample."""
    if _TIMESTAMP not in body:
        head = body[:60].decode("utf-8", "replace").strip().splitlines()
        first = safe_text(head[0]) if head else "an empty answer"
        raise ValueError(f"not gpuscope metrics (no gpuscope_sample_timestamp_seconds; it begins {first!r})")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start})") from None
    kept: list[str] = []
    for line in text.splitlines():
        if line.startswith("gpuscope_"):
            end = len(line)
            for stop in ("{", " "):
                at = line.find(stop)
                if 0 <= at < end:
                    end = at
            if line[:end] in WANTED:
                kept.append(line)
    try:
        return [
            Series(sample.name, sample.labels, float(sample.value))
            for family in text_string_to_metric_families("\n".join(kept) + "\n")
            for sample in family.samples
        ]
    except (ValueError, TypeError, IndexError) as exc:
        raise ValueError(f"not Prometheus exposition text ({safe_text(exc)})") from None


class HostsSource:
    """Scrapes every host on each :meth:`refresh`, at most ``concurrency`` at once."""

    kind = "hosts"

    def __init__(
        self,
        urls: list[str],
        options: HttpOptions,
        concurrency: int = 16,
        margin: float = DEFAULT_MARGIN,
        path: str = "/metrics",
    ) -> None:
        self.urls = urls
        self.options = options
        self.margin = margin
        self.path = path
        context = options.ssl_context() if any(url.startswith("https:") for url in urls) else None
        self._connections = [Connection(url, options, context) for url in urls]
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(urls))), thread_name_prefix="fleet")
        self.history = NodeHistory()
        self.where = f"{len(urls)} host{'s' if len(urls) != 1 else ''}"

    def _instance(self, connection: Connection) -> str:
        host = f"[{connection.host}]" if ":" in connection.host else connection.host
        return f"{host}:{connection.port}"

    def _scrape(self, connection: Connection) -> tuple[FleetNode, list[FleetAlert]]:
        instance = self._instance(connection)
        try:
            status, content_type, body = connection.get(self.path)
        except FetchError as exc:
            return FleetNode(instance=instance, state="down", error=str(exc)), []
        if status != 200:
            return FleetNode(instance=instance, state="down", error=f"{connection.base}{self.path}: HTTP {status}"), []
        try:
            series = parse_exposition(body)
        except ValueError as exc:
            return FleetNode(instance=instance, state="garbage", error=f"answers, but {exc}"), []
        return build_node(instance, series), alerts_of(instance, series)

    def refresh(self) -> FleetSnapshot:
        """Scrape every host once; never raises for a host (its row says what went wrong)."""
        results = list(self._pool.map(self._scrape, self._connections))
        nodes = [node for node, _ in results]
        alerts = [alert for _, found in results for alert in found]
        snapshot = assemble("hosts", self.where, time.time(), nodes, alerts, len(self._connections), self.margin)
        self.history.add(snapshot)
        return snapshot

    def node_history(self, instance: str, name: str) -> list[HistoryPoint]:
        """The recorded history of one node (since this view started)."""
        return self.history.points(instance, name)

    def refresh_history(self) -> int:
        """Nothing to fetch: history is recorded as snapshots arrive. Returns 0 (queries made)."""
        return 0

    def close(self) -> None:
        """Close the connections and the thread pool."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        for connection in self._connections:
            connection.close()
