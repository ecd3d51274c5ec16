"""Static facts about the host CPU: model, cores, SIMD features, caches and the datasheet
compute peak (cores x SIMD FLOP per cycle x clock). Reads /proc/cpuinfo and /sys on Linux;
elsewhere the fields it cannot find are ``None``."""

from __future__ import annotations

import functools
import os
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CacheLevel", "CpuInfo", "cpu_info", "parse_cache_size", "BOOST_CLOCKS_MHZ", "boost_clock_mhz"]

#: Maximum (boost) clocks of common server CPUs, MHz, from the vendors' product pages; used when
#: the kernel does not expose cpufreq (most VMs). Matched as a whole word in the model name.
BOOST_CLOCKS_MHZ: tuple[tuple[str, float], ...] = (
    ("EPYC 7763", 3500),
    ("EPYC 7713", 3675),
    ("EPYC 7543", 3700),
    ("EPYC 7B13", 3500),
    ("EPYC 7R13", 3600),
    ("EPYC 7V13", 3675),
    ("EPYC 7742", 3400),
    ("EPYC 7R32", 3300),
    ("EPYC 9654", 3700),
    ("EPYC 9R14", 3700),
    ("EPYC 9B14", 3700),
    ("EPYC 9554", 3750),
    ("EPYC 9V84", 3700),
    ("Xeon Platinum 8480", 3800),
    ("Xeon Platinum 8488C", 3800),
    ("Xeon Platinum 8375C", 3500),
    ("Xeon Platinum 8259CL", 3500),
    ("Xeon Platinum 8275CL", 3600),
    ("Xeon Platinum 8358", 3400),
    ("Xeon Platinum 8370C", 3500),
    ("Xeon Platinum 8272CL", 3700),
    ("Xeon Gold 6248", 3900),
    ("Xeon Platinum 8468", 3800),
    ("Xeon Platinum 8462Y", 4100),
)


def boost_clock_mhz(model: str) -> float | None:
    """The table's maximum clock (MHz) for a CPU model name, or None when it is not listed."""
    for name, mhz in BOOST_CLOCKS_MHZ:
        if re.search(r"(?<![\w])" + re.escape(name) + r"(?![\w])", model, flags=re.IGNORECASE):
            return mhz
    return None


_SYS_CPU = Path("/sys/devices/system/cpu")


@dataclass(frozen=True)
class CacheLevel:
    level: int  # 1, 2, 3
    kind: str  # "Data", "Instruction", "Unified"
    size_bytes: int  # one instance of the cache
    shared_by_logical_cpus: int  # how many logical CPUs share one instance
    instances: int  # how many instances this machine has (e.g. one L2 per core)

    @property
    def total_bytes(self) -> int:
        return self.size_bytes * self.instances


