"""The TUI's text-safety choke point: every line any widget paints passes through
:data:`SAFE_TEXT`, a Textual line filter (public API: ``App.get_line_filters``), which shows
control characters, bidi controls and undecodable bytes escaped by
:func:`gpuscope.textsafe.safe_text`, the rule the command line follows. A process command
line, a hostname, a NIC name or a file name therefore never sets the terminal's title or
colours nor reorders the screen, whichever widget shows it, a new one included.

The filter keeps each line's width: escapes are wider than the characters they show, so the
line is cut at its end. The lines a LineWidget builds (``widgets/lines.py``) and the top bar's
host escape their text before measuring it, so their layout holds and the filter finds nothing.
"""

from __future__ import annotations

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

from gpuscope.textsafe import has_unsafe, safe_text

__all__ = ["SafeText", "SAFE_TEXT"]


class SafeText(LineFilter):
    """A line filter that escapes unsafe characters in each segment's text (styles unchanged),
    keeping the line's cell length."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        if not any(has_unsafe(segment.text) for segment in segments if not segment.control):
            return segments
        length = Segment.get_line_length(segments)
        escaped = [
            segment if segment.control else Segment(safe_text(segment.text), segment.style) for segment in segments
        ]
        style = next((segment.style for segment in reversed(segments) if not segment.control), None)
        return list(Segment.adjust_line_length(escaped, length, style=style))


#: The one instance the app hands to every widget (Textual caches filtered lines per filter).
SAFE_TEXT = SafeText()
