"""The roofline part of a report, taken from :mod:`gpuscope.roofline` (the one roofline model).

:func:`roofline_view` is the single call the report makes into the model. It returns the report's
typed roofline section (:class:`gpuscope.schema.report.Roofline`: roofs, placed workload points,
datasheet roofs, above-datasheet flags, the DRAM roof rule and the model's own JSON), stored in
the report JSON, so a report re-rendered from JSON needs no results files. :func:`model_from_view`
turns it back into a model, so the chart of a report read back from JSON is drawn by the same
layout as ``gpuscope roofline``.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuscope.roofline import model as rm
from gpuscope.roofline.layout import envelope_roofs
from gpuscope.roofline.loading import build_model
from gpuscope.roofline.model_json import model_from_json, model_to_json
from gpuscope.roofline.shapes import roof_title
from gpuscope.schema import report as rs
from gpuscope.schema.results import Device, Results, System
from gpuscope.telemetry.cpuinfo import CpuInfo

__all__ = ["roofline_view", "model_from_view", "datasheet_roofs", "device_type", "DeviceFacts", "DatasheetIndex"]


def device_type(device: str | None) -> str:
    """``"gpu"`` or ``"cpu"`` guessed from a device string like ``cuda:0`` / ``cpu``."""
    text = (device or "").lower()
    return "gpu" if text.startswith(("cuda", "gpu", "rocm", "hip")) else "cpu"


class DeviceFacts:
    """The type and hardware name of each device of one results file: its ``devices`` list
    indexed once, since a report looks a device up for every ceiling and workload (a scan of the
    list each time made a 5,000-device file quadratic)."""

    def __init__(self, devices: Sequence[Device], system: System) -> None:
        self._cpu_model = system.cpu_model
        self._types: dict[str, str] = {}
        self._first_name: dict[str, str] = {}
        self._named: dict[tuple[str, str | None], tuple[int, str]] = {}  # (device, host) -> first named entry
        for position, entry in enumerate(devices):
            if entry.type in ("cpu", "gpu"):
                self._types.setdefault(entry.device, str(entry.type))
            if entry.name is not None:
                self._first_name.setdefault(entry.device, entry.name)
                self._named.setdefault((entry.device, entry.host), (position, entry.name))

    def type_of(self, device: str | None) -> str:
        """``"gpu"`` or ``"cpu"``: the first ``devices`` entry's type, else :func:`device_type`."""
        found = self._types.get(device) if device is not None else None
        return found or device_type(device)

    def name_of(self, device: str | None, host: str | None = None) -> str | None:
        """The hardware name (``NVIDIA H200``, the CPU model) of ``device``: the first named entry
        of it (on ``host``, or with no host, when ``host`` is given), else the system's CPU model
        for a CPU, else None."""
        name: str | None = None
        if device is not None and host is None:
            name = self._first_name.get(device)
        elif device is not None:
            found = [hit for hit in (self._named.get((device, host)), self._named.get((device, None))) if hit]
            name = min(found)[1] if found else None
        if name is not None:
            return name
        return self._cpu_model if self.type_of(device) == "cpu" else None


def roofline_view(inputs: Sequence[tuple[str, Results]], local_cpu: CpuInfo | None = None) -> rs.Roofline:
    """Roofs, workload points and datasheet values of ``inputs`` (label, results document) pairs,
    from :func:`gpuscope.roofline.loading.build_model`. ``local_cpu`` is passed on for the CPU
    datasheet roof (default: this machine's, used only when the model matches)."""
    return _from_model(build_model(inputs, local_cpu=local_cpu))


