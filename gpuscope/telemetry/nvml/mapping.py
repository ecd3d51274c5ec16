"""Which NVML GPU is CUDA device N: the one mapping used by probe telemetry, ``gpuscope.measure``
and the live roofline position. Under a ROCm build of torch the same ``torch.cuda`` API numbers
AMD GPUs: ``ROCR_VISIBLE_DEVICES`` filters them first, then ``HIP_VISIBLE_DEVICES`` (or
``CUDA_VISIBLE_DEVICES``) indexes what is left, in PCI bus order; the samples of the other
vendor are never candidates.

nvml.h: "The order in which NVML enumerates devices has no guarantees of consistency between
reboots" and NVML indices need not match CUDA's. CUDA numbers the devices it can see after
``CUDA_VISIBLE_DEVICES`` (indices, ``GPU-<uuid>`` or unique prefixes, ``MIG-<uuid>``), in
``CUDA_DEVICE_ORDER`` (FASTEST_FIRST by default, PCI_BUS_ID on request), and torchrun/SLURM set
``CUDA_VISIBLE_DEVICES`` per rank. The one reliable key is the UUID: torch reports it per CUDA
device (``get_device_properties(i).uuid``, without the ``GPU-``/``MIG-`` prefix), NVML per GPU
and MIG device. Without a CUDA UUID (no torch loaded, as in the monitor) the mapping falls back
to ``CUDA_VISIBLE_DEVICES`` and PCI bus order, and says so in :attr:`DeviceMatch.method`.

torch is imported only inside :func:`cuda_device_uuid` (tests replace that function).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpuscope.telemetry.nvml import session
from gpuscope.telemetry.nvml.device import read_mig_devices
from gpuscope.telemetry.values import Reason, Unavailable

__all__ = [
    "DeviceMatch",
    "normalize_uuid",
    "parse_visible_devices",
    "cuda_device_uuid",
    "match_cuda_device",
    "cuda_index_of",
    "torch_gpu_vendor",
    "visible_devices_text",
    "NvmlIdentity",
    "nvml_identities",
    "nvml_gpu_index",
]


@dataclass(frozen=True)
class DeviceMatch:
    """The NVML sample (a :class:`GpuSample`, full GPU or MIG device) of a CUDA device and how it
    was found: ``"uuid"`` (certain), ``"visible-devices uuid"`` (``CUDA_VISIBLE_DEVICES`` named
    it), ``"visible-devices index"`` or ``"pci order"`` (assumed: CUDA enumerates identical
    GPUs in PCI bus order)."""

    gpu: Any
    method: str

    @property
    def certain(self) -> bool:
        return self.method in ("uuid", "visible-devices uuid")


def normalize_uuid(text: Any) -> str:
    """``GPU-8932f937-...``, ``MIG-...`` or torch's bare ``8932f937-...`` -> the bare lower-case UUID."""
    value = str(text or "").strip().lower()
    for prefix in ("gpu-", "mig-"):
        if value.startswith(prefix):
            return value[len(prefix) :]
    return value


def parse_visible_devices(text: str | None) -> list[str] | None:
    """``CUDA_VISIBLE_DEVICES`` as a list of entries (None when unset: every GPU visible). CUDA
    stops at the first entry it cannot parse; so does this (an empty entry ends the list)."""
    if text is None:
        return None
    entries: list[str] = []
    for part in text.split(","):
        entry = part.strip()
        if not entry:
            break
        if not (entry.isdigit() or entry.lower().startswith(("gpu-", "mig-"))):
            break
        entries.append(entry)
    return entries


def cuda_device_uuid(index: int) -> str | None:
    """The UUID torch reports for CUDA device ``index`` (bare, lower case), or None when torch,
    CUDA or the property is unavailable. The only place here that touches torch."""
    try:
        import torch

        uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    except Exception:  # noqa: BLE001 - no CUDA, old torch: fall back to the environment
        return None
    return normalize_uuid(uuid) or None


def _full_gpus(gpus: Sequence[Any]) -> list[Any]:
    return [gpu for gpu in gpus if getattr(gpu, "mig_parent_index", None) is None]


