"""The Prometheus exporter: names, labels and units of every metric, unavailable metrics absent,
and serving over HTTP on loopback (ephemeral ports, bounded requests)."""

from __future__ import annotations

import json
import re
import socket
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuscope.errors import ResourceError, UsageError
from gpuscope.exporter import parse_listen, start_exporter
from gpuscope.exporter.metrics import GPU_LABELS, METRICS, sample_to_families
from gpuscope.telemetry.records import (
    CpuCoreSample,
    GpuProcessSample,
    GpuSample,
    HostSample,
    InfinibandPortSample,
    NicSample,
    NvLinkLinkSample,
    Sample,
)
from gpuscope.telemetry.values import Reason, Unavailable

ROOT = Path(__file__).resolve().parents[1]
NO_PERM = Unavailable(Reason.NO_PERMISSION, "profiling counters need admin")
WARM = Unavailable(Reason.WARMING_UP, "a rate needs two samples")
NOT_SUP = Unavailable(Reason.NOT_SUPPORTED, "no fan")


def _host() -> HostSample:
    return HostSample(
        hostname="node-a",
        cpu_model="Test CPU",
        logical_cores=2,
        physical_cores=1,
        cpu_utilization_percent=50.0,
        cores=[CpuCoreSample(0, 25.0, 2450.0), CpuCoreSample(1, 75.0, Unavailable(Reason.NOT_SUPPORTED, "no cpufreq"))],
        load_average_1m=1.5,
        load_average_5m=1.0,
        load_average_15m=0.5,
        memory_total_bytes=8_000_000_000,
        memory_used_bytes=3_000_000_000,
        memory_available_bytes=5_000_000_000,
        swap_total_bytes=0,
        swap_used_bytes=0,
        nics=[NicSample("eth0", 1000.0, 2000.0, True, 25000.0), NicSample("eth1", WARM, WARM, False, NOT_SUP)],
        infiniband_ports=[InfinibandPortSample("mlx5_0", 1, "InfiniBand", "4: ACTIVE", 400.0, 1e9, 2e9)],
    )


def _gpu0() -> GpuSample:
    return GpuSample(
        index=0,
        name="NVIDIA H200",
        uuid="GPU-0000",
        pci_bus_id="00000000:01:00.0",
        architecture="hopper",
        state="ok",
        mig_mode=False,
        utilization_percent=80.0,
        memory_busy_percent=40.0,
        memory_used_bytes=10 * 2**30,
        memory_total_bytes=141 * 10**9,
        dram_bandwidth_bytes_per_s=2.4e12,
        dram_bandwidth_percent_of_peak=50.0,
        dram_peak_bytes_per_s=4.8e12,
        sm_activity_percent=70.0,
        sm_occupancy_percent=30.0,
        tensor_activity_percent=20.0,
        hmma_tensor_activity_percent=20.0,
        imma_tensor_activity_percent=0.0,
        dfma_tensor_activity_percent=0.0,
        fp64_activity_percent=0.0,
        fp32_activity_percent=10.0,
        fp16_activity_percent=5.0,
        pcie_tx_bytes_per_s=1e9,
        pcie_rx_bytes_per_s=2e9,
        pcie_link_generation=5,
        pcie_link_width=16,
        nvlink_tx_bytes_per_s=3e10,
        nvlink_rx_bytes_per_s=4e10,
        nvlink_active_links=2,
        nvlink_version=4,
        nvlink_link_peak_bytes_per_s=2.5e10,
        nvlink_links=[NvLinkLinkSample(0, 1e10, 2e10), NvLinkLinkSample(1, 2e10, 2e10)],
        sm_clock_mhz=1980.0,
        sm_clock_max_mhz=1980.0,
        memory_clock_mhz=2619.0,
        memory_clock_max_mhz=2619.0,
        power_w=650.5,
        power_limit_w=700.0,
        energy_j=123456.0,
        temperature_gpu_c=61.0,
        temperature_memory_c=70.0,
        fan_speed_percent=NOT_SUP,
        throttle_reasons=["sw_power_cap"],
        ecc_corrected_errors=3,
        ecc_uncorrected_errors=0,
        processes=[GpuProcessSample(4242, "python", "alice", 2**30, 55.0, "compute")],
    )


def _mig() -> GpuSample:
    return GpuSample(
        index=1,
        name="NVIDIA H200 MIG 1g.18gb",
        uuid="MIG-1111",
        pci_bus_id="00000000:02:00.0",
        architecture="hopper",
        state="ok",
        mig_parent_index=1,
        mig_gpu_instance_id=7,
        mig_compute_instance_id=0,
        memory_used_bytes=2**30,
        memory_total_bytes=18 * 10**9,
        sm_activity_percent=NO_PERM,
        processes=NO_PERM,
        throttle_reasons=Unavailable(Reason.NOT_APPLICABLE, "MIG instance"),
    )


