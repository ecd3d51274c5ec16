"""Built-in datasheet roofs for NVIDIA and AMD GPUs, matched by NVML / AMD SMI device name, and the
CPU datasheet roof from :func:`gpuscope.telemetry.cpuinfo.cpu_info`.

Every compute number is **dense** (NVIDIA's "with sparsity" figures halved), per GPU, in FLOP/s.
Bandwidths are bytes per second per direction (GB = 1e9 bytes); cache sizes in bytes (MiB as
the vendors mean "MB" there). A datasheet roof is what the vendor promises, not what the machine
reaches: measured ceilings from ``gpuscope probe`` are drawn solid, these dimmer.

Sources (numbers checked against each; the URL is the vendor page of the datasheet):
- H100 SXM / PCIe / NVL: NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100/),
  same figures in the project's ANCHORS section 5 (SXM: BF16 989, TF32 495, FP8 1979, FP32 67,
  FP64 34, FP64 tensor 67 TFLOP/s; HBM3 3.35 TB/s; L2 50 MB; NVLink 900 GB/s = 450 each way;
  PCIe Gen5 128 GB/s = 64 each way; 700 W). FP16 non-tensor 133.8 TFLOP/s: Hopper whitepaper table.
- H200 / H200 NVL: NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200/): SXM compute as
  H100 SXM, 141 GB HBM3e at 4.8 TB/s, up to 700 W; NVL: FP64 30 / tensor 60, FP32 60, TF32 835*,
  BF16/FP16 1671*, FP8 3341* (* sparse, halved here), up to 600 W.
- A100 (SXM4 and PCIe, 40 and 80 GB): NVIDIA A100 datasheet (nvidia.com/en-us/data-center/a100/):
  FP64 9.7, FP64 tensor 19.5, FP32 19.5, TF32 156, BF16/FP16 312 TFLOP/s; 1555 GB/s (40 GB),
  2039 GB/s (80 GB SXM), 1935 GB/s (80 GB PCIe); L2 40 MB; NVLink 600 GB/s; PCIe Gen4 64 GB/s;
  400 W SXM, 250 W PCIe 40 GB, 300 W PCIe 80 GB. FP16 non-tensor 78 TFLOP/s: Ampere whitepaper.
- L40S: NVIDIA L40S datasheet: FP32 91.6, TF32 183, BF16/FP16 362.05, FP8 733 TFLOP/s (dense);
  48 GB GDDR6 864 GB/s; PCIe Gen4 x16 64 GB/s bidirectional; 350 W. FP64 is not in the datasheet:
  1/64 of FP32 (Ada). L2 96 MB (AD102, Ada whitepaper; cudaDeviceProp.l2CacheSize on L40S).
- L4: NVIDIA L4 datasheet: FP32 30.3, TF32 120*, BF16/FP16 242*, FP8 485* (sparse, halved here);
  24 GB GDDR6 300 GB/s; PCIe Gen4 x16; 72 W. L2 48 MB (AD104, Ada whitepaper). FP64 1/64 of FP32.
- GeForce RTX 4090: NVIDIA Ada Lovelace architecture whitepaper, appendix table: FP32 82.6,
  TF32 82.6, FP16/BF16 tensor with FP32 accumulate 165.2 (330.3 with FP16 accumulate; torch
  accumulates in FP32, so 165.2 is the roof), FP8 with FP32 accumulate 330.3 TFLOP/s; 24 GB
  GDDR6X 1008 GB/s; L2 72 MB; PCIe Gen4 x16; 450 W; FP64 1/64 of FP32.
- B200 (HGX B200, 1000 W): NVIDIA HGX B200 datasheet, 8-GPU totals divided by 8: FP64 and FP64
  tensor 37, FP32 75, TF32 1125, BF16/FP16 2250, FP8 4500 TFLOP/s dense; HBM3e 8 TB/s (later
  revisions list 7.7 TB/s); NVLink 5 1.8 TB/s = 900 GB/s each way. L2 132644864 bytes is
  cudaDeviceProp.l2CacheSize on a B200 (not in the datasheet). The host link in HGX/DGX B200 runs
  PCIe Gen5 x16 (64 GB/s each way) although the GPU supports Gen6.
- MI300X: AMD Instinct MI300X data sheet (amd.com/en/products/accelerators/instinct/mi300/mi300x):
  FP64 vector 81.7, FP64 matrix 163.4, FP32 163.4, TF32 653.7, FP16/BF16 1307.4, FP8 and INT8
  2614.9 TFLOP/s dense (AMD's "with sparsity" figures are twice these); 192 GB HBM3 at 5.3 TB/s;
  7 Infinity Fabric (XGMI) links at 128 GB/s each, i.e. 64 GB/s each way, 448 GB/s each way in
  all; PCIe Gen5 x16; 750 W. The cache roof is the L2 (4 MB per XCD x 8 = 32 MB); the 256 MB
  Infinity Cache between L2 and HBM is not a roof here.
- MI325X: AMD Instinct MI325X data sheet: compute as MI300X; 256 GB HBM3E at 6 TB/s; links as
  MI300X; 1000 W.
- MI250X: AMD Instinct MI250X data sheet, per OAM module (two GCDs): FP64 vector 47.9, FP64 matrix
  95.7, FP32 vector 47.9, FP16/BF16 383, INT8 383 TFLOP/s; 128 GB HBM2e at 3.2768 TB/s; 8 Infinity
  Fabric links of 100 GB/s (50 each way); PCIe Gen4 x16; 560 W peak. AMD SMI and ROCm show each
  GCD as its own GPU, so the row here is one GCD: half of every module figure, 8 MB L2, and half
  of the module's links (4 x 50 GB/s each way).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

from gpuscope.telemetry.cpuinfo import CpuInfo

__all__ = [
    "GpuDatasheet",
    "DATASHEETS",
    "COMPUTE_DTYPES",
    "match_gpu_datasheet",
    "datasheet_by_key",
    "cpu_datasheet_peaks",
    "CPU_DTYPES",
    "CLOCK_SOURCES",
    "FlopPerCycle",
    "cpu_flop_per_cycle",
    "CpuDatasheet",
    "cpu_datasheet",
    "pick_clock",
]

_MIB = 1024 * 1024

#: The compute roof names a datasheet entry can carry, in the order tables show them.
COMPUTE_DTYPES = ("fp64", "fp64.tensor", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")


@dataclass(frozen=True)
class GpuDatasheet:
    """Vendor figures for one GPU model (dense; per direction for links)."""

    key: str  # stable identifier, e.g. "h100-sxm"
    label: str  # human name, e.g. "H100 SXM"
    architecture: str  # "hopper", "ampere", "ada", "blackwell"
    compute_flop_per_s: dict[str, float]  # roof name (COMPUTE_DTYPES) -> FLOP/s, dense
    memory_bytes_per_s: float  # DRAM / HBM / GDDR
    memory_kind: str  # "HBM3", "GDDR6", ...
    memory_bytes: float
    l2_bytes: int | None
    nvlink_bytes_per_s_per_direction: float | None  # None: no NVLink
    pcie_bytes_per_s_per_direction: float
    tdp_w: float
    fp16_vector_flop_per_s: float | None = None  # non-tensor FP16 (for activity-counter estimates)
    notes: tuple[str, ...] = field(default_factory=tuple)
    vendor: str = "nvidia"  # "nvidia" or "amd"
    gpu_link_name: str = "NVLink"  # what nvlink_bytes_per_s_per_direction is on this GPU: "NVLink" or "XGMI"

    def peak_flop_per_s(self, dtype: str) -> float | None:
        """The highest dense roof for ``dtype`` (``fp64`` takes the FP64 tensor roof when higher)."""
        if dtype == "fp64":
            values = [self.compute_flop_per_s.get(name) for name in ("fp64", "fp64.tensor")]
            present = [value for value in values if value]
            return max(present) if present else None
        return self.compute_flop_per_s.get(dtype)


# Dense TFLOP/s in COMPUTE_DTYPES order (fp64, fp64.tensor, fp32, tf32, bf16, fp16, fp8, int8; None: no such roof),
# then FP16 without tensor cores. "x / 2": a "with sparsity" figure halved; "x / 64": FP64 on Ada, 1/64 of FP32.
_HOPPER_SXM = (34, 67, 67, 495, 989, 989, 1979, 1979, 133.8)
_HOPPER_PCIE = (26, 51, 51, 756 / 2, 1513 / 2, 1513 / 2, 3026 / 2, 3026 / 2, 102)
_HOPPER_NVL = (30, 60, 60, 835 / 2, 1671 / 2, 1671 / 2, 3341 / 2, 3341 / 2, 120)
_A100 = (9.7, 19.5, 19.5, 156, 312, 312, None, 624, 78)
_L40S = (91.6 / 64, None, 91.6, 183, 362.05, 362.05, 733, 733, 91.6)
_L4 = (30.3 / 64, None, 30.3, 120 / 2, 242 / 2, 242 / 2, 485 / 2, 485 / 2, 30.3)
_RTX_4090 = (82.6 / 64, None, 82.6, 82.6, 165.2, 165.2, 330.3, 660.6, 82.6)
_B200 = (37, 37, 75, 1125, 2250, 2250, 4500, 4500, 150)
_MI300X = (81.7, 163.4, 163.4, 653.7, 1307.4, 1307.4, 2614.9, 2614.9, None)
_MI250X_GCD = (47.9 / 2, 95.7 / 2, 47.9 / 2, None, 383 / 2, 383 / 2, None, 383 / 2, None)

_ADA_FP64_NOTE = "FP64 is not in the datasheet: 1/64 of FP32 on Ada"
_NOTES = {
    "l40s": (_ADA_FP64_NOTE,),
    "l4": (_ADA_FP64_NOTE,),
    "rtx-4090": (_ADA_FP64_NOTE, "FP16/BF16/FP8 tensor roofs with FP32 accumulate (torch's default)"),
    "b200": ("L2 size from cudaDeviceProp, not the datasheet", "host link PCIe Gen5 in HGX B200"),
    "mi300x": ("the L2 roof is 8 XCDs x 4 MB; the 256 MB Infinity Cache is not drawn",),
    "mi325x": ("the L2 roof is 8 XCDs x 4 MB; the 256 MB Infinity Cache is not drawn",),
    "mi250x-gcd": ("one GCD: half of the MI250X module's figures (ROCm shows each GCD as a GPU)",),
}


def _sheet(
    key: str, label: str, architecture: str, tflop_per_s: tuple[float | None, ...], memory_gb_per_s: float,
    memory_kind: str, memory_gb: float, l2_mib: float, nvlink_gb_per_s: float | None, pcie_gb_per_s: float,
    tdp_w: float,
) -> GpuDatasheet:  # fmt: skip
    """One row of the table below, in the datasheets' units (TFLOP/s, GB/s, GB, MiB; links per direction)."""
    *dense, fp16_vector = tflop_per_s
    return GpuDatasheet(
        key=key,
        label=label,
        architecture=architecture,
        compute_flop_per_s={name: value * 1e12 for name, value in zip(COMPUTE_DTYPES, dense) if value is not None},
        memory_bytes_per_s=memory_gb_per_s * 1e9,
        memory_kind=memory_kind,
        memory_bytes=memory_gb * 1e9,
        l2_bytes=round(l2_mib * _MIB),
        nvlink_bytes_per_s_per_direction=None if nvlink_gb_per_s is None else nvlink_gb_per_s * 1e9,
        pcie_bytes_per_s_per_direction=pcie_gb_per_s * 1e9,
        tdp_w=tdp_w,
        fp16_vector_flop_per_s=None if fp16_vector is None else fp16_vector * 1e12,
        notes=_NOTES.get(key, ()),
        vendor="amd" if architecture.startswith("cdna") else "nvidia",
        gpu_link_name="XGMI" if architecture.startswith("cdna") else "NVLink",
    )


