"""Topology for :class:`gpuscope.testing.fake_nvml.FakeNvml`: the C symbols that say how GPUs
are wired, and two scripted nodes.

Symbols: ``nvmlDeviceGetTopologyCommonAncestor`` (from ``FakeGpu.pcie_switch``,
``host_bridge`` and ``numa_node``: same switch SINGLE, same host bridge HOSTBRIDGE, same NUMA
node NODE, else SYSTEM), ``nvmlDeviceGetCpuAffinity`` / ``nvmlDeviceGetMemoryAffinity``
(``cpu_affinity``, ``numa_node``), ``nvmlDeviceGetNvLinkRemotePciInfo_v2`` /
``nvmlDeviceGetNvLinkRemoteDeviceType`` (``nvlink_remote``), ``nvmlDeviceGetNvLinkErrorCounter``
(CRC flit errors growing at ``nvlink_crc_per_s`` with the clock) and
``nvmlDeviceGetPcieReplayCounter`` (``pcie_replay_per_s``).

Nodes (``GPUSCOPE_FAKE_NVML=topology=hgx8`` or ``topology=pcie4``):

- :func:`hgx_h200_8`: 8 x H200 SXM, every GPU's 18 NVLink 4 links to four NVSwitches (NV18
  between every pair), GPU pairs under four PCIe switches, GPUs 0-3 on NUMA node 0 and 4-7 on
  node 1; GPU 5's link 3 counts CRC errors (50 per second).
- :func:`pcie_pairs_4`: 4 x H100 PCIe in NVLink-bridged pairs (12 links each: 0-1 and 2-3),
  each pair under one PCIe switch, pair 0-1 on NUMA node 0 (CPUs 0-7), pair 2-3 on node 1
  (CPUs 8-15); GPU 1 trained at x8 Gen4 under a x16 Gen5 maximum; link 5 of the 2-3 bridge down.
  Bus ids match the made-up sysfs tree of ``tests/support/sysfs.py``.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

import pynvml

from gpuscope.testing._fake_nvml_model import FakeGpu
from gpuscope.testing._fake_nvml_symbols import FakeReturn, Handle, Ref, as_int, put

__all__ = ["TopologySymbols", "NVSWITCH_BUS_IDS", "hgx_h200_8", "pcie_pairs_4", "TOPOLOGIES"]

_OK = pynvml.NVML_SUCCESS
_NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
_INVALID = pynvml.NVML_ERROR_INVALID_ARGUMENT
_CRC_FLIT = int(getattr(pynvml, "NVML_NVLINK_ERROR_DL_CRC_FLIT", 2))

#: The four NVSwitches of an HGX board, as NVML spells bus ids.
NVSWITCH_BUS_IDS = ("00000000:C1:00.0", "00000000:C2:00.0", "00000000:C3:00.0", "00000000:C4:00.0")


class TopologySymbols:
    """Topology symbols (mixed into FakeNvml)."""

    gpus: list[FakeGpu]

    if TYPE_CHECKING:  # defined by FakeNvml and SymbolsMixin

        def now(self) -> float: ...

        def _gpu_only(self, handle: Handle) -> tuple[int, FakeGpu]: ...

        def _link(self, handle: Handle, link: ctypes.c_uint) -> tuple[FakeGpu, int]: ...

    def _sym_nvmlDeviceGetTopologyCommonAncestor(self, first: Handle, second: Handle, ref: Ref[ctypes.c_uint]) -> int:
        index_a, a = self._gpu_only(first)
        index_b, b = self._gpu_only(second)
        if index_a == index_b:
            level = pynvml.NVML_TOPOLOGY_INTERNAL
        elif a.pcie_switch is not None and a.pcie_switch == b.pcie_switch:
            level = pynvml.NVML_TOPOLOGY_SINGLE
        elif a.host_bridge is not None and a.host_bridge == b.host_bridge:
            level = pynvml.NVML_TOPOLOGY_HOSTBRIDGE
        elif (a.numa_node or 0) == (b.numa_node or 0):
            level = pynvml.NVML_TOPOLOGY_NODE
        else:
            level = pynvml.NVML_TOPOLOGY_SYSTEM
        return put(ref, level)

    @staticmethod
    def _mask(ref: Ref[ctypes.Array[ctypes.c_ulonglong]], size: ctypes.c_uint | int, members: list[int]) -> int:
        words = ref._obj
        count = as_int(size)
        for number in range(count):
            words[number] = 0
        for member in members:
            if member // 64 >= count:
                return pynvml.NVML_ERROR_INSUFFICIENT_SIZE
            words[member // 64] |= 1 << (member % 64)
        return _OK

    def _sym_nvmlDeviceGetCpuAffinity(
        self, handle: Handle, size: ctypes.c_uint, ref: Ref[ctypes.Array[ctypes.c_ulonglong]]
    ) -> int:
        gpu = self._gpu_only(handle)[1]
        if not gpu.cpu_affinity:
            return _NOT_SUPPORTED
        return self._mask(ref, size, list(gpu.cpu_affinity))

    def _sym_nvmlDeviceGetMemoryAffinity(
        self, handle: Handle, size: ctypes.c_uint, ref: Ref[ctypes.Array[ctypes.c_ulonglong]], scope: ctypes.c_uint
    ) -> int:
        gpu = self._gpu_only(handle)[1]
        if gpu.numa_node is None:
            return _NOT_SUPPORTED
        return self._mask(ref, size, [gpu.numa_node])

    def _remote(self, handle: Handle, link: ctypes.c_uint) -> str:
        gpu, number = self._link(handle, link)
        if gpu.nvlink_remote is None:
            return NVSWITCH_BUS_IDS[0]
        if number >= len(gpu.nvlink_remote):
            raise FakeReturn(_NOT_SUPPORTED)
        return gpu.nvlink_remote[number]

    def _sym_nvmlDeviceGetNvLinkRemotePciInfo_v2(
        self, handle: Handle, link: ctypes.c_uint, ref: Ref[ctypes.Structure]
    ) -> int:
        bus_id = self._remote(handle, link)
        info = ref._obj
        domain, bus, rest = bus_id.split(":")
        info.busId = bus_id.encode()
        info.busIdLegacy = bus_id[4:].encode()
        info.domain, info.bus, info.device = int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16)
        return _OK

    def _sym_nvmlDeviceGetNvLinkRemoteDeviceType(
        self, handle: Handle, link: ctypes.c_uint, ref: Ref[ctypes.c_uint]
    ) -> int:
        bus_id = self._remote(handle, link)
        is_gpu = any(other.pci_bus_id == bus_id for other in self.gpus)
        return put(ref, pynvml.NVML_NVLINK_DEVICE_TYPE_GPU if is_gpu else pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH)

    def _sym_nvmlDeviceGetNvLinkErrorCounter(
        self, handle: Handle, link: ctypes.c_uint, counter: ctypes.c_uint, ref: Ref[ctypes.c_ulonglong]
    ) -> int:
        gpu, number = self._link(handle, link)
        rate = gpu.nvlink_crc_per_s.get(number, 0.0) if as_int(counter) == _CRC_FLIT else 0.0
        return put(ref, int(rate * self.now()))

    def _sym_nvmlDeviceGetPcieReplayCounter(self, handle: Handle, ref: Ref[ctypes.c_uint]) -> int:
        gpu = self._gpu_only(handle)[1]
        return put(ref, int(gpu.pcie_replay_per_s * self.now()) & 0xFFFFFFFF)


def _cpus(*ranges: tuple[int, int]) -> tuple[int, ...]:
    return tuple(cpu for low, high in ranges for cpu in range(low, high + 1))


def hgx_h200_8(**overrides: object) -> list[FakeGpu]:
    """8 x H200 on NVSwitch (NV18 everywhere), pairs under PCIe switches, two NUMA nodes; GPU 5's
    link 3 counts CRC errors. ``overrides`` go to every GPU (e.g. ``wobble``)."""
    buses = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
    switch_of_link = [0] * 5 + [1] * 4 + [2] * 4 + [3] * 5  # 18 links over four NVSwitches
    node_cpus = (_cpus((0, 55), (112, 167)), _cpus((56, 111), (168, 223)))
    gpus = []
    for index, bus in enumerate(buses):
        node = index // 4
        gpus.append(
            FakeGpu.h200(
                pci_bus_id=f"00000000:{bus}:00.0",
                numa_node=node,
                cpu_affinity=node_cpus[node],
                pcie_switch=f"switch{index // 2}",
                host_bridge=f"bridge{index // 2}",
                nvlink_remote=tuple(NVSWITCH_BUS_IDS[switch] for switch in switch_of_link),
                nvlink_crc_per_s={3: 50.0} if index == 5 else {},
                **overrides,
            )
        )
    return gpus


def pcie_pairs_4(**overrides: object) -> list[FakeGpu]:
    """4 x H100 PCIe, NVLink-bridged pairs under two PCIe switches on two NUMA nodes; GPU 1 at x8
    Gen4 under x16 Gen5; link 5 of the 2-3 bridge down. ``overrides`` go to every GPU."""
    buses = ("00000000:03:00.0", "00000000:04:00.0", "00000000:83:00.0", "00000000:84:00.0")
    gpus = []
    for index, bus in enumerate(buses):
        pair = index // 2
        partner = buses[index ^ 1]
        gpu = FakeGpu.h100(
            name="NVIDIA H100 PCIe",
            pci_bus_id=bus,
            power_limit_w=350.0,
            numa_node=pair,
            cpu_affinity=_cpus((0, 7)) if pair == 0 else _cpus((8, 15)),
            pcie_switch=f"switch{pair}",
            host_bridge=f"bridge{pair}",
            nvlink_links=12,
            nvlink_remote=(partner,) * 12,
            nvlink_inactive=frozenset({5}) if pair == 1 else frozenset(),
            **overrides,
        )
        if index == 1:
            gpu.pcie_generation, gpu.pcie_width, gpu.pcie_max_generation, gpu.pcie_max_width = 4, 8, 5, 16
        gpus.append(gpu)
    return gpus


#: ``GPUSCOPE_FAKE_NVML`` ``topology=`` names -> builders.
TOPOLOGIES = {"hgx8": hgx_h200_8, "pcie4": pcie_pairs_4}
