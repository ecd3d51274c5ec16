"""The energy roofline (Choi, Bedard, Fowler, Vuduc, "A Roofline Model of Energy", IPDPS 2013).

Energy of work with F FLOPs moving Q bytes: ``E = F * eps_flop + Q * eps_byte`` (joules), so at
arithmetic intensity I = F/Q the attainable energy efficiency is

    FLOP/J(I) = 1 / (eps_flop + eps_byte / I)

rising with I towards ``1 / eps_flop``; the energy balance point (where the two terms are equal)
is ``I = eps_byte / eps_flop``, generally not the time ridge point.

gpuscope measures the two costs from probe ceilings that carry energy: ``eps_flop`` = mean power
during the compute ceiling / its FLOP/s, ``eps_byte`` = mean power during the DRAM ceiling / its
bytes/s. Constant (idle) power is folded into both, as the ceilings measure the whole device;
Choi et al. model it as a separate term. The lowest cost per device wins (the best ceiling).
Pure Python, no torch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpuscope.schema.results import Ceiling

__all__ = ["EnergyRoofs", "attainable_flop_per_j", "energy_balance_flop_per_byte", "energy_roofs_from_ceilings"]


@dataclass(frozen=True)
class EnergyRoofs:
    """Energy costs of one device: joules per FLOP (of ``dtype``) and joules per DRAM byte."""

    device: str
    host: str | None
    j_per_flop: float
    j_per_byte: float
    compute_ceiling: str  # e.g. "fp32"
    memory_ceiling: str  # e.g. "dram.triad"

    @property
    def peak_flop_per_j(self) -> float:
        return 1.0 / self.j_per_flop

    @property
    def balance_flop_per_byte(self) -> float:
        return energy_balance_flop_per_byte(self.j_per_flop, self.j_per_byte)


def attainable_flop_per_j(intensity_flop_per_byte: float, j_per_flop: float, j_per_byte: float) -> float:
    """``1 / (j_per_flop + j_per_byte / I)``: the energy roofline at intensity I (FLOP/J)."""
    if intensity_flop_per_byte <= 0 or j_per_flop <= 0 or j_per_byte < 0:
        raise ValueError("intensity and J/FLOP must be > 0, J/byte >= 0")
    return 1.0 / (j_per_flop + j_per_byte / intensity_flop_per_byte)


def energy_balance_flop_per_byte(j_per_flop: float, j_per_byte: float) -> float:
    """Intensity where moving bytes and computing cost the same energy: ``j_per_byte / j_per_flop``."""
    return j_per_byte / j_per_flop


def _power_w(ceiling: Ceiling) -> float | None:
    joules, window = ceiling.energy_j, ceiling.energy_window_s
    return joules / window if joules is not None and window is not None and joules > 0 and window > 0 else None


def energy_roofs_from_ceilings(ceilings: Iterable[Ceiling]) -> list[EnergyRoofs]:
    """Energy roofs per (host, device) from results ``ceilings`` entries that carry ``energy_j`` and
    ``energy_window_s``: the lowest J/FLOP of the compute ceilings and the lowest J/byte of the
    DRAM ceilings. Devices lacking either are left out."""
    best: dict[tuple[str | None, str], dict[str, tuple[float, str]]] = {}
    for ceiling in ceilings:
        power, value = _power_w(ceiling), ceiling.value
        name, kind = ceiling.name, ceiling.kind
        dram = kind == "memory" and name.split(".", 1)[0].lower() in ("dram", "hbm")
        if power is None or value is None or value <= 0 or (kind != "compute" and not dram):
            continue
        slot = best.setdefault((ceiling.host, ceiling.device), {})
        cost, per = power / value, "flop" if kind == "compute" else "byte"
        if per not in slot or cost < slot[per][0]:
            slot[per] = (cost, name)
    return [
        EnergyRoofs(device, host, slot["flop"][0], slot["byte"][0], slot["flop"][1], slot["byte"][1])
        for (host, device), slot in sorted(best.items(), key=lambda item: (str(item[0][0]), item[0][1]))
        if "flop" in slot and "byte" in slot
    ]
