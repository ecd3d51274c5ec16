"""The declared minimum amdsmi really works (issue 30), as tests/test_nvml_versions.py does for nvidia-ml-py.

The oldest release ``pyproject.toml``'s ``amd`` extra allows is installed with ``pip install --no-deps
--target`` into the session's temporary folder, put first on ``PYTHONPATH``, and tests/test_amdsmi.py
runs against it in a subprocess (its binding over the fake ``libamd_smi.so``). A call or a struct
field only a newer amdsmi has fails here. Skipped, with the reason, only when pip cannot reach an index.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_OFFLINE = re.compile(
    r"NewConnectionError|Network is unreachable|Temporary failure in name resolution|"
    r"Failed to establish a new connection|Could not fetch URL|ProxyError|Max retries exceeded|"
    r"No route to host|Connection refused|timed out",
    re.IGNORECASE,
)

pytestmark = pytest.mark.slow


def declared_minimum() -> str:
    """The version in ``amdsmi>=X`` of pyproject.toml's ``amd`` extra."""
    match = re.search(r'"amdsmi>=([0-9][0-9.]*)', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert match, "pyproject.toml declares no amdsmi minimum"
    return match.group(1)


def test_the_oldest_amdsmi_runs_the_amd_tests(tmp_path_factory: pytest.TempPathFactory) -> None:
    version = declared_minimum()
    target = tmp_path_factory.getbasetemp() / f"amdsmi-{version}"
    command = [
        sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--disable-pip-version-check",
        "--no-input", "--target", str(target), f"amdsmi=={version}",
    ]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.skip(f"pip did not fetch amdsmi=={version} within 240 s (no package index reachable?)")
    if done.returncode != 0 or not (target / "amdsmi").is_dir():
        output = done.stdout + done.stderr
        last = output.strip().splitlines()[-1] if output.strip() else f"exit {done.returncode}"
        if _OFFLINE.search(output):
            pytest.skip(f"pip cannot reach a package index to fetch amdsmi=={version}: {last}")
        pytest.fail(f"pip install amdsmi=={version} failed: {last}")
    env = {key: value for key, value in os.environ.items() if not key.startswith("GPUSCOPE_FAKE")}
    env["PYTHONPATH"] = os.pathsep.join([str(target), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    where = subprocess.run(
        [sys.executable, "-c", "import importlib.util; print(importlib.util.find_spec('amdsmi').origin)"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert Path(where.stdout.strip()).is_relative_to(target), where.stdout + where.stderr
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_amdsmi.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout.splitlines()[-1]
