"""``gpuscope log`` writing compressed logs as a real process: a disk that fills up (a small tmpfs
in a private mount namespace), kill -9, and the output name choosing the format."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuscope.telemetry.logfile import read_log
from gpuscope.telemetry.logframes import scan_frames

REPO = Path(__file__).resolve().parent.parent


def _env(scenario: str = "gpus=8xh200") -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "GPUSCOPE_FAKE_NVML": scenario}
    env.pop("PYTHONSTARTUP", None)
    return env


def _private_mounts_allowed() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True)
    return probe.returncode == 0


_FILL = r"""
set -u
mount -t tmpfs -o size=64k tmpfs "$1" || exit 97
"$2" -m gpuscope log --interval 0.1 --no-processes -o "$1/$4"
code=$?
cp "$1/$4" "$3/" 2>/dev/null
exit $code
"""


@pytest.mark.parametrize("name", ["run.jsonl.zst", "run.csv.gz"])
def test_a_disk_filling_up_ends_in_one_line_with_every_record_before_it_readable(tmp_path: Path, name: str) -> None:
    if not _private_mounts_allowed():
        pytest.skip("unshare -m (a private mount namespace) is not permitted here")
    small, out = tmp_path / "small", tmp_path / "out"
    small.mkdir()
    out.mkdir()
    command = ["unshare", "-m", "--propagation", "private", "sh", "-c", _FILL, "sh"]
    result = subprocess.run(
        [*command, str(small), sys.executable, str(out), name],
        capture_output=True, text=True, env=_env(), cwd=REPO, timeout=120,
    )  # fmt: skip
    if result.returncode == 97:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("gpuscope: error: ")]
    assert len(errors) == 1, result.stderr
    assert "No space left on device after" in errors[0] and "the records written are intact" in errors[0]
    written = int(errors[0].split(" after ")[1].split()[0])
    assert written >= 1
    copy = out / name
    with open(copy, "rb") as handle:
        scan = scan_frames(handle.fileno(), name.rsplit(".", 1)[1])
    assert scan.cut == 0, "a partial frame was left at the end"
    samples = list(read_log(copy, on_warning=lambda message: pytest.fail(message)))
    assert len(samples) == written


def test_kill_9_leaves_a_compressed_log_that_reads_up_to_its_last_whole_frame(tmp_path: Path) -> None:
    output = tmp_path / "run.jsonl.zst"
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuscope", "log", "--interval", "0.5", "--no-processes", "-o", str(output)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env("gpus=2xh200"), cwd=REPO,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not output.exists() or output.stat().st_size == 0):
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            time.sleep(0.1)
        time.sleep(2.2)  # into the second frame (10 records of 0.5 s each)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    samples = list(read_log(output, on_warning=lambda message: None))
    assert len(samples) >= 10 and len(samples) % 10 == 0  # whole frames only
    assert [s.timestamp for s in samples] == sorted(s.timestamp for s in samples)


def test_the_output_name_chooses_format_and_compression(tmp_path: Path) -> None:
    output = tmp_path / "run.csv.gz"
    result = subprocess.run(
        [sys.executable, "-m", "gpuscope", "log", "--interval", "0.2", "--duration", "1", "-o", str(output)],
        capture_output=True, text=True, env=_env("gpus=2xh200"), cwd=REPO, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "logging csv to" in result.stderr
    import gzip

    assert gzip.decompress(output.read_bytes()).startswith(b"schema_version,timestamp,")
    assert len(list(read_log(output))) >= 3
