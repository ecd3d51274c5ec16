"""GPU acceptance run: one command on a machine with an NVIDIA GPU and no network.

    python benchmarks/gpu_acceptance.py OUTPUT_FOLDER [--device cuda:0] [--python PYTHON]
                                         [--budget-s 360]

Read ``OUTPUT_FOLDER/SUMMARY.txt`` first: one screen, the verdict (PASS/FAIL) on its first
line, then every reason it failed, then the ceilings with the probe's B/s next to the GPU's own
DRAM counter over the same window. It is written at the start and rewritten after every step,
so a run cut short still leaves one.

Steps, all inside a hard total budget (``--budget-s``, default 6 minutes, doctor included): a
step that would overrun is interrupted (SIGINT: ``gpuscope probe`` writes partial results),
then killed; what it wrote is kept and the run fails.

1. ``nvidia-smi`` (nvidia-smi.txt; ``amd-smi static`` on a ROCm machine, amd-smi.txt) and
   ``gpuscope doctor`` (doctor.txt, doctor.json);
2. ``gpuscope log --interval 0.2`` in the background for the whole run (telemetry.jsonl);
3. ``gpuscope probe --suite quick`` then ``--suite transformer`` (quick.json, transformer.json);
   quick runs the Triton kernels too (gpuscope.probing.triton_kernels: FMA peaks, L2 and DRAM
   read/copy/triad with the repetition inside the kernel);
4. checks. The run FAILS (exit 1) when: doctor exits non-zero or reports a problem (``!!``);
   the probed GPU has no power, memory-used or SM-clock reading; every metric of a GPU is an
   error; a results file is missing, partial or has a failed measurement; any required ceiling
   is missing; on a GPU, a ``dram.*`` ceiling's B/s and the GPU's DRAM counter during it differ
   by more than 10 %, or an ``l2.*`` ceiling shows more than a little DRAM traffic (or the
   counter could not be read), the same for the Triton kernels' own L2/DRAM measurements, or no
   Triton kernel ran; an H200 misses a target; a step overran the budget.

CPU check of the failure logic (tests/test_gpu_contact_acceptance.py): ``--device cpu --fake
SCENARIO --suite PATH --require NAME,...`` runs a tiny suite on the CPU with the fake NVML
(``GPUSCOPE_FAKE_NVML=SCENARIO``) and skips nvidia-smi and the CUDA check.

Needs gpuscope, torch, numpy, psutil, nvidia-ml-py and msgspec (no Textual, no plotext;
docs/gpu-runs/README.md says how to carry msgspec to a GPU machine).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: name -> (minimum value, unit) on an H200 (issue 12 targets).
H200_TARGETS = {
    "bf16": (790e12, "FLOP/s"),
    "fp8": (1400e12, "FLOP/s"),
    "dram.copy": (4.3e12, "B/s"),
    "h2d.pinned": (50e9, "B/s"),
    "d2h.pinned": (50e9, "B/s"),
}
QUICK_REQUIRED = (
    "fp64",
    "fp32",
    "tf32",
    "bf16",
    "fp16",
    "dram.copy",
    "dram.triad",
    "dram.read",
    "l2.copy",
    "h2d.pinned",
    "d2h.pinned",
    "h2d.pageable",
    "d2h.pageable",
    "fp64.fma",
    "fp32.fma",
)
TRANSFORMER_REQUIRED = ("bf16", "dram.copy")
#: GpuSample fields the probed GPU must report (in the log and during the probes).
READINGS = ("power_w", "memory_used_bytes", "sm_clock_mhz")
#: Metrics read per sample (static facts such as max clocks do not count as readings).
LIVE_METRICS = READINGS + (
    "memory_clock_mhz",
    "utilization_percent",
    "temperature_gpu_c",
    "energy_j",
    "sm_activity_percent",
    "dram_bandwidth_bytes_per_s",
    "pcie_tx_bytes_per_s",
    "pcie_rx_bytes_per_s",
)
DRAM_AGREEMENT = 0.10  # dram.*: the GPU's DRAM counter within 10 % of the probe's B/s
L2_DRAM_NEAR_ZERO = 0.10  # l2.*: DRAM traffic below 10 % of the probe's B/s
RESERVE_S = 15.0  # kept back from the budget for the checks and the summary
SUMMARY_LINES = 40


@dataclass
class Run:
    """What the run found so far; :func:`write_summary` renders it."""

    out: Path
    device: str
    budget_s: float
    started: float = field(default_factory=time.monotonic)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    finished: bool = False

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def remaining_s(self) -> float:
        return self.budget_s - self.elapsed_s()

    def fail(self, message: str) -> None:
        self.failures.append(message)
        print(f"gpu_acceptance: FAILED: {message}", file=sys.stderr, flush=True)


def step(run: Run, message: str) -> None:
    run.steps.append(f"{run.elapsed_s():5.0f} s  {message}")
    print(f"gpu_acceptance: {time.strftime('%H:%M:%S')} {message}", flush=True)
    write_summary(run)


# --- running things inside the budget ----------------------------------------------------------


def _env(fake: str | None) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if fake:
        env["GPUSCOPE_FAKE_NVML"] = fake
    return env


def _die_with_parent() -> None:
    """In a child (Linux): SIGTERM it when this script dies, so a killed run leaves nothing."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: the budget and --duration still bound them
        pass


