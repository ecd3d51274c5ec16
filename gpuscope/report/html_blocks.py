"""HTML building blocks shared by the page (:mod:`gpuscope.report.html`) and its sections
(:mod:`gpuscope.report.profile_section`): text escaped once, where it reaches the page, and tables."""

from __future__ import annotations

from html import escape

from gpuscope.report.fmt import clean_text
from gpuscope.report.tables import Table

__all__ = ["escape_text", "table_html"]


def escape_text(value: object) -> str:
    """``value`` as HTML text: printable (:func:`~gpuscope.report.fmt.clean_text`, at most 2000
    characters) and escaped, quotes included, so it is safe in an element or an attribute."""
    return escape(clean_text(value, 2000), quote=True)


def table_html(table: Table) -> str:
    """``table`` as an HTML table (every cell escaped), or a "No ..." line when it has no rows."""
    if not table.rows:
        return f'<p class="empty">{escape(table.empty or f"No {table.title.lower()}.")}</p>\n'
    out = [f'<div class="scroll"><table id="table-{escape(table.id)}">\n<thead><tr>']
    out.extend(f"<th>{escape(header)}</th>" for header in table.headers)
    out.append("</tr></thead>\n<tbody>\n")
    last = len(table.headers) - 1
    for row, flag in zip(table.rows, table.flags):
        out.append(f'<tr class="{escape(flag)}">' if flag else "<tr>")
        for index, cell in enumerate(row):
            classes = []
            if index in table.numeric:
                classes.append("num")
            if index == last and table.headers[last] == "Flag":
                classes.append("flag")
            attr = f' class="{" ".join(classes)}"' if classes else ""
            out.append(f"<td{attr}>{escape(cell, quote=True)}</td>")
        out.append("</tr>\n")
    out.append("</tbody></table></div>\n")
    if table.note:
        out.append(f'<p class="note">{escape(table.note)}</p>\n')
    return "".join(out)
