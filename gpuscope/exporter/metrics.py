"""Turn one telemetry :class:`~gpuscope.telemetry.records.Sample` into Prometheus metric families.

Names follow the Prometheus conventions: a ``gpuscope_`` prefix, base units (bytes, seconds,
joules, watts, celsius, hertz), ``_ratio`` for 0..1 values (percents are divided by 100),
``_bytes_per_second`` for rates and ``_total`` for counters. An unavailable metric is absent
from the exposition, never a zero; instead ``gpuscope_metric_unavailable{metric, reason}`` says
which metric is missing and why (one series per host or GPU, metric and reason).

Every metric is listed in :data:`METRICS` (documented in ``docs/prometheus.md``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gpuscope.telemetry.alerts import LEVELS, exporter_alerts
from gpuscope.telemetry.records import NOT_COLLECTED, GpuSample, HostSample, Sample
from gpuscope.telemetry.values import Reason, Unavailable
from gpuscope.textsafe import safe_text

__all__ = [
    "PREFIX",
    "HOST_LABELS",
    "GPU_LABELS",
    "MetricSpec",
    "METRICS",
    "UNAVAILABLE_METRIC",
    "gpu_label_values",
    "sample_to_families",
    "count_xids",
    "XidTotals",
    "CounterTotals",
    "PROCESS_LABEL_LEVELS",
]

PREFIX = "gpuscope_"
HOST_LABELS: tuple[str, ...] = ("host",)
#: Labels of every per-GPU series. ``gpu`` is the physical GPU index (the parent GPU for a MIG
#: instance); ``gpu_instance``/``compute_instance`` are the MIG ids, empty for a whole GPU.
GPU_LABELS: tuple[str, ...] = ("host", "gpu", "uuid", "gpu_instance", "compute_instance")


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One exposed metric family. ``name`` is the exposed name (counters end in ``_total``)."""

    name: str
    help: str
    labels: tuple[str, ...]
    kind: str = "gauge"  # "gauge" or "counter"

    def family(self, labels: tuple[str, ...] | None = None) -> CounterMetricFamily | GaugeMetricFamily:
        """An empty prometheus-client family for this spec (``labels`` instead of its own)."""
        names = list(self.labels if labels is None else labels)
        if self.kind == "counter":
            return CounterMetricFamily(self.name.removesuffix("_total"), self.help, labels=names)
        return GaugeMetricFamily(self.name, self.help, labels=names)


Convert = Callable[[Any], float]


def _same(value: Any) -> float:
    return float(value)


def _percent_to_ratio(value: Any) -> float:
    return float(value) / 100.0


def _mhz_to_hz(value: Any) -> float:
    return float(value) * 1e6


def _mbit_to_bytes(value: Any) -> float:
    return float(value) * 1e6 / 8.0


def _gbit_to_bytes(value: Any) -> float:
    return float(value) * 1e9 / 8.0


def _bool(value: Any) -> float:
    return 1.0 if value else 0.0


METRICS: list[MetricSpec] = []
_BY_NAME: dict[str, MetricSpec] = {}


def _spec(name: str, help_text: str, labels: tuple[str, ...], kind: str = "gauge") -> MetricSpec:
    spec = MetricSpec(PREFIX + name, help_text, labels, kind)
    METRICS.append(spec)
    _BY_NAME[spec.name] = spec
    return spec


_NIC = (*HOST_LABELS, "nic")
_CORE = (*HOST_LABELS, "core")
_IB = (*HOST_LABELS, "device", "port", "link_layer")
_LINK = (*GPU_LABELS, "link")
_PROC = (*GPU_LABELS, "pid", "process", "user", "kind")
#: ``--process-labels``: what the per-process series carry. ``full``: pid, process name, user;
#: ``pid``: the pid only (names and users stay on the node); ``none``: no per-process series,
#: only each GPU's process count and totals.
PROCESS_LABEL_LEVELS = ("full", "pid", "none")
_PID_ONLY = (*GPU_LABELS, "pid", "kind")

