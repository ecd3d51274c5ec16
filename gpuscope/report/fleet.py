"""``gpuscope report --fleet FLEET.json``: a fleet snapshot (``gpuscope fleet --once --json``)
as a self-contained HTML page, Markdown, or the snapshot again as JSON. Every name from outside
(hosts, instances, GPU names, error lines) is escaped with :func:`gpuscope.textsafe.safe_text`,
then for HTML with ``html.escape`` and for Markdown table cells with its own rule."""

from __future__ import annotations

import html
import os
from datetime import datetime, timezone

import msgspec

from gpuscope.errors import BadInputError
from gpuscope.fleet.snapshot import FLEET_SCHEMA, FleetSnapshot
from gpuscope.fleet.text import METRIC_WORDS, fleet_summary, node_line, node_names
from gpuscope.schema.core import encode_json
from gpuscope.schema.files import read_bytes
from gpuscope.textsafe import safe_text

__all__ = ["read_fleet_snapshot", "render_fleet_report"]


def read_fleet_snapshot(path: str | os.PathLike[str]) -> FleetSnapshot:
    """The fleet snapshot in ``path``. Raises :class:`BadInputError` naming the file and field."""
    raw = read_bytes(path, "a fleet snapshot (gpuscope fleet --once --json)")
    try:
        snapshot = msgspec.json.decode(raw, type=FleetSnapshot)
    except msgspec.ValidationError as exc:
        raise BadInputError(f"{safe_text(os.fspath(path))}: not a fleet snapshot: {safe_text(exc)}") from None
    except msgspec.DecodeError as exc:
        raise BadInputError(f"{safe_text(os.fspath(path))}: not JSON: {safe_text(exc)}") from None
    if snapshot.schema != FLEET_SCHEMA:
        raise BadInputError(
            f"{safe_text(os.fspath(path))}: schema {safe_text(snapshot.schema)!r} is not {FLEET_SCHEMA!r}"
        )
    return snapshot


def _md(text: str) -> str:
    """A Markdown table cell: escaped, pipes and markup characters neutralised."""
    out = safe_text(text)
    for char in "\\`*_[]<>|#":
        out = out.replace(char, "\\" + char)
    return out


def _when(snapshot: FleetSnapshot) -> str:
    return datetime.fromtimestamp(snapshot.timestamp_s, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _rows(snapshot: FleetSnapshot) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]], list[str]]:
    names = node_names(snapshot.nodes)
    nodes = [(names[node.instance], node_line(node, names[node.instance])) for node in snapshot.nodes]
    alerts = [(a.level, names.get(a.instance, safe_text(a.instance)), safe_text(a.message)) for a in snapshot.alerts]
    stragglers = [
        f"{names.get(s.instance, safe_text(s.instance))} {'node' if s.gpu is None else f'GPU {s.gpu}'}: "
        f"{METRIC_WORDS.get(s.metric, s.metric)} {s.value:.1f} is {s.below_median_percent:.0f}% below the median "
        f"{s.median:.1f} of {s.peers}"
        for s in snapshot.stragglers
    ]
    return nodes, alerts, stragglers


def render_fleet_report(snapshot: FleetSnapshot, fmt: str) -> str:
    """The report text in ``fmt`` (``html``, ``md`` or ``json``)."""
    if fmt == "json":
        return encode_json(snapshot, indent=2).decode("utf-8") + "\n"
    nodes, alerts, stragglers = _rows(snapshot)
    title = f"gpuscope fleet snapshot, {_when(snapshot)}"
    summary = f"{safe_text(snapshot.where)} ({snapshot.source}): {fleet_summary(snapshot)}"
    rule = (
        f"Straggler rule: SM activity or power more than {100 * snapshot.straggler_margin:.0f}% below the median of "
        f"the same GPU model across the fleet while that median SM activity is at least "
        f"{snapshot.busy_sm_activity_percent:.0f}%."
    )
    if fmt == "md":
        lines = [f"# {title}", "", _md(summary), "", "## Nodes", "", "| node | state |", "|---|---|"]
        lines += [f"| {_md(name)} | {_md(line)} |" for name, line in nodes]
        lines += ["", "## Alerts", ""]
        lines += [f"- **{_md(level)}** {_md(where)}: {_md(message)}" for level, where, message in alerts] or ["none"]
        lines += ["", "## Stragglers", "", _md(rule), ""]
        lines += [f"- {_md(text)}" for text in stragglers] or ["none"]
        return "\n".join(lines) + "\n"
    esc = html.escape
    body = [f"<h1>{esc(title)}</h1>", f"<p>{esc(summary)}</p>", "<h2>Nodes</h2>", "<table>"]
    body += [f"<tr><th>{esc(name)}</th><td>{esc(line)}</td></tr>" for name, line in nodes]
    body += ["</table>", "<h2>Alerts</h2>", "<ul>"]
    body += [f"<li><b>{esc(level)}</b> {esc(where)}: {esc(message)}</li>" for level, where, message in alerts]
    body += ["</ul>", "<h2>Stragglers</h2>", f"<p>{esc(rule)}</p>", "<ul>"]
    body += [f"<li>{esc(text)}</li>" for text in stragglers]
    body += ["</ul>"]
    style = "body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;text-align:left;vertical-align:top}"
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
