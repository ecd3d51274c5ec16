"""The HTML report: one self-contained file (inline CSS and SVG, no script, no external fetch, no
web font), light and dark through ``prefers-color-scheme``. A Content-Security-Policy forbids
every fetch and every script, so even a name that slipped through escaping could not run.

Rendering is a pure function of the report document: the same ``report.json`` gives the same
bytes.
"""

from __future__ import annotations

from html import escape

from gpuscope.report.charts import roofline_key, roofline_svg, telemetry_svg
from gpuscope.report.fmt import clean_text, fmt_time_utc, source_descriptions
from gpuscope.report.html_blocks import escape_text, table_html
from gpuscope.report.interconnect_section import INTERCONNECT_TITLE, interconnect_section_html
from gpuscope.report.model import run_in_log
from gpuscope.report.profile_section import energy_section_html, profile_section_html, profiles_of
from gpuscope.report.sweep_section import SWEEP_TITLE, sweep_section_html
from gpuscope.report.tables import report_tables
from gpuscope.report.telemetry_only import is_telemetry_only
from gpuscope.report.topology_section import TOPOLOGY_TITLE, topology_section_html
from gpuscope.schema.report import Report

__all__ = ["render_html"]

_CSS = """
:root{color-scheme:light dark;--bg:#ffffff;--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--head:#f3f5f7;
--low-bg:#ffe3e0;--low-fg:#b3261e;--warn-bg:#fff4d6;--chart-fg:#1b1f24;--chart-muted:#57606a;--chart-grid:#dde2e7;
--chart-span-a:#e8ecf7;--chart-span-b:#f1f3f9;
--c0:#1f5fbf;--c1:#d9480f;--c2:#2b8a3e;--c3:#c2255c;--c4:#7048e8;--c5:#0b7285;--c6:#a05a00;--c7:#5c940d;--c8:#862e9c;--c9:#495057}
@media (prefers-color-scheme: dark){:root{--bg:#0f1115;--fg:#e6e8eb;--muted:#9aa4af;--line:#30363d;--head:#171b21;
--low-bg:#4a1f1c;--low-fg:#ff9b91;--warn-bg:#3a3017;--chart-fg:#e6e8eb;--chart-muted:#9aa4af;--chart-grid:#2d333b;
--chart-span-a:#1d2533;--chart-span-b:#181d26;
--c0:#6ea8fe;--c1:#ff922b;--c2:#69db7c;--c3:#f783ac;--c4:#b197fc;--c5:#66d9e8;--c6:#ffd43b;--c7:#a9e34b;--c8:#e599f7;--c9:#ced4da}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);\
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
main{max-width:1200px;margin:0 auto;padding:16px 20px 40px}
h1{font-size:22px;margin:8px 0 4px}\
h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
p.meta,p.note,ul.note,footer{color:var(--muted);font-size:12.5px}
nav{font-size:13px;margin:8px 0}nav a{color:inherit;margin-right:12px}
ul.summary{padding-left:20px}ul.summary li{margin:2px 0}
div.warnings{background:var(--warn-bg);border:1px solid var(--line);padding:6px 10px;border-radius:4px;font-size:13px}
div.scroll{overflow-x:auto}
table{border-collapse:collapse;font-size:12.5px;margin:4px 0;min-width:40%}
th,td{border:1px solid var(--line);padding:3px 7px;text-align:left;vertical-align:top;\
overflow-wrap:normal;word-break:normal;hyphens:manual;-webkit-hyphens:manual}
th{background:var(--head);font-weight:600;white-space:nowrap}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.low td{background:var(--low-bg)}tr.low td.flag{color:var(--low-fg);font-weight:700}
tr.straggler td{background:var(--warn-bg)}tr.straggler td.flag{color:var(--low-fg);font-weight:700}
svg.chart{width:100%;height:auto;display:block;margin:6px 0}
figure{margin:0}figcaption{color:var(--muted);font-size:12.5px}
.empty{color:var(--muted);font-style:italic}
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"


def _section(section_id: str, title: str, body: str) -> str:
    return f'<section id="{section_id}">\n<h2>{escape(title)}</h2>\n{body}</section>\n'


def render_html(report: Report) -> str:
    """The report as one self-contained HTML page (a pure function of ``report``)."""
    tables = {table.id: table for table in report_tables(report)}
    title = clean_text(report.title or "gpuscope report")
    parts = [
        "<!DOCTYPE html>\n",
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n',
        (
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            '<meta name="color-scheme" content="light dark">\n'
        ),
        f'<meta name="generator" content="gpuscope {escape_text(report.gpuscope_version)}">\n',
        f"<title>{escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<main>\n",
        f"<header>\n<h1>{escape(title)}</h1>\n",
        f'<p class="meta">{_meta(report)}</p>\n</header>\n',
    ]
    telemetry = report.telemetry
    nav = [
        ("summary", "Summary"),
        ("system", "System"),
        ("roofline", "Roofline"),
        ("ceilings", "Ceilings"),
        ("workloads", "Workloads"),
    ]
    if "stragglers" in tables:
        nav.insert(1, ("stragglers", "Stragglers"))
    if telemetry:
        nav += [("telemetry", "Telemetry"), ("telemetry-stats", "Telemetry per metric")]
    if "runs" in tables:
        nav.append(("runs", "Probe runs"))
    if profiles_of(report.results):
        nav.insert(nav.index(("workloads", "Workloads")) + 1, ("where-time-goes", "Where the time goes"))
    energy_html = energy_section_html(report.results)
    if energy_html:
        nav.insert(nav.index(("workloads", "Workloads")) + 1, ("energy-roofline", ENERGY_ROOFLINE_TITLE))
    nav.extend((key, tables[key].title) for key in ("energy", "throttling", "alerts") if key in tables)
    if is_telemetry_only(report):  # a log alone: no system, roofline, ceilings or workloads
        kept = ("summary", "telemetry", "telemetry-stats", "energy", "throttling", "alerts")
        nav = [item for item in nav if item[0] in kept]
    parts.append("<nav>" + "".join(f'<a href="#{key}">{escape(label)}</a>' for key, label in nav) + "</nav>\n")

    summary = "".join(f"<li>{escape_text(line)}</li>" for line in report.summary or [])
    body = f'<ul class="summary">{summary}</ul>\n'
    if report.warnings:
        body += (
            '<div class="warnings"><strong>Warnings</strong><ul>'
            + "".join(f"<li>{escape_text(w)}</li>" for w in report.warnings)
            + "</ul></div>\n"
        )
    parts.append(_section("summary", "Summary", body))

    def table_sections(*keys: str, section_id: str | None = None) -> None:
        """The section of each table in ``keys`` that the report has (id: the table's, or ``section_id``)."""
        parts.extend(_section(section_id or k, tables[k].title, table_html(tables[k])) for k in keys if k in tables)

    table_sections("stragglers", "system")

    svg = roofline_svg(report.roofline)
    if svg is None:
        roof_body = '<p class="empty">No roofs or workloads to draw.</p>\n'
    else:
        roof_body = (
            f'<figure aria-labelledby="roofline-caption">\n{svg}<figcaption id="roofline-caption">Arithmetic '
            f"intensity against performance, log-log, one colour per device; {roofline_key()}.</figcaption>\n"
            "</figure>\n"
        )
    notes = report.roofline.notes or []
    if notes:
        roof_body += '<ul class="note">' + "".join(f"<li>{escape_text(note)}</li>" for note in notes) + "</ul>\n"
    if not is_telemetry_only(report):
        parts.append(_section("roofline", "Roofline", roof_body))
    table_sections("ceilings", "datasheet", "workloads")
    extra = (
        ("where-time-goes", "Where the time goes", profile_section_html(report.results, report.roofline)),
        ("energy-roofline", ENERGY_ROOFLINE_TITLE, energy_html),
        ("sweeps", SWEEP_TITLE, sweep_section_html(report.results)),
        ("interconnect", INTERCONNECT_TITLE, interconnect_section_html(report.results)),
        ("topology", TOPOLOGY_TITLE, topology_section_html(report.results)),
    )
    for section_id, title, section_body in extra:
        if section_body:
            parts.append(_section(section_id, title, section_body))

    if telemetry:
        chart = telemetry_svg(telemetry, report.measurements)
        tel_body = (
            f'<p class="meta">{escape_text(telemetry.source)}: {escape_text(telemetry.samples)} samples '
            f"from {escape_text(fmt_time_utc(telemetry.start))} to {escape_text(fmt_time_utc(telemetry.end))}.</p>\n"
        )
        tel_body += (
            f'<figure aria-labelledby="telemetry-caption">\n{chart}<figcaption id="telemetry-caption">Telemetry of '
            f"{escape_text(telemetry.source)} over time, one panel per metric group, one colour per GPU; "
            f"{_runs_caption(report)}.</figcaption>\n</figure>\n"
            if chart
            else '<p class="empty">No telemetry metric had a value to draw.</p>\n'
        )
        parts.append(_section("telemetry", "Telemetry", tel_body))
    table_sections("runs")
    table_sections("telemetry", section_id="telemetry-stats")
    table_sections("energy", "throttling", "alerts", "unavailable", "processes")
    parts.append(
        f"<footer>gpuscope {escape_text(report.gpuscope_version)} · "
        f"report schema {escape_text(report.schema)} v{escape_text(report.schema_version)}</footer>\n"
    )
    parts.append("</main>\n</body>\n</html>\n")
    return "".join(parts)


#: The workloads' energy section (FLOP/J, the energy roofline); the telemetry's is "GPU energy (telemetry)".
ENERGY_ROOFLINE_TITLE = "Energy per workload (FLOP/J)"


def _runs_caption(report: Report) -> str:
    """What the telemetry figure's shading shows: the runs inside the log, or that none is."""
    runs = report.measurements
    inside = sum(1 for run in runs if run_in_log(run, report.telemetry) is not None)
    if not runs:
        return "no probe run to mark"
    if not inside:
        return "no probe run falls inside the log, so none is shaded"
    return f"{inside} of {len(runs)} probe runs shaded and numbered as in the Probe runs table"


def _meta(report: Report) -> str:
    items = [escape(text) for text in source_descriptions(report, " — partial")]
    if report.redacted:
        items.append("<strong>redacted</strong>: hostnames, usernames and command lines removed")
    return " · ".join(items)
