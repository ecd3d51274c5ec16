"""Energy in joules from RAPL (a fake powercap tree) and NVML (the fake NVML's energy counter):
exact against the scripted counters; unavailable with the reason, never 0 J."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.telemetry import powercap
from gpuscope.telemetry.energy import (
    EnergyMeter,
    EnergyResult,
    energy_fields,
    flop_per_joule,
)
from gpuscope.telemetry.powercap import RaplReader, counter_delta_uj
from gpuscope.telemetry.values import Reason, Unavailable
from gpuscope.testing.fake_nvml import FakeClock, FakeGpu, FakeNvml, install_fake_nvml

MAX_UJ = 262_143_328_850


class Clock:
    def __init__(self) -> None:
        self.now = 10.0

    def __call__(self) -> float:
        return self.now


def _zone(path: Path, name: str, energy_uj: int, max_uj: int = MAX_UJ) -> Path:
    path.mkdir(parents=True)
    (path / "name").write_text(name + "\n")
    (path / "energy_uj").write_text(f"{energy_uj}\n")
    (path / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return path


def _set(zone: Path, energy_uj: int) -> None:
    (zone / "energy_uj").write_text(f"{energy_uj}\n")


@pytest.fixture
def rapl_tree(tmp_path: Path) -> dict[str, Path]:
    """Two packages, each with core and dram sub-zones (core must not be counted)."""
    root = tmp_path / "powercap"
    zones = {
        "pkg0": _zone(root / "intel-rapl:0", "package-0", 1_000_000),
        "core0": _zone(root / "intel-rapl:0" / "intel-rapl:0:0", "core", 500_000),
        "dram0": _zone(root / "intel-rapl:0" / "intel-rapl:0:1", "dram", 200_000),
        "pkg1": _zone(root / "intel-rapl:1", "package-1", MAX_UJ - 1_000_000),
    }
    (root / "intel-rapl-mmio:0").mkdir()  # another interface: ignored
    zones["root"] = root
    return zones


def test_rapl_package_and_dram_joules_are_exact(rapl_tree: dict[str, Path]) -> None:
    clock = Clock()
    meter = EnergyMeter("cpu", powercap_root=rapl_tree["root"], clock=clock)
    assert meter.unavailable is None
    meter.start()
    _set(rapl_tree["pkg0"], 1_000_000 + 12_500_000)  # 12.5 J
    _set(rapl_tree["core0"], 500_000 + 9_000_000)  # part of the package: not added
    _set(rapl_tree["dram0"], 200_000 + 3_250_000)  # 3.25 J
    _set(rapl_tree["pkg1"], 4_000_000)  # wrapped: 1 J before the wrap + 4 J after
    clock.now += 2.0
    result = meter.stop()
    assert result.domains_j == pytest.approx({"package-0": 12.5, "package-0/dram": 3.25, "package-1": 5.0}, abs=1e-12)
    assert result.joules == pytest.approx(20.75, abs=1e-12)
    assert result.window_s == pytest.approx(2.0)
    assert flop_per_joule(83e9, result) == pytest.approx(4e9)
    fields = energy_fields(result, 83e9)
    assert fields["energy_j"] == pytest.approx(20.75) and fields["flop_per_j"] == pytest.approx(4e9)
    assert fields["energy_unavailable"] is None


def test_counter_wrap_around() -> None:
    assert counter_delta_uj(100, 350, 1000) == 250
    assert counter_delta_uj(900, 50, 1000) == 150


def test_no_powercap_interface_is_unavailable_never_zero(tmp_path: Path) -> None:
    meter = EnergyMeter("cpu", powercap_root=tmp_path / "missing")
    meter.start()
    result = meter.stop()
    assert isinstance(result.joules, Unavailable)
    assert result.joules.reason is Reason.NOT_SUPPORTED
    assert "no powercap interface" in result.joules.detail
    fields = energy_fields(result, 1e9)
    assert fields["energy_j"] is None and fields["flop_per_j"] is None
    assert fields["energy_unavailable"].startswith("not_supported: no powercap interface")
    assert isinstance(flop_per_joule(1e9, result), Unavailable)


def test_unreadable_counter_names_the_remedy(rapl_tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    real = powercap._read_int

    def denied(path: Path) -> int:
        if path.name == "energy_uj":
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(powercap, "_read_int", denied)
    problem = RaplReader(rapl_tree["root"]).open()
    assert problem is not None and problem.reason is Reason.NO_PERMISSION
    assert "root" in problem.detail


def test_counter_that_did_not_move_is_unavailable(rapl_tree: dict[str, Path]) -> None:
    meter = EnergyMeter("cpu", powercap_root=rapl_tree["root"], clock=Clock())
    meter.start()
    result = meter.stop()
    assert isinstance(result.joules, Unavailable) and "did not advance" in result.joules.detail


def test_nvml_energy_counter_is_exact() -> None:
    clock = FakeClock()
    fake = FakeNvml.with_gpus([FakeGpu.h100(), FakeGpu.h100()], clock=clock)
    fake.set_load(1, power_w=612.5)
    with install_fake_nvml(fake):
        meter = EnergyMeter("cuda:0", nvml_index=1, clock=clock)
        assert meter.unavailable is None
        meter.start()
        clock.advance(4.0)
        result = meter.stop()
        meter.close()
    assert result.joules == pytest.approx(2450.0, abs=1e-9)  # 612.5 W x 4 s, read in mJ
    assert result.window_s == pytest.approx(4.0)
    assert "GPU 1" in result.method
    assert flop_per_joule(4.9e15, result) == pytest.approx(2e12)
    per_step = result.scaled(1 / 4)
    assert per_step.joules == pytest.approx(612.5)


def test_nvml_counter_not_supported_is_unavailable() -> None:
    clock = FakeClock()
    fake = FakeNvml.with_gpus(
        [FakeGpu.h100(errors={"nvmlDeviceGetTotalEnergyConsumption": "NotSupported"})],
        clock=clock,
    )
    with install_fake_nvml(fake):
        meter = EnergyMeter("cuda:0", clock=clock)
        meter.start()
        clock.advance(1.0)
        result = meter.stop()
        meter.close()
    assert isinstance(result.joules, Unavailable) and result.joules.reason is Reason.NOT_SUPPORTED


def test_scaled_unavailable_stays_unavailable() -> None:
    result = EnergyResult(Unavailable(Reason.NOT_SUPPORTED, "x"), 1.0, "none")
    assert result.scaled(0.5) is result


def test_energy_per_call_over_a_window(rapl_tree: dict[str, Path]) -> None:
    from gpuscope.telemetry.energy import energy_per_call

    clock = Clock()
    counter = {"uj": 1_000_000}

    def call() -> None:  # each call: 0.01 s and 0.5 J on the package
        clock.now += 0.01
        counter["uj"] += 500_000
        _set(rapl_tree["pkg0"], counter["uj"])

    result, calls = energy_per_call(
        call,
        "cpu",
        per_call_s=0.01,
        window_s=1.0,
        powercap_root=rapl_tree["root"],
        clock=clock,
    )
    assert calls in (100, 105)  # whole batches of 5 until 1 s has passed
    assert result.joules == pytest.approx(0.5)
    assert result.window_s == pytest.approx(0.01)


def test_energy_per_call_runs_nothing_without_a_counter(tmp_path: Path) -> None:
    from gpuscope.telemetry.energy import energy_per_call

    ran = []
    result, calls = energy_per_call(lambda: ran.append(1), "cpu", per_call_s=0.01, powercap_root=tmp_path / "none")
    assert calls == 0 and not ran and isinstance(result.joules, Unavailable)
