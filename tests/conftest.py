"""Shared test set-up: every test runs with its own config/data folders and a fixed timezone."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

os.environ["TZ"] = "UTC"
if hasattr(time, "tzset"):
    time.tzset()


@pytest.fixture(autouse=True)
def _isolated_user_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep tests away from the real ~/.config and ~/.local/share."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("GPUSCOPE_CONFIG_DIR", str(home / "config"))
    monkeypatch.setenv("GPUSCOPE_DATA_DIR", str(home / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "xdg-data"))
    return home
