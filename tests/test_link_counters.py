"""Issue 33: NVLink CRC/replay/recovery and PCIe replay counters read by the NVML collector (the
fake NVML's topologies at the C boundary), carried in the log and exported as counters."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from support.samples import make_sample

from gpuscope.exporter.server import SampleCollector
from gpuscope.telemetry.logfile import open_log_writer
from gpuscope.telemetry.logread import read_log, sample_to_json_dict
from gpuscope.telemetry.records import Sample
from gpuscope.telemetry.values import Reason, Unavailable
from gpuscope.telemetry.wire import decode_record
from gpuscope.testing._fake_nvml_topology import hgx_h200_8, pcie_pairs_4
from gpuscope.testing.fake_nvml import FakeClock, FakeNvml, opened_collector, reason_of

ERRORS = ("nvlink_crc_flit_errors", "nvlink_crc_data_errors", "nvlink_replay_errors", "nvlink_recovery_errors")


def _hgx_samples(apart_s: float = 10.0) -> tuple[Sample, Sample]:
    clock = FakeClock()
    fake = FakeNvml.with_gpus(hgx_h200_8(), clock=clock)
    out = []
    with opened_collector(fake) as collector:
        for _ in range(2):
            sample = make_sample(gpus=0, timestamp=1_700_000_000.0 + clock())
            sample.gpus = collector.sample().gpus
            out.append(sample)
            clock.advance(apart_s)
    return out[0], out[1]


def test_gpu5_link3_crc_errors_rise_and_nothing_else_counts() -> None:
    first, second = _hgx_samples()
    gpu5_before, gpu5 = first.gpus[5], second.gpus[5]
    assert isinstance(gpu5.nvlink_crc_flit_errors, int)
    assert gpu5.nvlink_crc_flit_errors > gpu5_before.nvlink_crc_flit_errors  # type: ignore[operator]
    per_link = {link.link: link.crc_flit_errors for link in gpu5.nvlink_links}
    assert per_link[3] == gpu5.nvlink_crc_flit_errors and per_link[3] > 0
    assert all(value == 0 for link, value in per_link.items() if link != 3)
    for gpu in second.gpus:
        assert gpu.pcie_replay_errors == 0
        assert gpu.nvlink_replay_errors == 0 and gpu.nvlink_recovery_errors == 0 and gpu.nvlink_crc_data_errors == 0
        if gpu.index != 5:
            assert gpu.nvlink_crc_flit_errors == 0, gpu.index


def test_a_gpu_without_nvlink_says_why() -> None:
    gpus_ = pcie_pairs_4()
    gpus_[0].nvlink_links = 0  # no NVLink at all
    gpus_[1].nvlink_inactive = frozenset(range(gpus_[1].nvlink_links))  # every link down
    fake = FakeNvml.with_gpus(gpus_, clock=FakeClock())
    with opened_collector(fake) as collector:
        gpus = collector.sample().gpus
    assert len([gpu for gpu in gpus if isinstance(gpu.nvlink_crc_flit_errors, int)]) == 2
    no_link = [gpu for gpu in gpus if isinstance(gpu.nvlink_active_links, Unavailable) or gpu.nvlink_active_links == 0]
    assert no_link, "pcie4 has a GPU without an active NVLink link"
    for gpu in no_link:
        for name in ERRORS:
            value = getattr(gpu, name)
            assert isinstance(value, Unavailable), (gpu.index, name, value)
            assert value.reason in (Reason.NOT_SUPPORTED, Reason.NOT_APPLICABLE)
            assert "not collected" not in value.detail
    for gpu in gpus:
        assert isinstance(gpu.pcie_replay_errors, int)


def test_pcie_replay_counter_rises_with_the_fake() -> None:
    clock = FakeClock()
    gpus = pcie_pairs_4()
    gpus[2].pcie_replay_per_s = 3.0
    fake = FakeNvml.with_gpus(gpus, clock=clock)
    with opened_collector(fake) as collector:
        before = collector.sample().gpus[2].pcie_replay_errors
        clock.advance(20.0)
        after = collector.sample().gpus[2].pcie_replay_errors
    assert isinstance(before, int) and isinstance(after, int) and after - before >= 50


def test_counters_survive_the_log_and_older_logs_still_read() -> None:
    _, sample = _hgx_samples()
    data = sample_to_json_dict(sample)
    back = decode_record(json.dumps(data))
    assert back.gpus[5].nvlink_crc_flit_errors == sample.gpus[5].nvlink_crc_flit_errors
    assert back.gpus[5].nvlink_links[3].crc_flit_errors == sample.gpus[5].nvlink_links[3].crc_flit_errors
    assert back.gpus[0].pcie_replay_errors == 0
    # a log written before the counters existed: no such keys anywhere
    for gpu in data["gpus"]:  # type: ignore[union-attr]
        for name in (*ERRORS, "pcie_replay_errors"):
            gpu.pop(name, None)  # type: ignore[union-attr]
        for link in gpu["nvlink_links"]:  # type: ignore[index]
            for name in ("crc_flit_errors", "crc_data_errors", "replay_errors", "recovery_errors"):
                link.pop(name, None)
    old = decode_record(json.dumps(data))
    assert reason_of(old.gpus[5].nvlink_crc_flit_errors) is Reason.ERROR
    assert reason_of(old.gpus[5].nvlink_links[3].crc_flit_errors) is Reason.ERROR
    assert old.gpus[5].nvlink_tx_bytes_per_s == sample.gpus[5].nvlink_tx_bytes_per_s


def test_exporter_exposes_the_counters_per_gpu_and_per_link() -> None:
    _, sample = _hgx_samples()
    collector = SampleCollector()
    registry = CollectorRegistry()
    registry.register(collector)
    collector.update(sample)
    text = generate_latest(registry).decode()
    crc = sample.gpus[5].nvlink_crc_flit_errors
    lines = [line for line in text.splitlines() if line.startswith("gpuscope_gpu_nvlink_crc_flit_errors_total{")]
    assert len(lines) == 8
    assert any('gpu="5"' in line and line.endswith(f" {float(crc)}") for line in lines), lines
    link3 = [
        line
        for line in text.splitlines()
        if line.startswith("gpuscope_gpu_nvlink_link_errors_total{")
        and 'gpu="5"' in line
        and 'link="3"' in line
        and 'error="crc_flit"' in line
    ]
    assert link3 and link3[0].endswith(f" {float(crc)}")
    assert "# TYPE gpuscope_gpu_pcie_replay_errors_total counter" in text or (
        "# TYPE gpuscope_gpu_pcie_replay_errors counter" in text
    )
    assert text.count("gpuscope_gpu_pcie_replay_errors_total{") == 8


def test_no_nvlink_is_noted_in_metric_unavailable() -> None:
    gpus_ = pcie_pairs_4()
    gpus_[0].nvlink_links = 0
    fake = FakeNvml.with_gpus(gpus_, clock=FakeClock())
    with opened_collector(fake) as collector:
        sample = make_sample(gpus=0, timestamp=time.time())
        sample.gpus = collector.sample().gpus
    collector_ = SampleCollector()
    collector_.update(sample)
    registry = CollectorRegistry()
    registry.register(collector_)
    text = generate_latest(registry).decode()
    without = [gpu for gpu in sample.gpus if isinstance(gpu.nvlink_crc_flit_errors, Unavailable)]
    assert [gpu.index for gpu in without] == [0]
    for gpu in without:
        assert f'gpuscope_gpu_nvlink_crc_flit_errors_total{{compute_instance="",gpu="{gpu.index}"' not in text
        assert any(
            'metric="gpuscope_gpu_nvlink_crc_flit_errors_total"' in line and f'gpu="{gpu.index}"' in line
            for line in text.splitlines()
            if line.startswith("gpuscope_metric_unavailable{")
        )


def test_a_csv_log_without_the_counter_columns_still_reads(tmp_path: Path) -> None:
    sample = make_sample()
    sample.gpus[0].pcie_replay_errors = 7
    new = tmp_path / "new.csv"
    writer = open_log_writer(new, "csv", codec=None)
    writer.write(sample)
    writer.close()
    assert [s.gpus[0].pcie_replay_errors for s in read_log(new)] == [7]
    rows = list(csv.reader(new.open(newline="")))
    keep = [i for i, name in enumerate(rows[0]) if not name.endswith(("replay_errors", "crc_flit_errors"))]
    assert len(keep) < len(rows[0])
    old = tmp_path / "old.csv"
    with old.open("w", newline="") as handle:
        csv.writer(handle).writerows([[row[i] for i in keep] for row in rows])
    (back,) = read_log(old)
    assert reason_of(back.gpus[0].pcie_replay_errors) is Reason.ERROR
    assert back.gpus[0].power_w == sample.gpus[0].power_w
