"""The probe engine: calibrated compute, memory, transfer and collective measurements.

Nothing here imports Textual; torch is imported only when a probe runs. Modules, by concern:

- :mod:`~gpuscope.probing.timing` the harness (clocks, warm-up, repetitions, tick rule);
  :mod:`~gpuscope.probing.stats` best-of-N and median/p10/p90;
  :mod:`~gpuscope.probing.validation` float64 references and tolerances
- :mod:`~gpuscope.probing.matmul`, :mod:`~gpuscope.probing.memory`,
  :mod:`~gpuscope.probing.transfer`, :mod:`~gpuscope.probing.collective`,
  :mod:`~gpuscope.probing.transformer` the probe kinds
- :mod:`~gpuscope.probing.suite` TOML suites; :mod:`~gpuscope.probing.runner` ``ProbeRunner``
- :mod:`~gpuscope.probing.environment` devices, memory budget, versions;
  :mod:`~gpuscope.probing.telemetry` telemetry next to each measurement

Use from a UI::

    runner = ProbeRunner(load_suite("quick"), "cuda:0", on_progress=..., on_measurement=...)
    results = runner.run(cancel_event)   # see gpuscope.probing.runner
"""

from __future__ import annotations

from typing import Any

__all__ = ["ProbeRunner", "load_suite", "Suite"]


def __getattr__(name: str) -> Any:
    if name == "ProbeRunner":
        from gpuscope.probing.runner import ProbeRunner

        return ProbeRunner
    if name in ("load_suite", "Suite"):
        from gpuscope.probing import suite

        return getattr(suite, name)
    raise AttributeError(name)
