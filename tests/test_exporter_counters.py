"""Issue 28's exporter points: cumulative ``*_bytes_total`` traffic counters beside the gauges, the
Xid counter at 0 from the first scrape, one alert metric, ``nic`` on ``metric_unavailable``, and
``promtool check metrics`` on a scrape of the fake 8-GPU node."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from support.samples import make_sample

from gpuscope.exporter.metrics import METRICS
from gpuscope.exporter.server import SampleCollector
from gpuscope.telemetry.records import Sample, XidEvent
from gpuscope.telemetry.values import Reason, Unavailable
from gpuscope.testing._fake_nvml_topology import hgx_h200_8
from gpuscope.testing.fake_nvml import FakeClock, FakeNvml, opened_collector


def _exporter() -> tuple[SampleCollector, CollectorRegistry]:
    collector = SampleCollector()
    registry = CollectorRegistry()
    registry.register(collector)
    return collector, registry


def _values(registry: CollectorRegistry, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    text = generate_latest(registry).decode()
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def _sample(step: int, interval_s: float = 15.0) -> Sample:
    sample = make_sample(tick=step, gpus=2, timestamp=1_700_000_000.0 + interval_s * step)
    for gpu in sample.gpus:
        gpu.xid_events, gpu.xid_events_dropped = [], 0
    return sample


def test_traffic_counters_integrate_rate_times_interval() -> None:
    collector, registry = _exporter()
    samples = [_sample(step) for step in range(4)]
    for sample in samples:
        collector.update(sample)
    gaps = [b.timestamp - a.timestamp for a, b in zip(samples, samples[1:])]
    expected = sum(s.gpus[0].pcie_tx_bytes_per_s * gap for s, gap in zip(samples[1:], gaps))  # type: ignore[operator]
    pcie = _values(registry, "gpuscope_gpu_pcie_transmit_bytes_total")
    gpu0 = next(value for labels, value in pcie.items() if ("gpu", "0") in labels)
    assert gpu0 == pytest.approx(expected) and gpu0 > 0
    nic = _values(registry, "gpuscope_nic_receive_bytes_total")
    first_nic = samples[0].host.nics[0]
    got = next(value for labels, value in nic.items() if ("nic", first_nic.name) in labels)
    assert got == pytest.approx(sum(s.host.nics[0].rx_bytes_per_s * gap for s, gap in zip(samples[1:], gaps)))  # type: ignore[operator]
    for name in (
        "gpuscope_gpu_pcie_receive_bytes_total",
        "gpuscope_gpu_nvlink_transmit_bytes_total",
        "gpuscope_gpu_nvlink_receive_bytes_total",
        "gpuscope_nic_transmit_bytes_total",
    ):
        assert len(_values(registry, name)) >= 1, name
    text = generate_latest(registry).decode()
    assert "# TYPE gpuscope_gpu_pcie_transmit_bytes counter" in text or (
        "# TYPE gpuscope_gpu_pcie_transmit_bytes_total counter" in text
    )


def test_counters_start_at_zero_and_never_go_down() -> None:
    collector, registry = _exporter()
    collector.update(_sample(0))
    first = _values(registry, "gpuscope_gpu_nvlink_receive_bytes_total")
    assert first and set(first.values()) == {0.0}
    previous = first
    for step in range(1, 5):
        sample = _sample(step)
        if step == 3:
            sample.gpus[0].nvlink_rx_bytes_per_s = Unavailable(Reason.ERROR, "read failed")  # adds nothing
        collector.update(sample)
        now = _values(registry, "gpuscope_gpu_nvlink_receive_bytes_total")
        assert all(now[key] >= previous[key] for key in previous)
        previous = now


def test_a_stalled_gap_is_not_integrated() -> None:
    collector, registry = _exporter()
    collector.update(_sample(0))
    collector.update(_sample(100))  # 1500 s later: the exporter was stalled
    assert set(_values(registry, "gpuscope_gpu_pcie_transmit_bytes_total").values()) == {0.0}


def test_xid_counter_is_zero_for_every_gpu_from_the_first_scrape() -> None:
    collector, registry = _exporter()
    collector.update(_sample(0))
    totals = _values(registry, "gpuscope_gpu_xid_errors_total")
    assert sorted(dict(labels)["gpu"] for labels in totals) == ["0", "1"]
    assert set(totals.values()) == {0.0}
    sample = _sample(1)
    sample.gpus[1].xid_events = [XidEvent(79, 2, sample.timestamp, sample.timestamp, "")]
    sample.gpus[1].xid_events_dropped = 1
    collector.update(sample)
    totals = _values(registry, "gpuscope_gpu_xid_errors_total")
    assert {dict(labels)["gpu"]: value for labels, value in totals.items()} == {"0": 0.0, "1": 3.0}


def test_one_alert_metric_only() -> None:
    names = {spec.name for spec in METRICS}
    assert "gpuscope_alert" in names and "gpuscope_alerts" not in names
    collector, registry = _exporter()
    sample = _sample(0)
    sample.gpus[0].temperature_gpu_c = 99.0
    collector.update(sample)
    text = generate_latest(registry).decode()
    assert "gpuscope_alerts" not in text


def test_nic_metric_unavailable_names_the_nic() -> None:
    collector, registry = _exporter()
    sample = _sample(0)
    nic = sample.host.nics[0]
    nic.speed_mbit_per_s = Unavailable(Reason.NOT_SUPPORTED, "no speed for a virtual interface")
    collector.update(sample)
    missing = _values(registry, "gpuscope_metric_unavailable")
    rows = [dict(labels) for labels in missing if dict(labels)["metric"] == "gpuscope_nic_speed_bytes_per_second"]
    assert [row["nic"] for row in rows] == [nic.name]
    others = [dict(labels) for labels in missing if not dict(labels)["metric"].startswith("gpuscope_nic_")]
    assert all(row["nic"] == "" for row in others)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed (Debian: prometheus)")
def test_promtool_accepts_a_scrape_of_the_fake_8_gpu_node() -> None:
    clock = FakeClock()
    fake = FakeNvml.with_gpus(hgx_h200_8(), clock=clock)
    collector, registry = _exporter()
    with opened_collector(fake) as nvml:
        for step in range(3):
            sample = make_sample(gpus=0, tick=step, timestamp=1_700_000_000.0 + clock())
            sample.gpus = nvml.sample().gpus
            collector.update(sample)
            clock.advance(5.0)
    text = generate_latest(registry).decode()
    assert text.count("gpuscope_gpu_xid_errors_total{") == 8
    assert text.count("gpuscope_gpu_nvlink_crc_flit_errors_total{") == 8
    result = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
