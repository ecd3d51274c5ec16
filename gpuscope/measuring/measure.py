"""``gpuscope.measure(fn, *args, ...)``: time a callable with the probe timing rules, count its
FLOPs (torch's FlopCounterMode) and a lower bound on its bytes, record the DRAM bytes the GPU
actually moved where GPM telemetry is available, and append it to a results file as a workload
that ``gpuscope roofline`` draws as a point.

torch is imported only when :func:`measure` runs.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from gpuscope.errors import GpuscopeError, UsageError
from gpuscope.fileio import OutputLock, check_output, write_json_atomic
from gpuscope.measuring.counting import (
    BYTES_RULE,
    FLOP_COUNTING_RULE,
    POINTWISE_RULE,
    CountResult,
    FlopFormula,
    count_call,
)
from gpuscope.measuring.dram import DramCollector, match_gpu, measure_dram_bytes
from gpuscope.measuring.timing import TimingResult, cpu_clock, cuda_clock, time_callable
from gpuscope.probing.environment import device_info, parse_device, system_info, torch_device, torch_device_name
from gpuscope.results import empty_results, parse_results
from gpuscope.roofline.model import PerCallRates
from gpuscope.roofline.units import format_bytes, format_count, format_intensity, format_si
from gpuscope.schema.core import timestamp_now_s
from gpuscope.schema.files import read_bytes
from gpuscope.schema.results import Device, Results, System, Workload
from gpuscope.telemetry.cpuinfo import cpu_info
from gpuscope.telemetry.energy import EnergyResult, energy_fields, energy_per_call
from gpuscope.telemetry.values import Reason, Unavailable

if TYPE_CHECKING:
    import torch

__all__ = ["COUNTED_CALL", "measure", "MeasuredWorkload", "UncountedOpsWarning", "append_workload"]


#: The call whose FLOPs and bytes :func:`measure` counts: the first warm one (call 1 is discarded,
#: as the timing discards it).
COUNTED_CALL = 2


class UncountedOpsWarning(UserWarning):
    """Ops ran that have no FLOP formula in torch.utils.flop_counter: their FLOPs are not counted."""


@dataclass
class MeasuredWorkload(PerCallRates):
    """The result of :func:`measure`: one call's FLOPs and bytes and the timing of many calls."""

    name: str
    device: str
    host: str
    counts: CountResult
    timing: TimingResult
    flops: float
    bytes: float
    bytes_rule: str
    dtype: str | None
    dram_bytes_measured: float | Unavailable
    device_name: str | None = None
    results_path: str | None = None
    notes: list[str] = field(default_factory=list)
    energy: EnergyResult | None = None  # of one call; None when not measured
    counted_call: int | None = COUNTED_CALL  # which call FLOPs and bytes were counted on (1 = the first)

    @property
    def time_s(self) -> float:
        """Median time of one call."""
        return self.timing.median_s

    def to_workload(self) -> Workload:
        """The ``workloads`` entry of a results file."""
        dram, timing, counts = self.dram_bytes_measured, self.timing, self.counts
        return Workload(
            name=self.name,
            device=self.device,
            host=self.host,
            device_name=self.device_name,
            flops=self.flops,
            bytes=self.bytes,
            bytes_rule=self.bytes_rule,
            read_bytes=counts.read_bytes,
            written_bytes=counts.written_bytes,
            flop_counting_rule=FLOP_COUNTING_RULE,
            pointwise_rule=POINTWISE_RULE,
            flops_by_dtype=dict(counts.flops_by_dtype),
            uncounted_ops=dict(counts.uncounted_ops),
            counted_call=self.counted_call,
            dtype=self.dtype,
            time_s=timing.median_s,
            time_p10_s=timing.p10_s,
            time_p90_s=timing.p90_s,
            n=timing.n,
            statistic=timing.statistic,
            samples_s=list(timing.samples_s),
            reps_per_sample=timing.reps_per_sample,
            timer=timing.timer,
            timer_resolution_s=timing.timer_resolution_s,
            warmup_samples=timing.warmup_samples,
            cache_state=timing.cache_state,
            warm=timing.cache_state == "warm",
            flop_per_s=self.flop_per_s,
            bytes_per_s=self.bytes / self.time_s if self.time_s > 0 else None,
            intensity_flop_per_byte=self.intensity_flop_per_byte,
            dram_bytes_measured=None if isinstance(dram, Unavailable) else dram,
            dram_bytes_unavailable=dram.to_json() if isinstance(dram, Unavailable) else None,
            dram_intensity_flop_per_byte=self.dram_intensity_flop_per_byte,
            source="measure",
            notes=[*self.notes, *timing.notes, *counts.notes],
            created=timestamp_now_s(),
            **energy_fields(self.energy, self.flops),  # energy_j per call, or why not (never 0 J)
        )

    def summary_lines(self) -> list[str]:
        """A short human summary (what ``gpuscope measure`` prints)."""
        t = self.timing
        dram = self.dram_bytes_measured
        lines = [
            f"{self.name} on {self.device}{f' ({self.device_name})' if self.device_name else ''}",
            f"  time      {format_si(t.median_s, 's')} median  "
            f"[p10 {format_si(t.p10_s, 's')}, p90 {format_si(t.p90_s, 's')}]"
            f"  N={t.n} x {t.reps_per_sample} calls, {t.timer}, {t.cache_state}",
            f"  FLOPs     {format_count(self.flops)}  ({self.dtype or 'dtype unknown'})  "
            f"-> {format_si(self.flop_per_s, 'FLOP/s')}",
            f"  bytes     {format_bytes(self.bytes)} lower bound (read {format_bytes(self.counts.read_bytes)},"
            f" written {format_bytes(self.counts.written_bytes)})  "
            f"-> {format_intensity(self.intensity_flop_per_byte)} FLOP/byte",
        ]
        if self.counted_call is not None:
            lines.append(f"  counted   on call {self.counted_call} (warm; call 1 discarded, as the timing does)")
        if isinstance(dram, Unavailable):
            lines.append(f"  DRAM      not measured: {dram.detail or dram.reason.value}")
        else:
            lines.append(
                f"  DRAM      {format_bytes(dram)} moved per call (GPM)  "
                f"-> {format_intensity(self.dram_intensity_flop_per_byte)} FLOP/DRAM byte"
            )
        for note in [*self.notes, *t.notes, *self.counts.notes]:
            lines.append(f"  note: {note}")
        if self.results_path:
            lines.append(f"  appended to {self.results_path}")
        return lines