# NVLink: H100 PCIe and A100 PCIe 40GB through a 2-GPU bridge, H200 NVL a 2- or 4-way bridge; None: no NVLink.
# fmt: off
DATASHEETS: tuple[GpuDatasheet, ...] = (
    #      key               label               arch         TFLOP/s       GB/s  memory    GB  L2MiB NVLink PCIe W
    _sheet("h100-sxm",       "H100 SXM",         "hopper",    _HOPPER_SXM,  3350, "HBM3",   80,    50, 450,  64, 700),
    _sheet("h100-pcie",      "H100 PCIe",        "hopper",    _HOPPER_PCIE, 2000, "HBM2e",  80,    50, 300,  64, 350),
    _sheet("h100-nvl",       "H100 NVL",         "hopper",    _HOPPER_NVL,  3900, "HBM3",   94,    50, 300,  64, 400),
    _sheet("h200-sxm",       "H200 SXM",         "hopper",    _HOPPER_SXM,  4800, "HBM3e", 141,    50, 450,  64, 700),
    _sheet("h200-nvl",       "H200 NVL",         "hopper",    _HOPPER_NVL,  4800, "HBM3e", 141,    50, 450,  64, 600),
    _sheet("a100-sxm-40gb",  "A100 SXM 40GB",    "ampere",    _A100,        1555, "HBM2",   40,    40, 300,  32, 400),
    _sheet("a100-sxm-80gb",  "A100 SXM 80GB",    "ampere",    _A100,        2039, "HBM2e",  80,    40, 300,  32, 400),
    _sheet("a100-pcie-40gb", "A100 PCIe 40GB",   "ampere",    _A100,        1555, "HBM2",   40,    40, 300,  32, 250),
    _sheet("a100-pcie-80gb", "A100 PCIe 80GB",   "ampere",    _A100,        1935, "HBM2e",  80,    40, 300,  32, 300),
    _sheet("l40s",           "L40S",             "ada",       _L40S,         864, "GDDR6",  48,    96, None, 32, 350),
    _sheet("l4",             "L4",               "ada",       _L4,           300, "GDDR6",  24,    48, None, 32, 72),
    _sheet("rtx-4090",       "GeForce RTX 4090", "ada",       _RTX_4090,    1008, "GDDR6X", 24,    72, None, 32, 450),
    _sheet("b200",           "B200",             "blackwell", _B200,        8000, "HBM3e", 180, 126.5, 900,  64, 1000),
    # AMD: the "NVLink" column holds the XGMI links (gpu_link_name says so)
    _sheet("mi300x",         "MI300X",           "cdna3",     _MI300X,      5300, "HBM3",  192,    32, 448,  64, 750),
    _sheet("mi325x",         "MI325X",           "cdna3",     _MI300X,      6000, "HBM3e", 256,    32, 448,  64, 1000),
    _sheet("mi250x-gcd",     "MI250X (one GCD)", "cdna2",     _MI250X_GCD, 1638.4, "HBM2e", 64,     8, 200,  32, 280),
)
# fmt: on

