"""Fleets on the roofline chart (part of :mod:`gpuscope.roofline.layout`).

A multi-node burn-in holds thousands of devices, mostly of one model: one envelope, legend entry
and label per device would draw thousands of lines nobody can tell apart, and cost minutes to
paint. With more than :data:`FLEET_DEVICES` devices to draw, the devices of one hardware model
(type and name) are drawn as one group: its **median device** (each roof the median of that roof
across the group), with the count, and the range of its envelope's roofs in the notes. The
worst :data:`FLEET_STRAGGLERS` straggler devices (a multi-rank run flagged a roof of theirs; slow
on a roof the chart draws first) and devices of a model of their own are still drawn on their
own; every point is still drawn, but only the points of the devices drawn on their own carry a
tag. The terminal tables summarize the groups the same way; ``--json`` and the report's tables
list every device, roof and point. No Textual, plotext or matplotlib import.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gpuscope.roofline.model import DeviceKey, DeviceRoofs, Roof, RooflineModel
from gpuscope.roofline.shapes import roof_title
from gpuscope.roofline.units import format_si

__all__ = ["FLEET_DEVICES", "FLEET_STRAGGLERS", "Drawn", "drawn_devices", "chart_devices"]

#: More devices to draw than this: the devices of one hardware model are drawn as one group.
FLEET_DEVICES = 16
#: In a fleet, this many straggler devices (the furthest below their median) are drawn on their own.
FLEET_STRAGGLERS = 8


@dataclass(frozen=True)
class Drawn:
    """One entry of the chart's legend: a device (``members`` is just it), or a group of devices
    of one model drawn as their median device."""

    device: DeviceRoofs  # the device itself, or the group's median device
    members: tuple[DeviceRoofs, ...]

    @property
    def group(self) -> bool:
        return len(self.members) > 1

    def label(self, model: RooflineModel) -> str:
        """The device's label, or ``"5000 devices"`` for a group."""
        return f"{len(self.members)} devices" if self.group else model.device_label(self.device.key)

    def ranges_text(self, roofs: Sequence[Roof | None]) -> str:
        """``"bf16 580 TFLOP/s to 791 TFLOP/s"`` per roof of the group's median device: the lowest
        and highest value of that roof across the group ('' for a single device)."""
        if not self.group:
            return ""
        parts = []
        for roof in roofs:
            if roof is None:
                continue
            values = [r.value for m in self.members for r in m.roofs if _same_roof(r, roof)]
            if values:
                unit = "FLOP/s" if roof.kind == "compute" else "B/s"
                low, high = format_si(min(values), unit, 3), format_si(max(values), unit, 3)
                parts.append(f"{roof_title(roof)} {low} to {high}")
        return ", ".join(parts)


def _same_roof(a: Roof, b: Roof) -> bool:
    return (a.kind, a.name, a.source, a.unit) == (b.kind, b.name, b.source, b.unit)


def _median_device(members: Sequence[DeviceRoofs]) -> DeviceRoofs:
    """A device whose every roof is the median of that roof (kind, name, source) across ``members``."""
    first = members[0]
    key = DeviceKey(None, None, f"{first.device_type}:{first.name or '?'} x{len(members)}")
    values: dict[tuple[str, str, str, str], list[float]] = {}
    notes: dict[tuple[str, str, str, str], str] = {}
    for member in members:
        for roof in member.roofs:
            which = (roof.kind, roof.name, roof.source, roof.unit)
            values.setdefault(which, []).append(roof.value)
            notes.setdefault(which, roof.note)
    roofs = []
    for (kind, name, source, unit), found in values.items():
        note = notes[(kind, name, source, unit)]
        text = f"median of {len(found)} devices" + (f"; {note}" if note else "")
        roofs.append(Roof(key, kind, name, statistics.median(found), unit, source, text))
    return DeviceRoofs(key=key, device_type=first.device_type, name=first.name, datasheet=first.datasheet, roofs=roofs)


def _slowest_first(device: DeviceRoofs) -> tuple[float, float]:
    """Sort key of a straggler device: furthest below its median on a roof the chart draws
    (compute, memory) first, then on any roof (a transfer)."""

    def worst(kinds: tuple[str, ...]) -> float:
        return max((roof.below_median_percent or 0.0 for roof in device.stragglers if roof.kind in kinds), default=0.0)

    return -worst(("compute", "memory")), -worst(("compute", "memory", "transfer", "collective"))


def drawn_devices(devices: Sequence[DeviceRoofs]) -> tuple[list[Drawn], list[str]]:
    """What the chart draws for ``devices`` (in model order), and notes on what it left out: each
    device on its own when there are at most :data:`FLEET_DEVICES`, else the fleet's groups (see
    the module docstring)."""
    if len(devices) <= FLEET_DEVICES:
        return [Drawn(device, (device,)) for device in devices], []
    models: dict[tuple[str, str | None], list[int]] = {}
    for position, device in enumerate(devices):
        models.setdefault((device.device_type, device.name), []).append(position)
    stragglers = sorted(
        (position for position, device in enumerate(devices) if device.straggler),
        key=lambda position: (*_slowest_first(devices[position]), position),
    )
    own = set(stragglers[:FLEET_STRAGGLERS])
    first: dict[int, Drawn] = {}  # first position of what it stands for -> entry
    for positions in models.values():
        if len(positions) == 1:
            own.add(positions[0])
        else:
            members = tuple(devices[position] for position in positions)
            first[positions[0]] = Drawn(_median_device(members), members)
    entries: list[tuple[int, int, Drawn]] = [(position, 0, drawn) for position, drawn in first.items()]
    entries += [(position, 1, Drawn(devices[position], (devices[position],))) for position in own]
    notes = []
    left_out = sum(1 for position in stragglers if position not in own)
    if left_out:
        notes.append(
            f"{left_out} more straggler devices are drawn within their group (the {FLEET_STRAGGLERS} furthest "
            "below their median are drawn on their own): the Stragglers table lists them all"
        )
    return [drawn for _, _, drawn in sorted(entries, key=lambda entry: (entry[0], entry[1]))], notes


def chart_devices(model: RooflineModel) -> tuple[list[Drawn], list[str]]:
    """:func:`drawn_devices` of the model's devices that have roofs or points (what the chart
    draws and the tables of a fleet summarize)."""
    return drawn_devices([device for device in model.devices if device.roofs or model.placements_of(device.key)])