def _flush_function(device: torch.device) -> Callable[[], None]:
    """Evicts the caches: writes a buffer twice the last-level cache (GPU L2 or CPU LLC)."""
    import torch

    if device.type == "cuda":
        l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 64 * 2**20
        buffer = torch.empty(2 * l2_bytes, dtype=torch.uint8, device=device)
    else:
        llc_bytes = cpu_info().last_level_cache_bytes or 64 * 2**20
        buffer = torch.empty(min(2 * llc_bytes, 2**30), dtype=torch.uint8)
    state = {"value": 0}

    def flush() -> None:
        state["value"] = (state["value"] + 1) % 255
        buffer.fill_(state["value"])
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # done before the timed stream records its start event

    return flush


# --- results file ------------------------------------------------------------------------------


#: A results file kept as written, field by field, with lists to which entries are appended.
_KeptDocument = dict[str, "msgspec.Raw | list[msgspec.Raw | Device | Workload]"]


def _entries(value: object) -> list[msgspec.Raw | Device | Workload]:
    """The entries of one of a results file's lists, each kept as written (``msgspec.Raw``)."""
    if isinstance(value, msgspec.Raw):
        return list(msgspec.json.decode(value, type=list[msgspec.Raw]))
    return []


def append_workload(path: str | os.PathLike[str], workload: Workload, device: Device, system: System) -> None:
    """Append ``workload`` to the results file at ``path`` (created when absent, with ``system``),
    adding ``device`` when the file does not list that device on that host yet. An existing file
    keeps every field as written. Atomic: a reader never sees a half-written file. Read, change and
    write happen under the file's lock (processes appending to one file wait for each other: none
    loses another's workload). Raises :class:`BadInputError` for an existing file that is not results."""
    target = Path(path)
    check_output(target, allow_inputs=True)
    with OutputLock(target, wait_s=300.0):
        document: Results | _KeptDocument
        if target.exists() and target.stat().st_size > 0:  # empty: the lock's new file, nothing to keep
            raw = read_bytes(target, "a results JSON file")
            known = {(entry.device, entry.host) for entry in parse_results(raw, str(target)).devices}
            kept: _KeptDocument = dict(msgspec.json.decode(raw, type=dict[str, msgspec.Raw]))  # every field as written
            document = kept
            fresh = [device] if (device.device, device.host) not in known else []
            kept["devices"] = [*_entries(kept.get("devices")), *fresh]
            kept["workloads"] = [*_entries(kept.get("workloads")), workload]
        elif target.parent and not target.parent.exists():
            raise UsageError(f"{path}: folder {target.parent} does not exist")
        else:
            document = empty_results(system=system, devices=[device], workloads=[workload])
        try:
            write_json_atomic(target, document, replace_input=True)
        except OSError as exc:  # disk full, I/O error: the run failed, the command line was fine (exit 1)
            raise GpuscopeError(f"{path}: cannot write ({exc.strerror or exc}); nothing was written") from None