# --- sample and host ---------------------------------------------------------------------------
SAMPLE_TIMESTAMP = _spec(
    "sample_timestamp_seconds", "Wall-clock time of the latest sample (seconds since the epoch).", HOST_LABELS
)
SAMPLE_COST = _spec("sample_cost_seconds", "Wall time gpuscope spent collecting the latest sample.", HOST_LABELS)
SAMPLES = _spec(
    "exporter_samples_total", "Samples this exporter has received since it started.", HOST_LABELS, "counter"
)
HOST_INFO = _spec(
    "host_info",
    "Host facts as labels (value is always 1).",
    (
        *HOST_LABELS,
        "cpu_model",
        "driver_version",
        "nvml_version",
        "cuda_driver_version",
        "amd_driver_version",
        "amdsmi_library_version",
        "simulated",  # what scripted the GPUs (GPUSCOPE_FAKE_NVML=...), empty on real hardware
    ),
)
GPU_DEVICES = _spec(
    "gpu_devices", "GPUs and MIG instances visible to gpuscope (absent when the GPU side is unavailable).", HOST_LABELS
)
CPU_UTILIZATION = _spec("cpu_utilization_ratio", "CPU busy fraction over all cores (0..1).", HOST_LABELS)
CPU_LOGICAL = _spec("cpu_logical_cores", "Logical CPU cores.", HOST_LABELS)
CPU_PHYSICAL = _spec("cpu_physical_cores", "Physical CPU cores.", HOST_LABELS)
CORE_UTILIZATION = _spec("cpu_core_utilization_ratio", "Busy fraction of one logical core (0..1).", _CORE)
CORE_FREQUENCY = _spec("cpu_core_frequency_hertz", "Current clock of one logical core.", _CORE)
LOAD1 = _spec("host_load1", "1-minute load average.", HOST_LABELS)
LOAD5 = _spec("host_load5", "5-minute load average.", HOST_LABELS)
LOAD15 = _spec("host_load15", "15-minute load average.", HOST_LABELS)
HOST_MEM_TOTAL = _spec("host_memory_total_bytes", "Host memory installed.", HOST_LABELS)
HOST_MEM_USED = _spec("host_memory_used_bytes", "Host memory in use.", HOST_LABELS)
HOST_MEM_AVAILABLE = _spec("host_memory_available_bytes", "Host memory available to new processes.", HOST_LABELS)
SWAP_TOTAL = _spec("host_swap_total_bytes", "Swap space configured.", HOST_LABELS)
SWAP_USED = _spec("host_swap_used_bytes", "Swap space in use.", HOST_LABELS)
NIC_RX = _spec("nic_receive_bytes_per_second", "Bytes received per second on a network interface.", _NIC)
NIC_TX = _spec("nic_transmit_bytes_per_second", "Bytes sent per second on a network interface.", _NIC)
NIC_UP = _spec("nic_up", "1 when the network interface is up, else 0.", _NIC)
NIC_SPEED = _spec("nic_speed_bytes_per_second", "Link speed of a network interface (one direction).", _NIC)
DISK_READ = _spec("host_disk_read_bytes_per_second", "Bytes read per second from all physical disks.", HOST_LABELS)
DISK_WRITE = _spec("host_disk_write_bytes_per_second", "Bytes written per second to all physical disks.", HOST_LABELS)
IB_INFO = _spec("infiniband_port_info", "InfiniBand/RoCE port state as a label (value is always 1).", (*_IB, "state"))
IB_RATE = _spec("infiniband_port_rate_bytes_per_second", "Link rate of an InfiniBand/RoCE port (one direction).", _IB)
IB_RX = _spec("infiniband_receive_bytes_per_second", "Bytes received per second on an InfiniBand/RoCE port.", _IB)
IB_TX = _spec("infiniband_transmit_bytes_per_second", "Bytes sent per second on an InfiniBand/RoCE port.", _IB)

# --- cumulative traffic (gpuscope.exporter.counters: integrated from each sample's rate) ---------
_INTEGRATED = " since this exporter started (each sample's rate x its interval; what rate() needs)."
NIC_RX_TOTAL = _spec("nic_receive_bytes_total", "Bytes received on a network interface" + _INTEGRATED, _NIC, "counter")
NIC_TX_TOTAL = _spec("nic_transmit_bytes_total", "Bytes sent on a network interface" + _INTEGRATED, _NIC, "counter")
DISK_READ_TOTAL = _spec(
    "host_disk_read_bytes_total", "Bytes read from all physical disks" + _INTEGRATED, HOST_LABELS, "counter"
)
DISK_WRITE_TOTAL = _spec(
    "host_disk_write_bytes_total", "Bytes written to all physical disks" + _INTEGRATED, HOST_LABELS, "counter"
)
IB_RX_TOTAL = _spec(
    "infiniband_receive_bytes_total", "Bytes received on an InfiniBand/RoCE port" + _INTEGRATED, _IB, "counter"
)
IB_TX_TOTAL = _spec(
    "infiniband_transmit_bytes_total", "Bytes sent on an InfiniBand/RoCE port" + _INTEGRATED, _IB, "counter"
)

