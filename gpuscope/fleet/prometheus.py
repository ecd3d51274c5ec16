"""The fleet from a Prometheus server's HTTP query API (``gpuscope fleet --prometheus URL``).

Each refresh makes one instant query for every series the grid needs (a ``__name__`` regex over
:data:`gpuscope.fleet.series.WANTED`, so the count does not grow with the nodes), one for the
targets' ``up``, and, only when a target is down, one read of ``/api/v1/targets`` for its last
error. History comes from range queries (one per history metric, every node at once).
"""

from __future__ import annotations

import json
import math
import re
import time
from urllib.parse import urlencode

import msgspec

from gpuscope.fleet.assemble import assemble
from gpuscope.fleet.history import HISTORY_METRICS, NodeHistory
from gpuscope.fleet.http import Connection, FetchError, HttpOptions
from gpuscope.fleet.series import WANTED, Series, alerts_of, build_node
from gpuscope.fleet.snapshot import FleetNode, FleetSnapshot, HistoryPoint
from gpuscope.fleet.stragglers import DEFAULT_MARGIN
from gpuscope.textsafe import safe_text

__all__ = ["PrometheusSource", "grid_query", "up_query", "HISTORY_QUERIES"]

#: History metric -> PromQL over every node (by instance).
HISTORY_QUERIES: dict[str, str] = {
    "sm_activity_percent": "100 * avg by (instance) (gpuscope_gpu_sm_activity_ratio{gpu_instance=''})",
    "utilization_percent": "100 * avg by (instance) (gpuscope_gpu_utilization_ratio{gpu_instance=''})",
    "power_w": "sum by (instance) (gpuscope_gpu_power_watts{gpu_instance=''})",
    "nic_rx_bytes_per_s": "sum by (instance) (gpuscope_nic_receive_bytes_per_second{nic!='lo'})",
}
assert set(HISTORY_QUERIES) == set(HISTORY_METRICS)


def _job_matcher(job: str | None) -> str:
    return "" if not job else f",job=~{json.dumps(job)}"


def grid_query(job: str | None = None) -> str:
    """The one instant query of a refresh: every series of :data:`WANTED`."""
    names = "|".join(sorted(re.escape(name) for name in WANTED))
    return f'{{__name__=~"{names}"{_job_matcher(job)}}}'


def up_query(job: str | None = None) -> str:
    """Which targets are up: ``up`` of the ``job`` regex, or of every target that exposed
    gpuscope's sample timestamp in the last hour."""
    if job:
        return f"up{{job=~{json.dumps(job)}}}"
    return "up and on(instance) last_over_time(gpuscope_sample_timestamp_seconds[1h])"


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


class _Result(msgspec.Struct):
    """One series of a query answer: an instant ``value`` or range ``values`` ([time, "number"])."""

    metric: dict[str, str] = msgspec.field(default_factory=dict)
    value: tuple[float, str] | None = None
    values: list[tuple[float, str]] = msgspec.field(default_factory=list)


class _Target(msgspec.Struct):
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    health: str = ""
    last_error: str = msgspec.field(default="", name="lastError")


class _Data(msgspec.Struct):
    """``data`` of a query (``resultType``, ``result``) or of the targets page (``activeTargets``)."""

    result_type: str = msgspec.field(default="", name="resultType")
    result: list[_Result] = msgspec.field(default_factory=list)
    active_targets: list[_Target] = msgspec.field(default_factory=list, name="activeTargets")


class _Answer(msgspec.Struct):
    """Every answer of the Prometheus HTTP API."""

    status: str
    data: _Data | None = None
    error: str = ""


