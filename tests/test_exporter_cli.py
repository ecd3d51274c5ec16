"""``gpuscope serve``: end to end over HTTP on loopback, signals, and one-line errors."""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuscope.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _series(url: str) -> dict[str, list]:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback test server
        text = response.read().decode()
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for item in family.samples:
            out.setdefault(item.name, []).append((item.labels, item.value))
    return out


def _read_line(stream, timeout_s: float) -> str:  # noqa: ANN001 - a pipe
    ready, _, _ = select.select([stream], [], [], timeout_s)
    assert ready, "gpuscope serve printed nothing in time"
    return stream.readline().decode()


@pytest.mark.slow
def test_serve_end_to_end_and_sigterm_exits_zero() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuscope", "serve", "--listen", "127.0.0.1:0", "--interval", "0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    try:
        line = _read_line(proc.stderr, 30)
        match = re.search(r"(http://127\.0\.0\.1:(\d+)/metrics)", line)
        assert match, line
        url = match.group(1)
        series: dict[str, list] = {}
        for _ in range(50):  # bounded: at most ~5 s for the first samples
            series = _series(url)
            if series.get("gpuscope_cpu_utilization_ratio"):  # a rate: needs the second sample
                break
            time.sleep(0.1)
        assert series["gpuscope_cpu_utilization_ratio"][0][1] >= 0
        assert series["gpuscope_host_memory_total_bytes"][0][1] > 0
        assert series["gpuscope_exporter_samples_total"][0][1] >= 2
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]


def test_serve_duration_ends_and_frees_the_port(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert main(["serve", "--listen", f"127.0.0.1:{port}", "--interval", "0.1", "--duration", "0.3", "--no-gpu"]) == 0
    assert f"http://127.0.0.1:{port}/metrics" in capsys.readouterr().err
    with socket.socket() as again:  # released on exit
        again.bind(("127.0.0.1", port))


def test_serve_port_in_use_is_one_line_exit_4(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert main(["serve", "--listen", f"127.0.0.1:{port}", "--no-gpu"]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "port already in use" in err and "Traceback" not in err


@pytest.mark.parametrize("listen", ["nonsense", "127.0.0.1:99999", "::1:80"])
def test_serve_bad_listen_is_one_line_exit_2(listen: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--listen", listen, "--no-gpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gpuscope: error: ")


def test_serve_interval_below_minimum_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--listen", "127.0.0.1:0", "--interval", "0.01", "--no-gpu"]) == 2
    assert "minimum" in capsys.readouterr().err


def test_fake_nvml_two_gpus_with_nvlink_through_the_exporter() -> None:
    """The real NVML collector on the fake library, through TelemetryCollector into a scrape."""
    from gpuscope.exporter import start_exporter
    from gpuscope.telemetry.collector import TelemetryCollector
    from gpuscope.telemetry.nvml import NvmlCollector
    from gpuscope.testing.fake_nvml import FakeClock, FakeGpu, FakeLoad, FakeMig, FakeNvml, install_fake_nvml

    clock = FakeClock()
    gpus = [
        FakeGpu.h200(nvlink_links=4, load=FakeLoad(memory_clock_mhz=3201.0, power_w=500.0, temperature_gpu_c=60.0)),
        FakeGpu.h200(nvlink_links=4, mig=[FakeMig("3g.71gb", 1), FakeMig("3g.71gb", 2)]),
    ]
    fake = FakeNvml.with_gpus(gpus, clock=clock)
    fake.set_load(0, dram_bytes_per_s=2.4e12, nvlink_tx_bytes_per_s=[1e10, 2e10, 3e10, 4e10], sm_activity_percent=70.0)
    with install_fake_nvml(fake):
        collector = TelemetryCollector(gpu_source=NvmlCollector(clock=clock))
        with collector, start_exporter("127.0.0.1:0") as handle:
            for _ in range(3):
                clock.advance(1.0)
                handle.update(collector.sample())
            series = _series(handle.url)
    by_uuid = {labels["uuid"]: labels for labels, _ in series["gpuscope_gpu_info"]}
    assert len(by_uuid) >= 4  # two GPUs plus two MIG instances
    migs = [labels for labels in by_uuid.values() if labels["gpu_instance"]]
    assert sorted(labels["gpu_instance"] for labels in migs) == ["1", "2"]
    assert {labels["gpu"] for labels in migs} == {"1"}
    gpu0 = next(labels for labels in by_uuid.values() if labels["gpu"] == "0" and not labels["gpu_instance"])
    tx = {
        labels["link"]: value
        for labels, value in series["gpuscope_gpu_nvlink_link_transmit_bytes_per_second"]
        if labels["uuid"] == gpu0["uuid"]
    }
    assert tx == pytest.approx({"0": 1e10, "1": 2e10, "2": 3e10, "3": 4e10}, rel=0.02)
    power = [value for labels, value in series["gpuscope_gpu_power_watts"] if labels["uuid"] == gpu0["uuid"]]
    assert power == [pytest.approx(500.0, rel=0.05)]
    dram = [
        value
        for labels, value in series["gpuscope_gpu_dram_bandwidth_bytes_per_second"]
        if labels["uuid"] == gpu0["uuid"]
    ]
    assert dram == [pytest.approx(2.4e12, rel=0.05)]
    assert "gpuscope_gpu_fan_speed_ratio" not in series or all(
        labels["uuid"] != gpu0["uuid"] for labels, _ in series["gpuscope_gpu_fan_speed_ratio"]
    )  # H200 has no fan reading: absent, not zero
    assert any(
        labels["metric"] == "gpuscope_gpu_fan_speed_ratio" and labels["uuid"] == gpu0["uuid"]
        for labels, _ in series["gpuscope_metric_unavailable"]
    )


@pytest.mark.slow
def test_log_prometheus_logs_and_serves_the_same_samples(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    out = tmp_path / "run.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuscope",
            "log",
            "--no-gpu",
            "--interval",
            "0.1",
            "-o",
            str(out),
            "--prometheus",
            "127.0.0.1:0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    try:
        match = re.search(r"(http://127\.0\.0\.1:\d+/metrics)", _read_line(proc.stderr, 30))
        assert match
        series: dict[str, list] = {}
        for _ in range(50):
            series = _series(match.group(1))
            if series.get("gpuscope_exporter_samples_total", [({}, 0)])[0][1] >= 2:
                break
            time.sleep(0.1)
        assert series["gpuscope_exporter_samples_total"][0][1] >= 2
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
    assert len(out.read_text().splitlines()) >= 2


def test_log_prometheus_port_in_use_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.jsonl"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        code = main(["log", "--no-gpu", "--duration", "0.2", "-o", str(out), "--prometheus", f"127.0.0.1:{port}"])
    assert code == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "port already in use" in err
    assert not out.exists()