# --- GPU ------------------------------------------------------------------------------------------
GPU_INFO = _spec(
    "gpu_info",
    "GPU facts as labels (value is always 1).",
    (*GPU_LABELS, "name", "pci_bus_id", "architecture", "state", "vendor"),
)
GPU_UP = _spec("gpu_up", "1 when the GPU answers, 0 when it is lost.", GPU_LABELS)

#: (GpuSample field, spec, conversion) for every scalar GPU metric.
_GPU_SCALARS: list[tuple[str, MetricSpec, Convert]] = []


def _gpu(field_name: str, name: str, help_text: str, kind: str = "gauge") -> None:
    """A scalar GPU metric; a ``*_percent*`` field is exposed as a ratio, a ``*_mhz`` one in hertz."""
    convert = _percent_to_ratio if "_percent" in field_name else _mhz_to_hz if field_name.endswith("_mhz") else _same
    _GPU_SCALARS.append((field_name, _spec(name, help_text, GPU_LABELS, kind), convert))


_gpu("mig_mode", "gpu_mig_mode_enabled", "1 when MIG mode is enabled, else 0.")
_gpu(
    "utilization_percent",
    "gpu_utilization_ratio",
    "Fraction of time a kernel was running (NVML 'GPU util'; not SM activity).",
)
_gpu(
    "memory_busy_percent",
    "gpu_memory_busy_ratio",
    "Fraction of time device memory was read or written (not bandwidth).",
)
_gpu("memory_used_bytes", "gpu_memory_used_bytes", "Device memory in use.")
_gpu("memory_total_bytes", "gpu_memory_total_bytes", "Device memory installed.")
_gpu(
    "dram_bandwidth_bytes_per_s",
    "gpu_dram_bandwidth_bytes_per_second",
    "Device memory (DRAM/HBM) traffic, read plus write.",
)
_gpu(
    "dram_bandwidth_percent_of_peak",
    "gpu_dram_bandwidth_ratio",
    "DRAM traffic as a fraction of the theoretical peak (0..1).",
)
_gpu(
    "dram_peak_bytes_per_s",
    "gpu_dram_peak_bytes_per_second",
    "Theoretical DRAM bandwidth: bus width x max memory clock x 2 / 8.",
)
_gpu(
    "sm_activity_percent",
    "gpu_sm_activity_ratio",
    "Fraction of SM cycles with at least one warp resident (GPM SM_UTIL).",
)
_gpu(
    "sm_occupancy_percent",
    "gpu_sm_occupancy_ratio",
    "Resident warps as a fraction of the SM maximum (GPM SM_OCCUPANCY).",
)
_gpu("tensor_activity_percent", "gpu_tensor_activity_ratio", "Fraction of cycles any tensor pipe was active.")
_gpu(
    "hmma_tensor_activity_percent",
    "gpu_hmma_tensor_activity_ratio",
    "Fraction of cycles the HMMA (half-precision) tensor pipe was active.",
)
_gpu(
    "imma_tensor_activity_percent",
    "gpu_imma_tensor_activity_ratio",
    "Fraction of cycles the IMMA (integer) tensor pipe was active.",
)
_gpu(
    "dfma_tensor_activity_percent",
    "gpu_dfma_tensor_activity_ratio",
    "Fraction of cycles the DFMA (fp64) tensor pipe was active.",
)
_gpu("fp64_activity_percent", "gpu_fp64_activity_ratio", "Fraction of cycles the FP64 pipe was active.")
_gpu("fp32_activity_percent", "gpu_fp32_activity_ratio", "Fraction of cycles the FP32 pipe was active.")
_gpu("fp16_activity_percent", "gpu_fp16_activity_ratio", "Fraction of cycles the FP16 pipe was active.")
_gpu("pcie_tx_bytes_per_s", "gpu_pcie_transmit_bytes_per_second", "PCIe bytes per second sent by the GPU.")
_gpu("pcie_rx_bytes_per_s", "gpu_pcie_receive_bytes_per_second", "PCIe bytes per second received by the GPU.")
_gpu("pcie_link_generation", "gpu_pcie_link_generation", "Current PCIe link generation.")
_gpu("pcie_link_width", "gpu_pcie_link_width", "Current PCIe link width (lanes).")
_gpu("nvlink_tx_bytes_per_s", "gpu_nvlink_transmit_bytes_per_second", "NVLink bytes per second sent, all links.")
_gpu("nvlink_rx_bytes_per_s", "gpu_nvlink_receive_bytes_per_second", "NVLink bytes per second received, all links.")
_gpu("nvlink_active_links", "gpu_nvlink_active_links", "NVLink links that are up.")
_gpu("nvlink_version", "gpu_nvlink_version", "NVLink generation.")
_gpu(
    "nvlink_link_peak_bytes_per_s",
    "gpu_nvlink_link_peak_bytes_per_second",
    "Peak bandwidth of one NVLink link, one direction.",
)
_gpu("pcie_bytes_per_s", "gpu_pcie_bytes_per_second", "PCIe bytes per second, both directions (AMD SMI's one total).")
_gpu(
    "xgmi_tx_bytes_per_s",
    "gpu_xgmi_transmit_bytes_per_second",
    "XGMI (Infinity Fabric) bytes per second sent, all links.",
)
_gpu(
    "xgmi_rx_bytes_per_s",
    "gpu_xgmi_receive_bytes_per_second",
    "XGMI (Infinity Fabric) bytes per second received, all links.",
)
_gpu("xgmi_active_links", "gpu_xgmi_active_links", "XGMI links that are up.")
_gpu(
    "xgmi_link_peak_bytes_per_s",
    "gpu_xgmi_link_peak_bytes_per_second",
    "Peak bandwidth of one XGMI link, one direction.",
)
_gpu("sm_clock_mhz", "gpu_sm_clock_hertz", "Current SM clock.")
_gpu("sm_clock_max_mhz", "gpu_sm_clock_max_hertz", "Maximum SM clock.")
_gpu("memory_clock_mhz", "gpu_memory_clock_hertz", "Current memory clock.")
_gpu("memory_clock_max_mhz", "gpu_memory_clock_max_hertz", "Maximum memory clock.")
_gpu("power_w", "gpu_power_watts", "Power draw.")
_gpu("power_limit_w", "gpu_power_limit_watts", "Enforced power limit.")
_gpu("energy_j", "gpu_energy_joules_total", "Energy consumed since the driver loaded.", "counter")
_gpu("temperature_gpu_c", "gpu_temperature_celsius", "GPU die temperature.")
_gpu("temperature_memory_c", "gpu_memory_temperature_celsius", "Device memory (HBM) temperature.")
_gpu("temperature_hotspot_c", "gpu_hotspot_temperature_celsius", "GPU junction (hotspot) temperature.")
_gpu("fan_speed_percent", "gpu_fan_speed_ratio", "Fan speed as a fraction of its maximum (0..1).")
_gpu(
    "ecc_corrected_errors",
    "gpu_ecc_corrected_errors_total",
    "Corrected ECC errors since the driver loaded (volatile).",
    "counter",
)
_gpu(
    "ecc_uncorrected_errors",
    "gpu_ecc_uncorrected_errors_total",
    "Uncorrected ECC errors since the driver loaded (volatile).",
    "counter",
)