def _stop(process: subprocess.Popen[Any], grace_s: float = 10.0) -> None:
    """SIGINT (partial results are written), then SIGKILL the whole process group."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=grace_s)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()


def run_step(
    run: Run,
    name: str,
    command: list[str],
    *,
    env: dict[str, str],
    cap_s: float,
    log: Path,
    errors: Path | None = None,
) -> int | None:
    """Run ``command`` with its output in ``log`` (stderr too, unless ``errors`` names a file)
    for at most ``cap_s`` and what the budget leaves; the exit code, or None when it overran
    (interrupted, then killed)."""
    limit_s = min(cap_s, run.remaining_s() - RESERVE_S)
    if limit_s <= 1:
        run.fail(f"{name}: not started, the {run.budget_s:.0f} s budget is spent")
        return None
    with open(log, "w") as handle, open(errors or os.devnull, "w") as error_handle:
        stderr: Any = error_handle if errors is not None else subprocess.STDOUT
        process = subprocess.Popen(
            command,
            stdout=handle,
            stderr=stderr,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
            cwd=ROOT,
        )
        try:
            return process.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            _stop(process)
            run.fail(
                f"{name}: overran its {limit_s:.0f} s share of the {run.budget_s:.0f} s budget; "
                f"interrupted (see {log.name})"
            )
            return None


# --- checks (pure functions: tested on the CPU) ------------------------------------------------


def doctor_problems(report: dict[str, Any] | None, code: int | None) -> list[str]:
    """One line per doctor problem (``!!``), or why doctor itself did not answer."""
    if code is None:
        return ["doctor did not finish"]
    if report is None:
        return [f"doctor exited {code} without a JSON report"]
    found = [
        f"{section['title'].split('  ')[0]}: {check['name']}: {check['detail']}"
        for section in report.get("sections", [])
        for check in section.get("checks", [])
        if check.get("status") == "problem"
    ]
    if code != 0 and not found:
        found.append(f"doctor exited {code}")
    return found


def results_problems(results: dict[str, Any] | None, path: str, required: tuple[str, ...]) -> list[str]:
    """Missing file, partial run, failed measurements, missing ceilings."""
    if results is None:
        return [f"{path}: missing or not JSON"]
    problems: list[str] = []
    if results.get("partial"):
        problems.append(f"{path}: partial results ({results.get('partial_reason')})")
    failed = [m for m in results.get("measurements", []) if m.get("status") == "failed"]
    if failed:
        problems.append(
            f"{path}: {len(failed)} failed measurement(s), "
            f"first: {failed[0].get('name')}: {str(failed[0].get('error'))[:120]}"
        )
    names = {c.get("name") for c in results.get("ceilings", [])}
    missing = [name for name in required if name not in names]
    if missing:
        skipped = {
            m.get("name"): str(m.get("error"))[:80]
            for m in results.get("measurements", [])
            if m.get("status") == "skipped"
        }
        problems.append(
            f"{path}: missing ceilings {', '.join(missing)}"
            + (f" (skipped: {json.dumps(skipped)[:200]})" if skipped else "")
        )
    return problems


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def log_problems(records: list[dict[str, Any]], uuids: set[str] | None = None) -> list[str]:
    """The telemetry log: GPU records exist; each checked GPU (``uuids``; None: all) has power,
    memory-used and SM-clock readings; not every metric of a GPU is an error."""
    gpu_records = [r for r in records if r.get("gpus")]
    if not gpu_records:
        reason = next(
            (r.get("gpu_unavailable") for r in records if r.get("gpu_unavailable")),
            None,
        )
        return [f"telemetry.jsonl: no GPU in {len(records)} record(s)" + (f" ({reason})" if reason else "")]
    seen: dict[str, dict[str, Any]] = {}
    for record in gpu_records:
        for gpu in record["gpus"]:
            if gpu.get("mig_parent_index") is not None:
                continue
            key = str(gpu.get("uuid") or gpu.get("index"))
            if uuids is not None and key not in uuids:
                continue
            entry = seen.setdefault(
                key,
                {
                    "name": f"GPU {gpu.get('index')} {gpu.get('name')}",
                    "read": set(),
                    "errors": {},
                    "numbers": 0,
                },
            )
            for name in READINGS:
                if _number(gpu.get(name)):
                    entry["read"].add(name)
            entry["numbers"] += sum(1 for name in LIVE_METRICS if _number(gpu.get(name)))
            for key_, why in (gpu.get("unavailable") or {}).items():
                if str(why).startswith("error"):
                    entry["errors"][key_] = str(why)
    problems: list[str] = []
    if uuids is not None and not seen:
        problems.append(f"telemetry.jsonl: the probed GPU ({', '.join(sorted(uuids))}) is not in the log")
    for entry in seen.values():
        missing = [name for name in READINGS if name not in entry["read"]]
        if missing:
            why = "; ".join(f"{name}: {entry['errors'][name]}" for name in missing if name in entry["errors"])
            problems.append(f"{entry['name']}: no {', '.join(missing)} reading" + (f" ({why[:160]})" if why else ""))
        if entry["numbers"] == 0 and entry["errors"]:
            first = next(iter(entry["errors"].values()))
            problems.append(
                f"{entry['name']}: every metric is unavailable, "
                f"{len(entry['errors'])} of them errors (e.g. {first[:100]})"
            )
    return problems


def probe_readings_problems(results: dict[str, Any] | None) -> list[str]:
    """GPU runs: the probes' own telemetry (matched to the probed GPU by UUID) has power,
    memory-used and SM-clock readings in at least one measurement."""
    if results is None:
        return []
    during = [m.get("telemetry_during") or {} for m in results.get("measurements", []) if m.get("status") == "ok"]
    if not during:
        return ["no measurement carries telemetry"]
    missing = [name for name in READINGS if not any(_number(d.get(f"{name}_mean")) for d in during)]
    if missing:
        reasons = sorted({str(d.get("reason")) for d in during if d.get("reason")})
        return [
            f"probed GPU: no {', '.join(missing)} reading during any measurement"
            + (f" ({'; '.join(reasons)[:160]})" if reasons else "")
        ]
    return []


def probed_uuids(results: dict[str, Any] | None) -> set[str]:
    """The NVML UUIDs the probes' telemetry matched (``gpu_uuid`` in telemetry snapshots)."""
    found: set[str] = set()
    for measurement in (results or {}).get("measurements", []):
        for key in ("telemetry_before", "telemetry_after"):
            uuid = (measurement.get(key) or {}).get("gpu_uuid")
            if uuid:
                found.add(str(uuid))
    return found


