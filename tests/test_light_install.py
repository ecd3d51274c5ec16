"""The light install (``pip install gpuscope``, no ``[probes]`` extra): every command's module
imports without torch, numba, Textual and matplotlib; ``probe``, ``measure`` and ``profile`` say in
one line what is missing and the command that adds it, exit 4 and write nothing; ``doctor`` lists
torch as optional. The packages are taken away in a child process by a ``sitecustomize`` that
refuses them on ``sys.meta_path``, which is what an environment without them looks like to an
import; ``.ci/run`` also runs this file and the monitoring side's tests in a real venv without
torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscope.errors import EXIT_UNAVAILABLE
from gpuscope.extras import PROBES_INSTALL_COMMAND

REPO = Path(__file__).resolve().parents[1]
COMMANDS = sorted(path.stem for path in (REPO / "gpuscope" / "commands").glob("*.py") if path.stem != "__init__")

_REFUSER = """
import os, sys

_REFUSED = frozenset(os.environ["GPUSCOPE_TEST_REFUSE"].split(","))


class _Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in _REFUSED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _Refuse())
"""


def _run(tmp_path: Path, refused: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python *args`` with the packages in ``refused`` (comma-separated) taken away."""
    site = tmp_path / "refuse"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_REFUSER, encoding="utf-8")
    env = dict(os.environ, GPUSCOPE_TEST_REFUSE=refused)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), str(REPO), env.get("PYTHONPATH", "")]))
    env.pop("GPUSCOPE_FAKE_NVML", None)
    return subprocess.run(
        [sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_refuser_really_refuses(tmp_path: Path) -> None:
    """The harness itself: a refused package cannot be imported or found in the child."""
    code = "import importlib.util as u, sys; print(u.find_spec('json') is not None); import torch"
    done = _run(tmp_path, "torch", "-c", code)
    assert done.returncode == 1 and done.stdout.strip() == "True"
    assert "No module named 'torch'" in done.stderr


def test_every_command_module_imports_without_the_heavy_packages(tmp_path: Path) -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {COMMANDS!r}:\n"
        "    importlib.import_module('gpuscope.commands.' + name)\n"
        "print(sorted(m for m in ('torch', 'numba', 'textual', 'matplotlib') if m in sys.modules))\n"
    )
    done = _run(tmp_path, "torch,numba,textual,matplotlib", "-c", code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
    assert len(COMMANDS) >= 10  # the glob found the commands


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("probe", ["--device", "cpu", "--suite", "quick"]),
        ("measure", ["torch:matmul"]),
        ("profile", ["gpuscope.profiling.examples:convnet_step", "--device", "cpu"]),
    ],
)
def test_a_probe_command_without_torch_says_what_is_missing_and_writes_nothing(
    tmp_path: Path, command: str, args: list[str]
) -> None:
    output = tmp_path / "out.json"
    done = _run(tmp_path, "torch,numba", "-m", "gpuscope", command, *args, "-o", str(output))
    assert done.returncode == EXIT_UNAVAILABLE
    assert done.stderr.splitlines() == [
        f"gpuscope: error: {command} needs torch, which is not installed; {PROBES_INSTALL_COMMAND} adds it"
    ]
    assert not output.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["refuse"]


def test_an_existing_results_file_is_left_as_it_was_without_torch(tmp_path: Path) -> None:
    output = tmp_path / "kept.json"
    output.write_text("{}", encoding="utf-8")
    done = _run(tmp_path, "torch", "-m", "gpuscope", "measure", "torch:matmul", "-o", str(output))
    assert done.returncode in (EXIT_UNAVAILABLE, 3)  # 3: `{}` is not a results file, said before torch matters
    assert output.read_text(encoding="utf-8") == "{}"


def test_doctor_lists_torch_as_optional_and_is_not_a_problem(tmp_path: Path) -> None:
    done = _run(tmp_path, "torch,numba", "-m", "gpuscope", "doctor", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    checks = {check["name"]: check for section in report["sections"] for check in section["checks"]}
    assert checks["torch"]["status"] == "unavailable" and "optional" in checks["torch"]["detail"]
    assert checks["torch"]["fix"] == PROBES_INSTALL_COMMAND
    assert checks["numba"]["status"] == "unavailable" and checks["numba"]["fix"] == PROBES_INSTALL_COMMAND


def test_the_monitoring_commands_run_without_torch(tmp_path: Path) -> None:
    """`log` records samples and `snapshot` prints one with torch, numba and matplotlib refused."""
    log = tmp_path / "run.jsonl"
    done = _run(
        tmp_path, "torch,numba,matplotlib", "-m", "gpuscope", "log", "--interval", "0.1", "--duration", "0.35",
        "--output", str(log),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(log.read_text(encoding="utf-8").splitlines()) >= 2
    shot = _run(tmp_path, "torch,numba,matplotlib", "-m", "gpuscope", "snapshot", "--json")
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert json.loads(shot.stdout)["record"]["host"]["hostname"]
