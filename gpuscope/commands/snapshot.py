"""``gpuscope snapshot``: one line per GPU and one for the host, then exit (like gpustat or
``nvidia-smi --query-gpu``; made for scripts and ``watch``). ``--json`` prints one JSON object:
the telemetry record (the schema of ``gpuscope log``, docs/telemetry-schema.md) with its alerts.

Rates (CPU %, bytes/s, GPM activity) need two reads: the command samples twice, ``--wait``
seconds apart (default 0.5). Exit codes: 0, 2 for bad options. Never imports Textual or torch.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

from gpuscope.errors import UsageError
from gpuscope.schema.core import encode_json, finite_or_none
from gpuscope.telemetry.alerts import annotate, load_thresholds
from gpuscope.telemetry.collector import TelemetryCollector
from gpuscope.telemetry.records import GpuSample, Sample, record_to_dict
from gpuscope.telemetry.simulated import simulation_note
from gpuscope.telemetry.topology_read import read_topology
from gpuscope.textsafe import safe_text
from gpuscope.tui.format import NA, fmt_bytes, fmt_rate, vendor_lines

__all__ = ["run", "gpu_line", "host_line", "vendor_lines"]


def _or_na(value: object, fmt: str, scale: float = 1.0) -> str:
    number = finite_or_none(value)
    return "n/a" if number is None else format(number * scale, fmt)


def gpu_line(gpu: GpuSample) -> str:
    """``[0] NVIDIA H200 | 62°C 512/700 W | util 63% SM 49% | 65.8/140.4 GiB | DRAM 1.41 TB/s | 2 procs``."""

    head = f"[{gpu.index}]" if gpu.mig_parent_index is None else f"[{gpu.mig_parent_index}/{gpu.mig_gpu_instance_id}]"
    if gpu.state != "ok":
        return f"{head} {gpu.name} | LOST (fell off the bus; check dmesg for Xid)"
    temp = _or_na(gpu.temperature_gpu_c, ".0f") + "°C"
    if finite_or_none(gpu.temperature_gpu_c) is None and finite_or_none(gpu.temperature_hotspot_c) is not None:
        temp = "hotspot " + _or_na(gpu.temperature_hotspot_c, ".0f") + "°C"  # MI300X: no edge sensor
    power = _or_na(gpu.power_w, ".0f") + "/" + _or_na(gpu.power_limit_w, ".0f") + " W"
    util = "util " + _or_na(gpu.utilization_percent, ".0f") + "%"
    sm = finite_or_none(gpu.sm_activity_percent)
    if sm is not None:
        util += f" SM {sm:.0f}%"
    used, total = finite_or_none(gpu.memory_used_bytes), finite_or_none(gpu.memory_total_bytes)
    memory = NA if used is None else f"{used / 2**30:.1f}" + (f"/{total / 2**30:.1f} GiB" if total else " GiB")
    dram = finite_or_none(gpu.dram_bandwidth_bytes_per_s)
    parts = [f"{head} {gpu.name}", f"{temp} {power}", util, memory]
    if dram is not None:
        parts.append(f"DRAM {fmt_rate(dram)}")
    xgmi = [finite_or_none(gpu.xgmi_tx_bytes_per_s), finite_or_none(gpu.xgmi_rx_bytes_per_s)]
    if xgmi[0] is not None and xgmi[1] is not None:
        parts.append(f"XGMI tx {fmt_rate(xgmi[0])} rx {fmt_rate(xgmi[1])}")
    processes = gpu.processes
    if isinstance(processes, list):
        parts.append(f"{len(processes)} proc{'s' if len(processes) != 1 else ''}")
    return " | ".join(parts)


def host_line(sample: Sample) -> str:
    """``node01 | CPU 12% of 8 cores, load 1.50 | mem 96.0/256 GB |
    net rx 125 MB/s tx 25 MB/s | disk r 0 B/s w 1.5 MB/s``."""

    host = sample.host
    cpu = _or_na(host.cpu_utilization_percent, ".0f") + "%"
    load = finite_or_none(host.load_average_1m)
    parts = [
        host.hostname,
        f"CPU {cpu} of {host.logical_cores} cores" + (f", load {load:.2f}" if load is not None else ""),
    ]
    used, total = finite_or_none(host.memory_used_bytes), finite_or_none(host.memory_total_bytes)
    parts.append(f"mem {fmt_bytes(used)}/{fmt_bytes(total)}" if used is not None and total else f"mem {NA}")
    rx = [v for v in (finite_or_none(n.rx_bytes_per_s) for n in host.nics if not n.is_loopback) if v is not None]
    tx = [v for v in (finite_or_none(n.tx_bytes_per_s) for n in host.nics if not n.is_loopback) if v is not None]
    if rx or tx:
        parts.append(f"net rx {fmt_rate(sum(rx))} tx {fmt_rate(sum(tx))}")
    read, write = finite_or_none(host.disk_read_bytes_per_s), finite_or_none(host.disk_write_bytes_per_s)
    if read is not None and write is not None:
        parts.append(f"disk r {fmt_rate(read)} w {fmt_rate(write)}")
    return " | ".join(parts)


def run(args: argparse.Namespace) -> int:
    """Print the snapshot; 0 when it was printed."""

    if not (isinstance(args.wait, float) and math.isfinite(args.wait) and 0.1 <= args.wait <= 10):
        raise UsageError(f"--wait {args.wait:g} must be between 0.1 and 10 seconds")
    thresholds, problem = load_thresholds()
    if problem:
        print(f"gpuscope: warning: {problem}", file=sys.stderr)
    with TelemetryCollector(nvml=not args.no_gpu, processes=not args.no_processes) as collector:
        collector.sample()
        time.sleep(args.wait)
        sample = collector.sample()
    alerts = annotate(sample, thresholds)
    simulated = simulation_note()
    if args.json:
        document = {
            "schema": "gpuscope.snapshot",
            "simulated": simulated,
            "record": record_to_dict(sample),
            # how GPUs, CPUs, NUMA nodes and NICs are wired (gpuscope topo --json; additive)
            "topology": read_topology(getattr(args, "sysfs", "/sys"), nvml=not args.no_gpu),
        }

        print(encode_json(document).decode())
        return 0
    lines = []
    if simulated:
        lines.append(f"SIMULATED GPUs ({simulated}), not real hardware")
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(sample.timestamp))
    drivers = [f"driver {sample.driver_version}"] if isinstance(sample.driver_version, str) else []
    if isinstance(sample.amd_driver_version, str):
        drivers.append(f"amdgpu {sample.amd_driver_version}")
    lines.append("  ".join([f"{sample.host.hostname}  {stamp}", *drivers]))
    lines.extend(gpu_line(gpu) for gpu in sample.gpus)
    if not sample.gpus:
        lines.extend(vendor_lines(sample))
    lines.append(host_line(sample))
    lines.extend(f"{a.level.upper()} {a.message}" for a in alerts)

    print("\n".join(safe_text(line) for line in lines))
    return 0
