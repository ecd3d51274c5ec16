"""Alerts (thresholds over a sample) as the TUI, ``gpuscope log``, the exporter and
``gpuscope snapshot`` use them; and the snapshot command itself."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from tui_samples import sample

from gpuscope.telemetry.alerts import AlertThresholds, alert_line, evaluate, load_thresholds, worst_level
from gpuscope.telemetry.logprogress import LogProgress, fmt_interval

ROOT = Path(__file__).resolve().parent.parent


def _with(gpu_index: int, **changes):
    s = sample(3)
    s.gpus[gpu_index] = dataclasses.replace(s.gpus[gpu_index], **changes)
    return s


def test_thresholds_raise_the_right_levels() -> None:
    kinds = lambda s: {(a.kind, a.level) for a in evaluate(s)}  # noqa: E731
    assert ("ecc_corrected", "careful") in kinds(sample(3)) and ("throttle", "careful") in kinds(
        sample(3)
    )  # the A100: 2 ECC, power cap
    assert ("temperature", "warning") in kinds(_with(0, temperature_gpu_c=88.0))
    assert ("temperature", "critical") in kinds(_with(0, temperature_gpu_c=90.0))
    assert ("memory_temperature", "critical") in kinds(_with(0, temperature_memory_c=96.0))
    assert ("memory_full", "critical") in kinds(
        _with(0, memory_used_bytes=140_000_000_000, memory_total_bytes=141_000_000_000)
    )
    assert ("power", "warning") in kinds(_with(0, power_w=700.0))
    assert ("ecc_uncorrected", "critical") in kinds(_with(0, ecc_uncorrected_errors=1))
    assert ("throttle", "critical") in kinds(_with(0, throttle_reasons=["hw_slowdown"]))
    lost = evaluate(_with(1, state="lost"))
    assert lost[0].kind == "gpu_lost" and lost[0].level == "critical" and worst_level(lost) == "critical"
    assert ("temperature", "warning") not in kinds(_with(0, temperature_gpu_c=62.0))


def test_alert_line_fits_its_width_and_counts_the_rest() -> None:
    alerts = evaluate(_with(0, temperature_gpu_c=95.0, ecc_uncorrected_errors=3))
    line = alert_line(alerts, 60)
    assert len(line) <= 60 and line.startswith("CRITICAL") and "more" in line


def test_thresholds_file_overrides_and_bad_fields_are_named(tmp_path: Path) -> None:
    path = tmp_path / "alerts.toml"
    path.write_text('gpu_temperature_c = [50, 60, 70]\n[throttle_levels]\nsw_power_cap = "ok"\n')
    thresholds, problem = load_thresholds(path)
    assert (
        problem is None
        and thresholds.gpu_temperature_c == (50.0, 60.0, 70.0)
        and "sw_power_cap" not in thresholds.throttle_levels
    )
    assert ("temperature", "warning") in {(a.kind, a.level) for a in evaluate(sample(3), thresholds)}  # 62 °C on GPU 0
    path.write_text("gpu_temperature_c = [90, 80, 70]\ncolour = 1\n")
    thresholds, problem = load_thresholds(path)
    assert (
        problem is not None
        and str(path) in problem
        and thresholds.gpu_temperature_c == AlertThresholds().gpu_temperature_c
    )
    path.write_text("gpu_temperature_c = [")
    assert "not valid TOML" in (load_thresholds(path)[1] or "")
    assert load_thresholds(tmp_path / "none.toml") == (AlertThresholds(), None)


def test_log_progress_annotates_records_and_says_start_alerts_and_summary() -> None:
    said: list[str] = []
    progress = LogProgress(said.append, AlertThresholds())
    progress.start("out.jsonl", "jsonl", 1.0, None)
    hot = _with(0, temperature_gpu_c=91.0)
    progress.observe(hot)
    progress.observe(_with(0, temperature_gpu_c=91.0))  # the same alert again: said once
    assert said[0] == "logging jsonl to out.jsonl every 1 s until Ctrl+C or SIGTERM"
    assert sum("CRITICAL GPU 0: 91°C" in line for line in said) == 1
    assert hot.alerts[0].startswith("critical temperature GPU 0: 91°C")
    assert progress.summary("out.jsonl").startswith("wrote 2 records (2 GPUs each) to out.jsonl")
    assert fmt_interval(0.25) == "every 250 ms" and fmt_interval(1.0) == "every 1 s"


def test_alerts_survive_the_log_round_trip() -> None:
    from gpuscope.telemetry.records import record_to_dict
    from gpuscope.telemetry.wire import decode_record

    hot = _with(0, temperature_gpu_c=91.0)
    LogProgress(lambda line: None, AlertThresholds()).observe(hot)
    again = decode_record(json.dumps(record_to_dict(hot)).encode())
    assert again.alerts == hot.alerts and again.alerts


def test_exporter_has_gpuscope_alert() -> None:
    from gpuscope.exporter.metrics import sample_to_families

    families = {f.name: f for f in sample_to_families(_with(1, state="lost"))}
    series = families["gpuscope_alert"].samples
    lost = [s for s in series if s.labels["kind"] == "gpu_lost"]
    assert lost and lost[0].value == 3.0 and lost[0].labels["gpu"] == "1"


def _snapshot(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuscope", "snapshot", "--wait", "0.1", *args],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_snapshot_prints_one_line_per_gpu_and_host_and_says_simulated(tmp_path: Path) -> None:
    done = _snapshot(env={"GPUSCOPE_FAKE_NVML": "gpus=2xh200", "GPUSCOPE_CONFIG_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("SIMULATED GPUs")
    gpu_lines = [line for line in lines if line.startswith("[")]
    assert len(gpu_lines) == 2 and all("NVIDIA H200" in line and "GiB" in line and "W" in line for line in gpu_lines)
    assert any(line.startswith(os.uname().nodename + " | CPU") for line in lines)


def test_snapshot_json_is_one_record(tmp_path: Path) -> None:
    done = _snapshot("--json", "--no-gpu", env={"GPUSCOPE_CONFIG_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["schema"] == "gpuscope.snapshot" and document["record"]["gpus"] == []
    assert isinstance(document["record"]["host"]["cpu_utilization_percent"], float)  # two reads: a real rate
    bad = _snapshot("--wait", "99")
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "--wait" in bad.stderr
