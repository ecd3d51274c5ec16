"""One call, one :class:`Sample`: the host side, the NVIDIA side and the AMD side together.

The TUI polls :class:`TelemetryCollector` from its own thread workers; ``gpuscope log`` drives it
from :class:`gpuscope.telemetry.sampler.Sampler`. Imports neither Textual nor torch; pynvml is
imported only by :meth:`TelemetryCollector.open` when the GPU side is wanted.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from gpuscope.errors import UsageError
from gpuscope.telemetry.host import HostCollector
from gpuscope.telemetry.records import Sample
from gpuscope.telemetry.simulated import simulation_note
from gpuscope.telemetry.values import Metric, Reason, Unavailable
from gpuscope.telemetry.wire import within_ranges

__all__ = ["TelemetryCollector", "GpuSource"]

_NO_GPU_SIDE = Unavailable(Reason.ERROR, "no GPU side")
_NO_AMD_SIDE = Unavailable(Reason.NOT_APPLICABLE, "AMD GPUs not collected")


class GpuSource(Protocol):
    """What :class:`TelemetryCollector` needs from the NVML collector (``gpuscope.telemetry.nvml``)."""

    def open(self) -> Unavailable | None: ...

    def sample(self) -> Any: ...  # a GpuSide

    def close(self) -> None: ...


class TelemetryCollector:
    """Host plus GPUs. ``sample()`` is safe to call from any one thread at a time (it locks).

    ``nvml=False`` skips the GPU side entirely (``gpu_unavailable`` says so); ``gpm``,
    ``processes`` and ``nvlink_per_link`` are passed to the NVML collector. ``host`` and
    ``gpu_source`` replace the real collectors (tests, replay). ``amd`` adds AMD GPUs through
    AMD SMI after the NVIDIA ones (their indices follow NVIDIA's); ``amd_source`` replaces it.
    """

    def __init__(
        self,
        nvml: bool = True,
        *,
        gpm: bool = True,
        processes: bool = True,
        host: HostCollector | None = None,
        gpu_source: GpuSource | None = None,
        nvlink_per_link: bool = True,
        wall_clock: Callable[[], float] = time.time,
        amd: bool = True,
        amd_source: GpuSource | None = None,
    ) -> None:
        self._want_nvml = nvml
        self._gpm = gpm
        self._processes = processes
        self._nvlink_per_link = nvlink_per_link
        self._host = host
        self._gpu: GpuSource | None = gpu_source
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._opened = False
        self._gpu_processes_shown = True
        self._want_amd = amd and nvml
        self._amd: GpuSource | None = amd_source
        #: Why there is no GPU side at all (None while NVML or AMD SMI gives GPUs).
        self.gpu_unavailable: Unavailable | None = None
        #: Why NVML gives no GPUs, and why AMD SMI gives none (None: it does, or it was not asked).
        self.nvidia_unavailable: Unavailable | None = None
        self.amd_unavailable: Unavailable | None = None

    def open(self) -> Unavailable | None:
        """Start both sides. Never raises for a missing GPU side; returns why it is missing (or None)."""
        with self._lock:
            if self._opened:
                return self.gpu_unavailable
            if self._host is None:
                self._host = HostCollector()
            if not self._want_nvml:
                self._gpu = None
                self.gpu_unavailable = Unavailable(Reason.NOT_APPLICABLE, "GPU collection turned off")
            else:
                if self._gpu is None:
                    self._gpu, self.gpu_unavailable = _make_nvml(self._gpm, self._processes, self._nvlink_per_link)
                if self._gpu is not None:
                    try:
                        self.gpu_unavailable = self._gpu.open()
                    except Exception as exc:  # noqa: BLE001 - the contract says never raises; be sure
                        self.gpu_unavailable = Unavailable(Reason.ERROR, f"NVML collector failed to open: {exc}")
                    if self.gpu_unavailable is not None:
                        self._close_gpu()
                    else:
                        self.set_gpu_processes_shown(self._gpu_processes_shown)
            self.nvidia_unavailable = self.gpu_unavailable
            self._open_amd()
            if self._amd is not None:
                self.gpu_unavailable = None  # AMD GPUs: there is a GPU side
            self._opened = True
            return self.gpu_unavailable

    def _open_amd(self) -> None:
        if not self._want_amd:
            self._amd, self.amd_unavailable = None, None
            return
        if self._amd is None:
            from gpuscope.telemetry.amdsmi.collector import AmdSmiCollector

            first_index = int(getattr(self._gpu, "gpu_count", 0)) if self._gpu is not None else 0
            self._amd = AmdSmiCollector(processes=self._processes, first_index=first_index)
        try:
            self.amd_unavailable = self._amd.open()
        except UsageError:  # a malformed GPUSCOPE_FAKE_AMDSMI: the user's error, said in one line
            raise
        except Exception as exc:  # noqa: BLE001 - the contract says never raises
            self.amd_unavailable = Unavailable(Reason.ERROR, f"AMD SMI collector failed to open: {exc}")
        if self.amd_unavailable is not None:
            with contextlib.suppress(Exception):
                self._amd.close()
            self._amd = None

    def set_gpu_processes_shown(self, shown: bool) -> None:
        """Tell the GPU side whether its process lists are on screen (they are read less often
        when not; see ``NvmlCollector.set_processes_shown``). Any thread."""
        self._gpu_processes_shown = shown
        setter = getattr(self._gpu, "set_processes_shown", None)
        if setter is not None:
            setter(shown)

    def sample(self) -> Sample:
        """One :class:`Sample` (opens on first use). ``sample_cost_s`` is the wall time it took."""
        if not self._opened:
            self.open()
        with self._lock:
            started = time.perf_counter()
            timestamp = self._wall_clock()
            assert self._host is not None
            host = self._host.sample()
            gpus: list[Any] = []
            unavailable = self.nvidia_unavailable if self._want_nvml else self.gpu_unavailable
            missing: Metric[str] = unavailable or _NO_GPU_SIDE
            driver: Metric[str] = missing
            nvml_version: Metric[str] = missing
            cuda: Metric[str] = missing
            amd_driver: Metric[str] = self.amd_unavailable or _NO_AMD_SIDE
            amd_library: Metric[str] = amd_driver
            amd_unavailable = self.amd_unavailable
            if self._gpu is not None:
                try:
                    side = self._gpu.sample()
                except Exception as exc:  # noqa: BLE001 - one failing side never spoils the sample
                    unavailable = Unavailable(Reason.ERROR, f"NVML collector failed: {exc}")
                    driver = nvml_version = cuda = unavailable
                else:
                    gpus = list(side.gpus)
                    driver, nvml_version, cuda = side.driver_version, side.nvml_version, side.cuda_driver_version
                    unavailable = side.unavailable
            if self._amd is not None:
                try:
                    amd_side = self._amd.sample()
                except Exception as exc:  # noqa: BLE001 - one failing side never spoils the sample
                    amd_unavailable = Unavailable(Reason.ERROR, f"AMD SMI collector failed: {exc}")
                else:
                    gpus += list(amd_side.gpus)
                    amd_driver, amd_library = amd_side.driver_version, amd_side.library_version
                    amd_unavailable = amd_side.unavailable
            sample = Sample(
                timestamp=timestamp,
                host=host,
                gpus=gpus,
                driver_version=driver,
                nvml_version=nvml_version,
                cuda_driver_version=cuda,
                gpu_unavailable=None if gpus else unavailable,
                nvidia_unavailable=unavailable,
                amd_unavailable=amd_unavailable,
                amd_driver_version=amd_driver,
                amdsmi_library_version=amd_library,
                simulated=simulation_note() if gpus else None,
                sample_cost_s=time.perf_counter() - started,
            )
        # every number inside its declared range: what a log, the exporter or the TUI gets reads back
        return within_ranges(sample)

    def close(self) -> None:
        """Release NVML. Safe to call twice; ``sample`` opens again."""
        with self._lock:
            self._close_gpu()
            if self._amd is not None:
                with contextlib.suppress(Exception):
                    self._amd.close()
                self._amd = None
            self._opened = False

    def _close_gpu(self) -> None:
        if self._gpu is not None:
            try:
                self._gpu.close()
            except Exception:  # noqa: BLE001 - closing must not hide the real outcome
                pass
        self._gpu = None

    def __enter__(self) -> TelemetryCollector:
        self.open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _make_nvml(gpm: bool, processes: bool, nvlink_per_link: bool) -> tuple[GpuSource | None, Unavailable | None]:
    """The real NVML collector, or why it cannot be built (module or pynvml missing)."""
    try:  # pynvml only now: the host side works without it
        from gpuscope.telemetry.nvml.collector import LOST_RETRY_INTERVAL_S, NvmlCollector
    except ImportError as exc:
        if exc.name == "pynvml":
            return None, Unavailable(
                Reason.NO_DRIVER, "the nvidia-ml-py package is not installed (pip install nvidia-ml-py)"
            )
        return None, Unavailable(Reason.ERROR, f"NVML support not importable: {exc}")
    lost_retry_interval_s = LOST_RETRY_INTERVAL_S
    if os.environ.get("GPUSCOPE_FAKE_NVML"):  # simulated GPUs: the fake NVML's one door
        from gpuscope.testing.scenarios import install_from_environment

        scenario = install_from_environment()
        if scenario is not None and scenario.lost_retry_s is not None:
            lost_retry_interval_s = scenario.lost_retry_s
    collector = NvmlCollector(
        gpm=gpm, processes=processes, nvlink_per_link=nvlink_per_link, lost_retry_interval_s=lost_retry_interval_s
    )
    return collector, None
