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

The engine takes :class:`DistributedOptions` and returns a :class:`RankOutcome`; it prints nothing.
``gpuscope probe --distributed`` (gpuscope.commands.probe) says the progress, writes the file
(``save``, called once before the collectives and once at the end) and chooses the exit code.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from gpuscope.errors import GpuscopeError, ResourceError, UsageError
from gpuscope.probing.cluster import RankReport, collective_records, merge_rank_results
from gpuscope.probing.collective import CollectiveTiming, run_collectives
from gpuscope.probing.environment import DeviceSpec, device_info, first_line, parse_device, resolve_device
from gpuscope.probing.rendezvous import HEARTBEAT_S, Heartbeat, Launch, Liveness, Mailbox, StopSignals
from gpuscope.probing.runner import ProbeRunner
from gpuscope.probing.suite import Suite, load_suite
from gpuscope.schema.core import Detail
from gpuscope.schema.results import Ceiling, Device, Measurement, Results
from gpuscope.schema.suites import OPS, CollectiveOptions

__all__ = ["run_distributed", "DistributedOptions", "RankOutcome", "Launch"]

#: A rank whose heartbeat has not moved for this many seconds is taken as dead.
_DEAD_AFTER_S = 10.0
#: After SIGTERM, how long rank 0 waits for the other ranks' partial results (torchrun gives 30 s).
_STOP_GRACE_S = 6.0
#: Collective sizes when the suite's collective probe names none (bytes).
_DEFAULT_SIZES_BYTES = [2**20, 16 * 2**20]


@dataclass(frozen=True)
class DistributedOptions:
    """What one rank runs: a suite on ``device`` (``cpu`` or ``cuda``: each rank takes
    ``cuda:LOCAL_RANK``), and how rank 0 judges the others."""

    suite: str
    device: str = "cpu"
    memory_fraction: float = 0.5
    telemetry: bool = True
    straggler_margin: float = 0.10  # a fraction below the median ceiling
    rank_timeout_s: float = 900.0  # how long rank 0 waits for the other ranks


@dataclass
class RankOutcome:
    """How this rank's part of the job ended. ``results``: rank 0's merged document (None on the
    other ranks); ``interrupted``: stopped by SIGINT/SIGTERM; ``error``: one line, this rank failed."""

    rank: int
    results: Results | None = None
    interrupted: bool = False
    error: str | None = None


class _Hello(msgspec.Struct, kw_only=True):
    """What each rank says first: where it runs."""

    host: str
    local_rank: int
    device: str
    pid: int
    device_entry: Device | None = None


class _RankResult(msgspec.Struct, kw_only=True):
    """A rank's results at the end of its suite (status ``ok`` or ``partial``)."""

    status: str
    reason: str | None = None
    results: Results | None = None


class _Decision(msgspec.Struct, kw_only=True):
    """Rank 0's word on the collectives (they need every rank)."""

    collectives: bool


def _rank_device(text: str, local_rank: int) -> DeviceSpec:
    spec = parse_device(text)
    if not spec.is_gpu:
        return spec
    if text.strip().lower() != "cuda":
        raise UsageError(
            f"--device {text}: with --distributed use --device cuda (each rank takes cuda:LOCAL_RANK) or cpu"
        )
    return resolve_device(f"cuda:{local_rank}")


def _split_suite(suite: Suite, device: DeviceSpec) -> tuple[Suite, CollectiveOptions | None]:
    """The suite without collective probes (run per rank) and the collective options for this device."""
    local = [spec for spec in suite.probes if spec.kind != "collective"]
    collective = next(
        (
            spec.options
            for spec in suite.probes
            if isinstance(spec.options, CollectiveOptions) and spec.runs_on(device.type)
        ),
        None,
    )
    return dataclasses.replace(suite, probes=local), collective


def run_distributed(
    launch: Launch,
    options: DistributedOptions,
    *,
    save: Callable[[Results], None],
    say: Callable[[str], None] = lambda text: None,
) -> RankOutcome:
    """This rank's part of ``gpuscope probe --distributed``. Rank 0 hands the merged results to
    ``save`` before the collectives and again at the end; ``say`` receives progress lines (every
    rank calls it; the command shows rank 0's). Raises :class:`GpuscopeError` when the job itself
    cannot be reached."""
    import torch
    import torch.distributed as dist

    suite = load_suite(options.suite)
    device = _rank_device(options.device, launch.local_rank)
    local_suite, collective = _split_suite(suite, device)
    if device.is_gpu:
        torch.cuda.set_device(device.index)
    try:
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=options.rank_timeout_s))
    except Exception as exc:  # noqa: BLE001 - rendezvous errors come in many classes
        raise ResourceError(f"--distributed: cannot join the torchrun job ({first_line(exc)})") from None
    store = dist.distributed_c10d._get_default_store()
    mailbox = Mailbox(store, f"gpuscope/probe/{launch.restart}/")
    host = socket.gethostname()
    stop = StopSignals()
    heartbeat = Heartbeat(mailbox, launch.rank).start()
    try:
        hello = _Hello(host=host, local_rank=launch.local_rank, device=device.name, pid=os.getpid())
        mailbox.put(f"hello/{launch.rank}", msgspec.structs.replace(hello, device_entry=device_info(device)))
        liveness = Liveness(mailbox, [r for r in range(launch.world_size) if r != launch.rank])
        say(f"{launch.world_size} ranks; suite {suite.name}; this rank {host} {device.name}")
        job = _Job(launch, options, mailbox, stop, liveness, device, suite, collective, say)
        own = job.run_local(local_suite)
        mailbox.put(f"result/{launch.rank}", own)
        mailbox.bump("done")  # rank 0 rescans the results only when this counter moves
        if launch.rank != 0:
            return job.follow()
        return job.lead(own, save)
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


