"""Assemble a :class:`ProfileResult` from the counted step and the profiled steps' events; find the
roofs that judge it; append it to a results file."""

from __future__ import annotations

import collections
import os
import socket
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpuscope.measuring.measure import append_workload
from gpuscope.probing.environment import device_info, parse_device, system_info, torch_device_name
from gpuscope.profiling.attribution import StepEvents, group_ops, module_rollup
from gpuscope.profiling.record import CountedStep
from gpuscope.profiling.result import ProfileResult
from gpuscope.profiling.verdict import judge_groups, roofs_statement
from gpuscope.results import read_results
from gpuscope.roofline.loading import build_model
from gpuscope.roofline.model import DeviceKey, DeviceRoofs
from gpuscope.schema.core import decode_json, encode_json
from gpuscope.schema.results import Device, Results, System, Workload
from gpuscope.telemetry.cpuinfo import CpuInfo
from gpuscope.telemetry.energy import EnergyResult
from gpuscope.telemetry.values import Unavailable

if TYPE_CHECKING:
    import torch

__all__ = ["append_profile", "build_result", "device_roofs"]

#: dtypes that have compute roofs (others, e.g. int64 counters, are left out of the roofs line)
_ROOF_DTYPES = frozenset({"fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8"})


def device_roofs(
    device_text: str,
    device_type: str,
    name: str | None,
    host: str,
    roofs: Sequence[str | os.PathLike[str]] = (),
    *,
    local_cpu: CpuInfo | None = None,
) -> tuple[DeviceKey, DeviceRoofs | None]:
    """The roofs of one device: measured ceilings from the probe results files ``roofs`` (same host
    and device), plus the built-in datasheet. Raises BadInputError for a bad results file."""
    documents = [(str(path), read_results(path)) for path in roofs]
    here = Results(
        schema="gpuscope.results",
        schema_version=1,
        system=System(hostname=host),
        devices=[Device(device=device_text, type=device_type, name=name, host=host)],
    )
    model = build_model([*documents, ("this profile", here)], local_cpu=local_cpu, local_hostname=host)
    key = DeviceKey(host=host, rank=None, device=device_text)
    found = model.device(key)
    if found is None and name:  # two CPU models named on one host: keys are "cpu:<model>"
        found = model.device(DeviceKey(host=host, rank=None, device=f"{device_text}:{name.strip()}"))
    return (found.key if found is not None else key), found


def build_result(
    *,
    name: str,
    device: torch.device,
    counted: CountedStep,
    step_events: list[StepEvents],
    step_times_s: list[float],
    warmup: int,
    roofs: Sequence[str | os.PathLike[str]],
    energy: EnergyResult | None,
    dram: float | Unavailable,
    device_roofs_override: tuple[DeviceKey, DeviceRoofs | None] | None = None,
) -> ProfileResult:
    """The result of a finished profile."""
    host = socket.gethostname()
    device_text = str(device) if device.type == "cuda" else "cpu"
    label = torch_device_name(device)
    key, roofs_of_device = device_roofs_override or device_roofs(
        device_text, "gpu" if device.type == "cuda" else "cpu", label, host, roofs
    )
    groups = group_ops(step_events)
    step_s = statistics.fmean(step_times_s)
    verdicts = judge_groups(groups, roofs_of_device, step_s, key)
    dtypes = sorted({group.dtype for group in groups if group.dtype in _ROOF_DTYPES and group.flops})
    uncounted: collections.Counter[str] = collections.Counter(
        record.name for record in counted.records if record.no_formula
    )
    matched = (
        collections.Counter(op.record.key for op in step_events[-1].ops if op.record is not None)
        if step_events
        else collections.Counter()
    )
    per_key = collections.Counter(record.key for record in counted.records if record.flops or record.bytes)
    unmatched = sum(max(count - matched.get(key_, 0), 0) for key_, count in per_key.items())
    notes = []
    if unmatched:
        notes.append(
            f"{unmatched} counted op calls per step had no twin among the profiler's events: "
            "their FLOPs are in the total, not in a group"
        )
    return ProfileResult(
        name=name,
        device=device_text,
        device_name=label,
        host=host,
        steps=len(step_times_s),
        warmup=warmup,
        step_times_s=list(step_times_s),
        groups=groups,
        verdicts=verdicts,
        modules=module_rollup(step_events),
        traced_s=sum(step.traced_s for step in step_events) / max(len(step_events), 1),
        flop_counter_total=counted.flop_counter_total,
        counter_flops=counted.counter_flops,
        pointwise_flops=counted.pointwise_flops,
        bytes_total=sum(record.bytes for record in counted.records),
        unmatched_ops=unmatched,
        uncounted_ops=dict(sorted(uncounted.items())),
        roofs=roofs_statement(roofs_of_device, dtypes),
        energy=energy,
        dram_bytes_measured=dram,
        time_basis="CUDA kernel time" if device.type == "cuda" else "CPU time (self time of each op's events)",
        notes=notes,
        device_key=key,
        device_roofs=roofs_of_device,
    )


def append_profile(path: str | os.PathLike[str], result: ProfileResult) -> None:
    """Append the profile to the results file at ``path`` as a workload (file created when absent)."""
    # checked as a reader will check it (ranges, finite numbers) before it joins the file
    workload = decode_json(encode_json(result.to_workload()), Workload, f"profile {result.name}")
    spec = parse_device(result.device)  # the probe's device entry and system: one identity
    append_workload(path, workload, device_info(spec), system_info(spec))
