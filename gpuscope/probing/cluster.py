"""Multi-rank results: merge the per-rank documents of ``gpuscope probe --distributed`` into one,
flag stragglers, turn collective timings into network roofs, and name the ranks that are missing.

Pure data (no torch, no torch.distributed): :mod:`gpuscope.probing.distributed` gathers the
per-rank results and calls :func:`merge_rank_results`. Layout additions to the results schema
(``docs/cluster.md``): ``host`` and ``rank`` on every device, ceiling, measurement and workload;
measurement ids prefixed ``r<rank>.``; top-level ``distributed`` (world, hosts, each rank's
status) and ``stragglers``; ``straggler`` flags on the ceilings compared.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

import msgspec

from gpuscope.probing.collective import CollectiveTiming, collective_record
from gpuscope.probing.derive import derive_ceilings, derive_workloads, summary_of
from gpuscope.results import empty_results
from gpuscope.schema.core import Detail
from gpuscope.schema.results import (
    Ceiling,
    Device,
    Distributed,
    Measurement,
    RankInfo,
    Results,
    Straggler,
    SuiteRef,
    System,
    Workload,
)

__all__ = [
    "DEFAULT_STRAGGLER_MARGIN",
    "RankReport",
    "collective_records",
    "flag_stragglers",
    "merge_rank_results",
]

#: A rank whose ceiling is more than this fraction below the median of the same ceiling is a straggler.
DEFAULT_STRAGGLER_MARGIN = 0.10

_Entry = TypeVar("_Entry", Device, Ceiling, Measurement, Workload)


@dataclass
class RankReport:
    """What rank 0 knows about one rank at the end of the run.

    ``status``: ``ok`` (finished its suite), ``partial`` (stopped early, e.g. by SIGTERM; its
    results so far are kept) or ``missing`` (died or timed out; ``measurements`` holds what it
    published before, ``reason`` says what happened).
    """

    rank: int
    host: str | None
    status: str
    results: Results | None = None
    reason: str | None = None
    local_rank: int | None = None
    device: str | None = None
    device_entry: Device | None = None
    measurements: list[Measurement] = field(default_factory=list)


def _retag(entries: Iterable[_Entry], report: RankReport, id_map: dict[str, str]) -> list[_Entry]:
    """Copies of ``entries`` placed on the report's host and rank, measurement ids renamed."""
    out = []
    for entry in entries:
        placed = msgspec.structs.replace(entry, host=report.host, rank=report.rank)
        if isinstance(placed, Measurement) and placed.id is not None:
            placed.id = id_map.get(str(placed.id), placed.id)
        if isinstance(placed, (Ceiling, Workload)) and placed.measurement_id is not None:
            placed.measurement_id = id_map.get(str(placed.measurement_id), placed.measurement_id)
        out.append(placed)
    return out


def _rank_document(report: RankReport) -> Results:
    """The rank's own results, or one rebuilt from the measurements it published before it vanished."""
    if report.results is not None:
        return report.results
    measurements = list(report.measurements)
    return empty_results(
        devices=[report.device_entry] if report.device_entry is not None else [],
        measurements=measurements,
        ceilings=derive_ceilings(measurements),
        workloads=derive_workloads(measurements),
    )


def collective_records(
    items: list[CollectiveTiming],
    *,
    device: str,
    host: str | None,
    hosts_by_rank: dict[int, str | None],
    backend: str,
    versions: Detail = None,
) -> tuple[list[Measurement], list[Ceiling]]:
    """Measurements and ``collective`` ceilings (best busbw per op and group size) from the raw
    timings of :func:`gpuscope.probing.collective.run_collectives`.

    The ceilings sit on rank 0 (which is in every group) and list ``group_ranks``/``group_hosts``.
    """
    measurements: list[Measurement] = []
    best: dict[tuple[str, int], Ceiling] = {}
    for number, item in enumerate(items, start=1):
        op, size, n = item.op, item.size_bytes, item.group_size
        ranks = list(item.ranks or range(n))
        hosts = sorted({str(hosts_by_rank.get(r)) for r in ranks})
        parameters: dict[str, Detail] = {"op": op, "backend": backend, "world_size": n, "group_ranks": list(ranks)}
        record = collective_record(item, f"collective {op} {size} B x{n} ranks", device, versions, parameters)
        record = msgspec.structs.replace(record, id=f"c{number:04d}", host=host, rank=0, group_hosts=hosts)
        busbw = record.busbw_bytes_per_s
        if record.status == "ok" and busbw:
            key = (op, n)
            if key not in best or busbw > best[key].value:
                best[key] = Ceiling(
                    device=device, kind="collective", name=f"{op}.busbw.{n}ranks", value=busbw, unit="B/s",
                    measurement_id=record.id, statistic="best", n=record.n, host=host, rank=0, backend=backend,
                    world_size=n, group_ranks=ranks, group_hosts=hosts, size_bytes=size,
                    note=f"nccl-tests busbw, {backend}, {n} ranks on {len(hosts)} host(s), "
                    f"best of {record.n} at {size} B",
                )  # fmt: skip
        measurements.append(record)
    ceilings = [best[key] for key in sorted(best)]
    return measurements, ceilings


