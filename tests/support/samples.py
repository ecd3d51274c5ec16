"""Hand-made :class:`Sample` records for tests and demos (no hardware, no NVML, no psutil)."""

from __future__ import annotations

import dataclasses

from gpuscope.telemetry.records import (
    CpuCoreSample,
    GpuProcessSample,
    GpuSample,
    HostSample,
    InfinibandPortSample,
    NicSample,
    NvLinkLinkSample,
    Sample,
)
from gpuscope.telemetry.values import Reason, Unavailable

__all__ = ["make_host_sample", "make_gpu_sample", "make_sample"]


def make_host_sample(cores: int = 4, tick: int = 0) -> HostSample:
    """A plausible host: ``cores`` cores, one NIC plus ``lo``, one InfiniBand port."""
    warming = Unavailable(Reason.WARMING_UP, "a rate needs two samples")
    return HostSample(
        hostname="node-a",
        cpu_model="Fake CPU 9000",
        logical_cores=cores,
        physical_cores=max(1, cores // 2),
        cpu_utilization_percent=warming if tick == 0 else 37.5,
        cores=[
            CpuCoreSample(
                core=i,
                utilization_percent=warming if tick == 0 else float((10 * i + tick) % 100),
                frequency_mhz=2450.0 + i,
            )
            for i in range(cores)
        ],
        load_average_1m=1.5,
        load_average_5m=1.25,
        load_average_15m=0.5,
        memory_total_bytes=64 * 2**30,
        memory_used_bytes=12 * 2**30,
        memory_available_bytes=50 * 2**30,
        swap_total_bytes=0,
        swap_used_bytes=0,
        nics=[
            NicSample(
                "lo", 10.0 * tick, 10.0 * tick, True, Unavailable(Reason.NOT_SUPPORTED, "no speed"), is_loopback=True
            ),
            NicSample("eth0", 1.25e6 * tick, 2.5e5 * tick, True, 25000.0),
        ],
        infiniband_ports=[
            InfinibandPortSample("mlx5_0", 1, "InfiniBand", "ACTIVE", 400.0, 4.0e9 * tick, 3.0e9 * tick),
        ],
    )


def make_gpu_sample(index: int = 0, tick: int = 0, lost: bool = False) -> GpuSample:
    """A Hopper-like GPU with GPM values; ``lost=True`` gives a lost GPU (every metric unavailable)."""
    gpu = GpuSample(
        index=index,
        name="NVIDIA H100 80GB HBM3",
        uuid=f"GPU-{index:08d}",
        pci_bus_id=f"0000:{index + 1:02x}:00.0",
        architecture="hopper",
        state="lost" if lost else "ok",
    )
    if lost:
        return gpu
    return dataclasses.replace(
        gpu,
        mig_mode=False,
        utilization_percent=float(50 + tick % 50),
        memory_busy_percent=30.0,
        memory_used_bytes=40 * 10**9,
        memory_total_bytes=80 * 10**9,
        dram_bandwidth_bytes_per_s=1.675e12,
        dram_bandwidth_percent_of_peak=50.0,
        dram_peak_bytes_per_s=3.35e12,
        sm_activity_percent=80.0,
        sm_occupancy_percent=40.0,
        tensor_activity_percent=60.0,
        pcie_tx_bytes_per_s=1.0e9,
        pcie_rx_bytes_per_s=2.0e9,
        pcie_link_generation=5,
        pcie_link_width=16,
        nvlink_tx_bytes_per_s=2.0e11,
        nvlink_rx_bytes_per_s=1.9e11,
        nvlink_active_links=2,
        nvlink_version=4,
        nvlink_link_peak_bytes_per_s=25e9,
        nvlink_links=[NvLinkLinkSample(0, 1.0e11, 0.95e11), NvLinkLinkSample(1, 1.0e11, 0.95e11)],
        sm_clock_mhz=1980.0,
        sm_clock_max_mhz=1980.0,
        memory_clock_mhz=2619.0,
        memory_clock_max_mhz=2619.0,
        power_w=550.5,
        power_limit_w=700.0,
        energy_j=123456.789 + tick,
        temperature_gpu_c=61.0,
        temperature_memory_c=Unavailable(Reason.NOT_SUPPORTED, "no memory sensor"),
        fan_speed_percent=Unavailable(Reason.NOT_SUPPORTED, "passively cooled"),
        throttle_reasons=[],
        ecc_corrected_errors=0,
        ecc_uncorrected_errors=0,
        processes=[
            GpuProcessSample(
                pid=1234, name="python", user="alice", gpu_memory_bytes=39 * 10**9, sm_percent=75.0, kind="compute"
            ),
        ],
    )


def make_sample(tick: int = 0, gpus: int = 2, cores: int = 4, timestamp: float = 1_700_000_000.0) -> Sample:
    """A whole sample at ``timestamp + tick`` seconds; ``gpus=0`` gives a host-only sample."""
    no_gpu = Unavailable(Reason.NO_DRIVER, "libnvidia-ml.so.1 not found")
    return Sample(
        timestamp=timestamp + tick,
        host=make_host_sample(cores, tick),
        gpus=[make_gpu_sample(i, tick) for i in range(gpus)],
        driver_version="550.54.15" if gpus else no_gpu,
        nvml_version="12.550.54.15" if gpus else no_gpu,
        cuda_driver_version="12.4" if gpus else no_gpu,
        gpu_unavailable=None if gpus else no_gpu,
        sample_cost_s=0.0012,
    )
