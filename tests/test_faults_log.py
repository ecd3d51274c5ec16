"""Faults during a long headless log: NVML errors injected at random, a GPU lost and back, the
disk filling up, and SIGINT/SIGTERM/SIGKILL, with the real ``gpuscope log`` process talking to
the fake NVML through the test-only ``GPUSCOPE_FAKE_NVML`` hook (gpuscope/testing/scenarios.py),
plus an in-process run of the real sampler, collector and writer over simulated minutes.

What must hold: the run goes on, the affected metrics say why they are missing, every record
written is a complete JSON object (or at most the last line is cut, after SIGKILL), and the
records before a failure read back intact.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuscope.errors import GpuscopeError, UsageError
from gpuscope.telemetry.logfile import open_log_writer, read_log
from gpuscope.telemetry.records import GpuSample, Sample
from gpuscope.telemetry.values import Reason, Unavailable
from gpuscope.testing.scenarios import build_fake, parse_scenario

REPO = Path(__file__).resolve().parent.parent
GPU_METRICS = (
    "utilization_percent",
    "power_w",
    "memory_used_bytes",
    "sm_clock_mhz",
    "temperature_gpu_c",
    "energy_j",
    "pcie_tx_bytes_per_s",
    "nvlink_tx_bytes_per_s",
    "dram_bandwidth_bytes_per_s",
    "sm_activity_percent",
)


def _env(scenario: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONSTARTUP", None)
    if scenario is None:
        env.pop("GPUSCOPE_FAKE_NVML", None)
    else:
        env["GPUSCOPE_FAKE_NVML"] = scenario
    return env


def start_log(output: Path, scenario: str | None, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpuscope", "log", "--interval", "0.1", "--output", str(output), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(scenario),
        cwd=output.parent,
    )


def wait_for_lines(path: Path, count: int, process: subprocess.Popen[str], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        if process.poll() is not None:
            raise AssertionError(
                f"gpuscope log exited early ({process.returncode}): {process.stderr.read() if process.stderr else ''}"
            )
        time.sleep(0.05)
    process.kill()
    raise AssertionError(f"no {count} lines in {path} after {timeout_s} s")


def complete_json_lines(path: Path) -> list[dict[str, Any]]:
    """Every line parsed; fails on any incomplete or invalid one."""
    data = path.read_bytes()
    assert data.endswith(b"\n"), "the last record is incomplete"
    return [json.loads(line) for line in data.splitlines()]


def unavailable_reasons(samples: list[Sample]) -> Counter[Reason]:
    seen: Counter[Reason] = Counter()
    for sample in samples:
        for gpu in sample.gpus:
            for name in GPU_METRICS:
                value = getattr(gpu, name)
                if isinstance(value, Unavailable):
                    assert value.detail, f"{name}: a reason without a detail"
                    seen[value.reason] += 1
    return seen


# --- the env hook itself -------------------------------------------------------------------------


def test_scenario_parsing_and_errors() -> None:
    scenario = parse_scenario("gpus=2xh200+a100,random=0.1,seed=4,lose=1@0.5:1.5;2@3,lost_retry_s=0.2,links=4,busy=0")
    assert scenario.gpus == ["h200", "h200", "a100"] and scenario.random == 0.1 and scenario.seed == 4
    assert scenario.lose == [(1, 0.5, 1.5), (2, 3.0, None)] and scenario.links == 4 and not scenario.busy
    for bad, fragment in [
        ("gpus=8xtpu", "gpus item"),
        ("random=2", "between 0 and 1"),
        ("lose=9@1", "there are 2 GPUs"),
        ("colour=red", "unknown key"),
        ("random", "not key=value"),
        ("lose=x", "GPU@START"),
    ]:
        with pytest.raises(UsageError, match=fragment):
            parse_scenario(bad)


def test_a_bad_scenario_is_a_one_line_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpuscope", "log", "--duration", "1"],
        capture_output=True,
        text=True,
        env=_env("gpus=banana"),
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "gpuscope: error: GPUSCOPE_FAKE_NVML: gpus item 'banana' is not [Nx]MODEL "
        "with MODEL one of h100, h200, a100, l4"
    ]


# --- random NVML errors and a lost GPU, in the real process ----------------------------------------


def test_random_nvml_errors_and_a_lost_gpu_during_a_headless_log(tmp_path: Path) -> None:
    """A real `gpuscope log` (4 GPUs, 8% of NVML calls failing, GPU 1 lost from 0.8 s to 1.8 s):
    exit 0, every line whole, GPU 1 shows gpu_lost on every metric then comes back, the others
    keep updating, injected errors show as unavailable with a reason."""
    output = tmp_path / "faults.jsonl"
    scenario = "gpus=4xh200,random=0.08,seed=11,errors=Unknown+Timeout+Memory,lose=1@0.8:1.8,lost_retry_s=0.3"
    process = start_log(output, scenario, "--duration", "4")
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
    lines = complete_json_lines(output)
    assert len(lines) >= 25  # 40 ticks at 0.1 s; a loaded 2-core machine may skip some
    samples = list(read_log(output, on_warning=lambda message: pytest.fail(message)))
    assert len(samples) == len(lines)
    assert all(len(sample.gpus) == 4 for sample in samples), "a GPU vanished from the records"
    states = ["".join("L" if gpu.state == "lost" else "." for gpu in sample.gpus) for sample in samples]
    lost = [i for i, state in enumerate(states) if state[1] == "L"]
    assert lost, f"GPU 1 was never lost: {states}"
    assert any(state[1] == "." for state in states[lost[-1] + 1 :]), f"GPU 1 never came back: {states}"
    assert all(state[0] == state[2] == state[3] == "." for state in states), "the other GPUs must keep updating"
    for i in lost:
        gpu = samples[i].gpus[1]
        assert gpu.uuid == samples[0].gpus[1].uuid  # the identity stays, the metrics say why
        for name in GPU_METRICS:
            value = getattr(gpu, name)
            assert isinstance(value, Unavailable) and value.reason is Reason.GPU_LOST, name
    back = samples[-1].gpus[1]
    assert back.state == "ok"
    reasons = unavailable_reasons(samples)
    assert reasons[Reason.ERROR] > 0 and reasons[Reason.GPU_LOST] > 0  # injected faults show their reason
    # the healthy GPUs still report most of their readings (the injected errors are transient
    # ones; NotSupported and NoPermission are cached as permanent, as NVML means them); energy only grows
    healthy = [s.gpus[0].power_w for s in samples]
    assert sum(not isinstance(v, Unavailable) for v in healthy) >= len(healthy) // 2
    energy = [s.gpus[2].energy_j for s in samples if not isinstance(s.gpus[2].energy_j, Unavailable)]
    assert energy == sorted(energy) and len(energy) >= 2


def _simulated_log(tmp_path: Path, scenario_text: str, ticks: int, fmt: str = "jsonl") -> tuple[Path, Any]:
    """The real TelemetryCollector, Sampler and log writer over ``ticks`` simulated 0.1 s ticks."""
    from gpuscope.telemetry.collector import TelemetryCollector
    from gpuscope.telemetry.nvml import NvmlCollector
    from gpuscope.telemetry.sampler import Sampler
    from gpuscope.testing.fake_nvml import FakeClock, install_fake_nvml

    clock = FakeClock(start_s=0.0)
    fake = build_fake(parse_scenario(scenario_text), clock=clock)
    path = tmp_path / f"simulated.{fmt}"

    def wait(timeout_s: float) -> bool:
        clock.advance(max(timeout_s, 1e-3))
        return False

    with install_fake_nvml(fake), open_log_writer(path, fmt) as writer:
        nvml = NvmlCollector(clock=clock)
        collector = TelemetryCollector(gpu_source=nvml, wall_clock=lambda: 1.7e9 + clock())
        collector.open()
        sampler = Sampler(
            collector.sample, 0.1, on_sample=writer.write, history=600, duration_s=ticks * 0.1, clock=clock, wait=wait
        )
        sampler.run()
        collector.close()
    return path, sampler


@pytest.mark.parametrize("seed", [1, 2])
def test_simulated_minute_of_random_faults_every_record_complete(tmp_path: Path, seed: int) -> None:
    """600 ticks (a simulated minute at 0.1 s) of 3 GPUs with 4% of NVML calls failing at random,
    GpuIsLost among them: the sampler never stops, every tick is a complete record, every gap has
    a reason, and a GPU that answered GpuIsLost is retried and comes back, again and again."""
    path, sampler = _simulated_log(
        tmp_path,
        f"gpus=2xh200+a100,random=0.04,seed={seed},errors=Unknown+Timeout+NoPermission+GpuIsLost+InsufficientPower,lost_retry_s=0.5",
        600,
    )
    assert sampler.samples_taken == 600
    samples = list(read_log(path, on_warning=lambda message: pytest.fail(message)))
    assert len(samples) == 600 and len(complete_json_lines(path)) == 600
    assert all(len(sample.gpus) == 3 for sample in samples)
    reasons = unavailable_reasons(samples)
    assert reasons[Reason.ERROR] > 0 and reasons[Reason.GPU_LOST] > 0 and reasons[Reason.NO_PERMISSION] > 0
    for sample in samples:
        for gpu in sample.gpus:
            assert isinstance(gpu, GpuSample) and gpu.state in ("ok", "lost")
    # a GPU answering GpuIsLost is retried and comes back, again and again, with real readings
    for index in range(3):
        states = [s.gpus[index].state for s in samples]
        comebacks = sum(1 for before, after in zip(states, states[1:]) if (before, after) == ("lost", "ok"))
        readings = sum(not isinstance(s.gpus[index].power_w, Unavailable) for s in samples)
        # (at 4% of calls failing, a GPU with NVLink and error counters to read is lost for most ticks)
        assert comebacks >= 3 and readings >= 10, f"GPU {index}: {comebacks} comebacks, {readings} power readings"


# --- the disk filling up ----------------------------------------------------------------------------


@contextlib.contextmanager
def small_tmpfs(folder: Path, size: str = "96k") -> Iterator[Path]:
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_disk_filling_up_mid_log_keeps_every_record_before_it(tmp_path: Path, fmt: str) -> None:
    """A 96 KiB tmpfs fills while 8 GPUs are logged: exit 1 with one line saying how many records
    were written, the file holds exactly those, whole (a partial record is cut back)."""
    with small_tmpfs(tmp_path / "small") as folder:
        output = folder / f"log.{fmt}"
        process = start_log(output, "gpus=8xh200,random=0.02,seed=5", "--format", fmt)
        try:
            _, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 1, stderr
        assert "Traceback" not in stderr
        lines = [line for line in stderr.splitlines() if "error" in line]  # log also prints progress lines
        assert len(lines) == 1, stderr
        assert f"{output}: No space left on device after" in lines[0] and "the records written are intact" in lines[0]
        written = int(lines[0].split(" after ")[1].split()[0])
        assert written >= 1
        data = output.read_bytes()
        assert data.endswith(b"\n"), "a partial record was left at the end"
        samples = list(read_log(output, on_warning=lambda message: pytest.fail(message)))
        assert len(samples) == written


def test_write_error_other_than_a_full_disk_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """EIO from the device (a yanked USB stick, a dead NFS server): one line, the records before it kept."""
    import errno

    from support.samples import make_sample

    path = tmp_path / "eio.jsonl"
    writer = open_log_writer(path, "jsonl")
    writer.write(make_sample(0))
    real_write = os.write

    def failing_write(fd: int, data: Any) -> int:
        if fd == writer._fd:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", failing_write)
    with pytest.raises(GpuscopeError) as caught:
        writer.write(make_sample(1))
    monkeypatch.setattr(os, "write", real_write)
    writer.close()
    assert "\n" not in str(caught.value) and "Input/output error" in str(caught.value)
    assert list(read_log(path)) == [make_sample(0)]


# --- signals during a log with faults ---------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_during_a_faulty_8_gpu_log_ends_cleanly(tmp_path: Path, signum: int) -> None:
    """SIGINT/SIGTERM while 8 GPUs with 18 links each answer 5% of calls with errors: exit 0,
    every line a whole record."""
    output = tmp_path / "signal.jsonl"
    process = start_log(output, "gpus=8xh200,random=0.05,seed=7")
    try:
        wait_for_lines(output, 8, process)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
    lines = complete_json_lines(output)
    assert len(lines) >= 8
    assert all(len(line["gpus"]) == 8 and len(line["gpus"][0]["nvlink_links"]) in range(0, 19) for line in lines)
    assert len(list(read_log(output, on_warning=lambda message: pytest.fail(message)))) == len(lines)


def test_sigkill_during_a_faulty_8_gpu_log_cuts_at_most_the_last_line(tmp_path: Path) -> None:
    """SIGKILL mid-run: every newline-terminated line is a whole record; the reader skips a cut
    last line with a warning."""
    output = tmp_path / "killed.jsonl"
    process = start_log(output, "gpus=8xh200,random=0.05,seed=8")
    try:
        wait_for_lines(output, 6, process)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    data = output.read_bytes()
    complete = data.count(b"\n")
    body = data.splitlines()
    for line in body[:complete]:
        json.loads(line)  # every newline-terminated record is whole
    warned: list[str] = []
    samples = list(read_log(output, on_warning=warned.append))
    assert len(samples) == complete
    assert bool(warned) == (not data.endswith(b"\n"))