def flag_stragglers(results: Results, margin: float = DEFAULT_STRAGGLER_MARGIN) -> list[Straggler]:
    """Mark ceilings more than ``margin`` below the median of the same ceiling on the same device
    model across ranks; returns the ``stragglers`` list (and sets it on ``results``).

    Every compared ceiling gets ``straggler`` (bool), ``median_value`` and ``fraction_of_median``;
    a straggler's device entry and measurement get ``straggler: true``. Collective ceilings are
    shared by a group and not compared.
    """
    models = {(d.host, d.rank, d.device): d.name or d.type for d in results.devices}
    groups: dict[tuple[str, str, str, str | None], list[Ceiling]] = {}
    for ceiling in results.ceilings:
        if ceiling.kind == "collective" or ceiling.rank is None:
            continue
        model = models.get((ceiling.host, ceiling.rank, ceiling.device))
        groups.setdefault((ceiling.kind, ceiling.name, ceiling.unit, model), []).append(ceiling)
    stragglers: list[Straggler] = []
    slow_ranks: set[tuple[str | None, int | None]] = set()
    slow_measurements: set[str | int | None] = set()
    for (kind, name, unit, model), ceilings in groups.items():
        if len({c.rank for c in ceilings}) < 2:
            continue
        median = statistics.median(c.value for c in ceilings)
        if median <= 0:
            continue
        for ceiling in ceilings:
            fraction = ceiling.value / median
            ceiling.median_value, ceiling.fraction_of_median = median, fraction
            ceiling.straggler = fraction < 1.0 - margin
            if ceiling.straggler:
                slow_ranks.add((ceiling.host, ceiling.rank))
                slow_measurements.add(ceiling.measurement_id)
                stragglers.append(
                    Straggler(
                        host=ceiling.host,
                        rank=ceiling.rank,
                        device=ceiling.device,
                        device_name=model,
                        kind=kind,
                        name=name,
                        unit=unit,
                        value=ceiling.value,
                        median=median,
                        fraction_of_median=fraction,
                        below_median_percent=(1.0 - fraction) * 100.0,
                    )  # fmt: skip
                )
    for device in results.devices:
        device.straggler = (device.host, device.rank) in slow_ranks
    for measurement in results.measurements:
        if measurement.id in slow_measurements:
            measurement.straggler = True
    stragglers.sort(key=lambda s: (s.rank or 0, s.kind or "", s.name or ""))
    results.stragglers = stragglers
    results.straggler_margin = margin
    return stragglers


def merge_rank_results(
    reports: list[RankReport],
    *,
    world_size: int,
    suite: SuiteRef | None,
    margin: float = DEFAULT_STRAGGLER_MARGIN,
    collective_measurements: list[Measurement] | None = None,
    collective_ceilings: list[Ceiling] | None = None,
    backend: str | None = None,
    notes: list[str] | None = None,
) -> Results:
    """One results document from every rank's report (in rank order), stragglers flagged.

    ``partial`` is true when a rank is missing or stopped early, or ``notes`` (reasons that
    concern the whole run, e.g. "collectives skipped") are given; ``partial_reason`` names
    every missing rank with its host and what happened.
    """
    by_rank = {report.rank: report for report in reports}
    for rank in range(world_size):
        by_rank.setdefault(
            rank, RankReport(rank=rank, host=None, status="missing", reason="never reported (no hello, no heartbeat)")
        )
    ordered = [by_rank[rank] for rank in sorted(by_rank)]
    first = next((r.results for r in ordered if r.results is not None), None)
    merged = empty_results(system=msgspec.structs.replace(first.system) if first else System(), suite=suite)
    ranks_info: list[RankInfo] = []
    for report in ordered:
        document = _rank_document(report)
        id_map = {str(m.id): f"r{report.rank}.{m.id}" for m in document.measurements if m.id}
        for device in _retag(document.devices, report, id_map):
            device.local_rank = report.local_rank
            merged.devices.append(device)
        merged.measurements.extend(_retag(document.measurements, report, id_map))
        merged.ceilings.extend(_retag(document.ceilings, report, id_map))
        merged.workloads.extend(_retag(document.workloads, report, id_map))
        merged.warnings.extend(f"rank {report.rank} ({report.host or '?'}): {w}" for w in document.warnings)
        ranks_info.append(
            RankInfo(
                rank=report.rank,
                host=report.host,
                local_rank=report.local_rank,
                device=report.device,
                status=report.status,
                reason=report.reason,
                measurements=len(document.measurements),
                duration_s=report.results.duration_s if report.results else None,
                system=report.results.system if report.results else None,
            )  # fmt: skip
        )
    merged.measurements.extend(collective_measurements or [])
    merged.ceilings.extend(collective_ceilings or [])
    flag_stragglers(merged, margin)
    missing = sorted((r for r in ordered if r.status != "ok"), key=lambda r: (r.status != "missing", r.rank))
    reasons = [
        f"rank {r.rank} ({r.host or 'host unknown'}) {r.status}: {r.reason or 'no reason given'}" for r in missing
    ]
    reasons.extend(notes or [])
    merged.partial = bool(reasons)
    merged.partial_reason = "; ".join(reasons) if reasons else None
    hosts = sorted({str(r.host) for r in ordered if r.host})
    merged.distributed = Distributed(
        world_size=world_size, hosts=hosts, nnodes=len(hosts), collective_backend=backend,
        missing_ranks=[r.rank for r in ordered if r.status == "missing"], ranks=ranks_info,
    )  # fmt: skip
    merged.summary = summary_of(merged.measurements)
    return merged
