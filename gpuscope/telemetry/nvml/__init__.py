"""NVIDIA GPUs through NVML (nvidia-ml-py): the collector, its pieces and the capability checks.

- :mod:`.session`      init/shutdown, versions, NVML errors -> ``Unavailable``
- :mod:`.device`       static identity, clocks, bus width, NVLink links, MIG devices
- :mod:`.fields`       the one batched field-values call per GPU and its counter rates
- :mod:`.gpm`          GPM metrics (Hopper+) between consecutive GPM samples
- :mod:`.processes`    processes, their GPU memory, SM % and name/user
- :mod:`.events`       Xid errors through one NVML event set, drained once per sample
- :mod:`.readings`     per-sample calls and how readings become GpuSample fields
- :mod:`.collector`    :class:`NvmlCollector` and :class:`GpuSide`
- :mod:`.capabilities` what is readable and why not (``gpuscope doctor``, the TUI)
- :mod:`.compat`       names older nvidia-ml-py releases lack (the declared minimum is 12.535.77)
- :mod:`.mapping`      which NVML GPU is CUDA device N (by UUID; CUDA_VISIBLE_DEVICES, MIG)
"""

from gpuscope.telemetry.nvml.collector import DeviceStatus, GpuSide, NvmlCollector

__all__ = ["NvmlCollector", "GpuSide", "DeviceStatus"]