_BY_KEY = {sheet.key: sheet for sheet in DATASHEETS}


def datasheet_by_key(key: str) -> GpuDatasheet | None:
    """The entry with this ``key`` (``"h100-sxm"``), or None."""
    return _BY_KEY.get(key)


def _tokens(name: str) -> list[str]:
    """``"NVIDIA A100-SXM4-80GB"`` -> ``["a100", "sxm4", "80gb"]`` (vendor words dropped)."""
    words = re.split(r"[^a-z0-9]+", name.lower())
    return [word for word in words if word and word not in ("nvidia", "geforce", "tesla", "tensor", "core", "gpu",
                                                            "amd", "instinct")]  # fmt: skip


def match_gpu_datasheet(nvml_name: str) -> GpuDatasheet | None:
    """The datasheet entry for an NVML device name, or None when the model is not in the table.

    Matching works on whole words, so ``"NVIDIA L4"`` is not ``"NVIDIA L40S"``. Examples:
    ``"NVIDIA H100 80GB HBM3"`` -> H100 SXM, ``"NVIDIA H100 PCIe"`` -> H100 PCIe,
    ``"NVIDIA A100-SXM4-80GB"`` -> A100 SXM 80GB, ``"NVIDIA A100-PCIE-40GB"`` -> A100 PCIe 40GB.
    A MIG instance (a name containing ``MIG``) gets no entry: it has a fraction of the roofs.
    """
    tokens = _tokens(nvml_name or "")
    words = set(tokens)
    if not words or "mig" in words:
        return None
    joined = " ".join(tokens)
    if "h100" in words:
        if "nvl" in words:
            return _BY_KEY["h100-nvl"]
        if "pcie" in words:
            return _BY_KEY["h100-pcie"]
        return _BY_KEY["h100-sxm"]  # "H100 80GB HBM3", "H100 SXM5 80GB"
    if "h200" in words:
        return _BY_KEY["h200-nvl"] if "nvl" in words else _BY_KEY["h200-sxm"]
    if "a100" in words:
        is_pcie = "pcie" in words
        is_80gb = "80gb" in words or re.search(r"\b80\s*gb\b", joined) is not None
        if is_pcie:
            return _BY_KEY["a100-pcie-80gb" if is_80gb else "a100-pcie-40gb"]
        return _BY_KEY["a100-sxm-80gb" if is_80gb else "a100-sxm-40gb"]
    if "l40s" in words:
        return _BY_KEY["l40s"]
    if tokens == ["l4"]:
        return _BY_KEY["l4"]
    if "4090" in words and "rtx" in words and not words & {"d", "laptop", "mobile"}:
        return _BY_KEY["rtx-4090"]
    if "b200" in words:
        return _BY_KEY["b200"]
    for key in ("mi300x", "mi325x"):  # AMD SMI's market names: "AMD Instinct MI300X"
        if key in words:
            return _BY_KEY[key]
    if "mi250x" in words:  # "AMD Instinct MI250X" (also "MI250X/MI250": the X figures)
        return _BY_KEY["mi250x-gcd"]
    return None


