"""The probe engine: calibrated compute, memory, transfer and collective measurements.

Nothing here imports Textual; torch is imported only when a probe runs. Modules, by concern:

- :mod:`~gpuscope.probing.timing` the harness (clocks, warm-up, repetitions, tick rule);
  :mod:`~gpuscope.probing.stats` best-of-N and median/p10/p90;
  :mod:`~gpuscope.probing.validation` float64 references and tolerances
- :mod:`~gpuscope.probing.matmul`, :mod:`~gpuscope.probing.memory`,
  :mod:`~gpuscope.probing.transfer`, :mod:`~gpuscope.probing.collective`,
  :mod:`~gpuscope.probing.transformer` the probe kinds
- :mod:`~gpuscope.probing.suite` TOML suites; :mod:`~gpuscope.probing.runner` ``ProbeRunner``;
  :mod:`~gpuscope.probing.derive` ceilings and roofline points from measurements
- :mod:`~gpuscope.probing.cluster`, :mod:`~gpuscope.probing.distributed`,
  :mod:`~gpuscope.probing.rendezvous` multi-rank runs under torchrun;
  :mod:`~gpuscope.probing.session` a probe run seen from the TUI
- :mod:`~gpuscope.probing.environment` devices, memory budget, versions;
  :mod:`~gpuscope.probing.telemetry` telemetry next to each measurement

Use from a UI (the submodules are the API; importing the package imports none of them)::

    from gpuscope.probing.runner import ProbeRunner
    from gpuscope.probing.suite import load_suite

    runner = ProbeRunner(load_suite("quick"), "cuda:0", on_progress=..., on_measurement=...)
    results = runner.run(cancel_event)   # see gpuscope.probing.runner
"""