PCIE_TX_TOTAL = _spec(
    "gpu_pcie_transmit_bytes_total", "PCIe bytes sent by the GPU" + _INTEGRATED, GPU_LABELS, "counter"
)
PCIE_RX_TOTAL = _spec(
    "gpu_pcie_receive_bytes_total", "PCIe bytes received by the GPU" + _INTEGRATED, GPU_LABELS, "counter"
)
NVLINK_TX_TOTAL = _spec(
    "gpu_nvlink_transmit_bytes_total", "NVLink bytes sent, all links" + _INTEGRATED, GPU_LABELS, "counter"
)
NVLINK_RX_TOTAL = _spec(
    "gpu_nvlink_receive_bytes_total", "NVLink bytes received, all links" + _INTEGRATED, GPU_LABELS, "counter"
)
XID_ERRORS = _spec(
    "gpu_xid_errors_total",
    "Xid errors of every number NVML reported since this exporter started; 0 from the first sample, "
    "so increase() sees a GPU's first Xid. Absent where the GPU cannot report Xid events.",
    GPU_LABELS,
    "counter",
)
_gpu(
    "pcie_replay_errors",
    "gpu_pcie_replay_errors_total",
    "PCIe replays since the driver loaded (nvmlDeviceGetPcieReplayCounter; read every 5 s).",
    "counter",
)
for _error in ("crc_flit", "crc_data", "replay", "recovery"):
    _gpu(
        f"nvlink_{_error}_errors",
        f"gpu_nvlink_{_error}_errors_total",
        f"NVLink {_error.replace('_', ' ')} errors since the driver loaded, all active links (read every 5 s).",
        "counter",
    )
