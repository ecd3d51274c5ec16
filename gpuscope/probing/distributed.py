"""``gpuscope probe --distributed``: one probe suite on every rank of a torchrun job, one results file.

Launch (see ``docs/cluster.md``)::

    torchrun --nnodes N --nproc-per-node G -m gpuscope probe --distributed --device cuda --suite quick -o results.json

Each rank measures its own device (``cuda:LOCAL_RANK``, or ``cpu``) with the suite minus its
collective probes, and publishes every measurement and then its results document in the job's
rendezvous store (the TCPStore torchrun already runs; no network layer of gpuscope's own). Rank 0
collects them, then every rank times the suite's collectives for each group size (2, 4, ... and
the whole world: the network roofs), and rank 0 writes one file with host and rank on every
entry and the stragglers flagged (:mod:`gpuscope.probing.cluster`).

Faults: every rank beats a heartbeat counter in the store. A rank that dies (no heartbeat) or
does not finish within ``--rank-timeout`` is named in ``partial_reason``, with the measurements
it published before; the collectives are then skipped, the file is still written, and rank 0
exits 1. When torchrun stops the job (SIGTERM after a rank failed) every rank cancels its probes,
publishes what it has, and rank 0 writes the file before exiting 130. The results live on rank 0:
if rank 0 itself dies, no file is written.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from gpuscope.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, GpuscopeError, ResourceError, UsageError
from gpuscope.paths import check_output_path
from gpuscope.probing.cluster import RankReport, collective_records, merge_rank_results
from gpuscope.probing.environment import first_line
from gpuscope.probing.rendezvous import HEARTBEAT_S, Heartbeat, Launch, Liveness, Mailbox, StopSignals

__all__ = ["run_distributed", "Launch"]

#: A rank whose heartbeat has not moved for this many seconds is taken as dead.
_DEAD_AFTER_S = 10.0
#: After SIGTERM, how long rank 0 waits for the other ranks' partial results (torchrun gives 30 s).
_STOP_GRACE_S = 6.0


def _rank_device(text: str, local_rank: int) -> Any:
    from gpuscope.probing.environment import parse_device, resolve_device

    spec = parse_device(text)
    if not spec.is_gpu:
        return spec
    if text.strip().lower() != "cuda":
        raise UsageError(
            f"--device {text}: with --distributed use --device cuda (each rank takes cuda:LOCAL_RANK) or cpu"
        )
    return resolve_device(f"cuda:{local_rank}")


def _split_suite(suite: Any, device: Any) -> tuple[Any, dict[str, Any] | None]:
    """The suite without collective probes (run per rank) and the collective options for this device."""
    local = [spec for spec in suite.probes if spec.kind != "collective"]
    collective = next((spec for spec in suite.probes if spec.kind == "collective" and spec.runs_on(device.type)), None)
    return dataclasses.replace(suite, probes=local), (collective.options if collective is not None else None)


def _say(launch: Launch, quiet: bool) -> Callable[[str], None]:
    """Progress lines on stderr, from rank 0 only (other ranks print errors only)."""

    def say(text: str) -> None:
        if launch.rank == 0 and not quiet:
            print(f"[rank {launch.rank}/{launch.world_size}] {text}", file=sys.stderr, flush=True)

    return say


def run_distributed(args: argparse.Namespace) -> int:
    """Entry point of ``gpuscope probe --distributed`` on every rank; returns the exit code."""
    launch = Launch.from_env()
    margin = float(args.straggler_margin)
    if not 0.0 <= margin < 1.0:
        raise UsageError(f"--straggler-margin {margin:g}: expected a fraction in [0, 1), e.g. 0.1 for 10%")
    rank_timeout_s = float(args.rank_timeout)
    if not rank_timeout_s > 0:
        raise UsageError(f"--rank-timeout {rank_timeout_s:g}: expected a positive number of seconds")
    output = Path(args.output)
    if launch.rank == 0:
        check_output_path(output, "on rank 0's host")

    from gpuscope.probing.suite import load_suite

    suite = load_suite(args.suite)
    device = _rank_device(args.device, launch.local_rank)
    local_suite, collective = _split_suite(suite, device)

    import datetime

    import torch
    import torch.distributed as dist

    if device.is_gpu:
        torch.cuda.set_device(device.index)
    try:
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=rank_timeout_s))
    except Exception as exc:  # noqa: BLE001 - rendezvous errors come in many classes
        raise ResourceError(f"--distributed: cannot join the torchrun job ({first_line(exc)})") from None
    store = dist.distributed_c10d._get_default_store()
    mailbox = Mailbox(store, f"gpuscope/probe/{launch.restart}/")
    host = socket.gethostname()
    say = _say(launch, args.quiet)
    stop = StopSignals()
    heartbeat = Heartbeat(mailbox, launch.rank).start()
    try:
        from gpuscope.probing.environment import device_info

        device_entry = msgspec.to_builtins(device_info(device))
        hello = dict(host=host, local_rank=launch.local_rank, device=device.name, pid=os.getpid())
        mailbox.put(f"hello/{launch.rank}", {**hello, "device_entry": device_entry})
        liveness = Liveness(mailbox, [r for r in range(launch.world_size) if r != launch.rank])
        say(f"{launch.world_size} ranks; suite {suite.name}; this rank {host} {device.name}")
        own = _run_local(local_suite, device, args, mailbox, launch, stop, say, liveness)
        mailbox.put(f"result/{launch.rank}", own)
        mailbox.bump("done")  # rank 0 rescans the results only when this counter moves
        if launch.rank != 0:
            return _follow(launch, mailbox, stop, liveness, device, suite, collective)
        code = _lead(
            launch, mailbox, stop, liveness, device, suite, collective, own, output, margin, rank_timeout_s, say
        )
        if getattr(args, "report", None):
            from gpuscope.report import write_report

            print(f"gpuscope: wrote report {write_report(args.report, [output])}", file=sys.stderr)
        return code
    except RuntimeError as exc:  # the store or a peer went away (DistStoreError, DistNetworkError)
        raise GpuscopeError(
            f"rank {launch.rank}: lost contact with the torchrun job ({first_line(exc, 300)})"
        ) from None
    except OSError as exc:
        raise GpuscopeError(
            f"rank {launch.rank}: {exc.filename + ': ' if exc.filename else ''}{exc.strerror or exc}"
        ) from None
    finally:
        heartbeat.stop()
        stop.restore()


def _run_local(
    suite: Any, device: Any, args: argparse.Namespace, mailbox: Mailbox, launch: Launch,
    stop: StopSignals, say: Callable[[str], None], liveness: Liveness,
) -> dict[str, Any]:  # fmt: skip
    """Run this rank's suite on a worker thread (so signals cancel it); publish each measurement."""
    from gpuscope.probing.runner import ProbeRunner

    published = 0

    def on_measurement(record: Any) -> None:  # a Measurement
        nonlocal published
        published += 1
        mailbox.put(f"m/{launch.rank}/{published}", msgspec.to_builtins(record))
        mailbox.put(f"mcount/{launch.rank}", published)

    runner = ProbeRunner(
        suite,
        device,
        memory_fraction=args.memory_fraction,
        on_progress=lambda done, total, label: say(f"[{done + 1}/{total}] {label}") if label != "done" else None,
        on_measurement=on_measurement,
        on_message=lambda message: say(f"warning: {message}"),
        telemetry=not args.no_telemetry,
    )
    cancel = threading.Event()
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["results"] = runner.run(cancel)
        except BaseException as exc:  # noqa: BLE001 - reported in this rank's status
            outcome["error"] = exc

    thread = threading.Thread(target=work, name="gpuscope-probe", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(timeout=0.1)
        if stop.event.is_set():
            cancel.set()
        if launch.rank == 0:
            liveness.poll(2.0)
    results = msgspec.to_builtins(outcome.get("results") or runner.snapshot())
    if stop.event.is_set():
        return {
            "status": "partial",
            "reason": f"stopped by {stop.name} (torchrun stops every rank when one fails)",
            "results": results,
        }
    if "error" in outcome:
        return {"status": "partial", "reason": f"probe error: {first_line(outcome['error'])}", "results": results}
    return {"status": "ok", "reason": None, "results": results}


def _error(text: str) -> int:
    """Say ``text`` on stderr as an error; returns the failure exit code."""
    print(f"gpuscope: error: {text}", file=sys.stderr, flush=True)
    return EXIT_FAILURE


def _follow(
    launch: Launch,
    mailbox: Mailbox,
    stop: StopSignals,
    liveness: Liveness,
    device: Any,
    suite: Any,
    collective: dict[str, Any] | None,
) -> int:
    """A rank other than 0: wait for rank 0's decision, then take part in the collectives."""
    import torch.distributed as dist

    if stop.event.is_set():
        return EXIT_INTERRUPTED
    while True:
        decision = mailbox.get("decision")
        if decision is not None:
            break
        if stop.event.is_set():
            return EXIT_INTERRUPTED
        liveness.poll()
        if liveness.silent_s(0) > _DEAD_AFTER_S:
            return _error(f"rank {launch.rank}: rank 0 stopped responding; it holds the results file")
        time.sleep(0.1)
    if not decision.get("collectives"):
        return EXIT_OK
    try:
        _collectives(launch, device, suite, collective or {}, stop)
    except Exception as exc:  # noqa: BLE001 - a peer died mid-collective
        return _error(f"rank {launch.rank}: collectives failed: {first_line(exc, 300)}")
    dist.destroy_process_group()
    return EXIT_INTERRUPTED if stop.event.is_set() else EXIT_OK


def _collectives(
    launch: Launch,
    device: Any,
    suite: Any,
    options: dict[str, Any],
    stop: StopSignals,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    from gpuscope.probing.collective import run_collectives

    backend = "nccl" if device.is_gpu else "gloo"
    return run_collectives(
        list(options.get("ops") or ["allreduce", "allgather"]), list(options.get("sizes") or [2**20, 16 * 2**20]),
        rank=launch.rank, world_size=launch.world_size, device=device.torch_device, backend=backend,
        samples=suite.settings.samples, target_sample_s=suite.settings.target_sample_s,
        should_stop=stop.event.is_set, on_result=on_result,
    )  # fmt: skip


def _report(rank: int, payload: dict[str, Any], hello: dict[str, Any] | None) -> RankReport:
    hello = hello or {}
    return RankReport(
        rank=rank, host=hello.get("host"), status=payload.get("status", "partial"),
        results=payload.get("results") or None, reason=payload.get("reason"), local_rank=hello.get("local_rank"),
        device=hello.get("device"), device_entry=hello.get("device_entry"),
    )  # fmt: skip


def _gather(
    launch: Launch,
    mailbox: Mailbox,
    stop: StopSignals,
    liveness: Liveness,
    rank_timeout_s: float,
    say: Callable[[str], None],
) -> dict[int, RankReport]:
    """Rank 0: every other rank's report, or why it is missing (dead, timed out, stopped)."""
    reports: dict[int, RankReport] = {}
    pending = set(range(1, launch.world_size))
    deadline = time.monotonic() + rank_timeout_s
    stop_deadline: float | None = None
    done_seen = -1
    while pending:
        done = mailbox.bump("done", 0)
        for rank in sorted(pending) if done != done_seen else []:
            payload = mailbox.get(f"result/{rank}")
            if payload is not None:
                reports[rank] = _report(rank, payload, mailbox.get(f"hello/{rank}"))
                pending.discard(rank)
                say(
                    f"rank {rank} ({reports[rank].host}) {reports[rank].status}: "
                    f"{len((reports[rank].results or {}).get('measurements', []))} measurement(s)"
                )
        done_seen = done
        if not pending:
            break
        liveness.poll(0.2 if stop.event.is_set() else 1.0, pending)
        now = time.monotonic()
        if stop.event.is_set():
            stop_deadline = stop_deadline or now + _STOP_GRACE_S
            if now > stop_deadline or all(liveness.silent_s(r) > 3 * HEARTBEAT_S + 1.0 for r in pending):
                break
        elif all(liveness.silent_s(r) > _DEAD_AFTER_S for r in pending) or now > deadline:
            break
        time.sleep(0.1)
    for rank in sorted(pending):
        hello = mailbox.get(f"hello/{rank}")
        count = mailbox.get(f"mcount/{rank}") or 0
        measurements = [m for m in (mailbox.get(f"m/{rank}/{i}") for i in range(1, int(count) + 1)) if m is not None]
        silent = liveness.silent_s(rank)
        if not liveness.ever_beat(rank) and hello is None:
            reason = "never started (no heartbeat, no hello)"
        elif silent > 3 * HEARTBEAT_S + 1.0:
            reason = (
                f"died or was killed (no heartbeat for {silent:.0f} s) "
                f"after publishing {len(measurements)} measurement(s)"
            )
        elif stop.event.is_set():
            reason = (
                f"had not reported when rank 0 was stopped by {stop.name} ({len(measurements)} measurement(s) so far)"
            )
        else:
            reason = (
                f"did not finish within --rank-timeout {rank_timeout_s:g} s "
                f"(still running: hung or slow; {len(measurements)} measurement(s) so far)"
            )
        report = _report(rank, {"status": "missing", "reason": reason}, hello)
        report.measurements = measurements
        reports[rank] = report
        say(f"rank {rank} ({report.host or 'host unknown'}) missing: {reason}")
    return reports


def _lead(
    launch: Launch, mailbox: Mailbox, stop: StopSignals, liveness: Liveness, device: Any, suite: Any,
    collective: dict[str, Any] | None, own: dict[str, Any], output: Path, margin: float, rank_timeout_s: float,
    say: Callable[[str], None],
) -> int:  # fmt: skip
    """Rank 0: gather, decide on collectives, merge, write the one results file."""
    from gpuscope.fileio import write_json_atomic

    reports = {0: _report(0, own, mailbox.get("hello/0"))}
    reports.update(_gather(launch, mailbox, stop, liveness, rank_timeout_s, say))
    ordered = [reports[r] for r in sorted(reports)]
    notes: list[str] = []
    backend = "nccl" if device.is_gpu else "gloo"
    everyone_ok = all(r.status == "ok" for r in ordered) and not stop.event.is_set()
    run_them = everyone_ok and launch.world_size >= 2 and collective is not None
    mailbox.put("decision", {"collectives": run_them})

    def merged(
        coll_measurements: list[dict[str, Any]] | None = None, coll_ceilings: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        document = merge_rank_results(
            ordered, world_size=launch.world_size, suite=msgspec.to_builtins(suite.ref()), margin=margin,
            collective_measurements=coll_measurements, collective_ceilings=coll_ceilings, backend=backend, notes=notes,
        )  # fmt: skip
        if collective is None:
            document["warnings"].append(
                f"suite {suite.name} has no collective probe for {device.type}: no network roofs"
            )
        elif not run_them and launch.world_size >= 2:
            document["warnings"].append("collectives not measured: they need every rank")
        return document

    write_json_atomic(output, merged())  # the per-rank results are safe before the collectives start
    coll_measurements: list[dict[str, Any]] = []
    coll_ceilings: list[dict[str, Any]] = []
    if run_them:
        say(f"collectives over {backend}: group sizes up to {launch.world_size}")
        items: list[dict[str, Any]] = []
        try:
            items = _collectives(
                launch, device, suite, collective or {}, stop,
                on_result=lambda item: say(
                    f"collective {item['op']} x{item['group_size']} {item['size_bytes']} B: "
                    f"best {min(item['samples_s'] or [float('nan')]) * 1e3:.3f} ms"
                ),
            )  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - a peer died mid-collective
            notes.append(f"collectives failed: {first_line(exc, 300)}")
        if stop.event.is_set():
            notes.append(f"collectives stopped by {stop.name}")
        hosts = {r.rank: r.host for r in ordered}
        versions = next(
            (m["versions"] for m in (own.get("results") or {}).get("measurements", []) if m.get("versions")), None
        )
        coll_measurements, coll_ceilings = collective_records(
            items, device=device.name, host=reports[0].host, hosts_by_rank=hosts, backend=backend, versions=versions
        )
    document = merged(coll_measurements, coll_ceilings)
    write_json_atomic(output, document)
    _print_summary(document, output)
    if everyone_ok and not notes:  # every peer is alive: a clean shutdown
        import torch.distributed as dist

        dist.destroy_process_group()
    if stop.event.is_set():
        return EXIT_INTERRUPTED
    if document["partial"]:
        return _error(f"partial results in {output}: {document['partial_reason']}")
    return EXIT_FAILURE if document["summary"].get("failed") else EXIT_OK


def _print_summary(document: dict[str, Any], output: Path) -> None:
    """Per ceiling name: median over ranks, slowest rank; then stragglers and missing ranks."""
    by_name: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for ceiling in document["ceilings"]:
        by_name.setdefault((ceiling["kind"], ceiling["name"], ceiling["unit"]), []).append(ceiling)

    def fmt(value: float, unit: str) -> str:
        if unit == "FLOP/s":
            return f"{value / 1e12:,.2f} TFLOP/s" if value >= 1e12 else f"{value / 1e9:,.1f} GFLOP/s"
        return f"{value / 1e9:,.2f} GB/s"

    import statistics

    for (kind, name, unit), items in by_name.items():
        values = [c["value"] for c in items]
        slowest = min(items, key=lambda c: c["value"])
        line = f"{kind:<10} {name:<24} median {fmt(statistics.median(values), unit):>16} over {len(items)} rank(s)"
        if len(items) > 1:
            line += f"; slowest {fmt(slowest['value'], unit)} on {slowest.get('host')}/r{slowest.get('rank')}"
        print(line)
    info = document["distributed"]
    print(f"{info['world_size']} rank(s) on {info['nnodes']} host(s); results in {output}")
    for item in document.get("stragglers", []):
        print(
            f"straggler: {item['host']}/r{item['rank']} {item['device']} {item['kind']} {item['name']} "
            f"{fmt(item['value'], item['unit'])} is {item['below_median_percent']:.0f}% below the median "
            f"{fmt(item['median'], item['unit'])}"
        )
    if document["partial"]:
        print(f"partial: {document['partial_reason']}")
