"""The CPU datasheet roof: FLOP per cycle per instruction set (fp64, fp32, bf16 where the ISA has
it), the clock and its stated source (cpufreq max, measured clock, boost table, cpuinfo), the roofs
a probe records on the machine and how the roofline reads them back."""

from __future__ import annotations

import dataclasses

import pytest
from support.roofline import ceiling, results_document, typed

from gpuscope.probing import environment
from gpuscope.probing.environment import device_info, parse_device
from gpuscope.probing.peaks import ClockEstimate
from gpuscope.roofline.datasheet import (
    CLOCK_SOURCES,
    cpu_datasheet,
    cpu_datasheet_peaks,
    cpu_flop_per_cycle,
    pick_clock,
)
from gpuscope.roofline.loading import build_model
from gpuscope.roofline.model import DATASHEET, DeviceKey, above_datasheet
from gpuscope.telemetry.cpuinfo import CpuInfo

ZEN4 = frozenset({"fma", "avx2", "avx512f", "avx512_bf16", "avx512_vnni"})
ZEN5 = ZEN4 | {"avx_vnni"}
SAPPHIRE = frozenset({"fma", "avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx_vnni"})


@pytest.mark.parametrize(
    ("flags", "vendor", "machine", "fp64", "fp32", "bf16"),
    [
        (ZEN4, "AuthenticAMD", "x86_64", 16, 32, 64),  # 512-bit ops on two 256-bit pipes
        (ZEN5, "AuthenticAMD", "x86_64", 32, 64, 128),
        (ZEN4 - {"avx512_bf16"}, "GenuineIntel", "x86_64", 32, 64, None),  # Skylake-SP: no bf16
        (ZEN4, "GenuineIntel", "x86_64", 32, 64, 128),  # Cooper Lake: AVX512_BF16
        (SAPPHIRE, "GenuineIntel", "x86_64", 32, 64, 1024),  # AMX tiles
        (frozenset({"fma", "avx2", "avx"}), "AuthenticAMD", "x86_64", 16, 32, None),  # Zen 3
        (frozenset({"avx", "sse2"}), "GenuineIntel", "x86_64", 8, 16, None),
        (frozenset({"sse2"}), "GenuineIntel", "x86_64", 4, 8, None),
        (frozenset({"asimd", "bf16"}), "0x41", "aarch64", 8, 16, 32),
        (frozenset({"asimd"}), "0x41", "aarch64", 8, 16, None),
        (frozenset(), "", "riscv64", 2, 2, None),
    ],
)
def test_flop_per_cycle_per_isa(flags, vendor, machine, fp64, fp32, bf16):
    row = cpu_flop_per_cycle(flags, vendor, machine)
    assert (row.fp64, row.fp32, row.bf16) == (fp64, fp32, bf16)
    assert (row.of("fp64"), row.of("fp32"), row.of("bf16"), row.of("fp8")) == (fp64, fp32, bf16, None)
    assert row.rule and row.isa


def _cpu(**changes) -> CpuInfo:
    base = CpuInfo(
        model="AMD EPYC", vendor="AuthenticAMD", architecture="x86_64", logical_cores=2, physical_cores=2,
        base_frequency_mhz=2596.0, max_frequency_mhz=2596.0, flags=ZEN4, simd="avx512",
        fp32_flop_per_cycle_per_core=32,
        max_frequency_source="current clock in /proc/cpuinfo; the maximum is not exposed",
    )  # fmt: skip
    return dataclasses.replace(base, **changes)


def test_clock_sources_in_order():
    assert CLOCK_SOURCES[:2] == ("cpufreq max", "measured clock")
    cpufreq = _cpu(max_frequency_mhz=3700.0, max_frequency_source="cpufreq cpuinfo_max_freq")
    assert pick_clock(cpufreq, measured_clock_mhz=3100.0) == (3700.0, "cpufreq max")
    assert pick_clock(_cpu(), measured_clock_mhz=3650.0) == (3650.0, "measured clock")
    table = _cpu(max_frequency_mhz=3700.0, max_frequency_source="boost clock table")
    assert pick_clock(table) == (3700.0, "boost clock table")
    assert pick_clock(_cpu()) == (2596.0, "cpuinfo")
    assert pick_clock(_cpu(max_frequency_mhz=None, base_frequency_mhz=None)) == (None, "unknown")