#: NvLinkLinkSample error fields -> the ``error`` label of gpuscope_gpu_nvlink_link_errors_total.
_LINK_ERRORS = (
    ("crc_flit_errors", "crc_flit"),
    ("crc_data_errors", "crc_data"),
    ("replay_errors", "replay"),
    ("recovery_errors", "recovery"),
)

GPU_THROTTLED = _spec("gpu_throttled", "1 when any clock throttle reason is active, else 0.", GPU_LABELS)
GPU_THROTTLE_REASON = _spec(
    "gpu_throttle_reason", "One series per active clock throttle reason (value is always 1).", (*GPU_LABELS, "reason")
)
LINK_TX = _spec("gpu_nvlink_link_transmit_bytes_per_second", "NVLink bytes per second sent on one link.", _LINK)
LINK_RX = _spec("gpu_nvlink_link_receive_bytes_per_second", "NVLink bytes per second received on one link.", _LINK)
LINK_ERRORS = _spec(
    "gpu_nvlink_link_errors_total",
    "NVLink errors on one link since the driver loaded, by error (crc_flit, crc_data, replay, recovery).",
    (*_LINK, "error"),
    "counter",
)
GPU_PROCESSES = _spec("gpu_processes", "Processes using the GPU.", GPU_LABELS)
PROCS_MEMORY = _spec(
    "gpu_processes_memory_bytes",
    "Device memory used by all processes on the GPU (at every --process-labels).",
    GPU_LABELS,
)
PROCS_SM = _spec(
    "gpu_processes_sm_utilization_ratio",
    "Sum of the processes' SM utilization (0..1 each; at every --process-labels).",
    GPU_LABELS,
)
PROC_MEMORY = _spec("gpu_process_memory_bytes", "Device memory used by one process.", _PROC)
PROC_SM = _spec("gpu_process_sm_utilization_ratio", "SM utilization of one process (0..1).", _PROC)
XID_EVENTS = _spec(
    "gpu_xid_events_total",
    'Xid errors NVML reported since this exporter started, by Xid number (xid="other": events not kept in the '
    "record, its xid_events_dropped); absent where the GPU cannot report Xid events.",
    (*GPU_LABELS, "xid"),
    "counter",
)
ALERT = _spec(
    "alert",
    "A threshold crossed (1 careful, 2 warning, 3 critical); one series per alert (gpuscope.telemetry.alerts).",
    (*HOST_LABELS, "gpu", "uuid", "kind", "level"),
)

# --- the exporter itself (served before the first sample too; gpuscope.exporter.server) ----------
BUILD_INFO = _spec(
    "build_info", "gpuscope's version as labels (value is always 1).", (*HOST_LABELS, "version", "python_version")
)
SCRAPE_ERRORS = _spec(
    "exporter_scrape_errors_total",
    "Scrapes whose sample could not be converted (its series were left out) or whose answer failed.",
    HOST_LABELS,
    "counter",
)
AUTH_REFUSALS = _spec(
    "exporter_auth_refusals_total",
    "Requests and TLS connections refused: no_credentials, wrong_credentials, tls_handshake, client_san.",
    (*HOST_LABELS, "reason"),
    "counter",
)

#: The optional operator aid: which metric is missing and why. Not part of :data:`METRICS`' data.
UNAVAILABLE_METRIC = _spec(
    "metric_unavailable",
    "A metric gpuscope cannot read, and why (value is always 1; the metric itself is absent).",
    (*GPU_LABELS, "nic", "metric", "reason"),
)