@dataclass
class _Job:
    """One rank's view of the job while it runs."""

    launch: Launch
    options: DistributedOptions
    mailbox: Mailbox
    stop: StopSignals
    liveness: Liveness
    device: DeviceSpec
    suite: Suite
    collective: CollectiveOptions | None
    say: Callable[[str], None]

    @property
    def backend(self) -> str:
        return "nccl" if self.device.is_gpu else "gloo"

    def run_local(self, suite: Suite) -> _RankResult:
        """Run this rank's suite on a worker thread (so signals cancel it); publish each measurement."""
        published = 0
        rank = self.launch.rank

        def on_measurement(measurement: Measurement) -> None:
            nonlocal published
            published += 1
            self.mailbox.put(f"m/{rank}/{published}", measurement)
            self.mailbox.put(f"mcount/{rank}", published)

        def on_progress(done: int, total: int, label: str) -> None:
            if label != "done":
                self.say(f"[{done + 1}/{total}] {label}")

        runner = ProbeRunner(
            suite, self.device, memory_fraction=self.options.memory_fraction, on_progress=on_progress,
            on_measurement=on_measurement, on_message=lambda message: self.say(f"warning: {message}"),
            telemetry=self.options.telemetry,
        )  # fmt: skip
        cancel = threading.Event()
        finished: list[Results] = []
        raised: list[BaseException] = []

        def work() -> None:
            try:
                finished.append(runner.run(cancel))
            except BaseException as exc:  # noqa: BLE001 - reported in this rank's status
                raised.append(exc)

        thread = threading.Thread(target=work, name="gpuscope-probe", daemon=True)
        thread.start()
        while thread.is_alive():
            thread.join(timeout=0.1)
            if self.stop.event.is_set():
                cancel.set()
            if rank == 0:
                self.liveness.poll(2.0)
        results = finished[0] if finished else runner.snapshot()
        if self.stop.event.is_set():
            reason = f"stopped by {self.stop.name} (torchrun stops every rank when one fails)"
            return _RankResult(status="partial", reason=reason, results=results)
        if raised:
            return _RankResult(status="partial", reason=f"probe error: {first_line(raised[0])}", results=results)
        return _RankResult(status="ok", results=results)

    def follow(self) -> RankOutcome:
        """A rank other than 0: wait for rank 0's decision, then take part in the collectives."""
        import torch.distributed as dist

        rank = self.launch.rank
        if self.stop.event.is_set():
            return RankOutcome(rank, interrupted=True)
        while True:
            decision = self.mailbox.get("decision", _Decision)
            if decision is not None:
                break
            if self.stop.event.is_set():
                return RankOutcome(rank, interrupted=True)
            self.liveness.poll()
            if self.liveness.silent_s(0) > _DEAD_AFTER_S:
                return RankOutcome(rank, error=f"rank {rank}: rank 0 stopped responding; it holds the results file")
            time.sleep(0.1)
        if not decision.collectives:
            return RankOutcome(rank)
        try:
            self.collectives()
        except Exception as exc:  # noqa: BLE001 - a peer died mid-collective
            return RankOutcome(rank, error=f"rank {rank}: collectives failed: {first_line(exc, 300)}")
        dist.destroy_process_group()
        return RankOutcome(rank, interrupted=self.stop.event.is_set())

    def collectives(self, on_result: Callable[[CollectiveTiming], None] | None = None) -> list[CollectiveTiming]:
        options = self.collective
        return run_collectives(
            list(options.ops) if options is not None else list(OPS),
            options.sizes_bytes() if options is not None else list(_DEFAULT_SIZES_BYTES),
            rank=self.launch.rank, world_size=self.launch.world_size, device=self.device.torch_device,
            backend=self.backend, samples=self.suite.settings.samples,
            target_sample_s=self.suite.settings.target_sample_s, should_stop=self.stop.event.is_set,
            on_result=on_result,
        )  # fmt: skip

    def gather(self) -> dict[int, RankReport]:
        """Rank 0: every other rank's report, or why it is missing (dead, timed out, stopped)."""
        mailbox, liveness, stop = self.mailbox, self.liveness, self.stop
        reports: dict[int, RankReport] = {}
        pending = set(range(1, self.launch.world_size))
        deadline = time.monotonic() + self.options.rank_timeout_s
        stop_deadline: float | None = None
        done_seen = -1
        while pending:
            done = mailbox.bump("done", 0)
            for rank in sorted(pending) if done != done_seen else []:
                payload = mailbox.get(f"result/{rank}", _RankResult)
                if payload is not None:
                    report = reports[rank] = _report(rank, payload, mailbox.get(f"hello/{rank}", _Hello))
                    pending.discard(rank)
                    count = len(report.results.measurements) if report.results else 0
                    self.say(f"rank {rank} ({report.host}) {report.status}: {count} measurement(s)")
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
            reports[rank] = report = self._missing(rank)
            self.say(f"rank {rank} ({report.host or 'host unknown'}) missing: {report.reason}")
        return reports

    def _missing(self, rank: int) -> RankReport:
        """A rank that never reported, with the measurements it published and why it is missing."""
        mailbox, liveness = self.mailbox, self.liveness
        hello = mailbox.get(f"hello/{rank}", _Hello)
        count = mailbox.get(f"mcount/{rank}", int) or 0
        published = (mailbox.get(f"m/{rank}/{i}", Measurement) for i in range(1, count + 1))
        measurements = [m for m in published if m is not None]
        silent = liveness.silent_s(rank)
        if not liveness.ever_beat(rank) and hello is None:
            reason = "never started (no heartbeat, no hello)"
        elif silent > 3 * HEARTBEAT_S + 1.0:
            reason = (
                f"died or was killed (no heartbeat for {silent:.0f} s) "
                f"after publishing {len(measurements)} measurement(s)"
            )
        elif self.stop.event.is_set():
            reason = (
                f"had not reported when rank 0 was stopped by {self.stop.name} "
                f"({len(measurements)} measurement(s) so far)"
            )
        else:
            reason = (
                f"did not finish within --rank-timeout {self.options.rank_timeout_s:g} s "
                f"(still running: hung or slow; {len(measurements)} measurement(s) so far)"
            )
        report = _report(rank, _RankResult(status="missing", reason=reason), hello)
        report.measurements = measurements
        return report

    def lead(self, own: _RankResult, save: Callable[[Results], None]) -> RankOutcome:
        """Rank 0: gather, decide on collectives, merge, hand the one results document to ``save``."""
        import torch.distributed as dist

        launch, stop = self.launch, self.stop
        reports = {0: _report(0, own, self.mailbox.get("hello/0", _Hello))}
        reports.update(self.gather())
        ordered = [reports[r] for r in sorted(reports)]
        notes: list[str] = []
        everyone_ok = all(r.status == "ok" for r in ordered) and not stop.event.is_set()
        run_them = everyone_ok and launch.world_size >= 2 and self.collective is not None
        self.mailbox.put("decision", _Decision(collectives=run_them))

        def merged(measurements: list[Measurement] | None = None, ceilings: list[Ceiling] | None = None) -> Results:
            document = merge_rank_results(
                ordered, world_size=launch.world_size, suite=self.suite.ref(), margin=self.options.straggler_margin,
                collective_measurements=measurements, collective_ceilings=ceilings, backend=self.backend, notes=notes,
            )  # fmt: skip
            if self.collective is None:
                document.warnings.append(
                    f"suite {self.suite.name} has no collective probe for {self.device.type}: no network roofs"
                )
            elif not run_them and launch.world_size >= 2:
                document.warnings.append("collectives not measured: they need every rank")
            return document

        save(merged())  # the per-rank results are safe before the collectives start
        measurements: list[Measurement] = []
        ceilings: list[Ceiling] = []
        if run_them:
            self.say(f"collectives over {self.backend}: group sizes up to {launch.world_size}")
            items: list[CollectiveTiming] = []
            try:
                items = self.collectives(
                    on_result=lambda item: self.say(
                        f"collective {item.op} x{item.group_size} {item.size_bytes} B: "
                        f"best {min(item.samples_s or [float('nan')]) * 1e3:.3f} ms"
                    )
                )
            except Exception as exc:  # noqa: BLE001 - a peer died mid-collective
                notes.append(f"collectives failed: {first_line(exc, 300)}")
            if stop.event.is_set():
                notes.append(f"collectives stopped by {stop.name}")
            hosts = {r.rank: r.host for r in ordered}
            versions = _versions(own.results)
            measurements, ceilings = collective_records(
                items, device=self.device.name, host=reports[0].host, hosts_by_rank=hosts, backend=self.backend,
                versions=versions,
            )  # fmt: skip
        document = merged(measurements, ceilings)
        save(document)
        if everyone_ok and not notes:  # every peer is alive: a clean shutdown
            dist.destroy_process_group()
        return RankOutcome(0, results=document, interrupted=stop.event.is_set())


def _versions(results: Results | None) -> Detail:
    """The versions rank 0's own measurements recorded (the collectives ran in the same process)."""
    return next((m.versions for m in (results.measurements if results else []) if m.versions), None)


def _report(rank: int, payload: _RankResult, hello: _Hello | None) -> RankReport:
    return RankReport(
        rank=rank, host=hello.host if hello else None, status=payload.status, results=payload.results,
        reason=payload.reason, local_rank=hello.local_rank if hello else None,
        device=hello.device if hello else None, device_entry=hello.device_entry if hello else None,
    )  # fmt: skip