class PrometheusSource:
    """A Prometheus server, read through its query API. :meth:`check` says in one line
    (a :class:`FetchError`) when the URL is not one."""

    kind = "prometheus"

    def __init__(
        self,
        url: str,
        options: HttpOptions,
        job: str | None = None,
        margin: float = DEFAULT_MARGIN,
        history_s: float = 900.0,
    ) -> None:
        self.connection = Connection(url, options)
        self.where = self.connection.base
        self.job = job
        self.margin = margin
        self.history_s = history_s
        self.history = NodeHistory()
        self._grid, self._up = grid_query(job), up_query(job)

    def _api(self, path: str, params: dict[str, str]) -> _Data:
        """GET an API path; its ``data``. Raises :class:`FetchError` (one line)."""
        status, content_type, body = self.connection.get(f"{path}?{urlencode(params)}")
        where = f"{self.where}{path}"
        try:
            answer = msgspec.json.decode(body, type=_Answer)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            kind = content_type.split(";")[0] or "no content type"
            if status == 404:
                message = "HTTP 404: not a Prometheus server, or a wrong path in the URL"
            elif isinstance(exc, msgspec.ValidationError) and body.lstrip().startswith(b"{"):
                message = "answers JSON, but not the Prometheus query API's"
            else:
                message = (
                    f"HTTP {status} with {safe_text(kind)}, not the Prometheus query API: is this a Prometheus URL?"
                )
            raise FetchError(f"{where}: {message}", "http", status) from None
        if answer.status != "success":
            raise FetchError(f"{where}: Prometheus refused: {safe_text(answer.error or answer.status)}", "http", status)
        return answer.data if answer.data is not None else _Data()

    def _vector(self, query: str) -> list[tuple[dict[str, str], float]]:
        data = self._api("/api/v1/query", {"query": query})
        if data.result_type != "vector":
            raise FetchError(f"{self.where}: the query answered no vector", "http")
        return [(item.metric, math.nan if item.value is None else _number(item.value[1])) for item in data.result]

    def check(self) -> None:
        """One cheap query, to fail early with a clear line. Raises :class:`FetchError`."""
        self._vector("vector(1)")

    def refresh(self) -> FleetSnapshot:
        """One grid query and one ``up`` query (and the targets page when one is down).
        Raises :class:`FetchError` when the server cannot be read."""
        queries = 2
        grid = self._vector(self._grid)
        up = self._vector(self._up)
        by_instance: dict[str, list[Series]] = {}
        for labels, value in grid:
            name = labels.pop("__name__", "")
            by_instance.setdefault(labels.get("instance", "?"), []).append(Series(name, labels, value))
        up_of: dict[str, float] = {}
        for labels, value in up:
            instance = labels.get("instance", "?")
            up_of[instance] = min(value, up_of.get(instance, value))
        nodes: list[FleetNode] = []
        alerts = []
        errors: dict[str, str] = {}
        if any(value == 0 for value in up_of.values()):
            queries += 1
            errors = self._target_errors()
        for instance in sorted(set(by_instance) | set(up_of)):
            series = by_instance.get(instance, [])
            if up_of.get(instance) == 0:
                nodes.append(FleetNode(instance=instance, state="down", error=errors.get(instance) or "down (up == 0)"))
                continue
            node = build_node(instance, series)
            if not node.gpus and node.sample_timestamp_s is None:
                node.state, node.error = "garbage", "scraped, but it exposes no gpuscope sample"
            nodes.append(node)
            alerts.extend(alerts_of(instance, series))
        snapshot = assemble("prometheus", self.where, time.time(), nodes, alerts, queries, self.margin)
        return snapshot

    def _target_errors(self) -> dict[str, str]:
        """instance -> the target's last scrape error (``/api/v1/targets``)."""
        try:
            data = self._api("/api/v1/targets", {"state": "active"})
        except FetchError:
            return {}
        return {
            target.labels["instance"]: "down: " + safe_text(target.last_error or "scrape failed")
            for target in data.active_targets
            if target.labels.get("instance") and target.health != "up"
        }

    def refresh_history(self) -> int:
        """One range query per history metric over the last ``history_s`` seconds, every node at
        once. Returns the number of queries made. Raises :class:`FetchError`."""
        end = time.time()
        start = end - self.history_s
        step = max(1.0, self.history_s / 240)
        for name, query in HISTORY_QUERIES.items():
            job = _job_matcher(self.job)
            if job:
                query = query.replace("{", "{" + job.lstrip(",") + ",", 1)
            data = self._api(
                "/api/v1/query_range",
                {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"},
            )
            for item in data.result:
                self.history.replace(item.metric.get("instance", "?"), name, _points(item.values))
        return len(HISTORY_QUERIES)

    def node_history(self, instance: str, name: str) -> list[HistoryPoint]:
        """The history of one node from the last :meth:`refresh_history`."""
        return self.history.points(instance, name)

    def close(self) -> None:
        """Close the connection."""
        self.connection.close()


def _points(values: list[tuple[float, str]]) -> list[HistoryPoint]:
    points = [HistoryPoint(float(time_s), _number(text)) for time_s, text in values]
    return [point for point in points if math.isfinite(point.value)]
