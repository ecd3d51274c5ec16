"""The built-in datasheet: NVML names map to the right entry, numbers are dense, every required
model carries every field; the CPU datasheet roof comes from CpuInfo."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from support.roofline import typed

from gpuscope.roofline.datasheet import DATASHEETS, cpu_datasheet_peaks, datasheet_by_key, match_gpu_datasheet


@pytest.mark.parametrize(
    ("nvml_name", "key"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 SXM5 80GB", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H100 NVL", "h100-nvl"),
        ("NVIDIA H200", "h200-sxm"),
        ("NVIDIA H200 NVL", "h200-nvl"),
        ("NVIDIA A100-SXM4-40GB", "a100-sxm-40gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
        ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("NVIDIA B200", "b200"),
        ("nvidia h100 80gb hbm3", "h100-sxm"),
    ],
)
def test_nvml_names_match(nvml_name, key):
    sheet = match_gpu_datasheet(nvml_name)
    assert sheet is not None, nvml_name
    assert sheet.key == key


@pytest.mark.parametrize(
    "nvml_name",
    [
        "NVIDIA L40",
        "NVIDIA GeForce RTX 4090 D",
        "NVIDIA GeForce RTX 4080",
        "Tesla V100-SXM2-16GB",
        "",
        "NVIDIA A100-SXM4-40GB MIG 1g.5gb",
        "NVIDIA GH200 480GB",
    ],
)
def test_unknown_names_and_mig_slices_get_no_entry(nvml_name):
    assert match_gpu_datasheet(nvml_name) is None


def test_dense_numbers_not_sparsity():
    h100 = datasheet_by_key("h100-sxm")
    assert h100.compute_flop_per_s["bf16"] == pytest.approx(989e12)
    assert h100.compute_flop_per_s["fp8"] == pytest.approx(1979e12)
    assert h100.compute_flop_per_s["tf32"] == pytest.approx(495e12)
    assert h100.compute_flop_per_s["fp64.tensor"] == pytest.approx(67e12)
    assert h100.memory_bytes_per_s == pytest.approx(3.35e12)
    assert h100.nvlink_bytes_per_s_per_direction == pytest.approx(450e9)
    h200 = datasheet_by_key("h200-sxm")
    assert h200.memory_bytes_per_s == pytest.approx(4.8e12)
    assert h200.compute_flop_per_s == h100.compute_flop_per_s
    assert datasheet_by_key("h100-pcie").compute_flop_per_s["bf16"] == pytest.approx(756.5e12)
    assert datasheet_by_key("a100-sxm-80gb").compute_flop_per_s["bf16"] == pytest.approx(312e12)
    assert datasheet_by_key("l4").compute_flop_per_s["fp8"] == pytest.approx(242.5e12)


REQUIRED = (
    "h100-sxm",
    "h100-pcie",
    "h200-sxm",
    "a100-sxm-40gb",
    "a100-sxm-80gb",
    "a100-pcie-40gb",
    "a100-pcie-80gb",
    "l40s",
    "l4",
    "rtx-4090",
    "b200",
)


@pytest.mark.parametrize("key", REQUIRED)
def test_every_required_model_has_every_field(key):
    sheet = datasheet_by_key(key)
    assert sheet is not None
    for dtype in ("fp64", "fp32", "tf32", "bf16", "fp16"):
        assert sheet.compute_flop_per_s.get(dtype, 0) > 0, (key, dtype)
    if sheet.architecture in ("hopper", "ada", "blackwell"):
        assert sheet.compute_flop_per_s.get("fp8", 0) > 0
    if sheet.architecture in ("hopper", "ampere", "blackwell"):
        assert sheet.compute_flop_per_s.get("fp64.tensor", 0) > 0
    # Tensor roofs sit above the FP32 vector roof, and bf16 above tf32: dense ordering holds.
    assert (
        sheet.compute_flop_per_s["bf16"] >= sheet.compute_flop_per_s["tf32"] >= sheet.compute_flop_per_s["fp32"] * 0.99
    )
    assert sheet.memory_bytes_per_s > 1e11
    assert sheet.l2_bytes and sheet.l2_bytes > 1e7
    assert sheet.pcie_bytes_per_s_per_direction >= 32e9
    assert sheet.tdp_w > 50


def test_keys_are_unique():
    keys = [sheet.key for sheet in DATASHEETS]
    assert len(keys) == len(set(keys))


def test_peak_for_fp64_takes_the_tensor_roof():
    assert datasheet_by_key("h100-sxm").peak_flop_per_s("fp64") == pytest.approx(67e12)
    assert datasheet_by_key("l40s").peak_flop_per_s("fp64") == pytest.approx(91.6e12 / 64)
    assert datasheet_by_key("l40s").peak_flop_per_s("int4") is None


@dataclass
class FakeCpu:
    model: str = "Fake CPU"
    clock_mhz: float | None = 2450.0

    def peak_flop_per_s(self, dtype: str = "fp32") -> float | None:
        if self.clock_mhz is None:
            return None
        per_cycle = 32 if dtype == "fp32" else 16
        return 2 * per_cycle * self.clock_mhz * 1e6


def test_cpu_datasheet_peaks():
    peaks = cpu_datasheet_peaks(FakeCpu())
    assert peaks["fp32"] == pytest.approx(156.8e9)  # 2 cores x 32 FLOP/cycle x 2.45 GHz
    assert peaks["fp64"] == pytest.approx(78.4e9)
    assert cpu_datasheet_peaks(FakeCpu(clock_mhz=None)) == {}


#: Measured ceiling names the probes write, beside the datasheet roofs' own names.
_PROBE_NAMES = [("compute", "fp64.tensor"), ("compute", "bf16.mma"), ("memory", "dram.triad"), ("memory", "l2.copy"),
                ("transfer", "h2d.pinned"), ("transfer", "d2h.pinned"), ("transfer", "h2d.pageable"),
                ("transfer", "d2d.peer"), ("transfer", "p2p.copy"), ("transfer", "nvlink.write"),
                ("collective", "allreduce.busbw")]  # fmt: skip


@pytest.mark.parametrize("sheet", DATASHEETS, ids=lambda sheet: sheet.key)
def test_report_and_roofline_hold_ceilings_against_the_same_datasheet_roof(sheet, tmp_path):
    from support.reports import make_results, write_results

    from gpuscope.report import make_report
    from gpuscope.roofline.loading import build_model
    from gpuscope.roofline.model import DATASHEET, MEASURED, datasheet_twin

    assert match_gpu_datasheet(sheet.label) is sheet
    doc = make_results(gpus=1)
    doc["devices"][1]["name"] = sheet.label

    def gpu() -> Any:
        return next(device for device in build_model(typed([("probe", doc)])).devices if device.key.device == "cuda:0")

    device = gpu()
    names = {(roof.kind, roof.name) for roof in device.roofs if roof.source == DATASHEET} | set(_PROBE_NAMES)
    unit = {"compute": "FLOP/s"}
    doc["ceilings"] = [{"device": "cuda:0", "kind": kind, "name": name, "value": 1e9, "unit": unit.get(kind, "B/s"),
                        "host": "node-a"} for kind, name in sorted(names)]  # fmt: skip
    write_results(tmp_path / "results.json", doc)
    rows = {
        (row["kind"], row["name"]): row["datasheet_value"]
        for row in make_report([tmp_path / "results.json"])["ceilings"]
    }
    device = gpu()
    twins = {}
    for roof in device.roofs:
        if roof.source == MEASURED:
            twin = datasheet_twin(device, roof)
            twins[(roof.kind, roof.name)] = twin.value if twin else None
    assert twins == rows
    held = {name for name, value in rows.items() if value is not None}
    assert ("transfer", "d2d.peer") in held or sheet.nvlink_bytes_per_s_per_direction is None
    assert {("compute", "fp64.tensor"), ("memory", "l2.copy"), ("transfer", "h2d.pageable")} & held == (
        {("compute", "fp64.tensor")}
    )
