"""GPM (GPU Performance Monitoring, Hopper and newer): metrics between two GPM samples.

Each reader keeps the previous GPM sample; a read takes a new one (when at least
``GPM_SAMPLE_INTERVAL_S`` after the previous: nvml.h wants *more than* 100 ms) and asks
``nvmlGpmMetricsGet`` for every metric between the two, so one read costs two NVML calls.
Closer reads return the last result.
A MIG GPU instance is read with ``nvmlGpmMigSampleGet``. Each metric carries its own return
code; a NoPermission names the RmProfilingAdminOnly fix.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuscope.telemetry.nvml.session import GpuLostError, call, pynvml, unavailable_from_error
from gpuscope.telemetry.values import Metric, Reason, Unavailable

__all__ = ["GPM_MIN_INTERVAL_S", "GPM_SAMPLE_INTERVAL_S", "ACTIVITY_METRICS", "GpmReader", "link_metric_ids", "MIB"]

#: NVML needs GPM samples more than this apart (nvml.h: "> 100 ms"); strictly more.
GPM_MIN_INTERVAL_S = 0.1
#: A new GPM sample is taken only this long after the previous one: 10 ms above the limit, so
#: that the driver's own timestamps (not our clock) are also more than 100 ms apart.
GPM_SAMPLE_INTERVAL_S = 0.11
MIB = float(1 << 20)

#: GpuSample field -> GPM metric id (all percent, 0-100).
ACTIVITY_METRICS: dict[str, int] = {
    "dram_bandwidth_percent_of_peak": 10,  # DRAM_BW_UTIL
    "sm_activity_percent": 2,  # SM_UTIL
    "sm_occupancy_percent": 3,  # SM_OCCUPANCY
    "tensor_activity_percent": 5,  # ANY_TENSOR_UTIL
    "dfma_tensor_activity_percent": 6,
    "hmma_tensor_activity_percent": 7,
    "imma_tensor_activity_percent": 9,
    "fp64_activity_percent": 11,
    "fp32_activity_percent": 12,
    "fp16_activity_percent": 13,
    "utilization_percent": 1,  # GRAPHICS_UTIL: time any context was active (used for MIG)
}
#: GpuSample field -> GPM metric id, in MiB/s.
INTERCONNECT_METRICS: dict[str, int] = {
    "pcie_tx_bytes_per_s": 20,
    "pcie_rx_bytes_per_s": 21,
    "nvlink_rx_bytes_per_s": 60,
    "nvlink_tx_bytes_per_s": 61,
}


def link_metric_ids(link: int) -> tuple[int | None, int | None]:
    """(RX, TX) GPM metric ids of NVLink ``link`` in MiB/s, or None where pynvml has none."""
    rx = getattr(pynvml, f"NVML_GPM_METRIC_NVLINK_L{link}_RX_PER_SEC", None)
    tx = getattr(pynvml, f"NVML_GPM_METRIC_NVLINK_L{link}_TX_PER_SEC", None)
    return rx, tx


class GpmReader:
    """GPM metrics of one GPU (``gpu_instance_id=None``) or one MIG GPU instance."""

    def __init__(
        self,
        handle: object,
        clock: Callable[[], float],
        *,
        gpu_instance_id: int | None = None,
        links: list[int] | tuple[int, ...] = (),
    ) -> None:
        self.handle = handle
        self.clock = clock
        self.gpu_instance_id = gpu_instance_id
        #: metric id -> key in the read() result (GpuSample field or "nvlink_tx_bytes_per_s:<link>")
        self.metrics: dict[int, str] = {mid: key for key, mid in ACTIVITY_METRICS.items()}
        if gpu_instance_id is None:
            self.metrics.update({mid: key for key, mid in INTERCONNECT_METRICS.items()})
            for link in links:
                rx, tx = link_metric_ids(link)
                if rx is not None and tx is not None:
                    self.metrics[rx] = f"nvlink_rx_bytes_per_s:{link}"
                    self.metrics[tx] = f"nvlink_tx_bytes_per_s:{link}"
        #: set when GPM cannot work here at all (not supported, driver too old)
        self.unavailable: Unavailable | None = None
        self._samples: list[object] = []  # two pynvml GPM sample handles
        self._previous_at: float | None = None  # clock time of the kept sample
        self._last: dict[str, Metric[float]] | Unavailable = Unavailable(Reason.WARMING_UP, "GPM needs two samples")
        #: two pynvml c_nvmlGpmMetricsGet_t: [0] asks for the metrics between _samples[0] and
        #: _samples[1], [1] the other way round; each read uses [0] and then turns both lists round
        self._requests: list[object] = []
        self._names = list(self.metrics.values())
        # GPM gives PCIe and NVLink in MiB/s, the rest in percent
        self._scales = [MIB if key.startswith(("pcie_", "nvlink_")) else 1.0 for key in self._names]

    def open(self) -> Unavailable | None:
        """Check support, allocate two samples and take the first. Returns why GPM is
        unusable, or None. Raises GpuLostError."""
        support = call("nvmlGpmQueryDeviceSupport", pynvml.nvmlGpmQueryDeviceSupport, self.handle)
        if isinstance(support, Unavailable):
            self.unavailable = support
            return support
        if not support.isSupportedDevice:
            self.unavailable = Unavailable(Reason.NOT_SUPPORTED, "GPM needs a Hopper or newer GPU")
            return self.unavailable
        for _ in range(2):
            sample = call("nvmlGpmSampleAlloc", pynvml.nvmlGpmSampleAlloc)
            if isinstance(sample, Unavailable):
                self.close()
                self.unavailable = sample
                return sample
            self._samples.append(sample)
        for first, second in (self._samples, self._samples[::-1]):
            request = pynvml.c_nvmlGpmMetricsGet_t()
            request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = len(self.metrics)
            for slot, metric_id in enumerate(self.metrics):
                request.metrics[slot].metricId = metric_id
            request.sample1, request.sample2 = first, second
            self._requests.append(request)
        taken = self._take(self._samples[0])
        if isinstance(taken, Unavailable):
            self._last = taken
            if taken.reason in (Reason.NOT_SUPPORTED, Reason.DRIVER_TOO_OLD):
                self.close()
                self.unavailable = taken
                return taken
        return None

    def _take(self, sample: object) -> Unavailable | None:
        result: Metric[object]
        if self.gpu_instance_id is None:
            result = call("nvmlGpmSampleGet", pynvml.nvmlGpmSampleGet, self.handle, sample, profiling=True)
        else:
            result = call(
                "nvmlGpmMigSampleGet",
                pynvml.nvmlGpmMigSampleGet,
                self.handle,
                self.gpu_instance_id,
                sample,
                profiling=True,
            )
        if isinstance(result, Unavailable):
            self._previous_at = None
            return result
        self._previous_at = self.clock()
        return None

    def read(self) -> dict[str, Metric[float]] | Unavailable:
        """Metrics keyed as :attr:`metrics` values (percent, or bytes/s for PCIe/NVLink), or
        one Unavailable for all. Raises GpuLostError."""
        if self.unavailable is not None:
            return self.unavailable
        if not self._samples:
            return Unavailable(Reason.ERROR, "GPM reader is closed")
        now = self.clock()
        if self._previous_at is None:  # the last sample failed: start again
            failed = self._take(self._samples[0])
            self._last = failed or Unavailable(Reason.WARMING_UP, "GPM needs two samples")
            return self._last
        if now - self._previous_at < GPM_SAMPLE_INTERVAL_S:
            return self._last
        failed = self._take(self._samples[1])
        if failed is not None:
            self._last = failed
            return failed
        got = call("nvmlGpmMetricsGet", pynvml.nvmlGpmMetricsGet, self._requests[0], profiling=True)
        self._samples.reverse()  # the new sample is the next read's previous one
        self._requests.reverse()
        if isinstance(got, Unavailable):
            self._last = got
            return got
        result: dict[str, Metric[float]] = {}
        for key, scale, metric in zip(self._names, self._scales, got.metrics):
            code = int(metric.nvmlReturn)
            if code == pynvml.NVML_SUCCESS:
                result[key] = float(metric.value) * scale
            elif code == pynvml.NVML_ERROR_GPU_IS_LOST:
                raise GpuLostError("nvmlGpmMetricsGet")
            else:
                what = f"{key.partition(':')[0]} (GPM metric {int(metric.metricId)})"
                result[key] = unavailable_from_error(pynvml.NVMLError(code), what, profiling=True)
        self._last = result
        return result

    def close(self) -> None:
        """Free the GPM samples (errors ignored)."""
        for sample in self._samples:
            try:
                pynvml.nvmlGpmSampleFree(sample)
            except Exception:  # noqa: BLE001
                pass
        self._samples = []
        self._requests = []
        self._previous_at = None
