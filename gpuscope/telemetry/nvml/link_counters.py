"""NVLink and PCIe link error counters for the telemetry record (issue 33's link health).

Read through the topology helpers (:func:`gpuscope.telemetry.nvml.topology.read_link_error_counters`,
:func:`~gpuscope.telemetry.nvml.topology.read_pcie_replay_counter`) on the collector's slow
cadence: they are counts since the driver loaded, so a few seconds' staleness loses nothing.
Where NVML cannot give a counter the field is an :class:`Unavailable` naming why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuscope.telemetry.nvml.topology import read_link_error_counters, read_pcie_replay_counter
from gpuscope.telemetry.records import GpuSample
from gpuscope.telemetry.values import Metric, Reason, Unavailable

__all__ = ["COUNTER_NAMES", "LinkErrors", "read_link_errors", "apply_link_errors"]

#: NvLinkLinkSample fields; GpuSample's sums are ``nvlink_`` + each.
COUNTER_NAMES = ("crc_flit_errors", "crc_data_errors", "replay_errors", "recovery_errors")


@dataclass(slots=True)
class LinkErrors:
    """One GPU's link error counters as of one read."""

    per_link: dict[int, dict[str, Metric[int]]] = field(default_factory=dict)
    totals: dict[str, Metric[int]] = field(default_factory=dict)  # keyed by COUNTER_NAMES
    pcie_replay: Metric[int] = Unavailable(Reason.WARMING_UP, "not read yet")


def read_link_errors(handle: Any, links: list[int], nvlink_status: Metric[Any]) -> LinkErrors:
    """The counters of the active ``links`` and the PCIe replay counter. ``nvlink_status`` is the
    GPU's active-link count or why it has none (the reason the sums carry when there are no
    links). Raises GpuLostError."""
    result = LinkErrors(pcie_replay=read_pcie_replay_counter(handle))
    for link in links:
        result.per_link[link] = read_link_error_counters(handle, link)
    for name in COUNTER_NAMES:
        if not links:
            result.totals[name] = (
                nvlink_status
                if isinstance(nvlink_status, Unavailable)
                else Unavailable(Reason.NOT_APPLICABLE, "no active NVLink link")
            )
            continue
        total = 0
        missing: Unavailable | None = None
        for counters in result.per_link.values():
            value = counters[name]
            if isinstance(value, Unavailable):
                missing = missing or value  # a sum with a link left out would read too small
            else:
                total += value
        result.totals[name] = missing if missing is not None else total
    return result


def apply_link_errors(sample: GpuSample, errors: LinkErrors | None) -> None:
    """Put ``errors`` into ``sample`` (its sums, its PCIe replay counter, and each entry of
    ``sample.nvlink_links``)."""
    if errors is None:
        return
    sample.pcie_replay_errors = errors.pcie_replay
    sample.nvlink_crc_flit_errors = errors.totals["crc_flit_errors"]
    sample.nvlink_crc_data_errors = errors.totals["crc_data_errors"]
    sample.nvlink_replay_errors = errors.totals["replay_errors"]
    sample.nvlink_recovery_errors = errors.totals["recovery_errors"]
    for link in sample.nvlink_links:
        counters = errors.per_link.get(link.link)
        if counters is None:
            continue
        link.crc_flit_errors = counters["crc_flit_errors"]
        link.crc_data_errors = counters["crc_data_errors"]
        link.replay_errors = counters["replay_errors"]
        link.recovery_errors = counters["recovery_errors"]
