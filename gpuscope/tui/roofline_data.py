"""What the roofline screen draws: the model of the loaded results plus the devices this machine
has (their datasheet roofs), probe measurements as points, and live estimated GPU positions.

No Textual import. Building the model is pure and cheap (tens of points); the screen calls it
when results change, not every tick.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

import msgspec

from gpuscope.profiling.stored import StoredProfile, profiled_workloads
from gpuscope.profiling.view import (
    flops_unknown,
    generation_phases,
    generation_points,
    phase_note,
    profile_points,
    profile_rows,
)
from gpuscope.roofline.live import cuda_device_name, estimate_live_position
from gpuscope.roofline.loading import build_model
from gpuscope.roofline.model import DeviceKey, Placement, RooflineModel, place_point
from gpuscope.schema.core import MIN_MAGNITUDE, JsonObject
from gpuscope.schema.results import Ceiling, Device, Results, System, Workload
from gpuscope.telemetry.cpuinfo import CpuInfo
from gpuscope.telemetry.records import GpuSample, Sample
from gpuscope.telemetry.values import Unavailable

__all__ = [
    "LoadedResults",
    "live_document",
    "measurement_points",
    "build_screen_model",
    "with_profile_clouds",
    "live_placements",
    "LIVE_LABEL",
]

#: How a live position is labelled everywhere it appears.
LIVE_LABEL = "estimated from activity counters"


class LoadedResults(NamedTuple):
    """Probe results the app holds: the typed view, and the document as written (a file's bytes,
    a run's in-progress document; None: only the typed view), what a report embeds."""

    results: Results
    written: bytes | JsonObject | None = None


def live_document(sample: Sample | None, results: Sequence[Results] = ()) -> Results | None:
    """A results document naming this machine's devices (no ceilings), so their datasheet
    roofs appear before any probe has run. Devices that ``results`` from this host already name
    are left out, and the rank those results use is reused, so both land on one device. None
    without a sample."""
    if sample is None:
        return None
    hostname = sample.host.hostname
    present: set[str] = set()
    rank: int | None = None
    for document in results:
        entries: list[Device | Ceiling] = [*document.devices, *document.ceilings]
        for entry in entries:
            if (entry.host or document.system.hostname) in (hostname, None):
                present.add(entry.device)
                rank = entry.rank if rank is None else rank

    devices: list[Device] = []
    if "cpu" not in present:
        devices.append(Device(device="cpu", type="cpu", name=sample.host.cpu_model, rank=rank))
    for gpu in sample.gpus:
        name = cuda_device_name(gpu, sample.gpus)  # CUDA's number (the mapping), not NVML's index
        if gpu.mig_parent_index is None and name not in present:
            uuid = gpu.uuid if isinstance(gpu.uuid, str) and gpu.uuid else None  # the same GPU as a probe file's
            devices.append(Device(device=name, type="gpu", name=gpu.name, rank=rank, uuid=uuid))
    return Results(schema="gpuscope.results", schema_version=1, system=System(hostname=hostname), devices=devices)


def measurement_points(document: Results) -> list[Workload]:
    """Probe measurements that can sit on the chart (FLOPs, bytes and a time, status ok) as
    ``workloads`` entries, named after the measurement."""
    points = []
    for m in document.measurements:
        parameters = m.parameters if isinstance(m.parameters, dict) else {}
        if (m.status or "ok").lower() not in ("ok", "passed", "valid", "success") or parameters.get(
            "role"
        ) == "workload":
            continue  # failed, or already a point through the document's "workloads"
        if not (m.device and m.flops and m.bytes and m.time_s) or min(m.flops, m.bytes, m.time_s) < MIN_MAGNITUDE:
            continue
        dtype = parameters.get("dtype")
        points.append(
            Workload(
                name=m.name or (str(m.id) if m.id is not None and m.id != "" else "probe"),
                device=m.device,
                flops=m.flops,
                bytes=m.bytes,
                time_s=m.time_s,
                dtype=dtype if isinstance(dtype, str) else None,
                source="probe",
                host=m.host,
                rank=m.rank,
                straggler=m.straggler,
            )  # fmt: skip
        )
    return points


def build_screen_model(
    results: Sequence[Results],
    sample: Sample | None,
    include_measurements: bool = True,
    local_cpu: CpuInfo | None = None,
) -> RooflineModel:
    """The :class:`gpuscope.roofline.model.RooflineModel` of ``results`` (probe results) plus this
    machine's devices; probe measurements become points. ``local_cpu`` (a CpuInfo) gives the
    CPU datasheet roof; default: this machine's."""
    documents: list[tuple[str, Results]] = []
    for number, document in enumerate(results):
        label = (document.suite.path if document.suite else None) or f"results {number + 1}"
        if include_measurements:
            document = msgspec.structs.replace(document, workloads=[*document.workloads, *measurement_points(document)])
        documents.append((label, document))
    live = live_document(sample, results)
    if live is not None:
        documents.append(("this machine", live))
    hostname = sample.host.hostname if sample is not None else socket.gethostname()
    model = build_model(documents, datasheet=True, local_cpu=local_cpu, local_hostname=hostname)
    return with_profile_clouds(model, documents)


def with_profile_clouds(model: RooflineModel, documents: Sequence[tuple[str, Results]]) -> RooflineModel:
    """``model`` with each profile workload's one point (a results workload with ``source:
    "profile"`` and a ``profile`` object, from ``documents``, (source, results document) pairs)
    replaced, in its place, by its top groups' points (:func:`gpuscope.profiling.view.profile_points`
    on the same device), each carrying its table row's time lost (and the step's speed-up at its
    roof) in ``note``; a profile of a ``generate()`` call adds its prefill and decode after them.
    Groups stay in the profile's order (by time lost), so the chart's number n of a group is its
    table row. ``model`` itself when there is no profile."""
    clouds: dict[tuple[str | None, str], StoredProfile] = {
        (source, profiled.workload.name): profiled.profile  # as the model's points name them
        for source, document in documents
        for profiled in profiled_workloads(document)
    }
    if not clouds:
        return model
    points = []
    for placement in model.placements:
        point = placement.point
        workload = clouds.get((point.origin, point.name)) if point.source == "profile" else None
        if workload is None:
            points.append(point)
            continue
        rows = zip(profile_points(workload, point.key), profile_rows(workload), workload.top_groups(), strict=True)
        for group, row, stored in rows:
            lost, gain = row[6], row[7]
            note = f"lost {lost} ms" + (f" · step {gain} at roof" if gain != "-" else "")
            if flops_unknown(stored):  # no formula: its time, never a memory verdict
                note = f"FLOPs unknown: {row[4]} ms, no verdict"
            points.append(replace(group, origin=point.origin, note=note))
        # a generate() call: its prefill and decode after the groups (the groups keep their numbers)
        for phase, phase_point in zip(
            generation_phases(workload), generation_points(workload, point.key, point.dtype), strict=True
        ):
            points.append(replace(phase_point, origin=point.origin, note=phase_note(phase)))
    return model.replace_points(points)


def live_placements(model: RooflineModel, sample: Sample | None) -> tuple[list[Placement], list[str]]:
    """Estimated current positions of the GPUs in ``sample`` (Hopper and newer: activity counters
    and DRAM GB/s) placed against their devices' roofs, and one line per GPU that cannot be
    estimated saying why."""
    if sample is None or not sample.gpus:
        return [], []
    placements, reasons = [], []
    for gpu in sample.gpus:
        if gpu.mig_parent_index is not None:
            continue
        estimate = estimate_live_position(gpu, gpus=sample.gpus)
        if isinstance(estimate, Unavailable):
            reasons.append(f"{cuda_device_name(gpu, sample.gpus)} live: {estimate.detail or estimate.reason.value}")
            continue
        key = _device_key(model, gpu, sample)
        point = replace(estimate.to_point(name=f"{estimate.device} now"), key=key)
        placements.append(place_point(point, model.device(key)))
    return placements, reasons


def _device_key(model: RooflineModel, gpu: GpuSample, sample: Sample) -> DeviceKey:
    wanted = cuda_device_name(gpu, sample.gpus)
    for device in model.devices:
        if device.key.device == wanted and device.key.host in (sample.host.hostname, None):  # first match wins
            return device.key
    return DeviceKey(host=sample.host.hostname, rank=None, device=wanted)