class _PeakSource(Protocol):
    def peak_flop_per_s(self, dtype: str = "fp32") -> float | None: ...


def cpu_datasheet_peaks(info: CpuInfo | _PeakSource) -> dict[str, float]:
    """Datasheet compute roofs of a CPU (``fp32``, ``fp64``, and ``bf16`` where the ISA has it)
    from a :class:`CpuInfo`: physical cores x FLOP per cycle (:func:`cpu_flop_per_cycle`) x
    clock (:func:`pick_clock`); anything else with ``peak_flop_per_s``: its fp32 and fp64. Empty
    when the clock is unknown."""
    if isinstance(info, CpuInfo):
        return dict(cpu_datasheet(info).peaks_flop_per_s)
    peaks: dict[str, float] = {}
    for dtype in ("fp64", "fp32"):
        value = info.peak_flop_per_s(dtype)
        if value:
            peaks[dtype] = float(value)
    return peaks


# --- CPU: FLOP per cycle per ISA, the clock, the datasheet peak ----------------------------------

#: The dtypes a CPU datasheet roof can carry.
CPU_DTYPES = ("fp64", "fp32", "bf16")

#: Where a CPU datasheet clock comes from, best first: the kernel's maximum, the clock measured by a
#: dependent-add chain (gpuscope.probing.peaks), the vendor's boost clock (cpuinfo.BOOST_CLOCKS_MHZ),
#: the current clock /proc/cpuinfo shows (in a VM often the TSC clock: below the real one).
CLOCK_SOURCES = ("cpufreq max", "measured clock", "boost clock table", "cpuinfo")


