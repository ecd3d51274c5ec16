"""The declared minimum nvidia-ml-py really works (issue 12 item 1).

The oldest release ``pyproject.toml`` allows is installed with ``pip install --no-deps --target``
into the test session's temporary folder (once per session), put first on ``PYTHONPATH``, and
``gpuscope log``, ``gpuscope doctor`` and the NVML collector tests run against it in
subprocesses, on the fake NVML library; the installed (newest) release runs ``log`` and
``doctor`` the same way. A name that only a newer nvidia-ml-py has fails here. Skipped, with the
reason, only when pip cannot reach a package index.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NVML_TESTS = [
    "tests/test_nvml_collector.py",
    "tests/test_nvml_fake.py",
    "tests/test_nvml_faults.py",
    "tests/test_nvml_mig.py",
    "tests/test_nvml_power.py",
    "tests/test_doctor.py",
    "tests/test_gpu_contact_pcie.py",
    "tests/test_gpu_contact_mapping.py",
]
_OFFLINE = re.compile(
    r"NewConnectionError|Network is unreachable|Temporary failure in name resolution|"
    r"Failed to establish a new connection|Could not fetch URL|ProxyError|Max retries exceeded|"
    r"No route to host|Connection refused|timed out",
    re.IGNORECASE,
)

pytestmark = pytest.mark.slow


def declared_minimum() -> str:
    """The version in ``nvidia-ml-py>=X`` of pyproject.toml's dependencies."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'"nvidia-ml-py>=([0-9][0-9.]*)', text)
    assert match, "pyproject.toml declares no nvidia-ml-py minimum"
    return match.group(1)


@pytest.fixture(scope="session")
def oldest_pynvml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    version = declared_minimum()
    target = tmp_path_factory.getbasetemp() / f"nvidia-ml-py-{version}"
    if not (target / "pynvml.py").exists():
        command = [
            sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--disable-pip-version-check",
            "--no-input", "--target", str(target), f"nvidia-ml-py=={version}",
        ]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=240)
        except subprocess.TimeoutExpired:
            pytest.skip(f"pip did not fetch nvidia-ml-py=={version} within 240 s (no package index reachable?)")
        if done.returncode != 0 or not (target / "pynvml.py").exists():
            output = done.stdout + done.stderr
            last = output.strip().splitlines()[-1] if output.strip() else f"exit {done.returncode}"
            if _OFFLINE.search(output):
                pytest.skip(f"pip cannot reach a package index to fetch nvidia-ml-py=={version}: {last}")
            pytest.fail(f"pip install nvidia-ml-py=={version} failed: {last}")
    return target


def _env(pynvml_dir: Path | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GPUSCOPE_FAKE_NVML", "CUDA_VISIBLE_DEVICES")}
    paths = [str(pynvml_dir)] if pynvml_dir is not None else []
    paths.append(str(ROOT))
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(extra)
    return env


def _names_used() -> set[str]:
    """Every ``pynvml.<name>`` written in gpuscope's sources (getattr fallbacks are not)."""
    names: set[str] = set()
    for path in (ROOT / "gpuscope").rglob("*.py"):
        names.update(re.findall(r"\bpynvml\.([A-Za-z_][A-Za-z0-9_]*)", path.read_text(encoding="utf-8")))
    return {name for name in names if not name.endswith("_")}  # "pynvml.NVML_DEVICE_ARCH_*" in prose


def _check_release(pynvml_dir: Path | None, tmp_path: Path, expected_version: str | None) -> None:
    """log + doctor (+ the static name check) with this nvidia-ml-py first on the path."""
    fake = _env(pynvml_dir, GPUSCOPE_FAKE_NVML="gpus=2xh200")
    log_file = tmp_path / "log.jsonl"
    log = subprocess.Popen(
        [sys.executable, "-m", "gpuscope", "log", "--duration", "2", "--interval", "0.5", "--output", str(log_file)],
        cwd=ROOT, env=fake, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    names = sorted(_names_used())
    probe = (
        "import json, sys, pynvml; names = json.loads(sys.argv[1]); "
        "print(json.dumps({'file': pynvml.__file__, 'missing': [n for n in names if not hasattr(pynvml, n)]}))"
    )
    where = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(names)],
        cwd=ROOT,
        env=_env(pynvml_dir),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert where.returncode == 0, where.stderr
    found = json.loads(where.stdout)
    if pynvml_dir is not None:
        assert Path(found["file"]).parent == pynvml_dir, found["file"]
    assert found["missing"] == [], f"gpuscope uses names this nvidia-ml-py lacks: {found['missing']}"
    doctor = subprocess.run(
        [sys.executable, "-m", "gpuscope", "doctor", "--no-torch", "--json"],
        cwd=ROOT,
        env=fake,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out, err = log.communicate(timeout=120)
    assert log.returncode == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    records = [json.loads(line) for line in log_file.read_text().splitlines() if line.strip()]
    assert len(records) >= 2
    last = records[-1]["gpus"]
    assert [gpu["name"] for gpu in last] == ["NVIDIA H200", "NVIDIA H200"]
    for gpu in last:
        assert isinstance(gpu["power_w"], float) and isinstance(gpu["memory_used_bytes"], int)
        assert isinstance(gpu["sm_clock_mhz"], float) and isinstance(gpu["energy_j"], float)
        errors = {key: why for key, why in (gpu.get("unavailable") or {}).items() if str(why).startswith("error")}
        assert errors == {}, errors
    assert doctor.returncode == 0, doctor.stdout[-3000:] + doctor.stderr[-3000:]
    report = json.loads(doctor.stdout)
    assert report["problems"] == 0
    if expected_version is not None:
        assert report["nvml"]["library"]["detail"].endswith(f"(nvidia-ml-py {expected_version})")


def test_declared_minimum_runs_log_doctor_and_the_nvml_tests(oldest_pynvml: Path, tmp_path: Path) -> None:
    version = declared_minimum()
    _check_release(oldest_pynvml, tmp_path, version)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *NVML_TESTS],
        cwd=ROOT, env=_env(oldest_pynvml), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, f"NVML tests fail on nvidia-ml-py {version}:\n{done.stdout[-4000:]}"


def test_installed_release_runs_log_and_doctor(tmp_path: Path) -> None:
    _check_release(None, tmp_path, None)
