"""Energy used over a window, in joules, from the hardware's own cumulative counters.

- NVIDIA GPU: NVML's total energy counter (``nvmlDeviceGetTotalEnergyConsumption``, the same
  counter as field ``NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION``; millijoules since driver load,
  Volta and newer), per GPU, read at the start and the end of the window.
- CPU: RAPL through ``/sys/class/powercap`` (:mod:`gpuscope.telemetry.powercap`), package and
  DRAM domains summed, wrap-around handled.

Anything else is :class:`Unavailable` with the reason, never 0 J: a counter that did not move
over the window (too short for its resolution) is unavailable too. A read costs microseconds
(RAPL: a file read per domain; NVML: one call).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

from gpuscope.telemetry.nvml import mapping, session
from gpuscope.telemetry.powercap import POWERCAP_ROOT, RaplReader, RaplReading
from gpuscope.telemetry.values import Reason, Unavailable

__all__ = ["EnergyFields", "EnergyMeter", "EnergyResult", "energy_fields", "energy_per_call", "flop_per_joule"]


@dataclass(frozen=True)
class EnergyResult:
    """Joules used over ``window_s`` seconds, or why they are not known."""

    joules: float | Unavailable
    window_s: float
    method: str  # what was read, e.g. "NVML total energy counter, GPU 0"
    domains_j: dict[str, float] = field(default_factory=dict)

    @property
    def available(self) -> bool:
        return not isinstance(self.joules, Unavailable)

    def scaled(self, factor: float) -> EnergyResult:
        """The same result with joules (and domains) multiplied by ``factor`` (e.g. 1/steps)."""
        if isinstance(self.joules, Unavailable):
            return self
        return EnergyResult(
            self.joules * factor,
            self.window_s * factor,
            self.method,
            {k: v * factor for k, v in self.domains_j.items()},
        )

    def to_json(self) -> EnergyFields:
        """``energy_j`` (None when unavailable), ``energy_unavailable`` (the reason), the method
        and the per-domain joules."""
        return energy_fields(self)


class EnergyFields(TypedDict, total=False):
    """The energy fields of a results entry: joules, or (``energy_unavailable``) why not."""

    energy_j: float | None
    energy_unavailable: str | None
    energy_method: str
    energy_window_s: float
    energy_domains_j: dict[str, float | None] | None
    flop_per_j: float | None


def energy_fields(result: EnergyResult | None, flops: float | None = None) -> EnergyFields:
    """The energy fields of a results entry (ceiling, workload, profile step); with ``flops``,
    also ``flop_per_j``."""
    if result is None:
        return {
            "energy_j": None,
            "energy_unavailable": Unavailable(Reason.NOT_APPLICABLE, "energy not measured").to_json(),
        }
    joules = result.joules
    fields: EnergyFields = {
        "energy_j": None if isinstance(joules, Unavailable) else joules,
        "energy_unavailable": joules.to_json() if isinstance(joules, Unavailable) else None,
        "energy_method": result.method,
        "energy_window_s": result.window_s,
        "energy_domains_j": {name: joules for name, joules in result.domains_j.items()} or None,
    }
    if flops is not None:
        ratio = flop_per_joule(flops, result)
        fields["flop_per_j"] = None if isinstance(ratio, Unavailable) else ratio
    return fields


def flop_per_joule(flops: float, result: EnergyResult) -> float | Unavailable:
    """FLOP per joule, or the reason the energy is unavailable."""
    if isinstance(result.joules, Unavailable):
        return result.joules
    if result.joules <= 0:
        return Unavailable(Reason.ERROR, "no energy measured")
    return flops / result.joules


class EnergyMeter:
    """Measures the energy of one device over a window: :meth:`start`, run, :meth:`stop`.

    ``device`` is ``"cpu"`` (RAPL) or ``"cuda"``/``"cuda:N"`` (NVML). The NVML GPU of CUDA
    device N is found by the one NVML<->CUDA mapping
    (:func:`gpuscope.telemetry.nvml.mapping.nvml_gpu_index`: by ``cuda_uuid``, torch's UUID of
    the device, asked of torch when None, else by CUDA_VISIBLE_DEVICES and PCI order; a MIG
    device reads its whole GPU's counter); ``nvml_index`` skips the mapping. ``powercap_root``
    points RAPL at a fake tree in tests; ``clock`` is the window clock (seconds)."""

    def __init__(
        self,
        device: str,
        *,
        powercap_root: str | os.PathLike[str] = POWERCAP_ROOT,
        nvml_index: int | None = None,
        cuda_uuid: str | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.device = device
        self.clock = clock
        self._problem: Unavailable | None = None
        self._rapl: RaplReader | None = None
        self._nvml_handle: Any = None
        self._nvml_initialized = False
        self._start: tuple[float, Any] | None = None
        if device == "cpu" or device.startswith("cpu:"):
            self._rapl = RaplReader(powercap_root)
            self._problem = self._rapl.open()
            self.method = (
                "RAPL powercap counters (" + ", ".join(d.label for d in self._rapl.domains) + ")"
                if not self._problem
                else "RAPL powercap"
            )
        elif device.startswith("cuda"):
            cuda_index = int(device.split(":", 1)[1]) if ":" in device else 0
            self.method = "NVML total energy counter"
            self._problem = self._open_nvml(cuda_index, nvml_index, cuda_uuid)
        else:
            self.method = "none"
            self._problem = Unavailable(Reason.NOT_SUPPORTED, f"no energy counter for device {device!r}")

    def _open_nvml(self, cuda_index: int, nvml_index: int | None, cuda_uuid: str | None) -> Unavailable | None:
        missing = session.init()
        if missing is not None:
            return missing
        self._nvml_initialized = True
        if nvml_index is None:
            found = mapping.nvml_gpu_index(cuda_index, cuda_uuid=cuda_uuid)
            if isinstance(found, Unavailable):
                return found
            index, how = found
            matched = "" if how == "uuid" else f" (cuda:{cuda_index} matched by {how})"
        else:
            index, matched = nvml_index, ""
        self.method = f"NVML total energy counter, GPU {index}{matched}"
        handle = session.call("nvmlDeviceGetHandleByIndex", session.pynvml.nvmlDeviceGetHandleByIndex, index)
        if isinstance(handle, Unavailable):
            return handle
        self._nvml_handle = handle
        first = self._read_nvml_mj()
        return first if isinstance(first, Unavailable) else None

    def _read_nvml_mj(self) -> int | Unavailable:
        try:
            return session.call(
                "nvmlDeviceGetTotalEnergyConsumption",
                session.pynvml.nvmlDeviceGetTotalEnergyConsumption,
                self._nvml_handle,
            )
        except session.GpuLostError:
            return Unavailable(Reason.GPU_LOST, "the GPU stopped answering")

    def close(self) -> None:
        """Release NVML (when this meter opened it)."""
        if self._nvml_initialized:
            self._nvml_handle = None
            self._nvml_initialized = False
            session.shutdown()

    @property
    def unavailable(self) -> Unavailable | None:
        """Why this meter cannot measure, or None."""
        return self._problem

    def _read(self) -> Any:
        if self._rapl is not None:
            return self._rapl.read(self.clock())
        return self._read_nvml_mj()

    def start(self) -> None:
        """Read the counters at the start of the window."""
        started = self.clock()
        if self._problem is not None:
            self._start = (started, None)
            return
        try:
            self._start = (started, self._read())
        except (OSError, ValueError) as exc:  # unreadable, or half-written while read
            self._problem = Unavailable(Reason.ERROR, f"cannot read the energy counter: {exc}")
            self._start = (started, None)

    def stop(self) -> EnergyResult:
        """Read the counters again; the joules used since :meth:`start`."""
        if self._start is None:
            raise RuntimeError("EnergyMeter.stop() before start()")
        started, before = self._start
        try:
            after = self._read() if self._problem is None else None
        except (OSError, ValueError) as exc:  # unreadable, or half-written while read
            self._problem = Unavailable(Reason.ERROR, f"cannot read the energy counter: {exc}")
            after = None
        window_s = max(self.clock() - started, 0.0)
        if self._problem is not None:
            return EnergyResult(self._problem, window_s, self.method)
        if self._rapl is not None:
            assert isinstance(before, RaplReading) and isinstance(after, RaplReading)
            domains = self._rapl.joules_between(before, after)
            total = sum(domains.values())
            if total <= 0:
                return EnergyResult(
                    Unavailable(Reason.ERROR, f"RAPL counters did not advance over {window_s:.3g} s"),
                    window_s,
                    self.method,
                )
            return EnergyResult(total, window_s, self.method, domains)
        if isinstance(after, Unavailable) or isinstance(before, Unavailable):
            return EnergyResult(after if isinstance(after, Unavailable) else before, window_s, self.method)
        assert after is not None and before is not None
        delta_mj = int(after) - int(before)
        if delta_mj <= 0:
            detail = (
                "went backwards (driver reloaded?)"
                if delta_mj < 0
                else f"did not advance over {window_s:.3g} s (window too short for its resolution)"
            )
            return EnergyResult(Unavailable(Reason.ERROR, f"NVML energy counter {detail}"), window_s, self.method)
        return EnergyResult(delta_mj * 1e-3, window_s, self.method, {self.method: delta_mj * 1e-3})


def energy_per_call(
    call: Callable[[], Any],
    device: str,
    *,
    per_call_s: float,
    window_s: float = 1.0,
    synchronize: Callable[[], Any] = lambda: None,
    powercap_root: str | os.PathLike[str] = POWERCAP_ROOT,
    nvml_index: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[EnergyResult, int]:
    """Run ``call`` repeatedly for about ``window_s`` seconds between two reads of the device's
    energy counter; returns the energy of *one* call and the number of calls made. A window of a
    second or more spans many updates of NVML's and RAPL's counters. Nothing runs when the
    counter is unavailable (the result says why)."""
    meter = EnergyMeter(device, powercap_root=powercap_root, nvml_index=nvml_index, clock=clock)
    try:
        if meter.unavailable is not None:
            return EnergyResult(meter.unavailable, 0.0, meter.method), 0
        batch = max(1, int(0.05 / max(per_call_s, 1e-9)))
        calls = 0
        synchronize()
        meter.start()
        started = clock()
        while calls == 0 or clock() - started < window_s:
            for _ in range(batch):
                call()
            calls += batch
            synchronize()
        result = meter.stop()
    finally:
        meter.close()
    if isinstance(result.joules, Unavailable):
        return result, calls
    per_call = EnergyResult(
        result.joules / calls,
        result.window_s / calls,
        f"{result.method}, {calls} calls over {result.window_s:.3g} s",
        {k: v / calls for k, v in result.domains_j.items()},
    )
    return per_call, calls