@dataclass(frozen=True)
class FlopPerCycle:
    """FLOP per cycle per core of one instruction set, per dtype (an FMA counts 2 FLOP; a bf16 dot
    product instruction 2 multiplies and 2 adds per fp32 lane); ``bf16`` None: no bf16 arithmetic
    in the ISA (bf16 then runs as fp32 after conversion: no bf16 roof). ``rule``: the assumption."""

    isa: str
    fp64: int
    fp32: int
    bf16: int | None
    rule: str

    def of(self, dtype: str) -> int | None:
        """FLOP per cycle per core of ``dtype`` (``fp64``, ``fp32``, ``bf16``), None without it."""
        return {"fp64": self.fp64, "fp32": self.fp32, "bf16": self.bf16}.get(dtype)


def cpu_flop_per_cycle(flags: frozenset[str] | set[str], vendor: str = "", machine: str = "x86_64") -> FlopPerCycle:
    """The FLOP-per-cycle row of a CPU's instruction set (``/proc/cpuinfo`` flags and vendor).

    x86 FMA cores are assumed to have two FMA pipes (every server core since Haswell and Zen);
    AMD with AVX-512 but without AVX-VNNI (256-bit) is Zen 4, whose 512-bit ops run on two
    256-bit pipes; AVX512_BF16's VDPBF16PS does twice the FLOP of an fp32 FMA at the same rate;
    AMX's TDPBF16PS does 16x16x32 bf16 multiply-adds every 16 cycles (1024 FLOP/cycle)."""
    fma = "fma" in flags or "avx512f" in flags
    bf16_dot = "avx512_bf16" in flags
    if "avx512f" in flags:
        zen4 = vendor == "AuthenticAMD" and "avx_vnni" not in flags
        lanes32 = 8 if zen4 else 16  # fp32 lanes per FMA pipe
        fp32 = 2 * lanes32 * 2
        bf16 = 2 * fp32 if bf16_dot else None
        isa = "avx512 (Zen 4: 512-bit ops on two 256-bit FMA pipes)" if zen4 else "avx512 (two 512-bit FMA pipes)"
        rule = "2 FMA pipes x " + str(lanes32) + " fp32 lanes x 2 FLOP"
        if "amx_bf16" in flags:
            return FlopPerCycle(
                isa + " + AMX", fp32 // 2, fp32, 1024, rule + "; bf16: AMX TDPBF16PS, 16x16x32 MACs / 16 cycles"
            )
        if bf16_dot:
            rule += "; bf16: AVX512_BF16 dot products, 2 bf16 products per fp32 lane at the FMA rate"
        return FlopPerCycle(isa, fp32 // 2, fp32, bf16, rule)
    if "avx2" in flags and fma:
        return FlopPerCycle("avx2 + fma", 16, 32, None, "2 FMA pipes x 8 fp32 lanes x 2 FLOP; no bf16 arithmetic")
    if "avx" in flags:
        return FlopPerCycle("avx", 8, 16, None, "one 256-bit add and one multiply pipe, no FMA")
    if "sse2" in flags:
        return FlopPerCycle("sse2", 4, 8, None, "one 128-bit add and one multiply pipe")
    if machine in ("aarch64", "arm64") or "asimd" in flags:
        bf16_arm = 32 if "bf16" in flags else None  # BFDOT: 2 products per fp32 lane
        return FlopPerCycle(
            "neon/sve (128-bit)", 8, 16, bf16_arm, "2 FMA pipes x 4 fp32 lanes x 2 FLOP (128-bit assumed)"
        )
    return FlopPerCycle("scalar", 2, 2, None, "one scalar FMA or add per cycle")


def pick_clock(info: CpuInfo, measured_clock_mhz: float | None = None) -> tuple[float | None, str]:
    """``(clock MHz, source)`` of a CPU's datasheet peak (:data:`CLOCK_SOURCES`): the cpufreq
    maximum when the kernel exposes it, else ``measured_clock_mhz`` (a dependent-add chain timed on
    this machine), else the boost clock table, else the clock /proc/cpuinfo shows. ``(None,
    "unknown")`` when none is known."""
    source = info.max_frequency_source
    if info.max_frequency_mhz and source.startswith("cpufreq"):
        return float(info.max_frequency_mhz), "cpufreq max"
    if measured_clock_mhz is not None and measured_clock_mhz > 0:
        return float(measured_clock_mhz), "measured clock"
    if info.max_frequency_mhz and source == "boost clock table":
        return float(info.max_frequency_mhz), "boost clock table"
    clock = info.max_frequency_mhz or info.base_frequency_mhz
    return (float(clock), "cpuinfo") if clock else (None, "unknown")


@dataclass(frozen=True)
class CpuDatasheet:
    """A CPU's datasheet compute roofs: ``cores`` x :class:`FlopPerCycle` x ``clock_mhz``, with
    where the clock came from (:data:`CLOCK_SOURCES`)."""

    model: str
    cores: int
    flop_per_cycle: FlopPerCycle
    clock_mhz: float | None
    clock_source: str
    peaks_flop_per_s: dict[str, float]

    def note(self, dtype: str) -> str:
        """One line: how ``dtype``'s roof was built
        (``2 cores x 32 fp32 FLOP/cycle (avx512 ...) x 3650 MHz (measured clock)``)."""
        per_cycle = self.flop_per_cycle.of(dtype)
        clock = f"{self.clock_mhz:.0f} MHz" if self.clock_mhz else "unknown clock"
        isa = self.flop_per_cycle.isa
        return f"{self.cores} cores x {per_cycle} {dtype} FLOP/cycle ({isa}) x {clock} ({self.clock_source})"

    @property
    def rule(self) -> str:
        """The whole rule in one line, for a results file's device entry."""
        per_cycle = ", ".join(
            f"{dtype} {value}" for dtype in CPU_DTYPES if (value := self.flop_per_cycle.of(dtype)) is not None
        )
        clock = f"{self.clock_mhz:.0f} MHz" if self.clock_mhz else "unknown clock"
        return (
            f"{self.cores} cores x FLOP/cycle ({per_cycle}; {self.flop_per_cycle.isa}: {self.flop_per_cycle.rule}) "
            f"x {clock} ({self.clock_source})"
        )


def cpu_datasheet(info: CpuInfo, measured_clock_mhz: float | None = None) -> CpuDatasheet:
    """The datasheet roofs of ``info``'s CPU: physical cores x FLOP per cycle x the clock
    :func:`pick_clock` chooses (``measured_clock_mhz`` when cpufreq is not exposed)."""
    if info.flags:
        row = cpu_flop_per_cycle(info.flags, info.vendor, info.architecture)
    else:  # no flags read (not Linux): the SIMD width CpuInfo found, no bf16 claim
        fp32 = info.fp32_flop_per_cycle_per_core
        row = FlopPerCycle(info.simd, info.fp64_flop_per_cycle_per_core, fp32, None, "SIMD width from CpuInfo")
    clock_mhz, source = pick_clock(info, measured_clock_mhz)
    cores = info.physical_cores or info.logical_cores
    peaks: dict[str, float] = {}
    if clock_mhz:
        for dtype in CPU_DTYPES:
            per_cycle = row.of(dtype)
            if per_cycle:
                peaks[dtype] = cores * per_cycle * clock_mhz * 1e6
    return CpuDatasheet(info.model, cores, row, clock_mhz, source, peaks)