def ceiling_rows(results: dict[str, Any] | None, *, gpu: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """Per ceiling: the probe's value and, on a GPU, the GPU's DRAM counter over the same
    measurement (mean); problems where a ``dram.*``/``l2.*`` ceiling and the counter disagree."""
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    if results is None:
        return rows, problems
    by_id = {m.get("id"): m for m in results.get("measurements", [])}
    for ceiling in results.get("ceilings", []):
        name = str(ceiling.get("name"))
        row: dict[str, Any] = {
            "name": name,
            "value": ceiling.get("value"),
            "unit": ceiling.get("unit"),
            "reported_dram_bytes_per_s": None,
            "check": "",
        }
        rows.append(row)
        if not gpu:
            continue
        measurement = by_id.get(ceiling.get("measurement_id")) or {}
        during = measurement.get("telemetry_during") or {}
        reported = during.get("dram_bandwidth_bytes_per_s_mean")
        row["reported_dram_bytes_per_s"] = reported
        level = name.split(".")[0]
        if level not in ("dram", "l2"):
            continue
        probe = measurement.get("bytes_per_s") or ceiling.get("value")
        if not _number(reported) or not _number(probe) or probe <= 0:
            row["check"] = "UNCHECKED"
            problems.append(
                f"{name}: no DRAM counter reading during the probe "
                f"({during.get('reason') or 'dram_bandwidth_bytes_per_s missing'})"
            )
            continue
        ratio = reported / probe
        if level == "dram":
            ok = abs(ratio - 1.0) <= DRAM_AGREEMENT
            row["check"] = f"{ratio:.0%} {'ok' if ok else 'DISAGREE'}"
            if not ok:
                problems.append(
                    f"{name}: the GPU's DRAM counter says {reported / 1e9:,.0f} GB/s, "
                    f"the probe {probe / 1e9:,.0f} GB/s ({ratio:.0%}; within {DRAM_AGREEMENT:.0%} expected)"
                )
        else:
            ok = ratio < L2_DRAM_NEAR_ZERO
            row["check"] = f"{ratio:.0%} {'ok' if ok else 'DRAM!'}"
            if not ok:
                problems.append(
                    f"{name}: {reported / 1e9:,.0f} GB/s of DRAM traffic during an L2 probe of "
                    f"{probe / 1e9:,.0f} GB/s ({ratio:.0%}): the working set spills to DRAM"
                )
    return rows, problems


def triton_rows(results: dict[str, Any] | None) -> tuple[list[dict[str, Any]], list[str]]:
    """The Triton kernels' own measurements (gpuscope.probing.triton_kernels): FMA peaks, and L2
    and DRAM bandwidth each held against the GPU's DRAM counter (``dram_check``: L2 near zero,
    DRAM within 10 %). Problems: no Triton measurement ran, or a check failed or could not run."""
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    measurements = [m for m in (results or {}).get("measurements", []) if m.get("library") == "triton"]
    if results is None:
        return rows, problems
    ran = [m for m in measurements if m.get("status") == "ok"]
    if not ran:
        reasons = sorted({str(m.get("error"))[:100] for m in measurements if m.get("error")})
        problems.append("no Triton kernel ran" + (f" ({'; '.join(reasons)[:200]})" if reasons else ""))
        return rows, problems
    for m in ran:
        parameters = m.get("parameters") or {}
        if m.get("kind") == "peak":
            rows.append({"name": f"{parameters.get('dtype')}.fma (triton)", "value": m.get("flop_per_s"),
                         "unit": "FLOP/s", "reported_dram_bytes_per_s": None, "check": ""})  # fmt: skip
            continue
        level = str(m.get("level") or parameters.get("level"))
        name = f"{level}.{parameters.get('kernel')} (triton)"
        check = m.get("dram_check") or {}
        row = {"name": name, "value": m.get("bytes_per_s"), "unit": "B/s",
               "reported_dram_bytes_per_s": check.get("reported_dram_bytes_per_s"), "check": ""}  # fmt: skip
        rows.append(row)
        ratio = check.get("ratio")
        if check.get("ok") is None:
            row["check"] = "UNCHECKED"
            problems.append(f"{name}: not checked against the DRAM counter ({check.get('reason') or 'no reading'})")
        elif check.get("ok"):
            row["check"] = f"{ratio:.0%} ok" if _number(ratio) else "ok"
        else:
            row["check"] = f"{ratio:.0%} {'DRAM!' if level == 'l2' else 'DISAGREE'}" if _number(ratio) else "FAILED"
            problems.append(f"{name}: {check.get('rule') or 'DRAM counter check'} failed (counter/probe {ratio})")
    return rows, problems


def target_problems(results: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """(problems, notes): H200 targets, enforced only when the device is an H200."""
    if results is None:
        return [], []
    name = str((results.get("devices") or [{}])[0].get("name") or "")
    ceilings = {c.get("name"): c.get("value") for c in results.get("ceilings", [])}
    lines = []
    for key, (target, unit) in H200_TARGETS.items():
        value = ceilings.get(key)
        if value is None or value < target:
            shown = "missing" if value is None else f"{value:.4g}"
            lines.append(f"H200 target {key}: {shown} < {target:.4g} {unit}")
    if "H200" in name.upper():
        return lines, []
    return [], [f"{line} (not an H200: not enforced)" for line in lines]


# --- the summary ---------------------------------------------------------------------------------


#: The device-pair matrix on an 8-GPU node takes at most this long (issue 33).
PAIR_MATRIX_MAX_S = 60.0


def transfer_problems(report: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """(failures, notes) of ``transfers.json`` (gpuscope.probing.transfer_cuda): a failed host
    transfer is noted, a pair matrix over :data:`PAIR_MATRIX_MAX_S` on up to 8 GPUs fails."""
    if not isinstance(report, dict):
        return ["transfers.json is missing or unreadable"], []
    problems: list[str] = []
    notes = [
        f"transfer {row.get('name')}: "
        + (str(row.get("error")) if row.get("error") else _rate(row.get("bytes_per_s"), "B/s"))
        for row in report.get("host", [])
        if isinstance(row, dict)
    ]
    for matrix in report.get("matrices", []):
        devices, seconds = len(matrix.get("devices", [])), float(matrix.get("seconds") or 0.0)
        flagged = sum(1 for cell in matrix.get("cells", []) if cell.get("flagged"))
        notes.append(
            f"pair matrix {matrix.get('mode')}: {devices} GPUs in {seconds:.1f} s, {flagged} cell(s) under 80%"
        )
        if devices <= 8 and seconds > PAIR_MATRIX_MAX_S:
            problems.append(
                f"pair matrix {matrix.get('mode')} took {seconds:.0f} s (at most {PAIR_MATRIX_MAX_S:.0f} s)"
            )
    latency = report.get("latency_s")
    if isinstance(latency, dict) and latency:  # small-copy latency: host-device and the slowest device pair
        pairs = {k: float(v) for k, v in latency.items() if str(k).startswith("d2d")}
        shown = {k: float(v) for k, v in latency.items() if k in ("h2d", "d2h")}
        if pairs:
            slowest = max(pairs, key=lambda k: pairs[k])
            shown[f"slowest {slowest}"] = pairs[slowest]
        notes.append("latency " + ", ".join(f"{k} {v * 1e6:.1f} us" for k, v in shown.items()))
    return problems, notes


def _rate(value: Any, unit: Any) -> str:
    if not _number(value):
        return "-"
    if unit == "FLOP/s":
        return f"{value / 1e12:,.1f} TFLOP/s" if value >= 1e12 else f"{value / 1e9:,.1f} GFLOP/s"
    return f"{value / 1e9:,.1f} GB/s"


def write_summary(run: Run) -> str:
    """SUMMARY.txt (one screen) and summary.json; returns the text."""
    state = (
        ("PASS" if not run.failures else "FAIL") if run.finished else ("FAIL (so far)" if run.failures else "RUNNING")
    )
    lines = [f"{state}  gpu_acceptance on {run.device}, {run.elapsed_s():.0f} s of a {run.budget_s:.0f} s budget"]
    if run.failures:
        lines.append("")
        lines.append(f"{len(run.failures)} reason(s) it fails:")
        lines += [f"  - {failure[:150]}" for failure in run.failures[:12]]
        if len(run.failures) > 12:
            lines.append(f"  ... {len(run.failures) - 12} more in summary.json")
    if run.rows:
        lines.append("")
        lines.append(f"{'ceiling':<16}{'probe':>18}{'GPU DRAM counter':>18}  check")
        for row in run.rows[: max(4, SUMMARY_LINES - len(lines) - 6)]:
            reported = (
                _rate(row["reported_dram_bytes_per_s"], "B/s") if row["reported_dram_bytes_per_s"] is not None else ""
            )
            lines.append(f"{row['name']:<16}{_rate(row['value'], row['unit']):>18}{reported:>18}  {row['check']}")
    if run.notes:
        lines.append("")
        lines += [f"note: {note[:150]}" for note in run.notes[:4]]
    lines.append("")
    lines.append("files: doctor.txt doctor.json telemetry.jsonl quick.json transformer.json *.log summary.json")
    text = "\n".join(lines[:SUMMARY_LINES])
    run.out.mkdir(parents=True, exist_ok=True)
    (run.out / "SUMMARY.txt").write_text(text + "\n")
    (run.out / "summary.json").write_text(
        json.dumps(
            {
                "state": state,
                "device": run.device,
                "elapsed_s": run.elapsed_s(),
                "budget_s": run.budget_s,
                "failures": run.failures,
                "notes": run.notes,
                "steps": run.steps,
                "ceilings": run.rows,
            },
            indent=2,
        )
    )
    return text


# --- the run -------------------------------------------------------------------------------------


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _machine(run: Run, python: str, env: dict[str, str]) -> bool:
    """The vendor's tool (nvidia-smi, or amd-smi on a ROCm machine) and torch.cuda (inside the
    budget); False when there is no point going on. ROCm builds of torch answer torch.cuda too."""
    nvidia, amd = shutil.which("nvidia-smi"), shutil.which("amd-smi")
    smi, name = (nvidia, "nvidia-smi") if nvidia is not None else (amd, "amd-smi")
    if smi is None:
        run.fail("neither nvidia-smi nor amd-smi found: no NVIDIA or AMD driver on this machine")
        return False
    arguments = [smi] if name == "nvidia-smi" else [smi, "static", "--asic", "--bus"]
    code = run_step(run, name, arguments, env=env, cap_s=30, log=run.out / f"{name}.txt")
    if code != 0:
        if code is not None:
            run.fail(f"{name} exited {code} (see {name}.txt)")
        return False
    check = (
        "import torch, numpy, psutil; assert torch.cuda.is_available(), 'torch sees no CUDA or ROCm GPU'; "
        "print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'HIP', torch.version.hip, "
        "torch.cuda.get_device_name(0))"
    )
    log = run.out / "environment.txt"
    code = run_step(run, "torch/CUDA check", [python, "-c", check], env=env, cap_s=90, log=log)
    lines = log.read_text().strip().splitlines() if log.exists() else []
    if code != 0:
        if code is not None:
            run.fail(f"the Python environment is not ready: {lines[-1] if lines else f'exit {code}'}")
        return False
    run.notes.append(lines[-1] if lines else "torch/CUDA check passed")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="gpuscope GPU acceptance run (read OUTPUT/SUMMARY.txt first)")
    parser.add_argument("output", help="folder to write everything into (created)")
    parser.add_argument(
        "--device",
        default="cuda",
        help="cuda, cuda:N, or cpu (with --fake: checks the failure logic)",
    )
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="the Python that has gpuscope's dependencies",
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=360.0,
        help="hard total budget in seconds, doctor included (default 360)",
    )
    parser.add_argument(
        "--fake",
        metavar="SCENARIO",
        help="GPUSCOPE_FAKE_NVML scenario (tests: the fake NVML, no nvidia-smi)",
    )
    parser.add_argument(
        "--suite",
        action="append",
        help="suite name or TOML path (repeatable; default quick and transformer)",
    )
    parser.add_argument(
        "--require",
        help="comma-separated ceilings every suite must produce (default: the quick/transformer lists)",
    )
    args = parser.parse_args(argv)
    out = Path(args.output).resolve()  # the steps run in the repository root
    out.mkdir(parents=True, exist_ok=True)
    run = Run(out=out, device=args.device, budget_s=args.budget_s)
    gpu = args.device.startswith("cuda")
    env = _env(args.fake)
    python = args.python
    write_summary(run)
    try:
        _run(run, args, gpu, env, python)
    except Exception as exc:  # noqa: BLE001 - a bug here must still leave a summary
        run.fail(f"the acceptance script itself failed: {type(exc).__name__}: {exc}")
    run.finished = True
    if run.elapsed_s() > run.budget_s:
        run.fail(f"took {run.elapsed_s():.0f} s, over the {run.budget_s:.0f} s budget")
    text = write_summary(run)
    print(text)
    return 1 if run.failures else 0


def _run(run: Run, args: argparse.Namespace, gpu: bool, env: dict[str, str], python: str) -> None:
    out = run.out
    if args.fake is None or gpu:
        step(run, "checking the machine")
        if not _machine(run, python, env):
            return

    step(run, "gpuscope doctor")
    torch_flag = [] if gpu else ["--no-torch"]
    code = run_step(
        run,
        "doctor",
        [python, "-m", "gpuscope", "doctor", "--json", *torch_flag],
        env=env,
        cap_s=90,
        log=out / "doctor.json",
        errors=out / "doctor.stderr",
    )
    report = _load_json(out / "doctor.json") if code is not None else None
    # the same checks as text, for a person (no torch import: that part is in doctor.json)
    run_step(
        run,
        "doctor (text)",
        [python, "-m", "gpuscope", "doctor", "--no-torch"],
        env=env,
        cap_s=30,
        log=out / "doctor.txt",
    )
    problems = doctor_problems(report, code)
    if problems:
        run.fail(f"doctor reports {len(problems)} problem(s): " + " | ".join(problems)[:400])

    step(run, "telemetry log every 0.2 s in the background")
    # --duration: the logger ends by itself with the budget, even if this script is killed
    lifetime_s = f"{max(1.0, run.remaining_s() - RESERVE_S / 2):.0f}"
    logger = subprocess.Popen(
        [python, "-m", "gpuscope", "log", "--interval", "0.2", "--duration", lifetime_s,
         "--output", str(out / "telemetry.jsonl"), "--force"],
        stdout=subprocess.DEVNULL, stderr=open(out / "telemetry.stderr", "w"), env=env,
        start_new_session=True, preexec_fn=_die_with_parent, cwd=ROOT,
    )  # fmt: skip
    suites = args.suite or ["quick", "transformer"]
    required_default = {"quick": QUICK_REQUIRED, "transformer": TRANSFORMER_REQUIRED}
    caps = {"quick": 230.0, "transformer": 110.0}
    results: dict[str, Any] = {}
    try:
        time.sleep(1.0)
        if logger.poll() is not None:
            run.fail(f"gpuscope log exited {logger.returncode} at once (see telemetry.stderr)")
        for suite in suites:
            name = Path(suite).stem
            step(run, f"suite {name}")
            output = out / f"{name}.json"
            if Path(suite).suffix == ".toml":
                suite = str(Path(suite).resolve())
            run_step(
                run, f"suite {name}",
                [python, "-m", "gpuscope", "probe", "--device", args.device, "--suite", suite, "--output", str(output)],
                env=env, cap_s=caps.get(suite, 300.0), log=out / f"{name}.log",
            )  # fmt: skip
            results[name] = _load_json(output)
            required = tuple(filter(None, (args.require or "").split(","))) or required_default.get(suite, ())
            for problem in results_problems(results[name], output.name, required):
                run.fail(problem)
        if gpu:  # issue 33: nvbandwidth-style transfers, the device-pair matrix and latency
            step(run, "transfers and the device-pair matrix")
            # sized for PAIR_MATRIX_MAX_S: 8 GPUs are 56 ordered pairs, each 1 warm-up + 5 timed 256 MiB
            # copies (both ways at once when bidirectional): about 1 s a matrix over NVLink, ~5 s at PCIe Gen4
            command = [python, "-m", "gpuscope.probing.transfer_cuda", str(out / "transfers.json"),
                       "--size-mib", "256", "--repeats", "5"]  # fmt: skip
            if run_step(run, "transfers", command, env=env, cap_s=120.0, log=out / "transfers.txt") == 0:
                problems, notes = transfer_problems(_load_json(out / "transfers.json"))
                run.notes += notes
                for problem in problems:
                    run.fail(problem)
    finally:
        _stop(logger, grace_s=10.0)

    step(run, "checking telemetry and ceilings")
    records = []
    if (out / "telemetry.jsonl").exists():
        for line in (out / "telemetry.jsonl").read_text().splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
    first = results.get(Path(suites[0]).stem)
    uuids = probed_uuids(first) if gpu else set()
    for problem in log_problems(records, uuids or None):
        run.fail(problem)
    if gpu:
        for problem in probe_readings_problems(first):
            run.fail(problem)
    rows, problems = ceiling_rows(first, gpu=gpu)
    if gpu:  # the Triton kernels' own rows: L2 and DRAM against the DRAM counter, FMA peaks
        more, triton_problems = triton_rows(first)
        rows += more
        problems += triton_problems
    run.rows = rows
    for problem in problems:
        run.fail(problem)
    if gpu:
        missed, notes = target_problems(first)
        for problem in missed:
            run.fail(problem)
        run.notes += notes


if __name__ == "__main__":
    raise SystemExit(main())
