"""Live roofline position from GPM activity counters (Hopper and newer), and why not elsewhere."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.roofline import ceiling, results_document, typed
from support.samples import make_gpu_sample

from gpuscope.roofline.live import LIVE_LABEL, estimate_live_position
from gpuscope.roofline.loading import build_model
from gpuscope.roofline.model import place_point
from gpuscope.telemetry.values import Reason, Unavailable

H100_BF16 = 989e12
NOT_SUPPORTED = Unavailable(Reason.NOT_SUPPORTED, "GPM metrics need Hopper or newer")


def test_any_tensor_activity_counts_at_the_bf16_peak():
    sample = make_gpu_sample()  # H100 SXM, 60 % tensor activity, 1.675 TB/s DRAM, max clock
    estimate = estimate_live_position(sample)
    assert not isinstance(estimate, Unavailable)
    assert estimate.flop_per_s == pytest.approx(0.6 * H100_BF16)
    assert estimate.dram_bytes_per_s == pytest.approx(1.675e12)
    assert estimate.intensity_flop_per_byte == pytest.approx(0.6 * H100_BF16 / 1.675e12)
    assert estimate.label == LIVE_LABEL == "estimated from activity counters"
    assert estimate.peaks_source == "H100 SXM datasheet"
    assert any("HMMA" in assumption for assumption in estimate.assumptions)


def test_per_pipe_activity_sums_with_matching_peaks():
    sample = replace(
        make_gpu_sample(),
        hmma_tensor_activity_percent=50.0,
        dfma_tensor_activity_percent=10.0,
        imma_tensor_activity_percent=0.0,
        fp32_activity_percent=20.0,
        fp64_activity_percent=0.0,
        fp16_activity_percent=5.0,
    )
    estimate = estimate_live_position(sample)
    expected = 0.5 * H100_BF16 + 0.1 * 67e12 + 0.2 * 67e12 + 0.05 * 133.8e12
    assert estimate.flop_per_s == pytest.approx(expected)
    assert set(estimate.contributions_flop_per_s) == {"hmma", "imma", "dfma", "fp64", "fp32", "fp16"}


def test_clock_below_max_scales_the_estimate():
    sample = replace(make_gpu_sample(), sm_clock_mhz=990.0, sm_clock_max_mhz=1980.0)
    estimate = estimate_live_position(sample)
    assert estimate.clock_scale == pytest.approx(0.5)
    assert estimate.flop_per_s == pytest.approx(0.3 * H100_BF16)


def test_dram_bandwidth_from_percent_of_peak():
    sample = replace(
        make_gpu_sample(),
        dram_bandwidth_bytes_per_s=Unavailable(Reason.ERROR, "x"),
        dram_bandwidth_percent_of_peak=25.0,
    )
    assert estimate_live_position(sample).dram_bytes_per_s == pytest.approx(0.25 * 3.35e12)


def test_ampere_without_gpm_is_unavailable_with_the_reason():
    sample = replace(
        make_gpu_sample(),
        name="NVIDIA A100-SXM4-80GB",
        architecture="ampere",
        tensor_activity_percent=NOT_SUPPORTED,
        hmma_tensor_activity_percent=NOT_SUPPORTED,
        dfma_tensor_activity_percent=NOT_SUPPORTED,
        imma_tensor_activity_percent=NOT_SUPPORTED,
        fp16_activity_percent=NOT_SUPPORTED,
        fp32_activity_percent=NOT_SUPPORTED,
        fp64_activity_percent=NOT_SUPPORTED,
        dram_bandwidth_bytes_per_s=NOT_SUPPORTED,
    )
    result = estimate_live_position(sample)
    assert isinstance(result, Unavailable)
    assert result.reason == Reason.NOT_SUPPORTED
    assert "Hopper" in result.detail


def test_no_permission_is_passed_through():
    denied = Unavailable(Reason.NO_PERMISSION, "RmProfilingAdminOnly=1")
    sample = replace(make_gpu_sample(), tensor_activity_percent=denied)
    result = estimate_live_position(sample)
    assert isinstance(result, Unavailable) and result.reason == Reason.NO_PERMISSION


def test_unknown_gpu_lost_gpu_and_idle_gpu():
    unknown = estimate_live_position(replace(make_gpu_sample(), name="NVIDIA Mystery 9"))
    assert isinstance(unknown, Unavailable) and "no datasheet peaks" in unknown.detail
    lost = estimate_live_position(make_gpu_sample(lost=True))
    assert isinstance(lost, Unavailable) and lost.reason == Reason.GPU_LOST
    idle = estimate_live_position(
        replace(make_gpu_sample(), tensor_activity_percent=0.0, dram_bandwidth_bytes_per_s=0.0)
    )
    assert isinstance(idle, Unavailable) and idle.reason == Reason.NOT_APPLICABLE


def test_live_point_placed_against_the_device_roofs():
    document = results_document(
        "node-a",
        [{"device": "cuda:0", "type": "gpu", "name": "NVIDIA H100 80GB HBM3"}],
        [ceiling("cuda:0", "compute", "bf16", 750e12), ceiling("cuda:0", "memory", "dram.triad", 3.0e12)],
    )
    model = build_model(typed([("r.json", document)]))
    estimate = estimate_live_position(make_gpu_sample())
    assert not isinstance(estimate, Unavailable)
    point = estimate.to_point(host="node-a")
    assert point.estimated and point.flop_per_s == pytest.approx(0.6 * H100_BF16)
    assert point.intensity_flop_per_byte == pytest.approx(0.6 * H100_BF16 / 1.675e12)
    placement = place_point(point, model.device(point.key))
    assert placement.bound == "compute"  # ~354 FLOP/byte, right of the 250 FLOP/byte ridge
    assert placement.efficiency == pytest.approx(0.6 * H100_BF16 / 750e12)
    assert LIVE_LABEL in placement.point.name
    assert place_point(point, None).bound == "unknown"
    assert isinstance(estimate_live_position(make_gpu_sample(lost=True)), Unavailable)


def _reordered_sample(monkeypatch: pytest.MonkeyPatch):
    """Three H100s where NVML's GPU 2 sits on the lowest PCI bus (CUDA's device 0, as nvml.h
    allows); only NVML 2 moves DRAM at 2 TB/s, so its live point is told apart."""
    from support.samples import make_sample

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    sample = make_sample(gpus=3)
    buses = {0: "0000:02:00.0", 1: "0000:03:00.0", 2: "0000:01:00.0"}
    gpus = [
        replace(gpu, pci_bus_id=buses[gpu.index], dram_bandwidth_bytes_per_s=2.0e12 if gpu.index == 2 else 1.0e12)
        for gpu in sample.gpus
    ]
    return replace(sample, gpus=gpus)


def test_tui_live_points_and_devices_carry_the_cuda_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuscope.tui.roofline_data import build_screen_model, live_document, live_placements

    sample = _reordered_sample(monkeypatch)
    document = live_document(sample)
    assert document is not None
    named = {entry.device: entry.uuid for entry in document.devices if entry.type == "gpu"}
    assert named == {"cuda:0": "GPU-00000002", "cuda:1": "GPU-00000000", "cuda:2": "GPU-00000001"}
    model = build_screen_model([], sample)
    placements, reasons = live_placements(model, sample)
    assert reasons == []
    by_name = {placement.point.name: placement.point for placement in placements}
    assert sorted(by_name) == ["cuda:0 now", "cuda:1 now", "cuda:2 now"]
    assert by_name["cuda:0 now"].key.device == "cuda:0"
    assert by_name["cuda:0 now"].bytes == pytest.approx(2.0e12)  # NVML 2's traffic, on CUDA's device 0
    assert by_name["cuda:2 now"].bytes == pytest.approx(1.0e12)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # PCI position 1 = NVML 0 is the only cuda device
    placements, _ = live_placements(build_screen_model([], sample), sample)
    assert sorted(p.point.name for p in placements) == ["cuda:0 now", "nvml:1 now", "nvml:2 now"]
    assert next(p.point for p in placements if p.point.name == "cuda:0 now").bytes == pytest.approx(1.0e12)
