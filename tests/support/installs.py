"""Markers for tests that need the ``probes`` extra, so the monitoring side's tests also run in the
light install (``.ci/run`` runs them in a venv without torch)."""

from __future__ import annotations

import pytest

from gpuscope.extras import is_installed

needs_torch = pytest.mark.skipif(not is_installed("torch"), reason="torch is not installed (the light install)")
