"""FieldSet.read unpacks the field-value array in one call (fields._rows); where pynvml's layout
differs it reads member by member. Both give the same readings, errors and rates included."""

from __future__ import annotations

import dataclasses

import pytest

from gpuscope.telemetry.nvml import fields
from gpuscope.telemetry.nvml.collector import NvmlCollector
from gpuscope.testing._fake_nvml_model import FakeClock
from gpuscope.testing.fake_nvml import install_fake_nvml
from gpuscope.testing.scenarios import build_fake, parse_scenario


def _samples(scenario: str) -> list[dict[str, object]]:
    clock = FakeClock()
    fake = build_fake(parse_scenario(scenario), clock=clock)
    out = []
    with install_fake_nvml(fake):
        collector = NvmlCollector(clock=clock)
        collector.open()
        for tick in range(6):
            out.extend(dataclasses.asdict(gpu) for gpu in collector.sample().gpus)
            clock.advance(0.5 if tick % 2 else 1.5)
        collector.close()
    return out


@pytest.mark.parametrize(
    "scenario",
    [
        "gpus=2xh200,links=18",
        "gpus=2xh200,random=0.1,seed=4,errors=Unknown+Timeout",
        "gpus=a100,pcie_bits=32",
        "gpus=h100,driver=550",  # per-entry errors (InvalidArgument for the PCIe counters)
    ],
)
def test_unpacked_rows_read_as_member_by_member(scenario: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert fields._ROWS_OK  # this pynvml's layout is the one the unpacking reads
    unpacked = _samples(scenario)
    monkeypatch.setattr(fields, "_ROWS_OK", False)
    member_by_member = _samples(scenario)
    assert unpacked == member_by_member
    readings = [gpu["energy_j"] for gpu in unpacked] + [gpu["pcie_tx_bytes_per_s"] for gpu in unpacked]
    assert any(isinstance(value, float) and value > 0 for value in readings)  # real readings compared