def gpu_label_values(host: str, gpu: GpuSample) -> tuple[str, str, str, str, str]:
    """The :data:`GPU_LABELS` values of one GPU or MIG instance."""
    is_mig = gpu.mig_parent_index is not None
    physical = gpu.mig_parent_index if is_mig else gpu.index
    return (
        host,
        str(physical),
        gpu.uuid,
        "" if gpu.mig_gpu_instance_id is None else str(gpu.mig_gpu_instance_id),
        "" if gpu.mig_compute_instance_id is None else str(gpu.mig_compute_instance_id),
    )


#: (GPU labels..., xid) -> Xid events counted since the exporter started.
XidTotals = dict[tuple[str, ...], int]
#: metric name -> label values -> the counter's value (gpuscope.exporter.counters keeps them).
CounterTotals = dict[str, dict[tuple[str, ...], float]]


def count_xids(totals: XidTotals, sample: Sample) -> None:
    """Add the Xid events of ``sample`` (those read in its interval) to ``totals``."""
    host = sample.host.hostname
    for gpu in sample.gpus:
        events, dropped = gpu.xid_events, gpu.xid_events_dropped
        if not isinstance(events, list) or (not events and not dropped):
            continue  # the usual case: [] and 0 (or unavailable, which is noted at scrape time)
        labels = gpu_label_values(host, gpu)
        for event in events:
            instance = (
                "" if event.gpu_instance_id is None else str(event.gpu_instance_id),
                "" if event.compute_instance_id is None else str(event.compute_instance_id),
            )
            key = (*labels[:3], *instance, str(event.xid))
            totals[key] = totals.get(key, 0) + event.count
        if isinstance(dropped, int) and dropped:
            key = (*labels, "other")
            totals[key] = totals.get(key, 0) + dropped


def _text(value: Any) -> str:
    return "" if value is None or isinstance(value, Unavailable) else str(value)


def _label_value(text: str) -> str:
    """``text``, or, where UTF-8 cannot encode it (a NIC or process name that is not UTF-8),
    the escaped form every gpuscope output writes (:func:`gpuscope.textsafe.safe_text`)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return safe_text(text)
    return text


class _Scrape:
    """Families filled during one scrape; an unavailable value becomes a note, never a sample."""

    def __init__(self) -> None:
        self.families: dict[str, CounterMetricFamily | GaugeMetricFamily] = {}
        self.missing: dict[tuple[str, ...], None] = {}

    def add(self, spec: MetricSpec, labels: Iterable[str], value: float, names: tuple[str, ...] | None = None) -> None:
        """Add one series; ``names`` replaces the spec's label names (``--process-labels pid``)."""
        family = self.families.get(spec.name)
        if family is None:
            family = self.families[spec.name] = spec.family(names)
        family.add_metric([_label_value(label) for label in labels], value)

    def note(self, spec: MetricSpec, scope: tuple[str, ...], reason: Reason, nic: str = "") -> None:
        """Record that ``spec`` is unavailable for ``scope`` (the 5 GPU label values; ``nic``
        names the network interface of a NIC metric)."""
        key = (*scope, nic, spec.name, reason.value)
        self.missing[key] = None

    def put(
        self,
        spec: MetricSpec,
        labels: tuple[str, ...],
        scope: tuple[str, ...],
        raw: Any,
        convert: Convert = _same,
        names: tuple[str, ...] | None = None,
        nic: str = "",
    ) -> None:
        """Add ``convert(raw)`` unless ``raw`` is unavailable (or not a finite number)."""
        if isinstance(raw, Unavailable):
            self.note(spec, scope, raw.reason, nic)
            return
        if raw is None:
            self.note(spec, scope, Reason.ERROR, nic)
            return
        try:
            value = convert(raw)
        except (TypeError, ValueError):
            self.note(spec, scope, Reason.ERROR, nic)
            return
        if not math.isfinite(value):
            self.note(spec, scope, Reason.ERROR, nic)
            return
        self.add(spec, labels, value, names)

    def result(self, with_unavailable: bool) -> Iterator[Metric]:
        for spec in METRICS:
            if spec is UNAVAILABLE_METRIC:
                continue
            family = self.families.get(spec.name)
            if family is not None:
                yield family
        if with_unavailable and self.missing:
            family = UNAVAILABLE_METRIC.family()
            for labels in self.missing:
                family.add_metric([_label_value(label) for label in labels], 1.0)
            yield family


