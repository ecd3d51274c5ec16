"""Multi-rank results: merge the per-rank documents of ``gpuscope probe --distributed`` into one,
flag stragglers, turn collective timings into network roofs, and name the ranks that are missing.

Pure data (no torch, no torch.distributed): :mod:`gpuscope.probing.distributed` gathers the
per-rank documents and calls :func:`merge_rank_results`. Layout additions to the results schema
(``docs/cluster.md``): ``host`` and ``rank`` on every device, ceiling, measurement and workload;
measurement ids prefixed ``r<rank>.``; top-level ``distributed`` (world, hosts, each rank's
status) and ``stragglers``; ``straggler`` flags on the ceilings compared.
"""

from __future__ import annotations

import copy
import statistics
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_STRAGGLER_MARGIN",
    "RankReport",
    "group_sizes",
    "collective_records",
    "flag_stragglers",
    "merge_rank_results",
]

#: A rank whose ceiling is more than this fraction below the median of the same ceiling is a straggler.
DEFAULT_STRAGGLER_MARGIN = 0.10


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
    results: dict[str, Any] | None = None
    reason: str | None = None
    local_rank: int | None = None
    device: str | None = None
    device_entry: dict[str, Any] | None = None
    measurements: list[dict[str, Any]] = field(default_factory=list)


def group_sizes(world_size: int) -> list[int]:
    """Collective group sizes measured for ``world_size`` ranks: 2, 4, 8, ... below it, then it."""
    sizes: list[int] = []
    size = 2
    while size < world_size:
        sizes.append(size)
        size *= 2
    if world_size >= 2:
        sizes.append(world_size)
    return sizes


def _retag(entry: dict[str, Any], rank: int, host: str | None, id_map: dict[str, str]) -> dict[str, Any]:
    out = copy.deepcopy(entry)
    out["host"] = host
    out["rank"] = rank
    if out.get("measurement_id") in id_map:
        out["measurement_id"] = id_map[out["measurement_id"]]
    return out


def _rank_document(report: RankReport) -> dict[str, Any]:
    """The rank's own results, or one rebuilt from the measurements it published before it vanished."""
    if report.results:
        return report.results
    import msgspec

    from gpuscope.probing.runner import derive_ceilings, derive_workloads
    from gpuscope.schema.results import Measurement

    measurements = [m for m in report.measurements if isinstance(m, dict)]
    typed = msgspec.convert(measurements, list[Measurement])  # what the rank's runner published
    return {
        "devices": [report.device_entry] if report.device_entry else [],
        "measurements": measurements,
        "ceilings": msgspec.to_builtins(derive_ceilings(typed)),
        "workloads": msgspec.to_builtins(derive_workloads(typed)),
        "warnings": [],
    }


