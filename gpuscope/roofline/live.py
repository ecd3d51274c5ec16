"""Where whatever runs on a GPU sits on the roofline right now, estimated from telemetry alone
(GPM activity counters, Hopper and newer) - labelled "estimated from activity counters".

Achieved FLOP/s is the sum over pipes of (activity fraction x that pipe's dense datasheet peak),
scaled by SM clock / max SM clock when both are known (activity counts busy cycles; the peaks
are at the boost clock). Assumptions, stated because the counters do not say which dtype ran:

- HMMA (half-precision tensor pipe) runs at the BF16/FP16 tensor peak; TF32 also issues on
  HMMA at half that rate, so TF32 work is over-estimated up to 2x;
- IMMA (integer tensor pipe) runs at the INT8 peak (= the FP8 peak on Hopper and Blackwell);
- DFMA (FP64 tensor pipe) runs at the FP64 tensor peak;
- FP64, FP32 and FP16 pipe activity run at their non-tensor peaks (FP16 non-tensor: the
  datasheet figure, else 2 x FP32);
- with only "any tensor" activity (no per-pipe split), all of it counts as HMMA.

DRAM bytes/s come from ``dram_bandwidth_bytes_per_s`` (GPM DRAM_BW_UTIL x theoretical bandwidth).

The device is named by its CUDA index (``cuda:N``) as this process's ``CUDA_VISIBLE_DEVICES`` and
PCI order give it (:func:`cuda_device_name`, through :mod:`gpuscope.telemetry.nvml.mapping`), not
by the NVML index, which need not match; a GPU CUDA cannot see here is ``nvml:N``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gpuscope.roofline.datasheet import GpuDatasheet, match_gpu_datasheet
from gpuscope.roofline.model import DeviceKey, Point
from gpuscope.telemetry.nvml.mapping import cuda_index_of
from gpuscope.telemetry.records import GpuSample
from gpuscope.telemetry.values import Metric, Reason, Unavailable

__all__ = ["LIVE_LABEL", "PipePeaks", "LiveEstimate", "pipe_peaks", "estimate_live_position", "cuda_device_name"]

LIVE_LABEL = "estimated from activity counters"

ASSUMPTIONS = (
    "HMMA activity at the BF16/FP16 tensor peak (TF32 work over-estimated up to 2x)",
    "IMMA activity at the INT8/FP8 tensor peak",
    "DFMA activity at the FP64 tensor peak",
    "FP64/FP32/FP16 pipe activity at their non-tensor peaks",
    "scaled by SM clock / max SM clock when both are known",
)


_PIPE_DTYPES = {
    "hmma": "bf16",
    "tensor": "bf16",
    "imma": "fp8",
    "dfma": "fp64",
    "fp64": "fp64",
    "fp32": "fp32",
    "fp16": "fp16",
}


@dataclass(frozen=True)
class PipePeaks:
    """Peak rate (FLOP/s, dense) of each pipe the GPM activity counters report."""

    hmma_flop_per_s: float
    imma_op_per_s: float | None
    dfma_flop_per_s: float | None
    fp64_flop_per_s: float | None
    fp32_flop_per_s: float | None
    fp16_flop_per_s: float | None
    source: str  # e.g. "H100 SXM datasheet"


def pipe_peaks(sheet: GpuDatasheet) -> PipePeaks | None:
    """The per-pipe peaks of a datasheet entry (None without a BF16/FP16 tensor peak)."""
    compute = sheet.compute_flop_per_s
    hmma = compute.get("bf16") or compute.get("fp16")
    if not hmma:
        return None
    fp32 = compute.get("fp32")
    return PipePeaks(
        hmma_flop_per_s=hmma,
        imma_op_per_s=compute.get("int8") or compute.get("fp8"),
        dfma_flop_per_s=compute.get("fp64.tensor"),
        fp64_flop_per_s=compute.get("fp64"),
        fp32_flop_per_s=fp32,
        fp16_flop_per_s=sheet.fp16_vector_flop_per_s or (2 * fp32 if fp32 else None),
        source=f"{sheet.label} datasheet",
    )


@dataclass(frozen=True)
class LiveEstimate:
    """An estimated roofline position of one GPU at one instant."""

    gpu_index: int
    device: str  # "cuda:0" (CUDA index, see cuda_device_name)
    name: str
    flop_per_s: float
    dram_bytes_per_s: float
    contributions_flop_per_s: dict[str, float]
    peaks_source: str
    clock_scale: float | None = None
    label: str = LIVE_LABEL
    assumptions: tuple[str, ...] = field(default=ASSUMPTIONS)

    @property
    def dominant_dtype(self) -> str | None:
        """Roof name of the pipe doing most of the work (HMMA -> ``"bf16"``, DFMA -> ``"fp64"``,
        IMMA -> ``"fp8"``), so the point is placed against that roof; None when idle."""
        if not self.contributions_flop_per_s or max(self.contributions_flop_per_s.values()) <= 0:
            return None
        pipe = max(self.contributions_flop_per_s.items(), key=lambda item: item[1])[0]
        return _PIPE_DTYPES.get(pipe.split()[0], None)

    @property
    def intensity_flop_per_byte(self) -> float | None:
        """FLOP per DRAM byte; None when no DRAM traffic was seen."""
        return self.flop_per_s / self.dram_bytes_per_s if self.dram_bytes_per_s > 0 else None

    def to_point(self, host: str | None = None, rank: int | None = None, name: str | None = None) -> Point:
        """A chart point for one second of activity (``estimated=True``)."""
        return Point(
            name=name or f"{self.device} now ({self.label})",
            key=DeviceKey(host=host, rank=rank, device=self.device),
            flops=self.flop_per_s,
            bytes=self.dram_bytes_per_s,
            time_s=1.0,
            dtype=self.dominant_dtype,
            source="live",
            estimated=True,
            note=self.label,
        )


def cuda_device_name(gpu: GpuSample, gpus: Sequence[GpuSample] | None = None) -> str:
    """``cuda:N`` for NVML sample ``gpu`` among all of ``gpus`` (one telemetry sample's GPUs), as
    CUDA numbers it in this process; ``nvml:N`` when CUDA cannot see it. Without ``gpus`` only
    ``gpu`` is known: NVML index taken as the CUDA index (the old assumption)."""
    if gpus is None:
        return f"cuda:{gpu.index}"
    index = cuda_index_of(gpu, gpus)
    return f"nvml:{gpu.index}" if index is None else f"cuda:{index}"


def _value(metric: Metric[float] | None) -> float | None:
    if metric is None or isinstance(metric, Unavailable):
        return None
    return float(metric)


def estimate_live_position(
    sample: GpuSample, peaks: PipePeaks | None = None, *, gpus: Sequence[GpuSample] | None = None
) -> LiveEstimate | Unavailable:
    """The estimated position of the work on the GPU of ``sample`` (a :class:`GpuSample`), or
    :class:`Unavailable` saying why (no GPM counters, unknown GPU, idle, GPU lost). Pass all of
    the telemetry sample's ``gpus`` so the device gets its CUDA name (:func:`cuda_device_name`)."""
    if getattr(sample, "state", "ok") != "ok":
        return Unavailable(Reason.GPU_LOST, f"GPU {sample.index} is {sample.state}")
    if peaks is None:
        sheet = match_gpu_datasheet(sample.name)
        if sheet is None:
            return Unavailable(Reason.NOT_SUPPORTED, f"no datasheet peaks for {sample.name!r}")
        peaks = pipe_peaks(sheet)
        if peaks is None:
            return Unavailable(Reason.NOT_SUPPORTED, f"no tensor peak for {sample.name!r}")
    pipes: list[tuple[str, Metric[float], float | None]] = [
        ("hmma", sample.hmma_tensor_activity_percent, peaks.hmma_flop_per_s),
        ("imma", sample.imma_tensor_activity_percent, peaks.imma_op_per_s),
        ("dfma", sample.dfma_tensor_activity_percent, peaks.dfma_flop_per_s),
        ("fp64", sample.fp64_activity_percent, peaks.fp64_flop_per_s),
        ("fp32", sample.fp32_activity_percent, peaks.fp32_flop_per_s),
        ("fp16", sample.fp16_activity_percent, peaks.fp16_flop_per_s),
    ]
    tensor_split = any(_value(metric) is not None for name, metric, _ in pipes[:3])
    if not tensor_split and _value(sample.tensor_activity_percent) is not None:
        pipes[0] = ("tensor (any, as HMMA)", sample.tensor_activity_percent, peaks.hmma_flop_per_s)
    reasons: list[Unavailable] = []
    contributions: dict[str, float] = {}
    for name, metric, peak in pipes:
        if isinstance(metric, Unavailable):
            reasons.append(metric)
            continue
        value = _value(metric)
        if value is None or not peak:
            continue
        contributions[name] = max(0.0, value) / 100.0 * peak
    if not contributions:
        if isinstance(sample.tensor_activity_percent, Unavailable):
            reasons.insert(0, sample.tensor_activity_percent)
        # A specific reason (no permission, not supported) says more than "not collected".
        specific = [reason for reason in reasons if reason.reason != Reason.ERROR]
        reason = (specific or reasons or [Unavailable(Reason.NOT_SUPPORTED, "no pipe activity counters")])[0]
        return Unavailable(
            reason.reason,
            f"activity counters unavailable ({reason.detail or reason.reason.value}); needs GPM on Hopper or newer",
        )
    dram = _value(sample.dram_bandwidth_bytes_per_s)
    if dram is None:
        percent, peak_bytes = _value(sample.dram_bandwidth_percent_of_peak), _value(sample.dram_peak_bytes_per_s)
        if percent is not None and peak_bytes is not None:
            dram = percent / 100.0 * peak_bytes
    if dram is None:
        missing = sample.dram_bandwidth_bytes_per_s
        detail = missing.detail if isinstance(missing, Unavailable) else "missing"
        why = missing.reason if isinstance(missing, Unavailable) else Reason.ERROR
        return Unavailable(why, f"DRAM bandwidth unavailable ({detail})")
    clock, clock_max = _value(sample.sm_clock_mhz), _value(sample.sm_clock_max_mhz)
    scale = clock / clock_max if clock is not None and clock_max else None
    if scale is not None:
        contributions = {name: rate * scale for name, rate in contributions.items()}
    flop_per_s = sum(contributions.values())
    if flop_per_s <= 0 and dram <= 0:
        return Unavailable(Reason.NOT_APPLICABLE, "GPU idle: no pipe activity and no DRAM traffic")
    return LiveEstimate(
        gpu_index=sample.index,
        device=cuda_device_name(sample, gpus),
        name=sample.name,
        flop_per_s=flop_per_s,
        dram_bytes_per_s=max(0.0, dram),
        contributions_flop_per_s=contributions,
        peaks_source=peaks.source,
        clock_scale=scale,
    )
