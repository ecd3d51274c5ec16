"""Lint, format and type checks as tests: ``ruff check``, ``ruff format --check`` and ``mypy``
(strict, on gpuscope/) over the repository, each with zero findings. Their configuration lives in
pyproject.toml ([tool.ruff], [tool.mypy]); the tools are pinned in the ``dev`` extra.

The tools run from the bin folder of the interpreter running the tests (the project's venv).
mypy keeps its cache in .mypy_cache at the repository root: a cold run takes about a minute on
two cores, a warm one a few seconds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.slow


def _tool(name: str) -> Path:
    path = BIN / name
    if not path.is_file():
        pytest.skip(f"{name} is not installed next to {sys.executable} (pip install -e '.[dev]')")
    return path


def _run(*command: str | Path, timeout_s: float = 600.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(part) for part in command],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def _assert_clean(result: subprocess.CompletedProcess[str], what: str) -> None:
    findings = (result.stdout + result.stderr).strip()
    assert result.returncode == 0, f"{what} exited {result.returncode}:\n{findings}"


def test_ruff_check_has_no_findings() -> None:
    ruff = _tool("ruff")
    result = _run(ruff, "check", "--no-fix", "--output-format", "concise", ".")
    _assert_clean(result, "ruff check")


def test_ruff_format_leaves_every_file_unchanged() -> None:
    ruff = _tool("ruff")
    result = _run(ruff, "format", "--check", "--diff", ".")
    _assert_clean(result, "ruff format --check (run `ruff format .` to apply)")


def test_mypy_strict_has_no_findings() -> None:
    mypy = _tool("mypy")
    # files, strictness and the Python version come from [tool.mypy] in pyproject.toml
    result = _run(mypy, "--no-error-summary", "--show-error-codes", "--no-color-output")
    _assert_clean(result, "mypy")
    assert "error:" not in result.stdout
