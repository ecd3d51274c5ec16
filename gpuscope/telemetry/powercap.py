"""CPU energy from RAPL through the Linux powercap interface (``/sys/class/powercap``).

Each RAPL zone is a folder ``intel-rapl:N`` (a CPU package; AMD Zen exposes the same names)
with ``name`` (``package-0``), ``energy_uj`` (a cumulative counter, microjoules) and
``max_energy_range_uj`` (where the counter wraps to 0). Sub-zones ``intel-rapl:N:M`` are the
package's ``core``, ``uncore`` and ``dram`` domains. gpuscope reads the package zones and their
``dram`` sub-zones: core and uncore are parts of the package and would count twice.

Reading costs one small file read per domain (microseconds). Since Linux 5.10 ``energy_uj`` is
readable by root only (CVE-2020-8694): a permission error becomes an :class:`Unavailable`
with the remedy, never a zero. ``root`` is configurable so tests run against a fake tree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gpuscope.telemetry.values import Reason, Unavailable

__all__ = ["POWERCAP_ROOT", "RaplDomain", "RaplReader", "RaplReading", "counter_delta_uj"]

POWERCAP_ROOT = "/sys/class/powercap"
_PERMISSION_REMEDY = (
    "energy_uj is readable by root only since Linux 5.10; run as root or `chmod o+r` the energy_uj files"
)


@dataclass(frozen=True)
class RaplDomain:
    """One RAPL counter: ``label`` is ``"package-0"`` or ``"package-0/dram"``."""

    label: str
    kind: str  # "package" | "dram"
    path: Path  # the zone folder
    max_energy_range_uj: int


@dataclass(frozen=True)
class RaplReading:
    """One read of every domain's counter (microjoules) at ``time_s`` (perf_counter)."""

    time_s: float
    energy_uj: dict[str, int]


def counter_delta_uj(before_uj: int, after_uj: int, max_energy_range_uj: int) -> int:
    """Microjoules between two reads of a counter that wraps to 0 after ``max_energy_range_uj``
    (at most one wrap between the reads)."""
    if after_uj >= before_uj:
        return after_uj - before_uj
    return after_uj + max_energy_range_uj - before_uj


def _read_int(path: Path) -> int:
    return int(path.read_text(encoding="ascii").strip())


class RaplReader:
    """Reads the RAPL package and DRAM counters under ``root`` (default ``/sys/class/powercap``).

    :meth:`open` returns None when at least one domain can be read, else an :class:`Unavailable`
    (``"no powercap interface"`` when the folder is missing)."""

    def __init__(self, root: str | os.PathLike[str] = POWERCAP_ROOT) -> None:
        self.root = Path(root)
        self.domains: list[RaplDomain] = []

    def open(self) -> Unavailable | None:
        """Find the domains and check they can be read."""
        if not self.root.is_dir():
            return Unavailable(Reason.NOT_SUPPORTED, f"no powercap interface ({self.root} does not exist)")
        zones = sorted(
            path
            for path in self.root.iterdir()
            if path.name.startswith(("intel-rapl:", "amd-rapl:")) and path.name.count(":") == 1
        )
        if not zones:
            return Unavailable(Reason.NOT_SUPPORTED, f"no powercap interface (no RAPL zones in {self.root})")
        domains: list[RaplDomain] = []
        denied: list[str] = []
        for zone in zones:
            candidates = [(zone, "package")]
            for sub in sorted(zone.glob(zone.name + ":*")):
                try:
                    if (sub / "name").read_text(encoding="ascii").strip() == "dram":
                        candidates.append((sub, "dram"))
                except OSError:
                    continue
            package_name = self._name(zone)
            for path, kind in candidates:
                try:
                    _read_int(path / "energy_uj")
                    maximum = _read_int(path / "max_energy_range_uj")
                except PermissionError:
                    denied.append(str(path / "energy_uj"))
                    continue
                except (OSError, ValueError):
                    continue
                label = package_name if kind == "package" else f"{package_name}/dram"
                domains.append(RaplDomain(label, kind, path, maximum))
        self.domains = domains
        if domains:
            return None
        if denied:
            return Unavailable(Reason.NO_PERMISSION, f"cannot read {denied[0]}: {_PERMISSION_REMEDY}")
        return Unavailable(Reason.NOT_SUPPORTED, f"no readable RAPL energy counter in {self.root}")

    @staticmethod
    def _name(zone: Path) -> str:
        try:
            return (zone / "name").read_text(encoding="ascii").strip() or zone.name
        except OSError:
            return zone.name

    def read(self, time_s: float) -> RaplReading:
        """Every domain's counter now. Raises OSError when a counter cannot be read."""
        return RaplReading(time_s, {domain.label: _read_int(domain.path / "energy_uj") for domain in self.domains})

    def joules_between(self, before: RaplReading, after: RaplReading) -> dict[str, float]:
        """Joules per domain between two reads, wrap-around handled."""
        result: dict[str, float] = {}
        for domain in self.domains:
            if domain.label in before.energy_uj and domain.label in after.energy_uj:
                delta = counter_delta_uj(
                    before.energy_uj[domain.label], after.energy_uj[domain.label], domain.max_energy_range_uj
                )
                result[domain.label] = delta * 1e-6
        return result