def _sample(**overrides: object) -> Sample:
    values: dict[str, object] = dict(
        timestamp=1_700_000_000.0,
        host=_host(),
        gpus=[_gpu0(), _mig()],
        driver_version="560.35",
        nvml_version="12.560",
        cuda_driver_version="12.6",
    )
    values.update(overrides)
    return Sample(**values)  # type: ignore[arg-type]


def _parse(text: str) -> dict[str, list]:
    """sample name -> list of (labels, value) over every family."""
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for item in family.samples:
            out.setdefault(item.name, []).append((item.labels, item.value))
    return out


def _exposition(sample: Sample | None) -> str:
    from prometheus_client import CollectorRegistry, generate_latest

    from gpuscope.exporter import SampleCollector

    registry = CollectorRegistry(auto_describe=False)
    collector = SampleCollector()
    registry.register(collector)
    if sample is not None:
        collector.update(sample)
    return generate_latest(registry).decode()


def _one(series: dict[str, list], name: str, **labels: str) -> float:
    found = [value for got, value in series.get(name, []) if all(got.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, f"{name}{labels}: {found} in {series.get(name)}"
    return found[0]


# --- names, units, labels ---------------------------------------------------------------------


def test_every_name_follows_prometheus_conventions() -> None:
    names = [spec.name for spec in METRICS]
    assert len(names) == len(set(names))
    for spec in METRICS:
        assert re.fullmatch(r"gpuscope_[a-z0-9_]+", spec.name), spec.name
        assert not re.search(
            r"_(percent|pct|mhz|ghz|w|kib|mib|kb|mb|gb|ms|us|mbit|gbit|bytes_per_s)(_|$)", spec.name
        ), spec.name
        assert spec.name.endswith("_total") == (spec.kind == "counter"), spec.name
        if any(word in spec.name for word in ("bandwidth", "transmit", "receive")):
            assert spec.name.endswith(("_bytes_per_second", "_ratio", "_bytes_total")), spec.name
        if "temperature" in spec.name:
            assert spec.name.endswith("_celsius")
        if "power" in spec.name:
            assert spec.name.endswith("_watts")
        if "clock" in spec.name or "frequency" in spec.name:
            assert spec.name.endswith("_hertz")


def test_every_record_field_is_exported() -> None:
    """A new telemetry field without an exported metric fails here."""
    import dataclasses

    from gpuscope.exporter.metrics import _GPU_SCALARS

    scalar_fields = {name for name, _, _ in _GPU_SCALARS}
    handled_elsewhere = {
        "index", "name", "uuid", "pci_bus_id", "architecture", "state",
        "mig_parent_index", "mig_gpu_instance_id", "mig_compute_instance_id",
        "throttle_reasons", "nvlink_links", "processes", "vendor",  # vendor: a gpuscope_gpu_info label
        "xid_events", "xid_events_dropped", "xid_recent",  # gpuscope_gpu_xid_events_total, gpuscope_alert
    }  # fmt: skip
    for field in dataclasses.fields(GpuSample):
        assert field.name in scalar_fields | handled_elsewhere, f"GpuSample.{field.name} is not exported"
    known = {
        Sample: {"timestamp", "host", "gpus", "driver_version", "nvml_version", "cuda_driver_version",
                 "gpu_unavailable", "sample_cost_s", "schema_version", "alerts",
                 "amd_driver_version", "amdsmi_library_version", "simulated",  # gpuscope_host_info labels
                 "nvidia_unavailable", "amd_unavailable"},  # per vendor; gpu_unavailable is the exported one
        HostSample: {"hostname", "cpu_model", "logical_cores", "physical_cores", "cpu_utilization_percent", "cores",
                     "load_average_1m", "load_average_5m", "load_average_15m", "memory_total_bytes",
                     "memory_used_bytes", "memory_available_bytes", "swap_total_bytes", "swap_used_bytes", "nics",
                     "infiniband_ports", "disk_read_bytes_per_s", "disk_write_bytes_per_s"},
        CpuCoreSample: {"core", "utilization_percent", "frequency_mhz"},
        NicSample: {"name", "rx_bytes_per_s", "tx_bytes_per_s", "is_up", "speed_mbit_per_s", "is_loopback"},
        InfinibandPortSample: {"device", "port", "link_layer", "state", "rate_gbit_per_s", "rx_bytes_per_s",
                               "tx_bytes_per_s"},
        NvLinkLinkSample: {"link", "tx_bytes_per_s", "rx_bytes_per_s",
                           "crc_flit_errors", "crc_data_errors", "replay_errors", "recovery_errors"},
        GpuProcessSample: {"pid", "name", "user", "gpu_memory_bytes", "sm_percent", "kind"},
    }  # fmt: skip
    for record, names in known.items():
        new = {field.name for field in dataclasses.fields(record)} - names
        assert not new, f"{record.__name__} gained {new}: export them in gpuscope/exporter/metrics.py"
    series = _parse(_exposition(_sample()))
    host_metrics = [
        "gpuscope_cpu_utilization_ratio", "gpuscope_cpu_logical_cores", "gpuscope_cpu_physical_cores",
        "gpuscope_cpu_core_utilization_ratio", "gpuscope_cpu_core_frequency_hertz", "gpuscope_host_load1",
        "gpuscope_host_load5", "gpuscope_host_load15", "gpuscope_host_memory_total_bytes",
        "gpuscope_host_memory_used_bytes", "gpuscope_host_memory_available_bytes", "gpuscope_host_swap_total_bytes",
        "gpuscope_host_swap_used_bytes", "gpuscope_nic_receive_bytes_per_second",
        "gpuscope_nic_transmit_bytes_per_second",
        "gpuscope_nic_up", "gpuscope_nic_speed_bytes_per_second", "gpuscope_infiniband_port_info",
        "gpuscope_infiniband_port_rate_bytes_per_second", "gpuscope_infiniband_receive_bytes_per_second",
        "gpuscope_infiniband_transmit_bytes_per_second", "gpuscope_host_info", "gpuscope_sample_timestamp_seconds",
    ]  # fmt: skip
    for name in host_metrics:
        assert name in series, name
    amd_or_counted = ("xgmi", "hotspot", "pcie_bytes_per_second", "errors_total")  # not in this sample
    for _, spec, _ in _GPU_SCALARS:
        # fan speed: unavailable on gpu0 by design
        if spec.name != "gpuscope_gpu_fan_speed_ratio" and not any(w in spec.name for w in amd_or_counted):
            assert spec.name in series, spec.name


def test_units_are_converted_to_base_units() -> None:
    series = _parse(_exposition(_sample()))
    gpu0 = dict(host="node-a", gpu="0", uuid="GPU-0000", gpu_instance="", compute_instance="")
    assert _one(series, "gpuscope_gpu_utilization_ratio", **gpu0) == pytest.approx(0.8)
    assert _one(series, "gpuscope_gpu_sm_activity_ratio", **gpu0) == pytest.approx(0.7)
    assert _one(series, "gpuscope_gpu_dram_bandwidth_ratio", **gpu0) == pytest.approx(0.5)
    assert _one(series, "gpuscope_gpu_dram_bandwidth_bytes_per_second", **gpu0) == pytest.approx(2.4e12)
    assert _one(series, "gpuscope_gpu_sm_clock_hertz", **gpu0) == pytest.approx(1.98e9)
    assert _one(series, "gpuscope_gpu_power_watts", **gpu0) == pytest.approx(650.5)
    assert _one(series, "gpuscope_gpu_energy_joules_total", **gpu0) == pytest.approx(123456.0)
    assert _one(series, "gpuscope_gpu_temperature_celsius", **gpu0) == pytest.approx(61.0)
    assert _one(series, "gpuscope_gpu_ecc_corrected_errors_total", **gpu0) == 3
    assert _one(series, "gpuscope_cpu_core_frequency_hertz", host="node-a", core="0") == pytest.approx(2.45e9)
    assert _one(series, "gpuscope_cpu_core_utilization_ratio", host="node-a", core="1") == pytest.approx(0.75)
    assert _one(series, "gpuscope_nic_speed_bytes_per_second", host="node-a", nic="eth0") == pytest.approx(25e9 / 8)
    assert _one(series, "gpuscope_infiniband_port_rate_bytes_per_second", device="mlx5_0", port="1") == pytest.approx(
        50e9
    )
    assert _one(series, "gpuscope_nic_up", nic="eth1") == 0
    assert _one(series, "gpuscope_gpu_throttled", **gpu0) == 1
    assert _one(series, "gpuscope_gpu_throttle_reason", reason="sw_power_cap", **gpu0) == 1
    assert _one(series, "gpuscope_gpu_process_memory_bytes", pid="4242", process="python", user="alice") == 2**30
    assert _one(series, "gpuscope_gpu_process_sm_utilization_ratio", pid="4242") == pytest.approx(0.55)
    assert _one(series, "gpuscope_gpu_devices", host="node-a") == 2


def test_labels_name_gpu_mig_instance_and_nvlink_link() -> None:
    series = _parse(_exposition(_sample()))
    tx = {got["link"]: value for got, value in series["gpuscope_gpu_nvlink_link_transmit_bytes_per_second"]}
    assert tx == {"0": 1e10, "1": 2e10}
    for got, _ in series["gpuscope_gpu_nvlink_link_receive_bytes_per_second"]:
        assert set(got) == {*GPU_LABELS, "link"} and got["uuid"] == "GPU-0000"
    mig = _one(series, "gpuscope_gpu_memory_total_bytes", uuid="MIG-1111")
    assert mig == 18e9
    labels = next(got for got, _ in series["gpuscope_gpu_memory_total_bytes"] if got["uuid"] == "MIG-1111")
    assert labels == {"host": "node-a", "gpu": "1", "uuid": "MIG-1111", "gpu_instance": "7", "compute_instance": "0"}
    info = next(got for got, _ in series["gpuscope_gpu_info"] if got["uuid"] == "GPU-0000")
    assert info["name"] == "NVIDIA H200" and info["pci_bus_id"] == "00000000:01:00.0" and info["state"] == "ok"
    host_info = series["gpuscope_host_info"][0][0]
    assert host_info["driver_version"] == "560.35" and host_info["cpu_model"] == "Test CPU"


def test_unavailable_metrics_are_absent_not_zero() -> None:
    series = _parse(_exposition(_sample()))
    # gpu0 has no fan reading; the MIG instance has only memory fields.
    assert "gpuscope_gpu_fan_speed_ratio" not in series
    assert all(got["uuid"] != "MIG-1111" for got, _ in series["gpuscope_gpu_sm_activity_ratio"])
    assert all(got["uuid"] != "MIG-1111" for got, _ in series["gpuscope_gpu_power_watts"])
    assert all(got["uuid"] != "MIG-1111" for got, _ in series["gpuscope_gpu_throttled"])
    assert all(got["nic"] != "eth1" for got, _ in series["gpuscope_nic_receive_bytes_per_second"])
    assert [got["core"] for got, _ in series["gpuscope_cpu_core_frequency_hertz"]] == ["0"]
    # ... and the operator aid says which and why, once per scope/metric/reason.
    missing = {(got["uuid"], got["metric"], got["reason"]) for got, _ in series["gpuscope_metric_unavailable"]}
    assert ("GPU-0000", "gpuscope_gpu_fan_speed_ratio", "not_supported") in missing
    assert ("MIG-1111", "gpuscope_gpu_sm_activity_ratio", "no_permission") in missing
    assert ("MIG-1111", "gpuscope_gpu_power_watts", "error") in missing  # NOT_COLLECTED default
    assert ("MIG-1111", "gpuscope_gpu_process_memory_bytes", "no_permission") in missing
    assert ("", "gpuscope_nic_receive_bytes_per_second", "warming_up") in missing
    assert ("", "gpuscope_cpu_core_frequency_hertz", "not_supported") in missing
    rows = [(tuple(sorted(got.items()))) for got, _ in series["gpuscope_metric_unavailable"]]
    assert len(rows) == len(set(rows))
    no_aid = [family.name for family in sample_to_families(_sample(), with_unavailable=False)]
    assert "gpuscope_metric_unavailable" not in no_aid


def test_no_gpu_side_and_no_sample() -> None:
    reason = Unavailable(Reason.NO_DRIVER, "libnvidia-ml.so.1 not found")
    series = _parse(_exposition(_sample(gpus=[], gpu_unavailable=reason, driver_version=reason)))
    assert "gpuscope_gpu_devices" not in series
    assert not any(name.startswith("gpuscope_gpu_") for name in series)
    assert "gpuscope_cpu_utilization_ratio" in series
    assert ("gpuscope_gpu_devices", "no_driver") in {
        (g["metric"], g["reason"]) for g, _ in series["gpuscope_metric_unavailable"]
    }
    assert series["gpuscope_host_info"][0][0]["driver_version"] == ""
    assert sample_to_families(None) == []
    assert _parse(_exposition(None)) == {}


def test_lost_gpu_reports_down() -> None:
    lost = GpuSample(index=0, name="NVIDIA H200", uuid="GPU-0000", pci_bus_id="x", architecture="hopper", state="lost")
    series = _parse(_exposition(_sample(gpus=[lost])))
    assert _one(series, "gpuscope_gpu_up", uuid="GPU-0000") == 0
    assert "gpuscope_gpu_power_watts" not in series


def test_docs_list_every_metric() -> None:
    text = (ROOT / "docs" / "prometheus.md").read_text()
    for spec in METRICS:
        assert spec.name in text, f"docs/prometheus.md does not mention {spec.name}"


def test_grafana_dashboard_is_valid_and_uses_real_metrics() -> None:
    dashboard = json.loads((ROOT / "docs" / "grafana" / "gpuscope-dashboard.json").read_text())
    names = {spec.name for spec in METRICS}
    variables = {item["name"] for item in dashboard["templating"]["list"]}
    assert {"host", "gpu"} <= variables
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    assert len(exprs) >= 8
    used = set()
    for expr in exprs:
        for token in re.findall(r"gpuscope_[a-z0-9_]+", expr):
            assert token in names, f"dashboard uses unknown metric {token}"
            used.add(token)
    for wanted in (
        "gpuscope_gpu_utilization_ratio", "gpuscope_gpu_sm_activity_ratio", "gpuscope_gpu_tensor_activity_ratio",
        "gpuscope_gpu_dram_bandwidth_bytes_per_second", "gpuscope_gpu_pcie_transmit_bytes_per_second",
        "gpuscope_gpu_nvlink_transmit_bytes_per_second", "gpuscope_gpu_power_watts", "gpuscope_gpu_temperature_celsius",
        "gpuscope_gpu_nvlink_link_transmit_bytes_per_second",
    ):  # fmt: skip
        assert wanted in used, wanted


# --- listen addresses ---------------------------------------------------------------------------


def test_parse_listen() -> None:
    assert parse_listen("127.0.0.1:9842") == ("127.0.0.1", 9842)
    assert parse_listen("0.0.0.0:80") == ("0.0.0.0", 80)
    assert parse_listen("[::1]:9000") == ("::1", 9000)
    assert parse_listen(":9000") == ("127.0.0.1", 9000)
    assert parse_listen("9000") == ("127.0.0.1", 9000)
    assert parse_listen("localhost:0") == ("localhost", 0)
    for bad in ("", "host:", "host:port", "1.2.3.4:70000", "::1:9000", "[nothost]:1", "[::1]"):
        with pytest.raises(UsageError) as info:
            parse_listen(bad)
        assert "\n" not in str(info.value)


# --- HTTP -----------------------------------------------------------------------------------------


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback test server
        assert response.status == 200
        return response.read().decode()


def test_scrape_over_http_on_loopback() -> None:
    with start_exporter("127.0.0.1:0") as handle:
        assert handle.host == "127.0.0.1" and handle.port > 0
        assert handle.url == f"http://127.0.0.1:{handle.port}/metrics"
        before = _parse(_get(handle.url))
        own = {"gpuscope_build_info", "gpuscope_exporter_scrape_errors_total", "gpuscope_exporter_auth_refusals_total"}
        assert {name for name in before if name.startswith("gpuscope_")} == own  # no sample's series before the first
        assert "process_resident_memory_bytes" in before or "process_cpu_seconds_total" in before
        handle.update(_sample())
        handle.update(_sample(timestamp=1_700_000_001.0))
        series = _parse(_get(handle.url))
        assert _one(series, "gpuscope_sample_timestamp_seconds", host="node-a") == 1_700_000_001.0
        assert _one(series, "gpuscope_exporter_samples_total", host="node-a") == 2
        assert _one(series, "gpuscope_gpu_power_watts", uuid="GPU-0000") == pytest.approx(650.5)
    handle.close()  # second close is harmless
    with pytest.raises(OSError):
        urllib.request.urlopen(handle.url, timeout=2)  # noqa: S310


def test_default_bind_is_loopback() -> None:
    from gpuscope.exporter import DEFAULT_LISTEN

    assert DEFAULT_LISTEN == "127.0.0.1:9842"
    with start_exporter("0") as handle:  # bare port: loopback, not every interface
        assert handle._server.socket.getsockname()[0] == "127.0.0.1"  # type: ignore[union-attr]


def test_port_in_use_is_a_one_line_resource_error() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(ResourceError) as info:
            start_exporter(f"127.0.0.1:{port}")
    message = str(info.value)
    assert "in use" in message and str(port) in message and "\n" not in message


def test_bad_host_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        start_exporter("192.0.2.123:0")  # TEST-NET-1: not an address of this machine
    with pytest.raises(UsageError):
        start_exporter("no-such-host.invalid:0")
