"""Cumulative counters the exporter keeps over every sample it receives (not only the scraped ones).

Traffic (PCIe, NVLink, NIC, InfiniBand, disk) reaches the exporter as rates in each sample. The
``*_bytes_total`` counters integrate them: each sample adds ``rate x interval``, the interval
being the time since the previous sample (the first sample adds 0, so every counter starts at 0
and ``rate()`` works from the second scrape). NIC, InfiniBand and disk rates are themselves the
kernel's cumulative counters differenced over the sample interval, so their integral is exact
from the exporter's start; NVML's PCIe rate is a 20 ms window read once per sample and NVLink's
is a per-interval rate, so those totals are estimates whose error shrinks with the interval.
A rate that is unavailable adds nothing (the gauge says why in ``gpuscope_metric_unavailable``).

``gpuscope_gpu_xid_errors_total`` counts every Xid per GPU and exists at 0 from the first sample
for each GPU that can report Xids, so ``increase(...[10m]) > 0`` fires on a GPU's first Xid.
"""

from __future__ import annotations

import math
from typing import Any

from gpuscope.exporter import metrics as m
from gpuscope.telemetry.records import Sample
from gpuscope.telemetry.values import Unavailable

__all__ = ["CounterState"]

#: A gap longer than this between two samples is not integrated (the exporter was stalled).
MAX_INTERVAL_S = 300.0


def _rate(value: Any) -> float | None:
    if value is None or isinstance(value, Unavailable) or isinstance(value, bool):
        return None
    try:
        rate = float(value)
    except (TypeError, ValueError):
        return None
    return rate if math.isfinite(rate) and rate >= 0.0 else None


class CounterState:
    """The counters' values so far; :meth:`add` once per sample (cheap: dict updates only)."""

    def __init__(self) -> None:
        self.totals: m.CounterTotals = {}
        self._last_timestamp: float | None = None

    def _grow(self, spec: m.MetricSpec, labels: tuple[str, ...], value: Any, interval_s: float) -> None:
        rate = _rate(value)
        if rate is None:
            return
        series = self.totals.setdefault(spec.name, {})
        series[labels] = series.get(labels, 0.0) + rate * interval_s

    def add(self, sample: Sample) -> None:
        """Add ``sample``'s traffic (rate x seconds since the previous sample) and its Xids."""
        timestamp = float(sample.timestamp)
        previous, self._last_timestamp = self._last_timestamp, timestamp
        interval_s = 0.0 if previous is None else timestamp - previous
        if not 0.0 <= interval_s <= MAX_INTERVAL_S:
            interval_s = 0.0
        host = sample.host
        name = host.hostname
        self._grow(m.DISK_READ_TOTAL, (name,), host.disk_read_bytes_per_s, interval_s)
        self._grow(m.DISK_WRITE_TOTAL, (name,), host.disk_write_bytes_per_s, interval_s)
        for nic in host.nics:
            self._grow(m.NIC_RX_TOTAL, (name, nic.name), nic.rx_bytes_per_s, interval_s)
            self._grow(m.NIC_TX_TOTAL, (name, nic.name), nic.tx_bytes_per_s, interval_s)
        for port in host.infiniband_ports:
            ib = (name, port.device, str(port.port), port.link_layer)
            self._grow(m.IB_RX_TOTAL, ib, port.rx_bytes_per_s, interval_s)
            self._grow(m.IB_TX_TOTAL, ib, port.tx_bytes_per_s, interval_s)
        xids = self.totals.setdefault(m.XID_ERRORS.name, {})
        for gpu in sample.gpus:
            labels = m.gpu_label_values(name, gpu)
            self._grow(m.PCIE_TX_TOTAL, labels, gpu.pcie_tx_bytes_per_s, interval_s)
            self._grow(m.PCIE_RX_TOTAL, labels, gpu.pcie_rx_bytes_per_s, interval_s)
            self._grow(m.NVLINK_TX_TOTAL, labels, gpu.nvlink_tx_bytes_per_s, interval_s)
            self._grow(m.NVLINK_RX_TOTAL, labels, gpu.nvlink_rx_bytes_per_s, interval_s)
            events = gpu.xid_events
            if gpu.mig_parent_index is None and isinstance(events, list):
                dropped = gpu.xid_events_dropped
                count = sum(event.count for event in events)
                count += dropped if isinstance(dropped, int) and not isinstance(dropped, bool) else 0
                xids[labels] = xids.get(labels, 0.0) + float(count)
        if not xids:
            del self.totals[m.XID_ERRORS.name]

    def snapshot(self) -> m.CounterTotals:
        """A copy for one scrape (the sampler thread keeps adding)."""
        return {name: dict(series) for name, series in self.totals.items()}
