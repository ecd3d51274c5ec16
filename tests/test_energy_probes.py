"""Issue 14 item 4 on probes: every probe ceiling carries the joules of its timed samples (RAPL from
a fake powercap tree, NVML from the fake's energy counter of the GPU the one NVML<->CUDA mapping
finds), or says why not, never 0 J; and the report's energy roofline draws from such ceilings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from results_files import new_document as new_results

from gpuscope.probing.context import ProbeContext
from gpuscope.probing.derive import derive_ceilings
from gpuscope.probing.environment import DeviceSpec, MemoryBudget, parse_device
from gpuscope.probing.runner import checked_measurement
from gpuscope.probing.timing import CpuClock, TimingPolicy
from gpuscope.profiling.energy_roofline import energy_roofs_from_ceilings
from gpuscope.report.profile_section import energy_section_html
from gpuscope.results import to_results
from gpuscope.schema.report import EmbeddedResults
from gpuscope.schema.results import Ceiling, Measurement
from gpuscope.telemetry import powercap
from gpuscope.telemetry.energy import EnergyMeter
from gpuscope.telemetry.nvml import mapping
from gpuscope.testing.fake_nvml import FakeClock, install_fake_nvml
from gpuscope.testing.scenarios import build_fake, cuda_uuids, parse_scenario

FAST = TimingPolicy(samples=3, target_sample_s=0.004, warmup_max_s=0.05)
CALL_S = 1.0 / 1024  # one fake call: exact in binary, so counters and clocks add up exactly


class FakeTime:
    """A clock the kernel advances: each call takes exactly ``CALL_S``."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _rapl_tree(root: Path, energy_uj: int = 5_000_000) -> Path:
    zone = root / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text(f"{energy_uj}\n")
    (zone / "max_energy_range_uj").write_text("262143328850\n")
    return zone / "energy_uj"


def _cpu_context(powercap_root: Path, clock: FakeTime) -> ProbeContext:
    device = parse_device("cpu")
    return ProbeContext(
        device=device,
        budget=MemoryBudget(device, 0.5, lambda: 1 << 34),
        ceiling_policy=FAST,
        contention_retries=0,
        clock_factory=lambda: CpuClock(now=clock, resolution_s=1e-6),
        powercap_root=powercap_root,
    )


def _kernel(clock: FakeTime, counter: Path | None, uj_per_call: int) -> Any:
    """A call that takes CALL_S on ``clock`` and adds ``uj_per_call`` to the RAPL counter."""
    state = {"uj": int(counter.read_text()) if counter is not None else 0}

    def call() -> None:
        clock.now += CALL_S
        if counter is not None:
            state["uj"] += uj_per_call
            counter.write_text(f"{state['uj']}\n")

    return call


MEMORY = {
    "kind": "memory",
    "name": "triad 1 GiB",
    "device": "cpu",
    "parameters": {"kernel": "triad", "footprint_bytes": 3 << 30},
    "flops": 2.0 * (1 << 27),
    "bytes": 24.0 * (1 << 27),
    "counting_rule": "STREAM",
    "level": "dram",
}
MATMUL = {
    "kind": "matmul",
    "name": "1024x1024x1024",
    "device": "cpu",
    "parameters": {"dtype": "fp32", "role": "ceiling"},
    "flops": 2.0 * 1024**3,
    "bytes": 12.0 * 1024**2,
    "counting_rule": "2MNK",
}


def _measure(ctx: ProbeContext, call: Any, record: dict[str, Any], ident: str) -> dict[str, Any]:
    draft = msgspec.convert(record, Measurement)
    result = ctx.measure(call, statistic="best", validate=None, record=draft)
    built: dict[str, Any] = msgspec.to_builtins(msgspec.structs.replace(result, id=ident))
    return built


