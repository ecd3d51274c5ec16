"""AMD GPUs through AMD SMI (ROCm's ``libamd_smi.so`` and its ``amdsmi`` Python package).

:class:`~gpuscope.telemetry.amdsmi.collector.AmdSmiCollector` fills the same
:class:`~gpuscope.telemetry.records.GpuSample` records the NVML collector does (``vendor="amd"``);
``amdsmi`` is imported only when the collector opens.
"""
