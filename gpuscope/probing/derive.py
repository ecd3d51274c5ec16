"""Ceilings and roofline points from measurements: pure data, no torch.

:func:`derive_ceilings` keeps the best ok measurement per ceiling name and device (names in
docs/results-schema.md); :func:`derive_workloads` turns every ok workload-role GEMM into a point.
The runner calls both after every measurement; :mod:`gpuscope.probing.cluster` calls them for a
rank that vanished and left only its published measurements.
"""

from __future__ import annotations

from gpuscope.roofline.hierarchy import out_of_order_roofs
from gpuscope.schema.core import detail_map
from gpuscope.schema.results import Ceiling, CeilingKind, CeilingUnit, Measurement, RunSummary, Workload

__all__ = ["derive_ceilings", "derive_workloads", "summary_of", "CEILING_ENERGY_FIELDS"]

#: Copied from a measurement's ``timing`` into its ceiling (gpuscope.telemetry.energy.energy_fields).
CEILING_ENERGY_FIELDS = ("energy_j", "energy_window_s", "energy_method", "energy_unavailable", "flop_per_j")
_ORDER = {"compute": 0, "memory": 1, "transfer": 2, "collective": 3}


def _number(value: object) -> float | None:
    """A number as written (an int stays an int in the file), else None."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _with_energy(ceiling: Ceiling, m: Measurement) -> Ceiling:
    """``ceiling`` with its measurement's energy (joules over its timed samples, or why they are
    unavailable); FLOP/J only on a compute roof (a bandwidth kernel's FLOP/J is no roof)."""
    timing = detail_map(m.timing)
    ceiling.energy_j = _number(timing.get("energy_j"))
    ceiling.energy_window_s = _number(timing.get("energy_window_s"))
    ceiling.energy_method = _text(timing.get("energy_method"))
    ceiling.energy_unavailable = _text(timing.get("energy_unavailable"))
    if ceiling.kind == "compute":
        ceiling.flop_per_j = _number(timing.get("flop_per_j"))
    return ceiling


def _roof(m: Measurement, kind: CeilingKind, name: str, value: float, unit: CeilingUnit) -> Ceiling:
    return Ceiling(
        device=m.device, kind=kind, name=name, value=value, unit=unit, measurement_id=m.id,
        statistic=m.statistic or "best", n=m.n, rank=0,
    )  # fmt: skip


def _ceiling_of(m: Measurement) -> list[Ceiling]:
    """The ceilings ``m`` offers (none, one, or a collective's busbw and algbw), value > 0."""
    p = detail_map(m.parameters)
    dtype, kernel = _text(p.get("dtype")), _text(p.get("kernel"))
    out: list[Ceiling] = []
    if m.kind == "matmul" and p.get("role") == "ceiling" and dtype and m.flop_per_s:
        roof = _roof(m, "compute", dtype, m.flop_per_s, "FLOP/s")
        roof.dtype, roof.library, roof.blas, roof.shape = dtype, m.library, m.implementation, m.name
        roof.note = f"{m.implementation}, {m.name}, best of {m.n}"
        out.append(roof)
    elif m.kind == "peak" and dtype and m.flop_per_s:  # an FMA-chain peak beside the GEMM roof (gpuscope.probing.peaks)
        roof = _roof(m, "compute", f"{dtype}.fma", m.flop_per_s, "FLOP/s")
        roof.dtype, roof.kernel, roof.library, roof.implementation = dtype, kernel, m.library, m.implementation
        roof.note = f"FMA peak: {m.implementation}, best of {m.n}"
        out.append(roof)
    elif m.kind == "memory" and m.level and kernel and m.bytes_per_s:
        roof = _roof(m, "memory", f"{m.level}.{kernel}", m.bytes_per_s, "B/s")
        roof.level, roof.kernel, roof.implementation = m.level, kernel, m.implementation
        roof.footprint_bytes = _number(p.get("footprint_bytes"))
        roof.note = f"STREAM byte count, {m.implementation}, working set {p.get('footprint_bytes')} B"
        out.append(roof)
    elif m.kind == "transfer" and m.ceiling_name and m.bytes_per_s:
        roof = _roof(m, "transfer", m.ceiling_name, m.bytes_per_s, "B/s")
        roof.size_bytes = _number(p.get("size_bytes"))
        out.append(roof)
    elif m.kind == "collective":
        for bandwidth, value in (("busbw", m.busbw_bytes_per_s), ("algbw", m.algbw_bytes_per_s)):
            if value:
                roof = _roof(m, "collective", f"{p.get('op')}.{bandwidth}", value, "B/s")
                roof.backend, roof.world_size = _text(p.get("backend")), _count(p.get("world_size"))
                roof.size_bytes = _number(p.get("size_bytes"))
                out.append(roof)
    return [ceiling for ceiling in out if ceiling.value > 0]


def derive_ceilings(measurements: list[Measurement]) -> list[Ceiling]:
    """The best ok measurement per ceiling name and device (see docs/results-schema.md for the names)."""
    best: dict[tuple[str, str], tuple[Ceiling, Measurement]] = {}
    libraries: dict[tuple[str, str], dict[str, float | None]] = {}
    for m in measurements:
        if m.status != "ok":
            continue
        for ceiling in _ceiling_of(m):
            key = (m.device, ceiling.name)
            if key not in best or ceiling.value > best[key][0].value:
                best[key] = (ceiling, m)
            if ceiling.kind == "compute" and m.library:  # how each GEMM library did: which BLAS won, by how much
                per = libraries.setdefault(key, {})
                per[m.library] = max(per.get(m.library) or 0.0, m.flop_per_s or 0.0)
    out = []
    for key, (ceiling, m) in best.items():
        if ceiling.kind == "compute" and key in libraries:
            ceiling.libraries_flop_per_s = libraries[key]
        out.append(_with_energy(ceiling, m))
    _flag_out_of_order(out)
    return sorted(out, key=lambda c: (_ORDER[c.kind], c.name))


def _flag_out_of_order(ceilings: list[Ceiling]) -> None:
    """Set ``out_of_order`` on each memory ceiling slower than a farther level of its kernel."""
    by_device: dict[str, dict[str, Ceiling]] = {}
    for ceiling in ceilings:
        if ceiling.kind == "memory":
            by_device.setdefault(ceiling.device, {})[ceiling.name] = ceiling
    for named in by_device.values():
        flags = out_of_order_roofs({name: ceiling.value for name, ceiling in named.items()})
        for name, ceiling in named.items():
            ceiling.out_of_order = flags.get(name)


def derive_workloads(measurements: list[Measurement]) -> list[Workload]:
    """Roofline points: every ok workload-role GEMM (median time, p10/p90, N)."""
    out = []
    for m in measurements:
        p = detail_map(m.parameters)
        if m.status != "ok" or p.get("role") != "workload" or not m.time_median_s:
            continue
        flops, nbytes, time_s, rule = m.flops or 0.0, m.bytes or 0.0, m.time_median_s, m.counting_rule
        workload = Workload(
            name=m.workload_name or m.name or "", device=m.device, flops=flops, bytes=nbytes,
            bytes_rule=_text(detail_map(rule).get("bytes") if isinstance(rule, dict) else rule), time_s=time_s,
            time_p10_s=m.time_p10_s, time_p90_s=m.time_p90_s, n=m.n, flop_per_s=flops / time_s,
            bytes_per_s=nbytes / time_s, intensity_flop_per_byte=flops / nbytes if nbytes else None,
            dtype=_text(p.get("dtype")), cache_state="warm", source="probe", measurement_id=m.id,
        )  # fmt: skip
        out.append(workload)
    return out


def summary_of(measurements: list[Measurement]) -> RunSummary:
    """The measurements counted by status."""
    statuses = [m.status for m in measurements]
    return RunSummary(ok=statuses.count("ok"), failed=statuses.count("failed"), skipped=statuses.count("skipped"))