def _host_families(scrape: _Scrape, host: HostSample) -> None:
    name = host.hostname
    labels = (name,)
    scope = (name, "", "", "", "")
    scrape.put(CPU_UTILIZATION, labels, scope, host.cpu_utilization_percent, _percent_to_ratio)
    scrape.put(CPU_LOGICAL, labels, scope, host.logical_cores)
    scrape.put(CPU_PHYSICAL, labels, scope, host.physical_cores)
    for core in host.cores:
        core_labels = (name, str(core.core))
        scrape.put(CORE_UTILIZATION, core_labels, scope, core.utilization_percent, _percent_to_ratio)
        scrape.put(CORE_FREQUENCY, core_labels, scope, core.frequency_mhz, _mhz_to_hz)
    scrape.put(LOAD1, labels, scope, host.load_average_1m)
    scrape.put(LOAD5, labels, scope, host.load_average_5m)
    scrape.put(LOAD15, labels, scope, host.load_average_15m)
    scrape.put(HOST_MEM_TOTAL, labels, scope, host.memory_total_bytes)
    scrape.put(HOST_MEM_USED, labels, scope, host.memory_used_bytes)
    scrape.put(HOST_MEM_AVAILABLE, labels, scope, host.memory_available_bytes)
    scrape.put(SWAP_TOTAL, labels, scope, host.swap_total_bytes)
    scrape.put(SWAP_USED, labels, scope, host.swap_used_bytes)
    scrape.put(DISK_READ, labels, scope, host.disk_read_bytes_per_s)
    scrape.put(DISK_WRITE, labels, scope, host.disk_write_bytes_per_s)
    for nic in host.nics:
        nic_labels = (name, nic.name)
        scrape.put(NIC_RX, nic_labels, scope, nic.rx_bytes_per_s, nic=nic.name)
        scrape.put(NIC_TX, nic_labels, scope, nic.tx_bytes_per_s, nic=nic.name)
        scrape.put(NIC_UP, nic_labels, scope, nic.is_up, _bool, nic=nic.name)
        scrape.put(NIC_SPEED, nic_labels, scope, nic.speed_mbit_per_s, _mbit_to_bytes, nic=nic.name)
    for port in host.infiniband_ports:
        ib_labels = (name, port.device, str(port.port), port.link_layer)
        scrape.add(IB_INFO, (*ib_labels, port.state), 1.0)
        scrape.put(IB_RATE, ib_labels, scope, port.rate_gbit_per_s, _gbit_to_bytes)
        scrape.put(IB_RX, ib_labels, scope, port.rx_bytes_per_s)
        scrape.put(IB_TX, ib_labels, scope, port.tx_bytes_per_s)


def _gpu_families(scrape: _Scrape, host: str, gpu: GpuSample, process_labels: str = "full") -> None:
    labels = gpu_label_values(host, gpu)
    scrape.add(GPU_INFO, (*labels, gpu.name, gpu.pci_bus_id, gpu.architecture, gpu.state, gpu.vendor), 1.0)
    scrape.add(GPU_UP, labels, 0.0 if gpu.state == "lost" else 1.0)
    for field_name, spec, convert in _GPU_SCALARS:
        scrape.put(spec, labels, labels, getattr(gpu, field_name), convert)
    reasons = gpu.throttle_reasons
    if isinstance(reasons, Unavailable):
        scrape.note(GPU_THROTTLED, labels, reasons.reason)
    elif reasons is not None:
        scrape.add(GPU_THROTTLED, labels, 1.0 if reasons else 0.0)
        for reason in dict.fromkeys(str(r) for r in reasons):
            scrape.add(GPU_THROTTLE_REASON, (*labels, reason), 1.0)
    for link in gpu.nvlink_links:
        link_labels = (*labels, str(link.link))
        scrape.put(LINK_TX, link_labels, labels, link.tx_bytes_per_s)
        scrape.put(LINK_RX, link_labels, labels, link.rx_bytes_per_s)
        for field_name, error in _LINK_ERRORS:
            value = getattr(link, field_name)
            if value is not NOT_COLLECTED:  # an older log or another vendor: not a missing counter
                scrape.put(LINK_ERRORS, (*link_labels, error), labels, value)
    if isinstance(gpu.xid_events, Unavailable) and gpu.mig_parent_index is None:
        scrape.note(XID_EVENTS, labels, gpu.xid_events.reason)
        scrape.note(XID_ERRORS, labels, gpu.xid_events.reason)
    _process_families(scrape, labels, gpu, process_labels)