@dataclass(frozen=True)
class CpuInfo:
    model: str
    vendor: str
    architecture: str  # platform.machine(): x86_64, aarch64
    logical_cores: int
    physical_cores: int | None
    base_frequency_mhz: float | None
    max_frequency_mhz: float | None
    flags: frozenset[str] = field(default_factory=frozenset)
    simd: str = "scalar"  # widest vector ISA: avx512, avx2, avx, sse2, neon, sve, scalar
    fp32_flop_per_cycle_per_core: int = 2
    caches: tuple[CacheLevel, ...] = ()
    #: where ``max_frequency_mhz`` came from: "cpufreq cpuinfo_max_freq", "boost clock table",
    #: "current clock in /proc/cpuinfo; the maximum is not exposed", or "unknown"
    max_frequency_source: str = "unknown"

    @property
    def fp64_flop_per_cycle_per_core(self) -> int:
        return max(1, self.fp32_flop_per_cycle_per_core // 2)

    @property
    def last_level_cache_bytes(self) -> int | None:
        """Total size of the largest cache level (all instances), or None when unknown."""
        data_levels = [cache for cache in self.caches if cache.kind != "Instruction"]
        if not data_levels:
            return None
        top = max(cache.level for cache in data_levels)
        return sum(cache.total_bytes for cache in data_levels if cache.level == top)

    def cache_bytes(self, level: int) -> int | None:
        """Per-core (per-instance) size of data cache ``level``, or None when unknown."""
        for cache in self.caches:
            if cache.level == level and cache.kind != "Instruction":
                return cache.size_bytes
        return None

    @property
    def clock_source(self) -> str:
        """Which clock the datasheet peak uses, and where it came from (one line)."""
        if self.max_frequency_mhz:
            return f"{self.max_frequency_mhz:.0f} MHz ({self.max_frequency_source})"
        if self.base_frequency_mhz:
            return f"{self.base_frequency_mhz:.0f} MHz (base clock: the maximum is unknown)"
        return "clock unknown"

    def peak_flop_per_s(self, dtype: str = "fp32") -> float | None:
        """Datasheet peak (FLOP/s): physical cores x SIMD FLOP/cycle x max clock (see
        :attr:`clock_source`). None without a clock."""
        clock_mhz = self.max_frequency_mhz or self.base_frequency_mhz
        if clock_mhz is None:
            return None
        cores = self.physical_cores or self.logical_cores
        per_cycle = self.fp32_flop_per_cycle_per_core if dtype == "fp32" else self.fp64_flop_per_cycle_per_core
        return cores * per_cycle * clock_mhz * 1e6


def parse_cache_size(text: str) -> int | None:
    """``"32K"``, ``"1024 KB"``, ``"32 MiB"`` -> bytes."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(i?B)?\s*", text, flags=re.IGNORECASE)
    if not match:
        return None
    scale = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[match.group(2).upper()]
    return int(match.group(1)) * scale


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _cpulist_count(text: str) -> int:
    count = 0
    for part in text.split(","):
        if "-" in part:
            low, high = part.split("-")
            count += int(high) - int(low) + 1
        elif part.strip():
            count += 1
    return count


def _read_caches(sys_cpu: Path, logical_cores: int) -> tuple[CacheLevel, ...]:
    caches: list[CacheLevel] = []
    for index_dir in sorted((sys_cpu / "cpu0" / "cache").glob("index*")):
        level, kind, size = (_read(index_dir / name) for name in ("level", "type", "size"))
        shared = _read(index_dir / "shared_cpu_list")
        if not (level and kind and size):
            continue
        size_bytes = parse_cache_size(size)
        if size_bytes is None:
            continue
        shared_by = _cpulist_count(shared) if shared else 1
        caches.append(
            CacheLevel(
                level=int(level),
                kind=kind,
                size_bytes=size_bytes,
                shared_by_logical_cpus=shared_by,
                instances=max(1, logical_cores // max(1, shared_by)),
            )
        )
    return tuple(caches)


def _simd(flags: frozenset[str], machine: str, vendor: str = "") -> tuple[str, int]:
    """Widest vector ISA and fp32 FLOP per cycle per core (two FMA pipes assumed where FMA exists,
    which holds for server x86 cores since Haswell/Zen; a datasheet roof, not a measurement)."""
    if "avx512f" in flags:
        if vendor == "AuthenticAMD" and "avx_vnni" not in flags:
            return "avx512", 2 * 8 * 2  # Zen 4 runs 512-bit ops on 256-bit pipes
        return "avx512", 2 * 16 * 2
    if "avx2" in flags and "fma" in flags:
        return "avx2", 2 * 8 * 2
    if "avx" in flags:
        return "avx", 8 + 8  # one add and one multiply pipe
    if "sse2" in flags:
        return "sse2", 4 + 4
    if "sve" in flags:
        return "sve", 2 * 4 * 2  # 128-bit minimum vector length assumed
    if machine in ("aarch64", "arm64") or "asimd" in flags:
        return "neon", 2 * 4 * 2
    return "scalar", 2


@functools.lru_cache(maxsize=1)
def cpu_info() -> CpuInfo:
    """Facts about this machine's CPU (cached; they do not change while running)."""
    return read_cpu_info(Path("/proc/cpuinfo"), _SYS_CPU)


def read_cpu_info(proc_cpuinfo: Path, sys_cpu: Path) -> CpuInfo:
    """Parse CPU facts from the given files (separate from :func:`cpu_info` for tests)."""
    logical = os.cpu_count() or 1
    text = _read(proc_cpuinfo) or ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    flags = frozenset((fields.get("flags") or fields.get("Features") or "").split())
    model = fields.get("model name") or fields.get("Model") or platform.processor() or "unknown CPU"
    vendor = fields.get("vendor_id") or fields.get("CPU implementer") or "unknown"
    physical: int | None = None
    cores_per_socket = fields.get("cpu cores")
    if cores_per_socket and cores_per_socket.isdigit():
        sockets = len({line.split(":")[1].strip() for line in text.splitlines() if line.startswith("physical id")}) or 1
        physical = int(cores_per_socket) * sockets
    max_mhz, max_source = None, "unknown"
    max_khz = _read(sys_cpu / "cpu0" / "cpufreq" / "cpuinfo_max_freq")
    if max_khz and max_khz.isdigit():
        max_mhz, max_source = int(max_khz) / 1000, "cpufreq cpuinfo_max_freq"
    elif boost_clock_mhz(model) is not None:
        max_mhz, max_source = boost_clock_mhz(model), "boost clock table"
    else:
        current = []
        for line in text.splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() == "cpu MHz":
                try:
                    current.append(float(value))
                except ValueError:
                    pass
        if current:
            max_mhz = max(current)
            max_source = "current clock in /proc/cpuinfo; the maximum is not exposed"
    base_mhz = None
    base_khz = _read(sys_cpu / "cpu0" / "cpufreq" / "base_frequency")
    if base_khz and base_khz.isdigit():
        base_mhz = int(base_khz) / 1000
    elif fields.get("cpu MHz"):
        try:
            base_mhz = float(fields["cpu MHz"])
        except ValueError:
            base_mhz = None
    machine = platform.machine()
    simd, per_cycle = _simd(flags, machine, vendor)
    return CpuInfo(
        model=model,
        vendor=vendor,
        architecture=machine,
        logical_cores=logical,
        physical_cores=physical,
        base_frequency_mhz=base_mhz,
        max_frequency_mhz=max_mhz,
        flags=flags,
        simd=simd,
        fp32_flop_per_cycle_per_core=per_cycle,
        caches=_read_caches(sys_cpu, logical),
        max_frequency_source=max_source,
    )