def test_datasheet_is_cores_x_flop_per_cycle_x_clock_with_the_source_stated():
    sheet = cpu_datasheet(_cpu(), measured_clock_mhz=3650.0)
    assert sheet.peaks_flop_per_s == pytest.approx({"fp64": 2 * 16 * 3.65e9, "fp32": 2 * 32 * 3.65e9,
                                                   "bf16": 2 * 64 * 3.65e9})  # fmt: skip
    assert sheet.clock_source == "measured clock"
    assert "3650 MHz (measured clock)" in sheet.note("fp32") and "32 fp32 FLOP/cycle" in sheet.note("fp32")
    assert "bf16 64" in sheet.rule and "(measured clock)" in sheet.rule
    # without the measurement: the clock /proc/cpuinfo shows, named as such
    assert cpu_datasheet(_cpu()).note("fp64").endswith("2596 MHz (cpuinfo)")
    assert "bf16" not in cpu_datasheet(_cpu(flags=frozenset({"fma", "avx2"}))).peaks_flop_per_s
    assert cpu_datasheet(_cpu(max_frequency_mhz=None, base_frequency_mhz=None)).peaks_flop_per_s == {}
    assert cpu_datasheet_peaks(_cpu()) == pytest.approx(cpu_datasheet(_cpu()).peaks_flop_per_s)


def test_a_cpu_without_flags_keeps_its_own_simd_width():
    sheet = cpu_datasheet(_cpu(flags=frozenset(), fp32_flop_per_cycle_per_core=16))
    assert sheet.peaks_flop_per_s == pytest.approx({"fp64": 2 * 8 * 2.596e9, "fp32": 2 * 16 * 2.596e9})


def test_probe_device_entry_records_the_measured_clock(monkeypatch):
    monkeypatch.setattr(environment, "cpu_info", lambda: _cpu())
    monkeypatch.setattr(environment, "measured_clock", lambda: ClockEstimate(3650.0, 2, 1000, 8, [1e-3]))
    entry = device_info(parse_device("cpu"), measure_clock=True)
    assert entry.datasheet_clock_mhz == 3650.0 and entry.datasheet_clock_source == "measured clock"
    assert entry.datasheet_peak_fp32_flop_per_s == pytest.approx(2 * 32 * 3.65e9)
    assert entry.datasheet_peak_bf16_flop_per_s == pytest.approx(2 * 64 * 3.65e9)
    assert "measured clock" in entry.datasheet_rule
    plain = device_info(parse_device("cpu"))  # measure, profile: no clock chain
    assert plain.datasheet_clock_source == "cpuinfo" and plain.datasheet_clock_mhz == 2596.0


def test_the_roofline_reads_the_recorded_datasheet_with_its_source():
    fp32 = 2 * 32 * 3.65e9
    doc = results_document(
        "elsewhere",
        devices=[{"device": "cpu", "type": "cpu", "name": "AMD EPYC", "datasheet_peak_fp32_flop_per_s": fp32,
                  "datasheet_peak_fp64_flop_per_s": fp32 / 2, "datasheet_peak_bf16_flop_per_s": 2 * fp32,
                  "datasheet_clock_mhz": 3650.0, "datasheet_clock_source": "measured clock",
                  "datasheet_rule": "2 cores x FLOP/cycle (...) x 3650 MHz (measured clock)"}],
        ceilings=[ceiling("cpu", "compute", "fp32", 0.83 * fp32), ceiling("cpu", "compute", "fp32.fma", 1.2 * fp32)],
    )  # fmt: skip
    model = build_model(typed([("a.json", doc)]), local_cpu=_cpu(model="Another CPU"))
    device = model.device(DeviceKey("elsewhere", None, "cpu"))
    sheets = {roof.name: roof for roof in device.roofs if roof.source == DATASHEET}
    assert set(sheets) == {"fp64", "fp32", "bf16"}
    assert sheets["bf16"].value == pytest.approx(2 * fp32)
    assert "measured clock" in sheets["fp32"].note and "measured clock" in device.datasheet
    flagged = above_datasheet(device)  # the FMA peak above the datasheet is flagged, the GEMM is not
    assert [item.measured.name for item in flagged] == ["fp32.fma"]


def test_the_report_names_the_datasheet_clock_source():
    from support.reports import make_results

    from gpuscope.report import make_report, render_report

    doc = make_results(gpus=1)
    doc["devices"][0].update(
        datasheet_peak_fp32_flop_per_s=2.3e11, datasheet_clock_mhz=3650.0, datasheet_clock_source="measured clock"
    )
    text = render_report(make_report([doc]), "md")
    assert "datasheet roofs Fake CPU 9000: cores x FLOP/cycle x 3650 MHz (measured clock)" in text
