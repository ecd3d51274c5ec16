"""Telemetry for reports: a log (or in-memory samples) reduced to per-metric statistics, energy,
processes seen, and downsampled time series for the charts.

The result is the report's typed ``telemetry`` section (:class:`~gpuscope.schema.report.Telemetry`). Values
that were never available stay absent (``None``), with the reason, never a zero.
"""

from __future__ import annotations

import math
import operator
import os
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import msgspec

from gpuscope.errors import BadInputError
from gpuscope.report.fmt import natural_key
from gpuscope.schema.core import MIN_MAGNITUDE, finite_or_none
from gpuscope.schema.report import (
    MAX_POINTS_PER_LINE,
    AlertRow,
    Energy,
    GpuKey,
    Line,
    Missing,
    Panel,
    ProcessRow,
    Stat,
    Telemetry,
    ThrottleRow,
)
from gpuscope.telemetry.alerts import LEVELS
from gpuscope.telemetry.logscan import scan_log
from gpuscope.telemetry.records import GpuProcessSample, GpuSample, Sample
from gpuscope.telemetry.values import Unavailable

__all__ = ["GPU_METRICS", "HOST_METRICS", "PANELS", "read_samples", "summarize_samples", "MAX_POINTS_PER_LINE"]

#: (field, label, display unit, scale from the field's unit to the display unit)
GPU_METRICS: tuple[tuple[str, str, str, float], ...] = (
    ("utilization_percent", "GPU utilization", "%", 1.0),
    ("sm_activity_percent", "SM activity", "%", 1.0),
    ("tensor_activity_percent", "Tensor activity", "%", 1.0),
    ("dram_bandwidth_bytes_per_s", "DRAM bandwidth", "GB/s", 1e-9),
    ("pcie_tx_bytes_per_s", "PCIe TX", "GB/s", 1e-9),
    ("pcie_rx_bytes_per_s", "PCIe RX", "GB/s", 1e-9),
    ("nvlink_tx_bytes_per_s", "NVLink TX", "GB/s", 1e-9),
    ("nvlink_rx_bytes_per_s", "NVLink RX", "GB/s", 1e-9),
    ("power_w", "Power", "W", 1.0),
    ("temperature_gpu_c", "Temperature", "°C", 1.0),
    ("sm_clock_mhz", "SM clock", "MHz", 1.0),
    ("memory_clock_mhz", "Memory clock", "MHz", 1.0),
    ("memory_used_bytes", "Memory used", "GB", 1e-9),
)
HOST_METRICS: tuple[tuple[str, str, str, float], ...] = (
    ("cpu_utilization_percent", "CPU utilization", "%", 1.0),
    ("memory_used_bytes", "Host memory used", "GB", 1e-9),
)


PanelSpec = tuple[str, str, str, tuple[tuple[str, str, str], ...]]


def _pair(panel_id: str, first: str, second: str, unit: str, a: str, b: str) -> PanelSpec:
    """A panel of two GPU lines, the first solid and the second dashed."""
    return (panel_id, f"{first} (solid) and {second} (dashed)", unit, (("gpu", a, "-"), ("gpu", b, "--")))


