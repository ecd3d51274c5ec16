"""The report's working-set sweep section: each results file's sweeps as the same text chart
``gpuscope roofline --sweep`` prints (:mod:`gpuscope.roofline.sweep_chart`), in a ``<pre>``
block (HTML) or a fenced block (Markdown). Empty when no file has a sweep."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

from gpuscope.report.fmt import clean_text
from gpuscope.report.html_blocks import escape_text
from gpuscope.roofline.sweep_chart import sweep_lines, sweeps_of
from gpuscope.schema.report import EmbeddedResults

__all__ = ["SWEEP_TITLE", "sweep_text_blocks", "sweep_section_html", "sweep_markdown_lines"]

SWEEP_TITLE = "Working-set sweeps"
_WIDTH = 100


def sweep_text_blocks(results: Sequence[EmbeddedResults]) -> list[tuple[str, list[str]]]:
    """(file label, chart and level lines) per results file with a sweep."""
    out = []
    for item in results:
        sweeps = sweeps_of(item.document)
        if sweeps:
            lines = [clean_text(line, 400) for line in sweep_lines(sweeps, _WIDTH, 14)]
            out.append((clean_text(item.label or "", 200), lines))
    return out


def sweep_section_html(results: Sequence[EmbeddedResults]) -> str:
    """The section body as HTML; empty without sweeps."""
    parts = []
    for label, lines in sweep_text_blocks(results):
        text = "\n".join(escape(line, quote=False) for line in lines)
        parts.append(f'<p class="meta">{escape_text(label)}</p>\n<pre>{text}</pre>\n')
    return "".join(parts)


def sweep_markdown_lines(results: Sequence[EmbeddedResults], md_escape: Callable[[object], str]) -> list[str]:
    """The section as Markdown lines (a fenced text block per file, the label through the
    report's ``md_escape``); empty without sweeps."""
    out: list[str] = []
    for label, lines in sweep_text_blocks(results):
        fenced = [line.replace("`", "'") for line in lines]
        out.extend([f"_{md_escape(label)}_", "", "```text", *fenced, "```", ""])
    return out
