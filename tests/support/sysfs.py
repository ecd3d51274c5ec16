"""A made-up sysfs tree (``gpuscope topo --sysfs``): two NUMA nodes, two Ethernet NICs and an
InfiniBand HCA with one port down, laid out as the kernel does (devices under
``devices/pci<domain>:<bus>/...``, relative links from ``bus/pci/devices`` and ``class/*``).

The PCI tree matches the fake NVML's ``pcie4`` node (gpuscope.testing._fake_nvml_topology)::

    pci0000:00 (NUMA 0) - 00:01.0 - switch 01:00.0 - 02:00.0 - GPU0 03:00.0
                                                   - 02:01.0 - GPU1 04:00.0
                                                   - 02:02.0 - eth0 05:00.0 (25 Gb/s, up)
    pci0000:80 (NUMA 1) - 80:01.0 - switch 81:00.0 - 82:00.0 - GPU2 83:00.0
                                                   - 82:01.0 - GPU3 84:00.0
                                                   - 82:02.0 - mlx5_0 85:00.0 (port 1 ACTIVE
                                                               200 Gb/s, port 2 DOWN)
                        - 80:03.0 - eth1 86:00.0 (100 Gb/s, down)
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["make_sysfs", "GPU_ADDRESSES"]

GPU_ADDRESSES = ("0000:03:00.0", "0000:04:00.0", "0000:83:00.0", "0000:84:00.0")

_PCI = {  # address -> (path below devices/, NUMA node)
    "0000:03:00.0": ("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0", 0),
    "0000:04:00.0": ("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0", 0),
    "0000:05:00.0": ("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:02.0/0000:05:00.0", 0),
    "0000:83:00.0": ("pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:00.0/0000:83:00.0", 1),
    "0000:84:00.0": ("pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:01.0/0000:84:00.0", 1),
    "0000:85:00.0": ("pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:02.0/0000:85:00.0", 1),
    "0000:86:00.0": ("pci0000:80/0000:80:03.0/0000:86:00.0", 1),
}


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(target, link.parent), link)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def make_sysfs(root: Path, *, gpus: bool = True) -> Path:
    """Build the tree under ``root`` (``gpus``: with the four GPUs' PCI functions); returns ``root``."""
    devices = root / "devices"
    _write(devices / "system" / "node" / "node0" / "cpulist", "0-7")
    _write(devices / "system" / "node" / "node1" / "cpulist", "8-15")
    _write(devices / "system" / "node" / "possible", "0-1")
    for address, (relative, node) in _PCI.items():
        if not gpus and address in GPU_ADDRESSES:
            continue
        folder = devices / relative
        _write(folder / "numa_node", str(node))
        _link(root / "bus" / "pci" / "devices" / address, folder)
    for name, address, speed, state in (
        ("eth0", "0000:05:00.0", 25000, "up"),
        ("eth1", "0000:86:00.0", 100000, "down"),
    ):
        folder = devices / _PCI[address][0] / "net" / name
        _write(folder / "operstate", state)
        _write(folder / "speed", str(speed))
        _link(folder / "device", devices / _PCI[address][0])
        _link(root / "class" / "net" / name, folder)
    loopback = devices / "virtual" / "net" / "lo"
    _write(loopback / "operstate", "unknown")
    _link(root / "class" / "net" / "lo", loopback)
    hca_device = devices / _PCI["0000:85:00.0"][0]
    hca = hca_device / "infiniband" / "mlx5_0"
    _link(hca / "device", hca_device)
    for port, state, rate in ((1, "4: ACTIVE", "200 Gb/sec (4X HDR)"), (2, "1: DOWN", "10 Gb/sec (4X SDR)")):
        _write(hca / "ports" / str(port) / "state", state)
        _write(hca / "ports" / str(port) / "rate", rate)
        _write(hca / "ports" / str(port) / "link_layer", "InfiniBand")
    ib0 = hca_device / "net" / "ib0"
    _write(ib0 / "operstate", "up")
    _link(ib0 / "device", hca_device)
    _link(root / "class" / "net" / "ib0", ib0)
    _link(root / "class" / "infiniband" / "mlx5_0", hca)
    return root