#: Chart panels: (id, title, display unit, [(scope, field, line style)]); scope "gpu" or "host".
PANELS: tuple[PanelSpec, ...] = (
    ("util", "GPU utilization", "%", (("gpu", "utilization_percent", "-"),)),
    _pair("activity", "SM activity", "tensor activity", "%", "sm_activity_percent", "tensor_activity_percent"),
    ("dram", "DRAM bandwidth", "GB/s", (("gpu", "dram_bandwidth_bytes_per_s", "-"),)),
    _pair("pcie", "PCIe TX", "RX", "GB/s", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"),
    _pair("nvlink", "NVLink TX", "RX", "GB/s", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s"),
    ("power", "Power", "W", (("gpu", "power_w", "-"),)),
    ("temperature", "GPU temperature", "°C", (("gpu", "temperature_gpu_c", "-"),)),
    _pair("clocks", "SM clock", "memory clock", "MHz", "sm_clock_mhz", "memory_clock_mhz"),
    ("cpu", "Host CPU utilization", "%", (("host", "cpu_utilization_percent", "-"),)),
)

#: At most this many processes are listed (largest GPU memory first).
MAX_PROCESSES = 50


# --- reading ---------------------------------------------------------------------------------


def read_samples(path: str | os.PathLike[str], warnings: list[str] | None = None) -> Iterator[Sample]:
    """The samples of a ``gpuscope log`` file (JSON lines or CSV, plain or compressed), or of a
    folder, glob or rotated set read as one log (:mod:`gpuscope.telemetry.logscan`: only the
    fields a report reads). Raises :class:`BadInputError` for a missing, empty or corrupt log; an
    incomplete last line or frame (a killed logger) is skipped and noted in ``warnings``, and so
    is a gap between two files."""
    notes = warnings if warnings is not None else []
    yield from scan_log(path, on_warning=notes.append)


# --- reduction -------------------------------------------------------------------------------


@dataclass
class _Series:
    values: array[float] = field(default_factory=lambda: array("d"))
    reason: str | None = None  # why unavailable (first reason seen)


@dataclass
class _GpuTrack:
    key: str
    index: int
    name: str
    uuid: str
    times: array[float] = field(default_factory=lambda: array("d"))
    series: dict[str, _Series] = field(default_factory=dict)
    energy_first_j: float | None = None
    energy_last_j: float | None = None
    energy_ok: bool = True  # counter never went backwards


@dataclass
class _Seen:
    """When something (a throttle reason, an alert) was present in the log's samples."""

    samples: int = 0
    first_s: float = math.inf
    last_s: float = -math.inf
    message: str = ""

    def note(self, stamp: float, message: str = "") -> None:
        self.samples += 1
        self.first_s = min(self.first_s, stamp)
        self.last_s = max(self.last_s, stamp)
        self.message = message or self.message


def _note_alerts(alerts: dict[tuple[str, str, str], _Seen], texts: object, stamp: float) -> None:
    """Count each ``"level kind message"`` of a sample's ``alerts`` under (level, kind, subject);
    the subject is the message up to its colon (``GPU 1``), else ``host``."""
    for text in texts if isinstance(texts, list) else []:
        level, _, rest = str(text).partition(" ")
        kind, _, message = rest.partition(" ")
        subject, colon, _ = message.partition(":")
        alerts.setdefault((level, kind, subject if colon else "host"), _Seen()).note(stamp, message)


def _level_rank(level: str) -> int:
    return LEVELS.index(level) if level in LEVELS else -1


def _gpu_key(gpu: GpuSample) -> tuple[str, str]:
    if gpu.mig_parent_index is not None:
        key = f"gpu{gpu.mig_parent_index}.mig{gpu.mig_gpu_instance_id}.{gpu.mig_compute_instance_id}"
        label = f"GPU {gpu.mig_parent_index} MIG {gpu.mig_gpu_instance_id}/{gpu.mig_compute_instance_id}"
    else:
        key = f"gpu{gpu.index}"
        label = f"GPU {gpu.index}"
    return key, label


def _number(value: object) -> float:
    number = finite_or_none(value)
    return math.nan if number is None else number


def summarize_samples(samples: Iterable[Sample], source: str, warnings: list[str] | None = None) -> Telemetry:
    """Reduce samples to the report's ``telemetry`` section. ``source`` labels it."""
    warnings = warnings if warnings is not None else []
    host_times = array("d")
    host_series: dict[str, _Series] = {name: _Series() for name, *_ in HOST_METRICS}
    tracks: dict[str, _GpuTrack] = {}
    labels: dict[str, str] = {}
    processes: dict[tuple[str, int, str], ProcessRow] = {}
    hostnames: list[str] = []
    gpu_unavailable: str | None = None
    driver: str | None = None
    simulated: str | None = None
    throttles: dict[tuple[str, str], _Seen] = {}  # (GPU key, reason)
    throttle_reads: dict[str, int] = {}  # GPU key -> samples that read its throttle reasons
    alerts: dict[tuple[str, str, str], _Seen] = {}  # (level, kind, subject)
    costs = array("d")
    previous_time = -math.inf
    out_of_order = 0
    keys: dict[tuple[object, ...], tuple[str, str]] = {}  # a GPU's identity -> its key and label
    for sample in samples:
        stamp = _number(sample.timestamp)
        if math.isnan(stamp):
            continue
        if stamp < previous_time:
            out_of_order += 1
        previous_time = max(previous_time, stamp)
        host_times.append(stamp)
        costs.append(_number(sample.sample_cost_s))
        host = sample.host
        hostname = getattr(host, "hostname", None)
        if isinstance(hostname, str) and hostname not in hostnames:
            hostnames.append(hostname)
        for name, *_ in HOST_METRICS:
            _append(host_series[name], getattr(host, name, None))
        if sample.gpu_unavailable is not None and gpu_unavailable is None:
            gpu_unavailable = str(
                sample.gpu_unavailable.to_json()
                if isinstance(sample.gpu_unavailable, Unavailable)
                else sample.gpu_unavailable
            )
        if driver is None and isinstance(sample.driver_version, str):
            driver = sample.driver_version
        if simulated is None and isinstance(sample.simulated, str):
            simulated = sample.simulated
        if sample.alerts:
            _note_alerts(alerts, sample.alerts, stamp)
        for gpu in sample.gpus if isinstance(sample.gpus, list) else []:
            identity = (gpu.index, gpu.mig_parent_index, gpu.mig_gpu_instance_id, gpu.mig_compute_instance_id)
            known = keys.get(identity)
            if known is None:
                known = keys[identity] = _gpu_key(gpu)
            key, label = known
            track = tracks.get(key)
            if track is None:
                track = tracks[key] = _GpuTrack(key, gpu.index, str(gpu.name), str(gpu.uuid))
                track.series = {name: _Series() for name, *_ in GPU_METRICS}
                labels[key] = label
            track.times.append(stamp)
            for series, value in zip(track.series.values(), _GPU_VALUES(gpu), strict=True):
                if (value.__class__ is float or value.__class__ is int) and value - value == 0:
                    series.values.append(value)  # a finite number: the common case, kept fast
                else:
                    _append(series, value)
            energy = _number(gpu.energy_j)
            if not math.isnan(energy):
                if track.energy_first_j is None:
                    track.energy_first_j = energy
                elif track.energy_last_j is not None and energy < track.energy_last_j:
                    track.energy_ok = False
                track.energy_last_j = energy
            reasons = gpu.throttle_reasons
            if isinstance(reasons, list):
                throttle_reads[key] = throttle_reads.get(key, 0) + 1
                for reason in reasons:
                    throttles.setdefault((key, str(reason)), _Seen()).note(stamp)
            if isinstance(gpu.processes, list):
                for process in gpu.processes:
                    _note_process(processes, key, process, stamp)
    if len(host_times) == 0:
        raise BadInputError(f"{source}: telemetry log holds no samples with a timestamp")
    if out_of_order:
        warnings.append(f"{source}: {out_of_order} samples were out of time order")
    start = min(host_times)
    end = max(host_times)
    interval = _median_interval(host_times)
    gap_s = max(2.0, 2.5 * (interval or 1.0))  # a longer step is drawn as a gap (a rotated set's hole)
    gpus = [
        GpuKey(key=track.key, label=labels[track.key], index=track.index, name=track.name, uuid=track.uuid)
        for track in sorted(tracks.values(), key=lambda t: natural_key(t.key))
    ]
    stats: list[Stat] = []
    unavailable: list[Missing] = []
    lines: dict[str, list[Line]] = {}
    for name, label, unit, scale in HOST_METRICS:
        series = host_series[name]
        _collect(stats, unavailable, Missing(key="host", subject="Host", metric=name, label=label), unit, scale, series)
        lines.setdefault(f"host:{name}", []).append(_line("host", "Host", series, host_times, start, scale, gap_s))
    for track in (tracks[str(gpu.key)] for gpu in gpus):
        for name, label, unit, scale in GPU_METRICS:
            series = track.series[name]
            where = Missing(key=track.key, subject=labels[track.key], metric=name, label=label)
            _collect(stats, unavailable, where, unit, scale, series)
            lines.setdefault(f"gpu:{name}", []).append(
                _line(track.key, labels[track.key], series, track.times, start, scale, gap_s)
            )
    panels = []
    for panel_id, title, unit, members in PANELS:
        panel_lines = [
            msgspec.structs.replace(line, metric=name, style=style)
            for scope, name, style in members
            for line in lines.get(f"{scope}:{name}", [])
            if any(value is not None for value in line.v)
        ]
        if panel_lines:
            panels.append(Panel(id=panel_id, title=title, unit=unit, lines=panel_lines))
    finite_costs = [cost for cost in costs if not math.isnan(cost)]
    return Telemetry(
        source=source, start=start, end=end, duration_s=end - start, samples=len(host_times), interval_s=interval,
        mean_sample_cost_s=(sum(finite_costs) / len(finite_costs)) if finite_costs else None,
        hostnames=list(hostnames), driver=driver, simulated=simulated, gpu_unavailable=gpu_unavailable, gpus=gpus,
        stats=stats, unavailable=unavailable, energy=[_energy(tracks[str(gpu.key)], str(gpu.label)) for gpu in gpus],
        panels=panels, processes=_process_rows(processes, labels),
        throttling=[
            ThrottleRow(key=key, subject=labels[key], reason=reason, samples=seen.samples,
                        of_samples=throttle_reads.get(key, 0), first_s=seen.first_s - start, last_s=seen.last_s - start)
            for (key, reason), seen in sorted(throttles.items(), key=lambda item: (natural_key(item[0][0]), item[0][1]))
        ],
        alerts=[
            AlertRow(level=level, kind=kind, subject=subject, samples=seen.samples, first_s=seen.first_s - start,
                     last_s=seen.last_s - start, message=seen.message)
            for (level, kind, subject), seen in sorted(
                alerts.items(), key=lambda item: (-_level_rank(item[0][0]), -item[1].samples, natural_key(item[0][2]))
            )
        ],
    )  # fmt: skip


#: The GPU_METRICS values of a GPU sample, in order (one call instead of a getattr each).
_GPU_VALUES = operator.attrgetter(*(name for name, *_ in GPU_METRICS))


def _append(series: _Series, value: object) -> None:
    if isinstance(value, Unavailable):
        if series.reason is None:
            series.reason = value.to_json()
        series.values.append(math.nan)
    else:
        series.values.append(_number(value))


def _collect(
    stats: list[Stat], unavailable: list[Missing], where: Missing, unit: str, scale: float, series: _Series
) -> None:
    """A :class:`Stat` of ``series`` (in display units), or ``where`` with the reason when it never had a value."""
    import numpy as np

    values = [value for value in series.values if not math.isnan(value)]
    if not values:
        if series.reason is not None:
            where.reason = series.reason
            unavailable.append(where)
        return
    data = np.asarray(values, dtype=float) * scale
    stats.append(
        Stat(key=where.key, subject=where.subject, metric=where.metric, label=where.label, unit=unit,
             n=int(data.size), mean=float(data.mean()), p50=float(np.percentile(data, 50)),
             p95=float(np.percentile(data, 95)), max=float(data.max()))
    )  # fmt: skip


def _line(
    key: str, label: str, series: _Series, times: array[float], start: float, scale: float, gap_s: float = math.inf
) -> Line:
    """A chart line: times in seconds since the log's start, values in display units, gaps None,
    downsampled to at most :data:`MAX_POINTS_PER_LINE` points keeping each bucket's min and max;
    where two samples are more than ``gap_s`` apart, a None point just after the first breaks the
    line (while the line has room for it)."""
    count = len(times)
    if count <= MAX_POINTS_PER_LINE:
        indices = list(range(count))
    else:
        indices = _bucket_extremes(series.values, count, MAX_POINTS_PER_LINE // 2)
    t = [round(times[i] - start, 3) for i in indices]
    v = [None if math.isnan(series.values[i]) else round(series.values[i] * scale, 6) for i in indices]
    room = MAX_POINTS_PER_LINE - len(t)
    if room > 0 and count > 1 and _has_gap(times, gap_s):
        t, v = _break_gaps(t, v, times, indices, gap_s, room)
    return Line(key=key, label=label, t=t, v=v)


def _bucket_extremes(values: array[float], count: int, buckets: int) -> list[int]:
    """Per bucket ``[b * count // buckets, (b + 1) * count // buckets)``: the index of its lowest
    value (the first such) and of its highest (the last such), in order, NaN left out; a bucket
    of only NaN gives its first index."""
    import numpy as np

    data = np.frombuffer(values, dtype=np.float64)[:count]
    bounds = (np.arange(buckets + 1) * count) // buckets
    starts = bounds[:-1]
    owner = np.repeat(np.arange(buckets), np.diff(bounds))
    missing = np.isnan(data)
    lows = np.where(missing, np.inf, data)
    highs = np.where(missing, -np.inf, data)
    low_at = np.flatnonzero(lows == np.minimum.reduceat(lows, starts)[owner])
    first_low = low_at[np.unique(owner[low_at], return_index=True)[1]]  # the first per bucket
    high_at = np.flatnonzero(highs == np.maximum.reduceat(highs, starts)[owner])[::-1]
    last_high = high_at[np.unique(owner[high_at], return_index=True)[1]]  # the last per bucket
    empty = np.logical_and.reduceat(missing, starts)
    indices: list[int] = []
    for bucket, (low, high) in enumerate(zip(first_low.tolist(), last_high.tolist(), strict=True)):
        if empty[bucket]:
            indices.append(int(starts[bucket]))
        elif low == high:
            indices.append(low)
        else:
            indices.extend((low, high) if low < high else (high, low))
    return indices


def _has_gap(times: array[float], gap_s: float) -> bool:
    """True when two consecutive ``times`` are more than ``gap_s`` apart."""
    import numpy as np

    if gap_s == math.inf or len(times) < 2:
        return False
    return bool((np.diff(np.frombuffer(times, dtype=np.float64)) > gap_s).any())


def _break_gaps(
    t: list[float], v: list[float | None], times: array[float], indices: list[int], gap_s: float, room: int
) -> tuple[list[float], list[float | None]]:
    """``t`` and ``v`` with a None point after each sample followed by a gap longer than ``gap_s``
    (at most ``room`` of them)."""
    out_t: list[float] = []
    out_v: list[float | None] = []
    for position, index in enumerate(indices):
        out_t.append(t[position])
        out_v.append(v[position])
        following = indices[position + 1] if position + 1 < len(indices) else None
        if following is not None and room > 0 and times[following] - times[index] > gap_s:
            nearest = times[index + 1] if index + 1 < len(times) else times[following]
            if nearest - times[index] > gap_s:
                out_t.append(round(t[position] + gap_s / 2, 3))
                out_v.append(None)
                room -= 1
    return out_t, out_v


def _energy(track: _GpuTrack, label: str) -> Energy:
    """Energy over the log: the cumulative counter's difference when it is there and never went
    backwards, else power integrated over time (trapezoids; gaps longer than 5 intervals skipped)."""
    duration = (max(track.times) - min(track.times)) if len(track.times) > 1 else 0.0  # a clock may step back
    joules: float | None
    if track.energy_ok and track.energy_first_j is not None and track.energy_last_j is not None and duration > 0:
        joules = track.energy_last_j - track.energy_first_j
        method = "energy counter"
    else:
        joules, method = _integrate_power(track), "integrated power"
    # a mean over less than MIN_MAGNITUDE seconds (timestamps a clock got wrong) is no mean power
    mean_power = (joules / duration) if (joules is not None and duration >= MIN_MAGNITUDE) else None
    return Energy(
        key=track.key, subject=label, energy_j=joules, method=method if joules is not None else None,
        duration_s=duration, mean_power_w=mean_power,
    )  # fmt: skip


def _integrate_power(track: _GpuTrack) -> float | None:
    power = track.series["power_w"].values
    times = track.times
    limit = 5 * (_median_interval(times) or math.inf)
    total = 0.0
    used = False
    for i in range(1, len(times)):
        a, b = power[i - 1], power[i]
        step = times[i] - times[i - 1]
        if math.isnan(a) or math.isnan(b) or step <= 0 or step > limit:
            continue
        total += 0.5 * (a + b) * step
        used = True
    return total if used else None


def _median_interval(times: array[float]) -> float | None:
    if len(times) < 2:
        return None
    steps = sorted(b - a for a, b in zip(times, times[1:]) if b > a)
    return steps[len(steps) // 2] if steps else None


def _note_process(
    processes: dict[tuple[str, int, str], ProcessRow], key: str, process: GpuProcessSample, stamp: float
) -> None:
    pid = getattr(process, "pid", None)
    if not isinstance(pid, int):
        return
    name = process.name if isinstance(process.name, str) else None
    memory = _number(process.gpu_memory_bytes)
    sm = _number(process.sm_percent)
    entry = processes.get((key, pid, name or ""))
    if entry is None:
        if len(processes) >= 10_000:
            return
        entry = processes[(key, pid, name or "")] = ProcessRow(
            key=key, pid=pid, name=name, user=process.user if isinstance(process.user, str) else None,
            kind=str(getattr(process, "kind", "")), first_seen=stamp, last_seen=stamp,
        )  # fmt: skip
    if not math.isnan(memory):
        entry.max_gpu_memory_bytes = max(memory, entry.max_gpu_memory_bytes or 0.0)
    if not math.isnan(sm):
        entry.max_sm_percent = max(sm, entry.max_sm_percent or 0.0)
    entry.first_seen = stamp if entry.first_seen is None else min(entry.first_seen, stamp)
    entry.last_seen = stamp if entry.last_seen is None else max(entry.last_seen, stamp)


def _process_rows(processes: dict[tuple[str, int, str], ProcessRow], labels: dict[str, str]) -> list[ProcessRow]:
    ordered = sorted(
        processes.items(), key=lambda kv: (-(kv[1].max_gpu_memory_bytes or 0.0), natural_key(kv[0][0]), kv[0][1])
    )
    rows = [row for _, row in ordered[:MAX_PROCESSES]]
    for row in rows:
        row.subject = labels.get(str(row.key), row.key)
    return rows