def collective_records(
    items: list[dict[str, Any]],
    *,
    device: str,
    host: str | None,
    hosts_by_rank: dict[int, str | None],
    backend: str,
    versions: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Measurement records and ``collective`` ceilings (best busbw per op and group size) from the
    raw timings of :func:`gpuscope.probing.collective.run_collectives`.

    The ceilings sit on rank 0 (which is in every group) and list ``group_ranks``/``group_hosts``.
    """
    from gpuscope.probing.collective import collective_record

    measurements: list[dict[str, Any]] = []
    best: dict[tuple[str, int], dict[str, Any]] = {}
    for number, item in enumerate(items, start=1):
        op, size, n = item["op"], int(item["size_bytes"]), int(item["group_size"])
        ranks = list(item.get("ranks") or range(n))
        hosts = sorted({str(hosts_by_rank.get(r)) for r in ranks})
        name = f"collective {op} {size} B x{n} ranks"
        record = collective_record(item, n, name, device, backend, versions, group_ranks=ranks)
        record["id"] = f"c{number:04d}"
        record["host"], record["rank"] = host, 0
        record["group_hosts"] = hosts
        if record["status"] == "ok":
            key = (op, n)
            if key not in best or record["busbw_bytes_per_s"] > best[key]["value"]:
                best[key] = dict(
                    device=device, kind="collective", name=f"{op}.busbw.{n}ranks", value=record["busbw_bytes_per_s"],
                    unit="B/s", measurement_id=record["id"], statistic="best", n=record.get("n"), host=host, rank=0,
                    backend=backend, world_size=n, group_ranks=ranks, group_hosts=hosts, size_bytes=size,
                    note=f"nccl-tests busbw, {backend}, {n} ranks on {len(hosts)} host(s), "
                    f"best of {record.get('n')} at {size} B",
                )  # fmt: skip
        measurements.append(record)
    ceilings = [best[key] for key in sorted(best, key=lambda k: (k[0], k[1]))]
    return measurements, ceilings


def flag_stragglers(results: dict[str, Any], margin: float = DEFAULT_STRAGGLER_MARGIN) -> list[dict[str, Any]]:
    """Mark ceilings more than ``margin`` below the median of the same ceiling on the same device
    model across ranks; returns the ``stragglers`` list (and sets it on ``results``).

    Every compared ceiling gets ``straggler`` (bool), ``median_value`` and ``fraction_of_median``;
    a straggler's device entry and measurement get ``straggler: true``. Collective ceilings are
    shared by a group and not compared.
    """
    devices = results.get("devices", [])
    models = {(d.get("host"), d.get("rank"), d.get("device")): d.get("name") or d.get("type") for d in devices}
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for ceiling in results.get("ceilings", []):
        if ceiling.get("kind") == "collective" or ceiling.get("rank") is None:
            continue
        model = models.get((ceiling.get("host"), ceiling.get("rank"), ceiling.get("device")))
        key = (ceiling["kind"], ceiling["name"], ceiling["unit"], model)
        groups.setdefault(key, []).append(ceiling)
    stragglers: list[dict[str, Any]] = []
    slow_ranks: set[tuple[Any, Any]] = set()
    slow_measurements: set[Any] = set()
    for (kind, name, unit, model), ceilings in groups.items():
        if len({c["rank"] for c in ceilings}) < 2:
            continue
        median = statistics.median(float(c["value"]) for c in ceilings)
        if median <= 0:
            continue
        for ceiling in ceilings:
            fraction = float(ceiling["value"]) / median
            ceiling["median_value"] = median
            ceiling["fraction_of_median"] = fraction
            ceiling["straggler"] = fraction < 1.0 - margin
            if ceiling["straggler"]:
                slow_ranks.add((ceiling.get("host"), ceiling["rank"]))
                slow_measurements.add(ceiling.get("measurement_id"))
                stragglers.append(
                    dict(
                        host=ceiling.get("host"),
                        rank=ceiling["rank"],
                        device=ceiling["device"],
                        device_name=model,
                        kind=kind,
                        name=name,
                        unit=unit,
                        value=ceiling["value"],
                        median=median,
                        fraction_of_median=fraction,
                        below_median_percent=(1.0 - fraction) * 100.0,
                    )
                )
    for device in devices:
        device["straggler"] = (device.get("host"), device.get("rank")) in slow_ranks
    for measurement in results.get("measurements", []):
        if measurement.get("id") in slow_measurements:
            measurement["straggler"] = True
    stragglers.sort(key=lambda s: (s["rank"], s["kind"], s["name"]))
    results["stragglers"] = stragglers
    results["straggler_margin"] = margin
    return stragglers


def merge_rank_results(
    reports: list[RankReport],
    *,
    world_size: int,
    suite: dict[str, Any] | None,
    margin: float = DEFAULT_STRAGGLER_MARGIN,
    collective_measurements: list[dict[str, Any]] | None = None,
    collective_ceilings: list[dict[str, Any]] | None = None,
    backend: str | None = None,
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """One results document from every rank's report (in rank order), stragglers flagged.

    ``partial`` is true when a rank is missing or stopped early, or ``notes`` (reasons that
    concern the whole run, e.g. "collectives skipped") are given; ``partial_reason`` names
    every missing rank with its host and what happened.
    """
    from gpuscope.results import new_results

    by_rank = {report.rank: report for report in reports}
    for rank in range(world_size):
        by_rank.setdefault(
            rank, RankReport(rank=rank, host=None, status="missing", reason="never reported (no hello, no heartbeat)")
        )
    ordered = [by_rank[rank] for rank in sorted(by_rank)]
    first = next((r for r in ordered if r.results), None)
    merged = new_results(
        system=copy.deepcopy(first.results.get("system", {})) if first and first.results else {}, suite=suite
    )
    merged["warnings"] = []
    ranks_info: list[dict[str, Any]] = []
    for report in ordered:
        document = _rank_document(report)
        id_map = {m.get("id"): f"r{report.rank}.{m.get('id')}" for m in document.get("measurements", []) if m.get("id")}
        for device in document.get("devices", []):
            entry = _retag(device, report.rank, report.host, id_map)
            entry["local_rank"] = report.local_rank
            merged["devices"].append(entry)
        for measurement in document.get("measurements", []):
            entry = _retag(measurement, report.rank, report.host, id_map)
            entry["id"] = id_map.get(measurement.get("id"), entry.get("id"))
            merged["measurements"].append(entry)
        for key in ("ceilings", "workloads"):
            merged[key].extend(_retag(item, report.rank, report.host, id_map) for item in document.get(key, []))
        for warning in document.get("warnings", []):
            merged["warnings"].append(f"rank {report.rank} ({report.host or '?'}): {warning}")
        info: dict[str, Any] = dict(
            rank=report.rank, host=report.host, local_rank=report.local_rank, device=report.device,
            status=report.status, reason=report.reason, measurements=len(document.get("measurements", [])),
        )  # fmt: skip
        if report.results:
            info["duration_s"] = report.results.get("duration_s")
            info["system"] = report.results.get("system")
        ranks_info.append(info)
    merged["measurements"].extend(collective_measurements or [])
    merged["ceilings"].extend(collective_ceilings or [])
    flag_stragglers(merged, margin)
    missing = sorted((r for r in ordered if r.status != "ok"), key=lambda r: (r.status != "missing", r.rank))
    reasons = [
        f"rank {r.rank} ({r.host or 'host unknown'}) {r.status}: {r.reason or 'no reason given'}" for r in missing
    ]
    reasons.extend(notes or [])
    merged["partial"] = bool(reasons)
    merged["partial_reason"] = "; ".join(reasons) if reasons else None
    hosts = sorted({str(r.host) for r in ordered if r.host})
    merged["distributed"] = {
        "world_size": world_size,
        "hosts": hosts,
        "nnodes": len(hosts),
        "collective_backend": backend,
        "missing_ranks": [r.rank for r in ordered if r.status == "missing"],
        "ranks": ranks_info,
    }
    statuses = [m.get("status") for m in merged["measurements"]]
    merged["summary"] = {s: statuses.count(s) for s in ("ok", "failed", "skipped")}
    return merged
