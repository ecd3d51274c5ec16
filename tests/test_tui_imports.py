"""The TUI starts and shows every screen without importing torch (only a probe run may, and it
runs in a child process); `gpuscope tui --help` does not import Textual."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

_SCRIPT = r"""
import asyncio, sys
from gpuscope.tui.app import GpuscopeApp
from gpuscope.tui.sources import LiveSource

async def main():
    app = GpuscopeApp(LiveSource(nvml=False), persist_settings=False)
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(300):
            if app.latest_sample is not None:
                break
            await pilot.pause(0.05)
        assert app.latest_sample is not None, "no sample"
        for key in "2341":
            await pilot.press(key)
            await pilot.pause(0.2)
    print("torch" in sys.modules, "numpy" in sys.modules)

asyncio.run(main())
"""


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "GPUSCOPE_CONFIG_DIR": str(tmp_path)}


def test_tui_does_not_import_torch(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _SCRIPT], cwd=REPO, env=_env(tmp_path), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    torch, _numpy = result.stdout.split()
    assert torch == "False"


def test_tui_help_does_not_import_textual(tmp_path: Path) -> None:
    script = (
        "import sys; from gpuscope.cli import main\ntry:\n    main(['tui', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('textual' in sys.modules, 'torch' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=_env(tmp_path), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False False"
