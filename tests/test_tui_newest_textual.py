"""The TUI's snapshot suite on the newest Textual the package index offers (issue 25).

gpuscope pins Textual to the range it is tested with (pyproject.toml); this test says early
whether the next release still draws every screen the same. It downloads the newest Textual
and its dependencies from the index into a temporary folder that comes first on ``sys.path``
(the project's environment otherwise, untouched), checks that this Textual is the one imported
there, and runs tests/test_tui_snapshots.py against it. It is skipped, with the reason, only
when the index cannot be reached; any other failure fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: pip's words for an index it could not reach (no network, no DNS, a refused proxy).
_UNREACHABLE = re.compile(
    r"Failed to establish a new connection|Network is unreachable|Temporary failure in name resolution|"
    r"Name or service not known|ProxyError|ConnectionError|Connection refused|Max retries exceeded|"
    r"No matching distribution found for textual",
)

#: Prints the Textual version imported and where it was imported from.
_WHICH_TEXTUAL = "import importlib.metadata as m, textual; print(m.version('textual'), textual.__file__)"

pytestmark = pytest.mark.slow


def _pip(*args: str, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=timeout_s, env=env
    )


def test_snapshot_suite_passes_on_the_newest_textual(tmp_path: Path) -> None:
    wheels, overlay = tmp_path / "wheels", tmp_path / "site"
    fetched = _pip("download", "--no-deps", "--only-binary=:all:", "-d", str(wheels), "textual")
    if fetched.returncode != 0:
        said = fetched.stdout + fetched.stderr
        if _UNREACHABLE.search(said):
            pytest.skip(f"the package index cannot be reached: {said.strip().splitlines()[-1]}")
        pytest.fail(f"pip download textual failed:\n{said}")
    (wheel,) = wheels.glob("textual-*.whl")
    newest = wheel.name.split("-")[1]
    installed = _pip("install", "--quiet", "--target", str(overlay), str(wheel))  # with its dependencies
    assert installed.returncode == 0, installed.stdout + installed.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(overlay), str(REPO)])}
    seen = subprocess.run(
        [sys.executable, "-c", _WHICH_TEXTUAL],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )
    version, _, where = seen.stdout.strip().partition(" ")
    assert (version, Path(where).is_relative_to(overlay)) == (newest, True), seen.stdout + seen.stderr
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_tui_snapshots.py"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=900,
    )
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-2000:]
    assert run.returncode == 0, f"the snapshot suite on Textual {newest}: {summary}\n{run.stdout[-6000:]}"
    assert re.search(r"\b[1-9]\d* passed\b", summary) and "skipped" not in summary, summary
