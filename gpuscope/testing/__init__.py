"""Fakes for tests and benchmarks, at the outermost boundary (NVML C symbols, clocks, files)."""