def torch_gpu_vendor(gpus: Sequence[Any] = ()) -> str:
    """Whose GPUs torch's ``torch.cuda`` numbers: "amd" under a ROCm build of torch (already
    imported; this never imports it), else "nvidia" when any of ``gpus`` is NVIDIA's, else "amd"."""
    torch = sys.modules.get("torch")
    if torch is not None and getattr(getattr(torch, "version", None), "hip", None):
        return "amd"
    if not gpus or any(getattr(gpu, "vendor", "nvidia") == "nvidia" for gpu in gpus):
        return "nvidia"
    return "amd"


def visible_devices_text(vendor: str) -> str | None:
    """The environment's device list for ``vendor``: ``CUDA_VISIBLE_DEVICES`` for NVIDIA; for AMD
    ``HIP_VISIBLE_DEVICES`` (HIP also reads ``CUDA_VISIBLE_DEVICES`` when that is unset)."""
    if vendor == "amd":
        return os.environ.get("HIP_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def _vendor_gpus(gpus: Sequence[Any], vendor: str) -> list[Any]:
    """The samples of ``vendor`` that torch can number: for AMD after ``ROCR_VISIBLE_DEVICES``
    (the ROCr runtime filters first; HIP's list then indexes what is left)."""
    mine = [gpu for gpu in gpus if getattr(gpu, "vendor", "nvidia") == vendor]
    if vendor != "amd":
        return mine
    rocr = parse_visible_devices(os.environ.get("ROCR_VISIBLE_DEVICES"))
    return mine if rocr is None else [gpu for gpu, _method in _visible(mine, rocr)]


def _pci_order(gpus: Sequence[Any]) -> list[Any]:
    return sorted(
        _full_gpus(gpus),
        key=lambda gpu: (
            str(getattr(gpu, "pci_bus_id", "")).lower(),
            getattr(gpu, "index", 0),
        ),
    )


def _by_uuid(gpus: Sequence[Any], uuid: str) -> Any:
    """The sample whose UUID is ``uuid`` or starts with it (CUDA accepts unique prefixes)."""
    wanted = normalize_uuid(uuid)
    if not wanted:
        return None
    exact = [gpu for gpu in gpus if normalize_uuid(getattr(gpu, "uuid", "")) == wanted]
    if exact:
        return exact[0]
    prefixed = [gpu for gpu in gpus if normalize_uuid(getattr(gpu, "uuid", "")).startswith(wanted)]
    return prefixed[0] if len(prefixed) == 1 else None


def _visible(gpus: Sequence[Any], visible: list[str] | None) -> list[tuple[Any, str]]:
    """The devices CUDA enumerates, in CUDA order where known: (sample, method)."""
    ordered = _pci_order(gpus)
    if visible is None:
        return [(gpu, "pci order") for gpu in ordered]
    out: list[tuple[Any, str]] = []
    for entry in visible:
        if entry.isdigit():
            position = int(entry)
            if position >= len(ordered):
                break  # CUDA stops at an invalid entry
            out.append((ordered[position], "visible-devices index"))
        else:
            gpu = _by_uuid(gpus, entry)
            if gpu is None:
                break
            out.append((gpu, "visible-devices uuid"))
    return out


def match_cuda_device(
    gpus: Sequence[Any],
    cuda_index: int,
    *,
    cuda_uuid: str | None = None,
    visible_devices: str | None | bool = True,
) -> DeviceMatch | None:
    """The NVML sample of CUDA device ``cuda_index`` among ``gpus`` (GpuSamples of one telemetry
    sample), or None. ``cuda_uuid``: torch's UUID of that device (best; pass
    ``cuda_device_uuid(i)``). ``visible_devices``: the ``CUDA_VISIBLE_DEVICES`` text; True reads
    the environment."""
    if cuda_uuid:
        gpu = _by_uuid(gpus, cuda_uuid)
        if gpu is not None:
            return DeviceMatch(gpu, "uuid")
    vendor = torch_gpu_vendor(gpus)
    gpus = _vendor_gpus(gpus, vendor)
    text = visible_devices_text(vendor) if visible_devices is True else visible_devices
    listed = _visible(gpus, parse_visible_devices(text if isinstance(text, str) else None))
    if 0 <= cuda_index < len(listed):
        gpu, method = listed[cuda_index]
        return DeviceMatch(gpu, method)
    return None


def cuda_index_of(gpu: Any, gpus: Sequence[Any], *, visible_devices: str | None | bool = True) -> int | None:
    """The CUDA index a process with this ``CUDA_VISIBLE_DEVICES`` gives NVML sample ``gpu``
    (None when it is not visible to CUDA). Without torch: by the environment and PCI order."""
    vendor = getattr(gpu, "vendor", "nvidia")
    gpus = _vendor_gpus(gpus, vendor)
    text = visible_devices_text(vendor) if visible_devices is True else visible_devices
    wanted = normalize_uuid(getattr(gpu, "uuid", ""))
    for position, (candidate, _method) in enumerate(
        _visible(gpus, parse_visible_devices(text if isinstance(text, str) else None))
    ):
        if candidate is gpu or (wanted and normalize_uuid(getattr(candidate, "uuid", "")) == wanted):
            return position
    return None


@dataclass(frozen=True)
class NvmlIdentity:
    """What :func:`match_cuda_device` needs of one NVML device, read without a telemetry sample:
    ``index`` (NVML's index; a MIG device's slot), ``uuid``, ``pci_bus_id`` and
    ``mig_parent_index`` (the GPU's NVML index for a MIG device, None for a full GPU)."""

    index: int
    uuid: str
    pci_bus_id: str = ""
    mig_parent_index: int | None = None


def nvml_identities() -> list[NvmlIdentity] | Unavailable:
    """Every NVML device (full GPUs, then the MIG devices of GPUs in MIG mode) as
    :class:`NvmlIdentity`, or an ``Unavailable`` when NVML cannot count them. NVML must be
    initialised (:func:`gpuscope.telemetry.nvml.session.init`). A few NVML calls per GPU
    (microseconds each); a lost or unreadable GPU is left out."""
    pynvml = session.pynvml
    try:
        count = session.call("nvmlDeviceGetCount", pynvml.nvmlDeviceGetCount)
    except session.GpuLostError as exc:
        return Unavailable(Reason.GPU_LOST, str(exc))
    if isinstance(count, Unavailable):
        return count
    found: list[NvmlIdentity] = []
    for index in range(int(count)):
        try:
            handle = session.call("nvmlDeviceGetHandleByIndex", pynvml.nvmlDeviceGetHandleByIndex, index)
            if isinstance(handle, Unavailable):
                continue
            uuid = session.call("nvmlDeviceGetUUID", pynvml.nvmlDeviceGetUUID, handle)
            pci = session.call("nvmlDeviceGetPciInfo", pynvml.nvmlDeviceGetPciInfo, handle)
            bus = getattr(pci, "busId", "") if not isinstance(pci, Unavailable) else ""
            bus_id = bus.decode(errors="replace") if isinstance(bus, bytes) else str(bus)
            found.append(NvmlIdentity(index, "" if isinstance(uuid, Unavailable) else str(uuid), bus_id))
            mode = session.call("nvmlDeviceGetMigMode", pynvml.nvmlDeviceGetMigMode, handle)
            if not isinstance(mode, Unavailable) and mode[0] == pynvml.NVML_DEVICE_MIG_ENABLE:
                for mig in read_mig_devices(handle, []):
                    found.append(NvmlIdentity(mig.slot, mig.uuid, bus_id, index))
        except session.GpuLostError:
            continue
    return found


def nvml_gpu_index(
    cuda_index: int,
    *,
    cuda_uuid: str | None = None,
    visible_devices: str | None | bool = True,
) -> tuple[int, str] | Unavailable:
    """The NVML index of the GPU that CUDA device ``cuda_index`` is (or lives on, for a MIG
    device: GPU-wide counters such as energy are read there) and how it was matched
    (:attr:`DeviceMatch.method`), by :func:`match_cuda_device` over :func:`nvml_identities`.
    ``cuda_uuid``: torch's UUID of the device (None: ask :func:`cuda_device_uuid`). An
    ``Unavailable`` when NVML cannot list its GPUs or none matches. NVML must be initialised."""
    gpus = nvml_identities()
    if isinstance(gpus, Unavailable):
        return gpus
    uuid = cuda_uuid if cuda_uuid is not None else cuda_device_uuid(cuda_index)
    match = match_cuda_device(gpus, cuda_index, cuda_uuid=uuid, visible_devices=visible_devices)
    if match is None:
        return Unavailable(Reason.NOT_APPLICABLE, f"cuda:{cuda_index} is not among the {len(gpus)} GPUs NVML lists")
    gpu = match.gpu
    index = gpu.index if gpu.mig_parent_index is None else gpu.mig_parent_index
    return int(index), match.method
