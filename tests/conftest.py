"""Shared test set-up: every test runs with its own config/data folders and a fixed timezone."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

os.environ["TZ"] = "UTC"
if hasattr(time, "tzset"):
    time.tzset()


@pytest.fixture(scope="session")
def _session_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache folder for the whole run: numba's compiled probe kernels are built once, not per test."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def _isolated_user_dirs(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, _session_cache_dir: Path
) -> Path:
    """Keep tests away from the real ~/.config, ~/.local/share and ~/.cache."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("GPUSCOPE_CACHE_DIR", str(_session_cache_dir))
    monkeypatch.setenv("GPUSCOPE_CONFIG_DIR", str(home / "config"))
    monkeypatch.setenv("GPUSCOPE_DATA_DIR", str(home / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "xdg-data"))
    return home
