"""Declared types of every file gpuscope reads or writes, and the one rule set that checks them.

- :mod:`gpuscope.schema.core`: number types, strict decoding, one-line errors, the JSON encoder;
- :mod:`gpuscope.schema.kinds`: which kind of gpuscope file a byte string holds;
- :mod:`gpuscope.schema.results`, :mod:`~gpuscope.schema.report`, :mod:`~gpuscope.schema.suites`
  (with the probes' vocabulary), :mod:`~gpuscope.schema.themes`, :mod:`~gpuscope.schema.events`,
  :mod:`~gpuscope.schema.alerts`: one module per file kind. A telemetry log's wire types are
  generated from its records, so they live with them (:mod:`gpuscope.telemetry.wire`).

The floor of the package: it imports only :mod:`gpuscope.errors`, :mod:`gpuscope.textsafe`,
:mod:`gpuscope.fileio` and msgspec, never a package above it (probing, telemetry, roofline,
report, tui). ``python -m gpuscope.schema`` names its types' modules in a table
(:data:`gpuscope.schema.generate.SCHEMAS`), the one place that reaches above.

``python -m gpuscope.schema`` regenerates the JSON Schemas in ``docs/schemas/``.
No Textual and no torch here.

Why msgspec (not pydantic v2): one small C extension with no dependencies; it decodes JSON bytes
straight into the declared types with every check on the way (faster than ``json.loads`` alone,
benchmarks/bench_typed_load.py), its errors name the JSON path (``at `$.ceilings[3].value```),
and it generates JSON Schema from the same types.
"""