def _ceilings(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runner's ceilings of these probe records, as the results file holds them."""
    typed = [checked_measurement(msgspec.convert(record, Measurement), record["id"]) for record in records]
    return [msgspec.to_builtins(ceiling) for ceiling in derive_ceilings(typed)]


def test_probe_ceilings_carry_the_exact_joules_of_their_timed_samples(tmp_path: Path) -> None:
    clock = FakeTime()
    counter = _rapl_tree(tmp_path / "powercap")
    ctx = _cpu_context(tmp_path / "powercap", clock)
    memory = _measure(ctx, _kernel(clock, counter, 1_000), MEMORY, "m0001")  # 1 mJ per call
    matmul = _measure(ctx, _kernel(clock, counter, 4_000), MATMUL, "m0002")  # 4 mJ per call
    ctx.close()
    for record, joules_per_call in ((memory, 1e-3), (matmul, 4e-3)):
        assert record["status"] == "ok", record["error"]
        timing = record["timing"]
        calls = len(record["samples_s"]) * timing["inner_reps"]
        # warm-up and the discarded first call are outside the window: exactly the timed calls
        assert timing["energy_j"] == pytest.approx(calls * joules_per_call, rel=1e-12)
        assert timing["energy_unavailable"] is None and "RAPL" in timing["energy_method"]
    assert matmul["timing"]["flop_per_j"] == pytest.approx(MATMUL["flops"] / 4e-3, rel=1e-12)

    ceilings = {c["name"]: c for c in _ceilings([memory, matmul])}
    dram, fp32 = ceilings["dram.triad"], ceilings["fp32"]
    for ceiling, record in ((dram, memory), (fp32, matmul)):
        for key in ("energy_j", "energy_window_s", "energy_method", "energy_unavailable"):
            assert ceiling.get(key) == record["timing"][key]  # null fields are left out
        assert ceiling["energy_j"] > 0 and ceiling["energy_window_s"] > 0
    assert fp32["flop_per_j"] == pytest.approx(2.0 * 1024**3 / 4e-3, rel=1e-12)
    assert "flop_per_j" not in dram

    # the energy roofline needs no more than these ceilings
    (roofs,) = energy_roofs_from_ceilings(msgspec.convert(c, Ceiling) for c in ceilings.values())
    assert roofs.device == "cpu" and (roofs.compute_ceiling, roofs.memory_ceiling) == ("fp32", "dram.triad")
    power_w = dram["energy_j"] / dram["energy_window_s"]
    assert roofs.j_per_byte == pytest.approx(power_w / dram["value"])
    document = new_results()
    document.update(ceilings=list(ceilings.values()))
    section = energy_section_html([EmbeddedResults(label="energy.json", document=to_results(document, "energy.json"))])
    assert section is not None and "<svg" in section and "unavailable" not in section

    # and a results file with these ceilings passes the strict decoder (the report reads it so;
    # tests/test_profile_report.py checks the section's place in the HTML report)
    document = new_results()
    document.update(device="cpu", measurements=[memory, matmul], ceilings=list(ceilings.values()))
    to_results(document, "energy.json")


def test_without_powercap_the_ceiling_says_why_and_never_zero(tmp_path: Path) -> None:
    clock = FakeTime()
    ctx = _cpu_context(tmp_path / "no-powercap", clock)
    record = _measure(ctx, _kernel(clock, None, 0), MATMUL, "m0001")
    ctx.close()
    assert record["status"] == "ok", record["error"]
    (ceiling,) = _ceilings([record])
    assert ceiling.get("energy_j") is None and ceiling.get("energy_j") != 0
    assert ceiling["energy_unavailable"].startswith("not_supported: no powercap interface")
    assert "flop_per_j" not in ceiling and "flop_per_j" not in record["timing"]
    assert energy_roofs_from_ceilings([msgspec.convert(ceiling, Ceiling)]) == []


def test_energy_off_leaves_the_timing_without_a_meter(tmp_path: Path) -> None:
    clock = FakeTime()
    ctx = _cpu_context(tmp_path / "powercap", clock)
    ctx.energy = False
    record = _measure(ctx, _kernel(clock, None, 0), MATMUL, "m0001")
    assert record["timing"]["energy_j"] is None
    assert record["timing"]["energy_unavailable"] == "not_applicable: energy not measured"


def test_a_real_memory_probe_carries_the_scripted_joules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory probe's own measurement, with a counter that advances 2.5 J per read: the
    window is one read at each end, so every measurement carries exactly 2.5 J."""
    from gpuscope.probing import memory

    caches = memory.CacheSizes(l1_bytes=48 * 1024, l2_bytes=1 << 20, llc_bytes=32 << 20, threads=1)
    monkeypatch.setattr(memory, "cache_sizes", lambda ctx: caches)
    _rapl_tree(tmp_path / "powercap")
    reads = {"uj": 0}
    real = powercap._read_int

    def scripted(path: Path) -> int:
        if path.name == "energy_uj":
            reads["uj"] += 2_500_000
            return reads["uj"]
        return real(path)

    monkeypatch.setattr(powercap, "_read_int", scripted)
    device = parse_device("cpu")
    ctx = ProbeContext(
        device=device,
        budget=MemoryBudget(device, 0.5, lambda: 1 << 34),
        ceiling_policy=TimingPolicy(samples=2, target_sample_s=0.001, warmup_max_s=0.05),
        contention_retries=0,
        powercap_root=tmp_path / "powercap",
    )
    measured: list[Measurement] = []
    memory.memory_probe(["triad"], [16 * 1024], "fp64", ctx, measured.append)
    ctx.close()
    records: list[dict[str, Any]] = [msgspec.to_builtins(m) for m in measured]
    (record,) = records
    assert record["status"] == "ok", record["error"]
    assert record["timing"]["energy_j"] == pytest.approx(2.5, abs=1e-12)
    record["id"] = "m0001"
    (ceiling,) = _ceilings(records)
    assert ceiling["name"] == "l1.triad" and ceiling["energy_j"] == pytest.approx(2.5, abs=1e-12)


@pytest.fixture
def reordered() -> tuple[Any, FakeClock]:
    """Three H200s; NVML index 2 sits on the lowest PCI bus, so CUDA's device 0 is NVML's 2.
    Each GPU draws a different power, so the joules say which GPU was read."""
    clock = FakeClock()
    fake = build_fake(parse_scenario("gpus=3xh200,pci_order=2+0+1,busy=0"), clock=clock)
    for index, watts in enumerate((128.0, 256.0, 1024.0)):
        fake.set_load(index, power_w=watts)
        fake.gpus[index].wobble = 0.0
    return fake, clock


def test_gpu_ceiling_reads_the_energy_of_the_mapped_gpu(
    reordered: tuple[Any, FakeClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, clock = reordered
    uuids = cuda_uuids(fake)
    monkeypatch.setattr(mapping, "cuda_device_uuid", lambda index: uuids[index])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    device = DeviceSpec("cuda:0", "gpu", 0)
    ctx = ProbeContext(
        device=device,
        budget=MemoryBudget(device, free_bytes=lambda: 1 << 30),
        ceiling_policy=FAST,
        clock_factory=lambda: CpuClock(now=clock, resolution_s=1e-6),
    )
    ctx.synchronize = lambda: None  # type: ignore[method-assign]
    with install_fake_nvml(fake):
        record = _measure(ctx, lambda: clock.advance(CALL_S), {**MATMUL, "device": "cuda:0"}, "m0001")
        ctx.close()
    assert record["status"] == "ok", record["error"]
    calls = len(record["samples_s"]) * record["timing"]["inner_reps"]
    # NVML GPU 2 draws 1024 W: 1 J per 1/1024 s call (GPU 0, the same NVML index, would give 0.125 J)
    assert record["timing"]["energy_j"] == pytest.approx(calls * 1.0, abs=1e-9)
    assert "GPU 2" in record["timing"]["energy_method"]
    (ceiling,) = _ceilings([record])
    assert ceiling["energy_j"] == record["timing"]["energy_j"]


def test_energy_meter_maps_visible_devices_by_cuda_order_not_nvml_index(
    reordered: tuple[Any, FakeClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    """CUDA_VISIBLE_DEVICES=1,0 names CUDA's devices (PCI order: NVML 2, 0, 1), not NVML's: with
    no UUID from torch, cuda:0 is the second GPU on the bus, NVML 0."""
    fake, clock = reordered
    monkeypatch.setattr(mapping, "cuda_device_uuid", lambda index: None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    with install_fake_nvml(fake):
        meter = EnergyMeter("cuda:0", clock=clock)
        meter.start()
        clock.advance(2.0)
        result = meter.stop()
        meter.close()
    assert result.joules == pytest.approx(256.0, abs=1e-9)  # 128 W x 2 s: NVML GPU 0
    assert "GPU 0" in result.method and "visible-devices index" in result.method
