"""Read the node's :class:`~gpuscope.telemetry.topology.Topology`: NVML for the GPUs, sysfs
(under a root) for NUMA nodes, NICs and PCI paths, and the two joined: each GPU pair's
connection and how each GPU reaches each NIC."""

from __future__ import annotations

from pathlib import Path

from gpuscope.telemetry.nvml.topology import NvmlTopology, normalize_bus_id, read_nvml_topology
from gpuscope.telemetry.topology import GpuNode, Nic, Topology, gpu_connection, level_from_paths
from gpuscope.telemetry.topology_sysfs import DEFAULT_SYSFS, pci_path, read_nics, read_numa_nodes

__all__ = ["read_topology", "gpu_numa_node", "gpu_nic_level"]


def gpu_numa_node(gpu: GpuNode) -> int | None:
    """The GPU's NUMA node when NVML names exactly one, else None."""
    return gpu.numa_nodes[0] if len(gpu.numa_nodes) == 1 else None


def gpu_nic_level(gpu: GpuNode, nic: Nic) -> str:
    """How ``gpu`` reaches ``nic``: from their PCI paths when sysfs has the GPU, else by NUMA
    node (``NODE`` the same, ``SYS`` another, ``?`` unknown)."""
    if gpu.pci_path and nic.pci_path:
        return level_from_paths(gpu.pci_path, nic.pci_path, gpu_numa_node(gpu), nic.numa_node)
    node = gpu_numa_node(gpu)
    if node is None or nic.numa_node is None:
        return "?"
    return "NODE" if node == nic.numa_node else "SYS"


def read_topology(
    sysfs_root: str | Path = DEFAULT_SYSFS, *, simulated: str | None = None, nvml: bool = True
) -> Topology:
    """The node's topology (NVML initialised and shut down inside; ``nvml`` False: the host
    side only). Never raises for what it cannot read: the GPU side's absence is
    ``gpu_unavailable``, a missing file an unknown value."""
    root = Path(sysfs_root)
    gpus = read_nvml_topology() if nvml else NvmlTopology(unavailable="GPU side turned off (--no-gpu)")
    for gpu in gpus.gpus:
        if gpu.pci_bus_id:
            gpu.pci_path = pci_path(root, normalize_bus_id(gpu.pci_bus_id))
    by_index = {gpu.index: gpu for gpu in gpus.gpus}
    pairs = [
        gpu_connection(by_index[a], by_index[b], level)
        for (a, b), level in sorted(gpus.levels.items())
        if a in by_index and b in by_index
    ]
    nics = read_nics(root)
    return Topology(
        gpus=gpus.gpus,
        gpu_pairs=pairs,
        numa_nodes=read_numa_nodes(root),
        nics=nics,
        gpu_nic=[[gpu_nic_level(gpu, nic) for nic in nics] for gpu in gpus.gpus],
        sysfs_root=str(sysfs_root),
        gpu_unavailable=gpus.unavailable,
        simulated=simulated,
    )
