"""Test fixtures shared by tests/ and benchmarks/: results documents, telemetry samples, reports,
roofline pictures, profiles and multi-rank runs. Not part of the installed package (the fake
NVML, which `gpuscope --demo` and GPUSCOPE_FAKE_NVML use, stays in gpuscope.testing)."""
