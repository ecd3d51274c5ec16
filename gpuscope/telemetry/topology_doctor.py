"""``gpuscope doctor``'s interconnect section: the topology read twice, ``wait_s`` apart (so
error counters can be seen rising), and one line per link that falls short
(:func:`gpuscope.telemetry.topology_health.link_findings`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from gpuscope.telemetry.nvml.capabilities import Check
from gpuscope.telemetry.topology_health import link_findings, link_rates
from gpuscope.telemetry.topology_read import read_topology

__all__ = ["interconnect_checks", "WAIT_S"]

#: Seconds between the two reads of the error counters.
WAIT_S = 0.25

_FIXES = {
    "pcie_width": "reseat the GPU or move it to a full-width slot; check risers and BIOS lane settings",
    "pcie_generation": "check the slot's and BIOS's PCIe generation setting and the riser; reseat the GPU",
    "nvlink_down": "check the NVLink bridge or the NVSwitch tray; `nvidia-smi nvlink -s` shows each link",
    "nvlink_errors": "watch `nvidia-smi nvlink -e`; reseat the bridge or replace the cable/tray if they keep rising",
    "pcie_replays": "reseat the GPU; check the slot and riser (signal integrity)",
    "ib_port": "check the cable and the switch port (`ibstat`)",
    "numa_far": "pin the process to the device's NUMA node (numactl --cpunodebind, taskset)",
}


def interconnect_checks(
    sysfs: str | Path = "/sys", *, wait_s: float = WAIT_S, sleep: Callable[[float], None] = time.sleep
) -> list[Check]:
    """One problem line per link that falls short, or one line saying all are at their rates."""
    try:
        before = read_topology(sysfs)
        sleep(wait_s)
        after = read_topology(sysfs)
    except Exception as exc:  # noqa: BLE001 - doctor reports, never raises
        return [Check("links", "problem", f"cannot read the topology: {type(exc).__name__}: {exc}")]
    findings = link_findings(before, after, window_s=wait_s)
    if findings:
        return [Check("link", "problem", finding.line, _FIXES.get(finding.kind, "")) for finding in findings]
    rates = link_rates(after)
    if not rates:
        return [Check("links", "unavailable", "no GPU or NIC links found")]
    gpus, nics = len(after.gpus), len(after.nics)
    return [Check("links", "ok", f"{gpus} GPU(s) and {nics} NIC(s): every link at its expected state and rate")]
