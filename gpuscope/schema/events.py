"""The probe child's event stream (``python -m gpuscope.tui.probe_child``): one JSON object per
line on stdout, tagged by ``"event"``, decoded into these types by ``gpuscope.tui.probe_job``.

A line that is not one of these events (a stray print from a library) becomes a :class:`Log`
event, never an error. ``wall_s`` is set by the reader: when the UI read the line (time.time()).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from gpuscope.schema.core import Count, encode_json
from gpuscope.schema.results import Ceiling, Measurement, Workload

__all__ = [
    "Started",
    "Progress",
    "MeasurementDone",
    "Finished",
    "Failed",
    "Log",
    "Exited",
    "ProbeEvent",
    "decode_event",
    "encode_event",
]


class _Event(msgspec.Struct, kw_only=True, tag_field="event", omit_defaults=True):
    wall_s: float = 0.0


class Started(_Event, tag="started", kw_only=True):
    """The suite is planned: ``total`` measurements steps."""

    total: Count
    suite: str
    device: str


class Progress(_Event, tag="progress", kw_only=True):
    """Step ``done`` of ``total`` (``phase`` start: about to run ``name``; end: all done)."""

    done: Count
    total: Count
    name: str = ""
    phase: Literal["start", "end"] = "start"


class MeasurementDone(_Event, tag="measurement", kw_only=True):
    """One measurement (a results-file ``measurements[]`` entry) and the ceilings and workloads
    so far (the results file's lists)."""

    measurement: Measurement
    ceilings: list[Ceiling] = msgspec.field(default_factory=list)
    workloads: list[Workload] = msgspec.field(default_factory=list)


class Finished(_Event, tag="finished", kw_only=True):
    """The results file is written (``partial``: the run was cancelled)."""

    output: str
    partial: bool = False


class Failed(_Event, tag="failed", kw_only=True):
    """The run could not start or crashed; one line."""

    message: str


class Log(_Event, tag="log", kw_only=True):
    """A line to show as is."""

    line: str


class Exited(_Event, tag="exited", kw_only=True):
    """The child process ended (added by the reader, never sent by the child)."""

    returncode: int
    stderr: str = ""


ProbeEvent = Started | Progress | MeasurementDone | Finished | Failed | Log | Exited
_DECODER: msgspec.json.Decoder[ProbeEvent] = msgspec.json.Decoder(ProbeEvent)


def decode_event(line: str | bytes, wall_s: float = 0.0) -> ProbeEvent:
    """One stdout line of the child as an event (a :class:`Log` when it is not one)."""
    try:
        event = _DECODER.decode(line)
    except (msgspec.MsgspecError, RecursionError):
        text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
        return Log(line=text.rstrip("\n"), wall_s=wall_s)
    event.wall_s = wall_s
    return event


def encode_event(event: ProbeEvent) -> bytes:
    """``event`` as one JSON line (NaN and infinity as null; fields at their default, ``wall_s``
    included, are left out)."""
    return encode_json(msgspec.structs.replace(event, wall_s=0.0)) + b"\n"
