"""Fake-NVML scenarios chosen from the environment, for fault and load tests of whole commands.

Test-only hook: when ``GPUSCOPE_FAKE_NVML`` is set, :class:`gpuscope.telemetry.collector.TelemetryCollector`
calls :func:`install_from_environment` once, when it opens its GPU side, and the real NVML
bindings then talk to a :class:`~gpuscope.testing.fake_nvml.FakeNvml` instead of libnvidia-ml.
So ``gpuscope log``, ``gpuscope serve`` and the TUI (``gpuscope``) run unchanged against scripted
GPUs and faults, in a subprocess that can be signalled. Nothing is read from the environment
on the sampling path.

The value is comma-separated ``key=value`` items (all optional)::

    GPUSCOPE_FAKE_NVML="gpus=8xh200,random=0.05,seed=3,lose=1@1.0:2.0,lost_retry_s=0.5"

- ``gpus``: ``+``-separated models, each optionally ``Nx``-prefixed: ``8xh200``, ``h100+a100``,
  ``2xh200+l4`` (models: h100, h200, a100, l4). Default ``2xh200``.
- ``links``: NVLink links per GPU (overrides the model's count; ``0``: none).
- ``random``: probability that any NVML call fails (``inject_random``). Default 0.
- ``errors``: ``+``-separated NVML error names for ``random`` (default ``Unknown+Timeout+NotSupported+NoPermission``).
- ``seed``: seed for ``random`` (default 0).
- ``lose``: ``GPU@START:END`` (seconds after the fake is installed): that GPU answers GpuIsLost
  from START, and again from END (``END`` may be left out: lost for good). Repeat with ``;``.
- ``lost_retry_s``: how often the collector retries a lost GPU (default: the collector's own).
- ``busy``: ``1`` gives every GPU a steady, non-zero load (default 1).
- ``init_error``: an NVML error name that ``nvmlInit`` returns (e.g. ``DriverNotLoaded``).

A malformed value raises :class:`gpuscope.errors.UsageError` (one line, exit 2).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from gpuscope.errors import UsageError

__all__ = ["ENV_VAR", "Scenario", "parse_scenario", "build_fake", "install_from_environment"]

ENV_VAR = "GPUSCOPE_FAKE_NVML"
_MODELS = ("h100", "h200", "a100", "l4")
_DEFAULT_ERRORS = ("Unknown", "Timeout", "NotSupported", "NoPermission")

#: The fake installed by :func:`install_from_environment` (one per process), and its context
#: (kept referenced: a collected context manager would restore pynvml).
_installed: Any = None
_context: Any = None


@dataclass
class Scenario:
    """A parsed ``GPUSCOPE_FAKE_NVML`` value (see the module docstring)."""

    gpus: list[str] = field(default_factory=lambda: ["h200", "h200"])
    links: int | None = None
    random: float = 0.0
    errors: tuple[str, ...] = _DEFAULT_ERRORS
    seed: int = 0
    lose: list[tuple[int, float, float | None]] = field(default_factory=list)
    lost_retry_s: float | None = None
    busy: bool = True
    init_error: str | None = None


def _number(key: str, text: str, low: float, high: float) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{ENV_VAR}: {key}={text!r} is not a number") from None
    if not low <= value <= high:
        raise UsageError(f"{ENV_VAR}: {key}={text!r} must be between {low:g} and {high:g}")
    return value


def _gpus(text: str) -> list[str]:
    gpus: list[str] = []
    for part in text.split("+"):
        match = re.fullmatch(r"(?:(\d+)x)?([a-z0-9]+)", part.strip().lower())
        if match is None or match.group(2) not in _MODELS:
            raise UsageError(f"{ENV_VAR}: gpus item {part!r} is not [Nx]MODEL with MODEL one of {', '.join(_MODELS)}")
        count = int(match.group(1) or 1)
        if not 1 <= count <= 64:
            raise UsageError(f"{ENV_VAR}: gpus item {part!r}: between 1 and 64 GPUs of a model")
        gpus.extend([match.group(2)] * count)
    return gpus


def parse_scenario(text: str) -> Scenario:
    """Parse a ``GPUSCOPE_FAKE_NVML`` value. Raises :class:`UsageError` naming the bad item."""
    scenario = Scenario()
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            raise UsageError(f"{ENV_VAR}: item {item!r} is not key=value")
        if key == "gpus":
            scenario.gpus = _gpus(value)
        elif key == "links":
            scenario.links = int(_number(key, value, 0, 18))
        elif key == "random":
            scenario.random = _number(key, value, 0.0, 1.0)
        elif key == "errors":
            scenario.errors = tuple(name.strip() for name in value.split("+") if name.strip())
        elif key == "seed":
            scenario.seed = int(_number(key, value, 0, 2**31))
        elif key == "lose":
            for spec in value.split(";"):
                match = re.fullmatch(r"\s*(\d+)@([0-9.]+)(?::([0-9.]+))?\s*", spec)
                if match is None:
                    raise UsageError(f"{ENV_VAR}: lose={spec!r} is not GPU@START[:END]")
                end = None if match.group(3) is None else _number("lose end", match.group(3), 0, 1e9)
                scenario.lose.append((int(match.group(1)), _number("lose start", match.group(2), 0, 1e9), end))
        elif key == "lost_retry_s":
            scenario.lost_retry_s = _number(key, value, 0.01, 3600)
        elif key == "busy":
            scenario.busy = value.strip() not in ("0", "false", "no")
        elif key == "init_error":
            scenario.init_error = value.strip()
        else:
            raise UsageError(f"{ENV_VAR}: unknown key {key!r}")
    for index, _, _ in scenario.lose:
        if index >= len(scenario.gpus):
            raise UsageError(f"{ENV_VAR}: lose names GPU {index}, but there are {len(scenario.gpus)} GPUs")
    return scenario


def build_fake(scenario: Scenario, clock: Any = None) -> Any:
    """The :class:`FakeNvml` of ``scenario`` on ``clock`` (default: a real-time clock); loss
    times count from the clock's time now."""
    from gpuscope.testing.fake_nvml import GIB, FakeClock, FakeGpu, FakeNvml, error_code

    clock = clock if clock is not None else FakeClock(real=True)
    gpus = []
    for position, model in enumerate(scenario.gpus):
        options: dict[str, Any] = {"wobble": 0.02, "seed": position}
        if scenario.links is not None:
            options["nvlink_links"] = scenario.links
        gpus.append(getattr(FakeGpu, model)(**options))
    init_error = None
    if scenario.init_error:
        try:
            init_error = error_code(scenario.init_error)
        except ValueError:
            raise UsageError(f"{ENV_VAR}: init_error {scenario.init_error!r} is not an NVML error name") from None
    fake = FakeNvml.with_gpus(gpus, clock=clock, init_error=init_error)
    if scenario.busy:
        for index in range(len(gpus)):
            fake.set_load(
                index,
                gpu_util_percent=80.0,
                memory_busy_percent=40.0,
                sm_activity_percent=70.0,
                tensor_activity_percent=50.0,
                dram_bytes_per_s=1.5e12,
                pcie_tx_bytes_per_s=2e9,
                pcie_rx_bytes_per_s=6e9,
                nvlink_tx_bytes_per_s=5e9,
                nvlink_rx_bytes_per_s=5e9,
                power_w=450.0,
                memory_used_bytes=40 * GIB,
            )
    if scenario.random > 0:
        try:
            fake.inject_random(scenario.random, seed=scenario.seed, errors=scenario.errors)
        except ValueError as exc:
            raise UsageError(f"{ENV_VAR}: errors: {exc}") from None
    now = clock()
    for index, start_s, end_s in scenario.lose:
        fake.lose_gpu(index, at_time_s=now + start_s)
        if end_s is not None:
            gpus[index]._restore_at_s = now + end_s  # restore_gpu(at_time_s=) would cancel the loss
    return fake


def install_from_environment() -> Any:
    """When ``GPUSCOPE_FAKE_NVML`` is set, make pynvml use its fake for the rest of the process
    (once) and return the fake; else None."""
    global _installed, _context
    text = os.environ.get(ENV_VAR)
    if not text:
        return None
    if _installed is not None:
        return _installed
    scenario = parse_scenario(text)
    fake = build_fake(scenario)
    if scenario.lost_retry_s is not None:
        from gpuscope.telemetry.nvml.collector import NvmlCollector

        NvmlCollector.LOST_RETRY_INTERVAL_S = scenario.lost_retry_s
    from gpuscope.testing.fake_nvml import install_fake_nvml

    context = install_fake_nvml(fake)
    context.__enter__()  # for the rest of the process: this is a test run
    _installed, _context = fake, context
    return fake
