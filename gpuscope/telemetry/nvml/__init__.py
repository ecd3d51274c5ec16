"""NVIDIA GPUs through NVML (nvidia-ml-py): the collector, its pieces and the capability checks.

- :mod:`.session`      init/shutdown, versions, NVML errors -> ``Unavailable``
- :mod:`.device`       static identity, clocks, bus width, NVLink links, MIG devices
- :mod:`.fields`       the one batched field-values call per GPU and its counter rates
- :mod:`.gpm`          GPM metrics (Hopper+) between consecutive GPM samples
- :mod:`.processes`    processes, their GPU memory, SM % and name/user
- :mod:`.readings`     per-sample calls and how readings become GpuSample fields
- :mod:`.collector`    :class:`NvmlCollector` and :class:`GpuSide`
- :mod:`.capabilities` what is readable and why not (``gpuscope doctor``, the TUI)
"""

from gpuscope.telemetry.nvml.collector import DeviceStatus, GpuSide, NvmlCollector

__all__ = ["NvmlCollector", "GpuSide", "DeviceStatus"]