def _process_families(scrape: _Scrape, labels: tuple[str, ...], gpu: GpuSample, level: str) -> None:
    """The process count and totals, then one series per process at ``level`` (``full``, ``pid``, ``none``)."""
    processes = gpu.processes
    per_process = () if level == "none" else (PROC_MEMORY, PROC_SM)
    if isinstance(processes, Unavailable):
        for spec in (GPU_PROCESSES, PROCS_MEMORY, PROCS_SM, *per_process):
            scrape.note(spec, labels, processes.reason)
        return
    scrape.add(GPU_PROCESSES, labels, float(len(processes)))
    memory = [p.gpu_memory_bytes for p in processes]
    sm = [p.sm_percent for p in processes]
    scrape.put(PROCS_MEMORY, labels, labels, _sum(memory))
    scrape.put(PROCS_SM, labels, labels, _sum(sm), _percent_to_ratio)
    if level == "none":
        return
    names = _PID_ONLY if level == "pid" else None
    for process in processes:
        if level == "pid":
            series: tuple[str, ...] = (*labels, str(process.pid), process.kind)
        else:
            series = (*labels, str(process.pid), _text(process.name), _text(process.user), process.kind)
        scrape.put(PROC_MEMORY, series, labels, process.gpu_memory_bytes, names=names)
        scrape.put(PROC_SM, series, labels, process.sm_percent, _percent_to_ratio, names=names)


def _sum(values: list[Any]) -> Any:
    """The sum of numbers; the first unavailable value (or None) when one is missing, so the
    total is absent rather than too small. An empty list sums to 0."""
    total = 0.0
    for value in values:
        if value is None or isinstance(value, Unavailable):
            return value
        total += float(value)
    return total


def sample_to_families(
    sample: Sample | None,
    samples_received: int = 0,
    with_unavailable: bool = True,
    xid_totals: XidTotals | None = None,
    process_labels: str = "full",
    totals: CounterTotals | None = None,
) -> list[Metric]:
    """The metric families of ``sample`` (none when it is ``None``), unavailable values left out.

    ``samples_received`` feeds ``gpuscope_exporter_samples_total``; ``with_unavailable`` adds
    the ``gpuscope_metric_unavailable`` series; ``xid_totals`` (:func:`count_xids` over every
    sample so far) feeds ``gpuscope_gpu_xid_events_total``; ``process_labels`` is one of
    :data:`PROCESS_LABEL_LEVELS`; ``totals`` (:mod:`gpuscope.exporter.counters`) holds the
    cumulative counters kept over every sample (traffic bytes, Xid errors per GPU).
    """
    if sample is None:
        return []
    scrape = _Scrape()
    host = sample.host.hostname
    scrape.add(SAMPLE_TIMESTAMP, (host,), float(sample.timestamp))
    scrape.add(SAMPLE_COST, (host,), float(sample.sample_cost_s))
    scrape.add(SAMPLES, (host,), float(samples_received))
    scrape.add(
        HOST_INFO,
        (
            host,
            sample.host.cpu_model,
            _text(sample.driver_version),
            _text(sample.nvml_version),
            _text(sample.cuda_driver_version),
            _text(sample.amd_driver_version),
            _text(sample.amdsmi_library_version),
            sample.simulated or "",
        ),
        1.0,
    )
    if sample.gpu_unavailable is not None:
        scrape.note(GPU_DEVICES, (host, "", "", "", ""), sample.gpu_unavailable.reason)
    else:
        scrape.add(GPU_DEVICES, (host,), float(len(sample.gpus)))
    _host_families(scrape, sample.host)
    for gpu in sample.gpus:
        _gpu_families(scrape, host, gpu, process_labels)
    for series, total in (xid_totals or {}).items():
        scrape.add(XID_EVENTS, series, float(total))
    for name, by_labels in (totals or {}).items():
        spec = _BY_NAME[name]
        for series, value in by_labels.items():
            scrape.add(spec, series, value)
    for alert in exporter_alerts(sample):
        scrape.add(
            ALERT,
            (host, "" if alert.gpu is None else str(alert.gpu), alert.uuid, alert.kind, alert.level),
            float(LEVELS.index(alert.level)),
        )
    return list(scrape.result(with_unavailable))
