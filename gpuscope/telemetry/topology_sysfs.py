"""The host side of the topology from sysfs under a root (``--sysfs``, default ``/sys``; like
node_exporter's ``--path.sysfs``, so a host's /sys mounted into a container, or a made-up tree
in tests, reads the same): NUMA nodes and their CPUs, Ethernet NICs and InfiniBand/RoCE HCAs
with PCI address, NUMA node, rate and state, and the PCI path of any PCI function.

Files read (relative to the root): ``devices/system/node/node*/cpulist``;
``class/net/*`` (``device`` link, ``operstate``, ``speed`` in Mb/s, ``device/numa_node``);
``class/infiniband/*`` (``device`` link, ``ports/*/state``, ``ports/*/rate``,
``ports/*/link_layer``, ``device/net/*``); ``bus/pci/devices/<address>`` (a link into
``devices/pci<domain>:<bus>/...``, the PCI path). A file that cannot be read leaves its value
unknown. Names read here pass through :func:`gpuscope.textsafe.safe_text`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from gpuscope.telemetry.topology import Nic, NicPort, NumaNode, parse_cpulist
from gpuscope.textsafe import safe_text

__all__ = ["read_numa_nodes", "read_nics", "pci_path", "parse_ib_rate_bytes_per_s", "DEFAULT_SYSFS"]

DEFAULT_SYSFS = "/sys"
_NODE = re.compile(r"node(\d+)")
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")
_PCI_ADDRESS = re.compile(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except (OSError, ValueError):
        return None


def _int(text: str | None) -> int | None:
    try:
        return None if text is None else int(text.strip())
    except ValueError:
        return None


def read_numa_nodes(root: str | Path = DEFAULT_SYSFS) -> list[NumaNode]:
    """The NUMA nodes under ``root`` with their CPUs, by node number (empty when none are listed)."""
    folder = Path(root) / "devices" / "system" / "node"
    nodes: list[NumaNode] = []
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return nodes
    for entry in entries:
        match = _NODE.fullmatch(entry.name)
        if match is None:
            continue
        text = _read(entry / "cpulist")
        try:
            cpus = parse_cpulist(text) if text else []
        except ValueError:
            cpus = []
        nodes.append(NumaNode(node=int(match.group(1)), cpus=cpus))
    nodes.sort(key=lambda node: node.node)
    return nodes


def pci_path(root: str | Path, device: str | Path) -> list[str]:
    """The PCI path of a device folder or PCI address under ``root``: host bridge first
    (``pci0000:00``), then each bridge, the function last; empty when not found."""
    base = Path(root)
    target = Path(device) if isinstance(device, Path) else base / "bus" / "pci" / "devices" / str(device)
    try:
        resolved = Path(os.path.realpath(target))
        devices = Path(os.path.realpath(base / "devices"))
        parts = resolved.relative_to(devices).parts
    except (OSError, ValueError):
        return []
    if not parts or not parts[0].startswith("pci") or not resolved.exists():
        return []
    while len(parts) > 1 and not _PCI_ADDRESS.fullmatch(parts[-1]):
        parts = parts[:-1]  # a virtio or other child device: its PCI function
    return [safe_text(part) for part in parts] if len(parts) > 1 else []


def parse_ib_rate_bytes_per_s(text: str | None) -> float | None:
    """An InfiniBand port ``rate`` (``200 Gb/sec (4X HDR)``) as bytes/s one direction."""
    match = _RATE.match(text or "")
    return None if match is None else float(match.group(1)) * 1e9 / 8


def _numa(device: Path) -> int | None:
    node = _int(_read(device / "numa_node"))
    return None if node is None or node < 0 else node


def _hca(root: Path, entry: Path) -> Nic | None:
    device = entry / "device"
    if not device.exists():
        return None
    ports: list[NicPort] = []
    try:
        port_dirs = sorted((entry / "ports").iterdir(), key=lambda p: _int(p.name) or 0)
    except OSError:
        port_dirs = []
    for port_dir in port_dirs:
        number = _int(port_dir.name)
        if number is None:
            continue
        state = _read(port_dir / "state") or "unknown"
        ports.append(
            NicPort(
                port=number,
                state=safe_text(state),
                active=state.split(":")[-1].strip().upper() == "ACTIVE",
                rate_bytes_per_s=parse_ib_rate_bytes_per_s(_read(port_dir / "rate")),
                link_layer=safe_text(_read(port_dir / "link_layer") or ""),
            )
        )
    try:
        netdevs = sorted(safe_text(p.name) for p in (device / "net").iterdir())
    except OSError:
        netdevs = []
    active = [port for port in ports if port.active]
    rates = [port.rate_bytes_per_s for port in active if port.rate_bytes_per_s]
    infiniband = any(port.link_layer.lower() == "infiniband" for port in ports) or not ports
    return Nic(
        name=safe_text(entry.name),
        kind="infiniband" if infiniband else "roce",
        pci_address=safe_text(Path(os.path.realpath(device)).name),
        numa_node=_numa(device),
        pci_path=pci_path(root, device),
        state="ACTIVE" if active else (ports[0].state if ports else "unknown"),
        rate_bytes_per_s=max(rates) if rates else None,
        ports=ports,
        netdevs=netdevs,
    )


def read_nics(root: str | Path = DEFAULT_SYSFS) -> list[Nic]:
    """InfiniBand/RoCE HCAs (``class/infiniband``), then Ethernet NICs with a PCI device
    (``class/net``; virtual interfaces and an HCA's own network interfaces left out), by name."""
    base = Path(root)
    hcas: list[Nic] = []
    try:
        ib_entries = sorted((base / "class" / "infiniband").iterdir())
    except OSError:
        ib_entries = []
    for entry in ib_entries:
        hca = _hca(base, entry)
        if hca is not None:
            hcas.append(hca)
    taken = {hca.pci_address for hca in hcas}
    nics: list[Nic] = []
    try:
        net_entries = sorted((base / "class" / "net").iterdir())
    except OSError:
        net_entries = []
    for entry in net_entries:
        device = entry / "device"
        if not device.exists():
            continue  # lo, bridges, veth, docker0: no PCI function
        path = pci_path(base, device)
        if not path:
            continue  # not on PCI (usb, platform devices)
        address = path[-1]
        if address in taken:
            continue
        function = Path(os.path.realpath(base / "devices", strict=False)).joinpath(*path)
        speed = _int(_read(entry / "speed"))
        nics.append(
            Nic(
                name=safe_text(entry.name),
                kind="ethernet",
                pci_address=address,
                numa_node=_numa(function),
                pci_path=path,
                state=safe_text(_read(entry / "operstate") or "unknown"),
                rate_bytes_per_s=speed * 1e6 / 8 if speed is not None and speed > 0 else None,
                netdevs=[safe_text(entry.name)],
            )
        )
    return hcas + nics
