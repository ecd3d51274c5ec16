"""The Markdown report: a short summary fit for an issue tracker, then the same tables as the
HTML report. Every cell is escaped so a hostile name renders as text (no HTML, no links, no
table breakage)."""

from __future__ import annotations

import re

from gpuscope.report.fmt import clean_text, fmt_time_utc, source_descriptions
from gpuscope.report.interconnect_section import INTERCONNECT_TITLE, interconnect_markdown_lines
from gpuscope.report.profile_section import profile_markdown_lines
from gpuscope.report.sweep_section import SWEEP_TITLE, sweep_markdown_lines
from gpuscope.report.tables import Table, report_tables
from gpuscope.report.topology_section import TOPOLOGY_TITLE, topology_markdown_lines
from gpuscope.schema.report import Report

__all__ = ["render_markdown", "md_escape"]

_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
_LEADING = re.compile(r"^(\s*)([#+!=-])")
_ORDERED = re.compile(r"^(\s*\d+)([.)])(?=\s|$)")


def md_escape(value: object) -> str:
    """Text safe inside a Markdown table cell: HTML characters as entities, Markdown punctuation
    backslash-escaped, no line breaks."""
    text = clean_text(value, 2000)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _SPECIAL.sub(r"\\\1", text)
    text = _LEADING.sub(lambda m: m.group(1) + "\\" + m.group(2), text)  # no headings or lists
    text = _ORDERED.sub(lambda m: m.group(1) + "\\" + m.group(2), text)
    # autolinks (www.x, https://x) would become links on GitHub: break the scheme and "www."
    text = re.sub(r"(?i)\b(https?|ftp|file|javascript|data):", lambda m: m.group(1) + "&#58;", text)
    text = re.sub(r"(?i)\bwww\.", "www&#46;", text)
    text = text.replace("@", "&#64;")
    return text


def _table(table: Table) -> str:
    if not table.rows:
        return f"_{md_escape(table.empty or f'No {table.title.lower()}.')}_\n"
    headers = [md_escape(h) if h else " " for h in table.headers]
    lines = ["| " + " | ".join(headers) + " |"]
    lines.append("|" + "|".join("---:" if i in table.numeric else "---" for i in range(len(headers))) + "|")
    for row, flag in zip(table.rows, table.flags):
        cells = [md_escape(cell) for cell in row]
        if flag and cells:
            cells[-1] = f"**{cells[-1]}**" if cells[-1] else cells[-1]
        lines.append("| " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    if table.note:
        text += f"\n_{md_escape(table.note)}_\n"
    return text


def render_markdown(report: Report) -> str:
    """The report as Markdown (a pure function of ``report``)."""
    tables = report_tables(report)
    out = [f"# {md_escape(report.title or 'gpuscope report')}\n\n"]
    meta = [md_escape(text) for text in source_descriptions(report, ", partial")]
    if report.redacted:
        meta.append("redacted: hostnames, usernames and command lines removed")
    out.append(f"gpuscope {md_escape(report.gpuscope_version)}" + (" · " + " · ".join(meta) if meta else "") + "\n")
    out.append("\n## Summary\n\n")
    out.extend(f"- {md_escape(line)}\n" for line in report.summary or [])
    if report.warnings:
        out.append("\n**Warnings**\n\n")
        out.extend(f"- {md_escape(w)}\n" for w in report.warnings)
    for table in tables:
        out.append(f"\n## {md_escape(table.title)}\n\n")
        out.append(_table(table))
        if table.id == "ceilings":
            notes = report.roofline.notes or []
            if notes:
                out.append("\n")
                out.extend(f"- {md_escape(note)}\n" for note in notes)
    profile_lines = profile_markdown_lines(report.results, md_escape)
    if profile_lines:
        out.append("\n## Where the time goes\n\n" + "\n".join(profile_lines) + "\n")
    sweep_lines = sweep_markdown_lines(report.results, md_escape)
    if sweep_lines:
        out.append(f"\n## {SWEEP_TITLE}\n\n" + "\n".join(sweep_lines) + "\n")
    interconnect_lines = interconnect_markdown_lines(report.results, md_escape, _table)
    if interconnect_lines:
        out.append(f"\n## {INTERCONNECT_TITLE}\n\n" + "\n".join(interconnect_lines) + "\n")
    topology_lines = topology_markdown_lines(report.results, md_escape, _table)
    if topology_lines:
        out.append(f"\n## {TOPOLOGY_TITLE}\n\n" + "\n".join(topology_lines) + "\n")
    telemetry = report.telemetry
    if telemetry:
        out.append(
            f"\n_Telemetry: {md_escape(telemetry.source)}, {md_escape(telemetry.samples)} samples from "
            f"{md_escape(fmt_time_utc(telemetry.start))} to {md_escape(fmt_time_utc(telemetry.end))}. "
            "The charts are in the HTML report._\n"
        )
    return "".join(out)