def _from_model(model: rm.RooflineModel) -> rs.Roofline:
    """The roofline model's roofs and placements as the report's roofline section."""
    roofs: list[rs.Roof] = []
    notes: list[rs.Scalar] = []
    flagged: list[rs.AboveDatasheet] = []
    for device in model.devices:
        key = device.key
        label = model.device_label(key)
        notes.extend(f"{label}: {note}" for note in device.notes)
        if device.datasheet and "cores x FLOP/cycle x" in device.datasheet:  # a CPU's, with its clock's source
            notes.append(f"{label}: datasheet roofs {device.datasheet}")
        peak, dram, others = envelope_roofs(model, device)
        main = {id(roof) for roof in (peak, dram, *others) if roof is not None}
        above = {id(item.measured): item for item in rm.above_datasheet(device)}
        notes.extend(f"{label}: {text}" for text in device.out_of_order.values())  # not drawn as roofs
        for item in above.values():
            notes.append(f"{label}: {item.text}")
            flagged.append(
                rs.AboveDatasheet(device=key.device, host=key.host, rank=key.rank, name=item.measured.name,
                                  value=item.measured.value, datasheet_value=item.datasheet.value, ratio=item.ratio,
                                  text=item.text)
            )  # fmt: skip
        for roof in _report_order(device.roofs):
            sheet = roof.source == rm.DATASHEET
            memory_kind = roof.note.split()[-1] if (sheet and roof.kind == "memory" and roof.note) else None
            roofs.append(
                rs.Roof(
                    device=key.device,
                    device_type=device.device_type,
                    device_name=device.name,
                    host=key.host,
                    rank=key.rank,
                    source=roof.origin,
                    kind=roof.kind,
                    name=roof.name,
                    value=roof.value,
                    unit=roof.unit,
                    origin="datasheet" if sheet else "measured",
                    label=roof_title(roof, memory_kind),
                    note=roof.note or None,
                    # compute and memory roofs are FLOP roofs of the chart; transfers and collectives are not
                    chart=roof.kind in ("compute", "memory"),
                    main=id(roof) in main,
                    level=rm.memory_level(roof.name) if roof.kind == "memory" else roof.kind,
                    straggler=roof.straggler,
                    above_datasheet=above[id(roof)].text if id(roof) in above else None,
                )
            )
    points: list[rs.Point] = []
    for placement in model.placements:
        point = placement.point
        owner = model.device(point.key)
        bounding = placement.bounding_roof
        points.append(
            rs.Point(
                name=point.name,
                device=point.key.device,
                device_type=owner.device_type if owner else device_type(point.key.device),
                device_name=owner.name if owner else None,
                host=point.key.host,
                rank=point.key.rank,
                source=point.origin,
                dtype=point.dtype,
                intensity_flop_per_byte=placement.intensity_flop_per_byte,
                intensity_basis=placement.intensity_basis,
                flop_per_s=point.flop_per_s,
                bound=placement.bound if placement.bound != "unknown" else None,
                roof=f"{bounding.name} ({bounding.source})" if bounding is not None else None,
                attainable_flop_per_s=placement.attainable_flop_per_s,
                efficiency_percent=placement.efficiency * 100.0 if placement.efficiency is not None else None,
                above_roof=placement.above_roof,
                note=placement.note or None,
                straggler=point.straggler or bool(owner and owner.straggler),
            )
        )
    return rs.Roofline(
        available=True, notes=notes, warnings=list(model.warnings), roofs=roofs, points=points,
        datasheet=datasheet_roofs(model), above_datasheet=flagged, dram_rule=rm.DRAM_ROOF_RULE,
        model=dict(model_to_json(model)),
    )  # fmt: skip


def _report_order(roofs: Sequence[rm.Roof]) -> list[rm.Roof]:
    """A device's roofs as the report lists them: by kind, measured first, highest first."""
    return sorted(roofs, key=lambda r: (_KIND_ORDER.get(r.kind, 9), r.source != "measured", -r.value, r.name))


