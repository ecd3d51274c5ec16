"""What each command imports: every ``--help`` imports no command module (only the options of
gpuscope.commands.parsers), ``log``, ``probe``, ``doctor`` and ``serve`` never import Textual, and
only a probe (or measure, profile) imports torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscope.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
_RUN = (
    "import sys\nfrom gpuscope.cli import main\ntry:\n    code = main(sys.argv[1:])\nexcept SystemExit as done:\n"
    "    code = done.code\nloaded = sorted(m for m in sys.modules if m.startswith('gpuscope.commands.'))\n"
    "print('textual' in sys.modules, 'torch' in sys.modules, ','.join(loaded), file=sys.stderr)\n"
    "raise SystemExit(code)\n"
)


def _run(tmp_path: Path, *argv: str) -> tuple[int, bool, bool, list[str]]:
    """(exit code, Textual imported, torch imported, gpuscope.commands modules imported)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), GPUSCOPE_CONFIG_DIR=str(tmp_path))
    env.pop("GPUSCOPE_FAKE_NVML", None)
    done = subprocess.run(
        [sys.executable, "-c", _RUN, *argv], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    textual, torch, loaded = done.stderr.strip().splitlines()[-1].split(" ")
    return done.returncode, textual == "True", torch == "True", [m for m in loaded.split(",") if m]


@pytest.mark.slow
def test_help_of_every_command_imports_no_command(tmp_path: Path) -> None:
    for argv in (["--help"], *([name, "--help"] for name in COMMANDS)):
        code, textual, torch, loaded = _run(tmp_path, *argv)
        assert code == 0, argv
        assert (textual, torch) == (False, False), argv
        assert loaded == ["gpuscope.commands.options", "gpuscope.commands.parsers"], argv


@pytest.mark.slow
def test_log_doctor_and_serve_import_neither_textual_nor_torch(tmp_path: Path) -> None:
    runs = {
        "log": ["log", "--no-gpu", "--duration", "0.3", "--interval", "0.1", "-o", str(tmp_path / "log.jsonl")],
        "doctor": ["doctor", "--no-torch"],
        "serve": ["serve", "--no-gpu", "--listen", "127.0.0.1:0", "--duration", "0.3", "--interval", "0.1"],
    }
    for name, argv in runs.items():
        code, textual, torch, loaded = _run(tmp_path, *argv)
        assert code in (0, 1), name  # doctor: 1 when a check is a problem on this machine
        assert (textual, torch) == (False, False), name
        assert f"gpuscope.commands.{name}" in loaded and "gpuscope.commands.tui" not in loaded


@pytest.mark.slow
def test_probe_imports_torch_and_no_textual(tmp_path: Path) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text('[[probe]]\nkind = "matmul"\ndtypes = ["fp32"]\nshapes = [[32, 32, 32]]\nlibraries = ["numpy"]\n')
    code, textual, torch, _ = _run(tmp_path, "probe", "--suite", str(suite), "-o", str(tmp_path / "r.json"), "-q")
    assert code == 0
    assert textual is False and torch is True  # the probe ran: torch is its engine
