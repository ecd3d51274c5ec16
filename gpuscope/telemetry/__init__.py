"""Telemetry: typed samples of the host and its NVIDIA GPUs. Imports neither Textual nor torch."""