def datasheet_roofs(model: rm.RooflineModel) -> list[rs.DatasheetRoof]:
    """Every datasheet roof of ``model`` (what measured ceilings are held against), in the
    report's order: by device, then as :func:`_report_order`."""
    return [
        rs.DatasheetRoof(device=device.key.device, host=device.key.host, rank=device.key.rank, kind=roof.kind,
                         name=roof.name, value=roof.value, unit=roof.unit)
        for device in model.devices
        for roof in _report_order(device.roofs)
        if roof.source == rm.DATASHEET
    ]  # fmt: skip


def model_from_view(view: rs.Roofline) -> rm.RooflineModel | None:
    """A :class:`~gpuscope.roofline.model.RooflineModel` rebuilt from a report's roofline
    section (its ``roofs`` and ``points``), or None when it has neither. Points keep their
    intensity and FLOP/s (FLOPs = FLOP/s x 1 s); placements are computed again. A section that
    carries the model's own JSON (``model``, :func:`gpuscope.roofline.model_json.model_to_json`) is
    read from that instead."""
    if view.model is not None:
        return model_from_json(view.model)
    devices: dict[rm.DeviceKey, rm.DeviceRoofs] = {}

    def device_of(item: rs.Roof | rs.Point) -> rm.DeviceRoofs:
        key = rm.DeviceKey(item.host, item.rank, str(item.device))
        if key not in devices:
            kind = item.device_type if item.device_type in ("cpu", "gpu") else device_type(key.device)
            name = item.device_name if isinstance(item.device_name, str) else None
            devices[key] = rm.DeviceRoofs(key=key, device_type=str(kind), name=name)
        return devices[key]

    for roof in view.roofs or []:
        if not roof.value or roof.kind not in rm.UNIT_FOR_KIND:
            continue
        device = device_of(roof)
        source = rm.DATASHEET if roof.origin == "datasheet" else rm.MEASURED
        unit = rm.UNIT_FOR_KIND[str(roof.kind)]
        device.roofs.append(
            rm.Roof(device.key, str(roof.kind), str(roof.name), roof.value, unit, source, str(roof.note or ""))
        )
    points = []
    for item in view.points or []:
        rate, intensity = item.flop_per_s, item.intensity_flop_per_byte
        if not rate or not intensity or rate < 0 or intensity < 0:
            continue
        key = device_of(item).key
        dtype = item.dtype if isinstance(item.dtype, str) else None
        points.append(
            rm.Point(name=str(item.name), key=key, flops=rate, bytes=rate / intensity, time_s=1.0, dtype=dtype)
        )
    if not devices:
        return None
    model = rm.RooflineModel(devices=list(devices.values()), points=points)
    model.placements = [rm.place_point(point, model.device(point.key)) for point in points]
    return model


_KIND_ORDER = {"compute": 0, "memory": 1, "transfer": 2, "collective": 3}


class DatasheetIndex:
    """The datasheet roofs of a report's roofline section by (device, host, kind), indexed once:
    every measured ceiling looks up the value it is held against."""

    def __init__(self, datasheet: Sequence[rs.DatasheetRoof]) -> None:
        self._roofs: dict[tuple[object, object, object], list[rs.DatasheetRoof]] = {}
        for roof in datasheet:
            if roof.value is not None:
                self._roofs.setdefault((roof.device, roof.host, roof.kind), []).append(roof)

    def value(self, kind: str, name: str, device: str, host: str | None, rank: int | None) -> float | None:
        """The datasheet value (FLOP/s or bytes/s) a measured ceiling (``kind``, ``name`` on
        ``device`` of ``host``/``rank``) is held against, or None: the highest datasheet roof of
        that device that :func:`gpuscope.roofline.model.holds_against` accepts, as the
        roofline's ``datasheet_twin``."""
        values = [
            d.value
            for d in self._roofs.get((device, host, kind), [])
            if d.value is not None
            and (d.rank == rank or d.rank is None or (rank in (None, 0) and d.rank in (None, 0)))
            and rm.holds_against(kind, name, str(d.name))
        ]
        return max(values, default=None)
