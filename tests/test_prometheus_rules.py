"""The rules shipped in docs/prometheus/ under ``promtool test rules``, fed with series scraped from
the real exporter: the first-Xid alert fires, the dcgm-exporter/nvitop recording rules give their
names, labels and units. Skipped where promtool is missing (.ci/run installs Debian's prometheus)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from support.samples import make_sample

from gpuscope.exporter.server import SampleCollector
from gpuscope.telemetry.records import XidEvent

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "docs" / "prometheus"
pytestmark = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool is not installed (Debian: prometheus)"
)


def _scrapes(xid_at: int | None, steps: int = 8) -> list[str]:
    """The exposition after each of ``steps`` samples a minute apart; GPU 1 reports Xid 79 at ``xid_at``."""
    collector = SampleCollector()
    registry = CollectorRegistry()
    registry.register(collector)
    texts = []
    for step in range(steps):
        sample = make_sample(tick=step, gpus=2, timestamp=1_700_000_000.0 + 60.0 * step)
        for gpu in sample.gpus:
            gpu.xid_events, gpu.xid_events_dropped = [], 0
        if step == xid_at:
            now = sample.timestamp
            sample.gpus[1].xid_events = [XidEvent(79, 1, now, now, "GPU has fallen off the bus")]
        collector.update(sample)
        texts.append(generate_latest(registry).decode())
    return texts


def _series(texts: list[str], family: str) -> dict[str, list[float]]:
    """Each series of ``family`` (promtool's ``name{labels}`` form) -> its value per scrape ('_' absent)."""
    out: dict[str, list[float | None]] = {}
    for step, text in enumerate(texts):
        for metric in text_string_to_metric_families(text):
            for sample in metric.samples:
                if sample.name != family:
                    continue
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                out.setdefault(f"{family}{{{labels}}}", [None] * len(texts))[step] = sample.value
    return out  # type: ignore[return-value]


def _values(values: list[float | None]) -> str:
    return " ".join("_" if value is None else repr(float(value)) for value in values)


def _promtool(tmp_path: Path, rule_file: str, tests: str) -> subprocess.CompletedProcess[str]:
    shutil.copy(RULES / rule_file, tmp_path / rule_file)
    test = tmp_path / "test.yml"
    test.write_text(f"rule_files:\n  - {rule_file}\nevaluation_interval: 1m\ntests:\n{tests}")
    return subprocess.run(["promtool", "test", "rules", str(test)], capture_output=True, text=True, timeout=60)


def _input(series: dict[str, list[float | None]]) -> str:
    return "".join(
        f"      - series: '{name}'\n        values: '{_values(values)}'\n" for name, values in series.items()
    )


def test_first_xid_of_a_gpu_fires_the_alert(tmp_path: Path) -> None:
    texts = _scrapes(xid_at=4)
    series = _series(texts, "gpuscope_gpu_xid_errors_total")
    assert len(series) == 2 and all(values[0] == 0.0 for values in series.values()), series  # 0 from the start
    gpu1 = next(name for name in series if 'gpu="1"' in name)
    labels = gpu1[gpu1.index("{") + 1 : -1]
    host = labels.split('host="')[1].split('"')[0]
    tests = f"""  - interval: 1m
    input_series:
{_input(series)}    alert_rule_test:
      - eval_time: 3m
        alertname: GpuXidError
        exp_alerts: []
      - eval_time: 5m
        alertname: GpuXidError
        exp_alerts:
          - exp_labels: {{{labels}, severity: critical}}
            exp_annotations:
              summary: "GPU 1 on {host} reported an Xid error"
"""
    # exp_labels in promtool's YAML map form
    pairs = ", ".join(  # an empty label is no label in Prometheus
        f"{part.split('=')[0]}: {part.split('=', 1)[1]}" for part in labels.split(",") if not part.endswith('=""')
    )
    tests = tests.replace(f"{{{labels}, severity: critical}}", f"{{{pairs}, severity: critical}}")
    result = _promtool(tmp_path, "alerts.rules.yml", tests)
    assert result.returncode == 0, result.stdout + result.stderr


def test_without_an_xid_the_alert_stays_quiet(tmp_path: Path) -> None:
    series = _series(_scrapes(xid_at=None), "gpuscope_gpu_xid_errors_total")
    assert len(series) == 2
    tests = f"""  - interval: 1m
    input_series:
{_input(series)}    alert_rule_test:
      - eval_time: 7m
        alertname: GpuXidError
        exp_alerts: []
"""
    result = _promtool(tmp_path, "alerts.rules.yml", tests)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_wrong_expectation_fails_so_the_harness_can_fail(tmp_path: Path) -> None:
    series = _series(_scrapes(xid_at=None), "gpuscope_gpu_xid_errors_total")
    tests = f"""  - interval: 1m
    input_series:
{_input(series)}    alert_rule_test:
      - eval_time: 7m
        alertname: GpuXidError
        exp_alerts:
          - exp_labels: {{gpu: "1"}}
"""
    assert _promtool(tmp_path, "alerts.rules.yml", tests).returncode != 0


def test_dcgm_recording_rules_give_dcgm_names_labels_and_units(tmp_path: Path) -> None:
    texts = _scrapes(xid_at=None, steps=2)
    series: dict[str, list[float | None]] = {}
    for family in ("gpuscope_gpu_utilization_ratio", "gpuscope_gpu_memory_used_bytes", "gpuscope_gpu_info"):
        series.update(_series(texts, family))
    info = _series(texts, "gpuscope_gpu_info")
    gpu0_info = next(name for name in info if 'gpu="0"' in name)
    utilization = next(v for n, v in _series(texts, "gpuscope_gpu_utilization_ratio").items() if 'gpu="0"' in n)
    used = next(v for n, v in _series(texts, "gpuscope_gpu_memory_used_bytes").items() if 'gpu="0"' in n)
    labels = dict(part.split("=", 1) for part in gpu0_info[gpu0_info.index("{") + 1 : -1].split(","))
    keep = {k: labels[k] for k in ("host", "gpu", "uuid", "gpu_instance", "compute_instance", "name", "pci_bus_id")}
    dcgm = {**keep, "Hostname": labels["host"], "UUID": labels["uuid"], "modelName": labels["name"]}
    selector = ",".join(f"{k}={v}" for k, v in sorted(dcgm.items()))
    tests = f"""  - interval: 1m
    input_series:
{_input(series)}    promql_expr_test:
      - expr: DCGM_FI_DEV_GPU_UTIL{{gpu="0"}}
        eval_time: 1m
        exp_samples:
          - labels: 'DCGM_FI_DEV_GPU_UTIL{{{selector}}}'
            value: {utilization[1] * 100}
      - expr: DCGM_FI_DEV_FB_USED{{gpu="0"}}
        eval_time: 1m
        exp_samples:
          - labels: 'DCGM_FI_DEV_FB_USED{{{selector}}}'
            value: {used[1] / 1048576}
"""
    result = _promtool(tmp_path, "dcgm-compat.rules.yml", tests)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_rule_file_passes_promtool_check() -> None:
    files = sorted(RULES.glob("*.rules.yml"))
    assert len(files) >= 2
    result = subprocess.run(["promtool", "check", "rules", *map(str, files)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_nvitop_recording_rules_give_the_series_nvitop_exporter_publishes(tmp_path: Path) -> None:
    """nvitop-exporter's gauges carry prometheus_client's unit suffix (``gpu_utilization_Percentage``,
    ``gpu_memory_used_MiB``: the names its own Grafana dashboard queries), with labels hostname,
    index, devicename and uuid."""
    texts = _scrapes(xid_at=None, steps=2)
    families = ("gpuscope_gpu_utilization_ratio", "gpuscope_gpu_memory_used_bytes", "gpuscope_gpu_memory_total_bytes",
                "gpuscope_gpu_info", "gpuscope_cpu_utilization_ratio")  # fmt: skip
    series: dict[str, list[float | None]] = {}
    for family in families:
        series.update(_series(texts, family))
    info = _series(texts, "gpuscope_gpu_info")
    gpu0_info = next(name for name in info if 'gpu="0"' in name)
    labels = dict(part.split("=", 1) for part in gpu0_info[gpu0_info.index("{") + 1 : -1].split(","))
    keep = {k: labels[k] for k in ("host", "gpu", "uuid", "gpu_instance", "compute_instance", "name")}
    nvitop = {**keep, "hostname": labels["host"], "index": labels["gpu"], "devicename": labels["name"]}
    selector = ",".join(f"{k}={v}" for k, v in sorted(nvitop.items()))
    value = {family: next(v for n, v in _series(texts, family).items() if 'gpu="0"' in n or "gpu=" not in n)
             for family in families if family != "gpuscope_gpu_info"}  # fmt: skip
    (cpu_series,) = _series(texts, "gpuscope_cpu_utilization_ratio")
    host_labels = cpu_series[cpu_series.index("{") + 1 : -1]
    tests = f"""  - interval: 1m
    input_series:
{_input(series)}    promql_expr_test:
      - expr: gpu_utilization_Percentage{{index="0"}}
        eval_time: 1m
        exp_samples:
          - labels: 'gpu_utilization_Percentage{{{selector}}}'
            value: {value["gpuscope_gpu_utilization_ratio"][1] * 100}
      - expr: gpu_memory_percent_Percentage{{index="0"}}
        eval_time: 1m
        exp_samples:
          - labels: 'gpu_memory_percent_Percentage{{{selector}}}'
            value: {value["gpuscope_gpu_memory_used_bytes"][1] / value["gpuscope_gpu_memory_total_bytes"][1] * 100}
      - expr: gpu_memory_used_MiB{{index="0"}}
        eval_time: 1m
        exp_samples:
          - labels: 'gpu_memory_used_MiB{{{selector}}}'
            value: {value["gpuscope_gpu_memory_used_bytes"][1] / 1048576}
      - expr: host_cpu_percent_Percentage
        eval_time: 1m
        exp_samples:
          - labels: 'host_cpu_percent_Percentage{{{host_labels},hostname={labels["host"]}}}'
            value: {value["gpuscope_cpu_utilization_ratio"][1] * 100}
"""
    result = _promtool(tmp_path, "dcgm-compat.rules.yml", tests)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_rule_reads_a_metric_the_exporter_has() -> None:
    """A gpuscope metric renamed or removed breaks the shipped rules here, not in a user's Prometheus."""
    import re

    from gpuscope.exporter.metrics import METRICS

    names = {spec.name for spec in METRICS}
    names |= {f"{name}_total" for name in names} | {f"{name}_{suffix}" for name in names for suffix in ("count", "sum")}
    read = set()
    for path in sorted(RULES.glob("*.rules.yml")):
        read |= set(re.findall(r"\bgpuscope_[a-z0-9_]+", path.read_text(encoding="utf-8")))
    assert read and not read - names, sorted(read - names)
