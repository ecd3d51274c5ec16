"""``gpuscope doctor`` against the fake NVML library and with no NVML library at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscope.cli import main
from gpuscope.telemetry.nvml.capabilities import probe
from gpuscope.testing.fake_nvml import (
    OLD_DRIVER_MISSING_SYMBOLS,
    FakeClock,
    FakeGpu,
    FakeNvml,
    FakeProcess,
    install_fake_nvml,
    no_nvml_library,
)


def run_doctor(capsys: pytest.CaptureFixture[str], *args: str, code: int = 0) -> str:
    """The output of ``gpuscope doctor``; ``code``: the exit code expected (1: problems found)."""
    assert main(["doctor", *args]) == code
    return capsys.readouterr().out


def line(output: str, start: str) -> str:
    """The first line that starts with ``start`` after its indentation."""
    for text in output.splitlines():
        if text.strip().startswith(start):
            return text.strip()
    raise AssertionError(f"no line starting with {start!r} in:\n{output}")


def test_no_library_exits_0_and_still_reports_the_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    with no_nvml_library():
        out = run_doctor(capsys, "--no-torch")
    assert line(out, "--  library").endswith("no NVIDIA driver on this host")
    assert "fix: install the NVIDIA driver" in out
    assert line(out, "OK  cores").startswith("OK  cores")
    assert line(out, "OK  SIMD")
    assert line(out, "OK  psutil")
    assert "GPU 0" not in out


def test_healthy_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h200(processes=[FakeProcess(1)]), FakeGpu.a100()])
    with install_fake_nvml(fake):
        out = run_doctor(capsys, "--no-torch")
    assert "GPU 0  NVIDIA H200  Hopper  00000000:18:00.0" in out
    assert line(out, "OK  library").endswith("(nvidia-ml-py 13.615.71)") or "nvidia-ml-py" in line(out, "OK  library")
    assert line(out, "OK  driver").endswith("560.35.03")
    assert line(out, "OK  CUDA driver").endswith("12.6")
    assert line(out, "OK  GPM").endswith("supported")
    assert "18 active links, NVLink 4, 25 GB/s per link each way" in line(out, "OK  NVLink")
    assert "of 4,917 GB/s peak" in line(out, "OK  DRAM bandwidth")
    assert line(out, "OK  processes").endswith("1 running")
    assert "GPU 1  NVIDIA A100-SXM4-80GB  Ampere" in out
    assert "GPM needs a Hopper or newer GPU" in line(out, "--  GPM")
    assert "via field counters" in out
    assert "fix: sudo nvidia-smi -i 0 -am 1" in out  # accounting off: a hint, not a problem
    assert out.rstrip().endswith("No problems found.")


def test_profiling_without_permission_names_the_cause_and_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    with install_fake_nvml(FakeNvml.with_gpus([FakeGpu.h100(gpm_no_permission=True)])):
        out = run_doctor(capsys, "--no-torch", code=1)
    assert "RmProfilingAdminOnly=1" in line(out, "!!  profiling")
    assert "fix: run as root, or load the nvidia module with NVreg_RestrictProfilingToAdminUsers=0" in out
    assert line(out, "OK  PCIe counters")  # counters still work without profiling rights
    assert "problem(s) found." in out


def test_probe_quotes_the_driver_parameter(tmp_path: Path) -> None:
    params = tmp_path / "params"
    params.write_text("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\n")
    with install_fake_nvml(FakeNvml.with_gpus([FakeGpu.h100(gpm_no_permission=True)])):
        report = probe(params_path=params)
    profiling = next(check for check in report.gpus[0].checks if check.name == "profiling")
    assert profiling.status == "problem"
    assert f"(RmProfilingAdminOnly: 1 in {params})" in profiling.detail


def test_old_driver_and_lost_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeNvml.with_gpus([FakeGpu.h100(), FakeGpu.h100()], missing_symbols=OLD_DRIVER_MISSING_SYMBOLS)
    fake.lose_gpu(1)
    with install_fake_nvml(fake):
        out = run_doctor(capsys, "--no-torch", code=1)
    assert "driver too old" in line(out, "!!  GPM")
    assert "fix: update the NVIDIA driver" in out
    assert "GPU 1  unknown  unknown  unknown  [lost]" in out
    assert "the GPU fell off the bus" in line(out, "!!  state")


def test_mig_devices_listed_under_their_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    with install_fake_nvml(FakeNvml.with_gpus([FakeGpu.h100(mig=["3g.40gb", "4g.40gb"]), FakeGpu.l4()])):
        out = run_doctor(capsys, "--no-torch")
    titles = [text for text in out.splitlines() if text.startswith("GPU ")]
    assert [title.split("  ")[0] for title in titles] == ["GPU 0", "GPU 0 MIG 0", "GPU 0 MIG 1", "GPU 1"]


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    with install_fake_nvml(FakeNvml.with_gpus([FakeGpu.h200()])):
        report = json.loads(run_doctor(capsys, "--json", "--no-torch"))
    assert report["schema_version"] == 1
    assert report["nvml"]["library"]["status"] == "ok"
    gpu = report["nvml"]["gpus"][0]
    assert (gpu["name"], gpu["architecture"], gpu["state"]) == ("NVIDIA H200", "Hopper", "ok")
    checks = {check["name"]: check for check in gpu["checks"]}
    assert checks["GPM"]["marker"] == "OK" and checks["NVLink"]["status"] == "ok"
    assert report["cpu"]["logical_cores"] >= 1
    titles = [section["title"] for section in report["sections"]]
    assert titles[0] == "NVIDIA (NVML)" and "CPU" in titles and "torch" in titles


def test_json_without_library(capsys: pytest.CaptureFixture[str]) -> None:
    with no_nvml_library():
        report = json.loads(run_doctor(capsys, "--json", "--no-torch"))
    assert report["nvml"]["library"]["status"] == "unavailable"
    assert report["nvml"]["gpus"] == []


def test_missing_torch_is_reported_not_raised(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    with no_nvml_library():
        out = run_doctor(capsys)
    assert "not installed" in line(out, "--  torch")


def test_torch_and_cuda_check(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    with no_nvml_library():
        out = run_doctor(capsys)
    assert line(out, "OK  torch")
    cuda = next(text.strip() for text in out.splitlines() if text.strip()[4:].startswith("CUDA "))
    assert cuda.startswith(("OK", "--", "!!"))


def test_doctor_imports_neither_textual_nor_torch() -> None:
    code = (
        "import sys; from gpuscope.cli import main; rc = main(['doctor', '--no-torch']); "
        "assert 'textual' not in sys.modules and 'torch' not in sys.modules, 'heavy import'; sys.exit(rc)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "CPU" in done.stdout


def test_driver_library_mismatch_is_a_problem_with_a_fix(capsys: pytest.CaptureFixture[str]) -> None:
    with install_fake_nvml(FakeNvml.with_gpus([FakeGpu.h100()], init_error="LibRmVersionMismatch")):
        out = run_doctor(capsys, "--no-torch", code=1)
    assert "driver mismatch" in line(out, "!!  library")
    assert "fix: " in out and "reload the nvidia kernel module" in out
    assert "1 problem(s) found." in out


def test_problems_make_doctor_exit_1_also_with_json(capsys: pytest.CaptureFixture[str]) -> None:
    """Scripts (the GPU acceptance run) rely on the exit code: 0 only when nothing is a problem."""
    with install_fake_nvml(FakeNvml.with_gpus([FakeGpu.h200()])):
        assert json.loads(run_doctor(capsys, "--json", "--no-torch"))["problems"] == 0
    fake = FakeNvml.with_gpus([FakeGpu.h200()])
    fake.inject("nvmlDeviceGetPowerUsage", "Unknown", count=None)  # power unreadable: a problem
    with install_fake_nvml(fake):
        report = json.loads(run_doctor(capsys, "--json", "--no-torch", code=1))
    assert report["problems"] >= 1
    checks = {check["name"]: check for check in report["nvml"]["gpus"][0]["checks"]}
    assert checks["other metrics"]["status"] == "problem" and "power_w" in checks["other metrics"]["detail"]


def test_doctor_reads_the_fake_from_the_environment() -> None:
    """``GPUSCOPE_FAKE_NVML`` reaches doctor as it reaches ``gpuscope log`` (subprocess tests)."""
    env = dict(os.environ, GPUSCOPE_FAKE_NVML="gpus=1xh200")
    done = subprocess.run(
        [sys.executable, "-m", "gpuscope", "doctor", "--no-torch"], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "GPU 0  NVIDIA H200  Hopper" in done.stdout


def test_cuda_order_names_the_nvml_gpu_of_each_cuda_device(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuscope.commands import doctor
    from gpuscope.testing.scenarios import build_fake, cuda_uuids, parse_scenario

    fake = build_fake(parse_scenario("gpus=3xh200,pci_order=2+0+1"))
    monkeypatch.setattr(doctor, "_cuda_uuids", lambda skip: cuda_uuids(fake))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with install_fake_nvml(fake):
        out = run_doctor(capsys, "--no-torch")
    order = line(out, "OK  CUDA order")
    assert "cuda:0 = NVML 2, cuda:1 = NVML 0, cuda:2 = NVML 1" in order and "matches devices by UUID" in order


def test_xid_row_says_whether_driver_faults_will_be_seen(capsys: pytest.CaptureFixture[str]) -> None:
    """Operators ask doctor "will gpuscope see an Xid here?": yes, no with the reason, or the Xids it saw."""
    with install_fake_nvml(FakeNvml.with_gpus([FakeGpu.h200()])):
        out = run_doctor(capsys, "--no-torch")
    assert line(out, "OK  Xid events").endswith("watched (critical Xid errors reach the log and the alert line)")
    assert "xid" not in line(out, "--  other metrics")  # its own row, not repeated among the others

    fake = FakeNvml.with_gpus([FakeGpu.h200(), FakeGpu.h200()])
    fake.inject("nvmlDeviceRegisterEvents", "NoPermission", count=None, gpu=1)
    with install_fake_nvml(fake):
        out = run_doctor(capsys, "--no-torch", code=1)
    assert line(out, "OK  Xid events")  # GPU 0 registered
    assert line(out, "!!  Xid events").startswith("!!  Xid events       no permission")

    fake = FakeNvml.with_gpus([FakeGpu.h200()])
    fake.inject("nvmlDeviceGetSupportedEventTypes", "NotSupported", count=None)
    with install_fake_nvml(fake):
        out = run_doctor(capsys, "--no-torch")
    assert line(out, "--  Xid events").startswith("--  Xid events       not supported")

    clock = FakeClock()
    fake = FakeNvml.with_gpus([FakeGpu.h200()], clock=clock)

    def wait_for_gpm(seconds: float) -> None:  # an Xid while doctor waits its GPM window, after registration
        fake.inject_xid(0, 48, count=2)
        clock.advance(seconds)

    with install_fake_nvml(fake):
        report = probe(sleep=wait_for_gpm, clock=clock)
    xid = next(check for check in report.gpus[0].checks if check.name == "Xid events")
    assert xid.status == "problem"
    assert xid.detail.startswith("reported while doctor ran: Xid 48 (") and xid.detail.endswith(" x2")
    assert xid.fix == "see `dmesg | grep -i xid`"