# --- the public function -----------------------------------------------------------------------


def measure(
    fn: Callable[..., object],
    *args: object,
    name: str | None = None,
    device: str | torch.device | None = None,
    results: str | os.PathLike[str] | None = None,
    warm: bool = True,
    kwargs: dict[str, object] | None = None,
    flops: float | None = None,
    bytes_moved: float | None = None,
    flop_formulas: dict[object, FlopFormula] | None = None,
    target_sample_s: float = 0.02,
    samples: int = 15,
    max_time_s: float = 10.0,
    warmup_max_s: float = 2.0,
    telemetry: bool = True,
    dram_window_s: float = 1.0,
    collector_factory: Callable[[], DramCollector] | None = None,
    energy: bool = True,
) -> MeasuredWorkload:
    """Time ``fn(*args, **kwargs)`` and place it on the roofline.

    - ``name``: the point's label (default: the function's name); ``device``: ``"cpu"``,
      ``"cuda"``, ``"cuda:1"`` (default: the device of the first tensor argument, else CPU).
    - ``results``: a results file to append the workload to (created when absent); None keeps it
      in memory only.
    - ``warm=True`` times with warm caches and labels the result "warm"; ``warm=False`` flushes
      the last-level cache before each sample.
    - FLOPs: counted by torch's FlopCounterMode on one warm call (call 2: call 1 is discarded, as
      the timing discards it; recorded as ``counted_call``); ops without a FLOP formula raise an
      :class:`UncountedOpsWarning` naming them. ``flops`` overrides the count; ``flop_formulas``
      adds formulas. Bytes: a lower bound (distinct tensors read and written, see
      :data:`gpuscope.measuring.counting.BYTES_RULE`); ``bytes_moved`` overrides it.
    - Timing (the probe harness, :mod:`gpuscope.probing.timing`): first call discarded, warm-up
      until the rate stops rising (at most ``warmup_max_s``), then the median of ``samples``
      samples (p10, p90, N), each at least 20 timer ticks and ``target_sample_s``; the number of
      samples shrinks (to no fewer than 3) to fit ``max_time_s``.
    - ``telemetry``: on a GPU with GPM (Hopper and newer), run for ``dram_window_s`` more while
      sampling DRAM bandwidth and record the DRAM bytes moved per call.
    - ``energy``: where the device has an energy counter (NVML on NVIDIA GPUs, RAPL on CPUs), run
      about 1 s more between two reads of it and record the joules of one call.

    Whatever ``fn`` raises (``SystemExit`` and ``KeyboardInterrupt`` included) propagates
    unchanged and ``results`` is left as it was: it is written once, after the last call.
    ``results`` is resolved when ``measure`` starts (``fn`` may change directory). The command
    line turns what ``fn`` raised into one line, exit 1.
    """
    import torch

    # The file named now, relative to the directory now: ``fn`` may change directory.
    results_path = None if results is None else os.path.abspath(results)
    kwargs = dict(kwargs or {})
    label = name or getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    resolved = torch_device(device, (args, kwargs))

    def call() -> object:
        return fn(*args, **kwargs)

    with contextlib.ExitStack() as stack:
        if resolved.type == "cuda":
            stack.enter_context(torch.cuda.device(resolved))  # the caller's current device is kept
        # Call 1 is discarded, as the timing discards it: it may build what later calls only read
        # (a cached model, its input), and bytes read are counted only for tensors that exist
        # before the counted call. FLOPs and bytes are counted on call 2, a warm call.
        call()
        if resolved.type == "cuda":
            torch.cuda.synchronize(resolved)
        from gpuscope.measuring.eager import eager_counting

        with eager_counting():  # a torch.compile'd fn stays compiled (gpuscope.profiling.compiled)
            counts, _ = count_call(fn, args, kwargs, flop_formulas=flop_formulas)
        # A warm, uncounted call sizes the sample budget (the counted call is many times slower).
        started = time.perf_counter()
        call()
        if resolved.type == "cuda":
            torch.cuda.synchronize(resolved)
        first_call_s = time.perf_counter() - started
        if counts.uncounted_ops and flops is None:
            listed = ", ".join(f"{op} x{calls}" for op, calls in counts.uncounted_ops.items())
            warnings.warn(
                f"gpuscope.measure({label}): ops with no FLOP formula in torch.utils.flop_counter ran and "
                f"their FLOPs are not counted: {listed} (pass flops= to give the total)",
                UncountedOpsWarning,
                stacklevel=3,
            )
        clock = cuda_clock(resolved) if resolved.type == "cuda" else cpu_clock()
        flush = None if warm else _flush_function(resolved)
        timing = time_callable(
            call,
            clock=clock,
            flush=flush,
            target_sample_s=target_sample_s,
            samples=samples,
            max_time_s=max_time_s,
            per_call_estimate_s=first_call_s,
            warmup_max_s=warmup_max_s,
        )
        notes: list[str] = []
        dram: float | Unavailable
        if resolved.type != "cuda":
            dram = Unavailable(
                Reason.NOT_APPLICABLE, "DRAM traffic is measured on NVIDIA GPUs with GPM (Hopper and newer) only"
            )
        elif not telemetry:
            dram = Unavailable(Reason.NOT_APPLICABLE, "telemetry turned off")
        else:
            dram = measure_dram_bytes(
                call,
                timing.median_s,
                dram_window_s,
                collector_factory,
                synchronize=lambda: torch.cuda.synchronize(resolved),
                select_gpu=lambda sample: match_gpu(sample, resolved),
                device_text=str(resolved),
            )
        energy_result = None
        if energy:
            energy_result, _ = energy_per_call(
                call,
                str(resolved) if resolved.type == "cuda" else "cpu",
                per_call_s=timing.median_s,
                synchronize=(lambda: torch.cuda.synchronize(resolved)) if resolved.type == "cuda" else (lambda: None),
            )
    total_flops = float(flops) if flops is not None else float(counts.flops)
    total_bytes = float(bytes_moved) if bytes_moved is not None else float(counts.bytes)
    if flops is not None:
        notes.append("FLOPs given by the caller")
    if bytes_moved is not None:
        notes.append("bytes given by the caller")
    device_text = str(resolved) if resolved.type == "cuda" else "cpu"
    workload = MeasuredWorkload(
        name=label,
        device=device_text,
        host=socket.gethostname(),
        counts=counts,
        timing=timing,
        flops=total_flops,
        bytes=total_bytes,
        bytes_rule="given by the caller" if bytes_moved is not None else BYTES_RULE,
        dtype=counts.dtype,
        dram_bytes_measured=dram,
        device_name=torch_device_name(resolved),
        notes=notes,
        energy=energy_result,
    )
    if results is not None:
        spec = parse_device(device_text)  # the probe's device entry and system: one identity
        append_workload(results_path or results, workload.to_workload(), device_info(spec), system_info(spec))
        workload.results_path = str(results)
    return workload
