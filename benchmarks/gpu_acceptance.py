"""GPU acceptance run: one command on a machine with an NVIDIA GPU and no network.

    python benchmarks/gpu_acceptance.py OUTPUT_FOLDER [--device cuda:0] [--python PYTHON]

It runs, writing everything into OUTPUT_FOLDER:

1. ``nvidia-smi`` (nvidia-smi.txt) and ``gpuscope doctor`` (doctor.txt, doctor.json);
2. ``gpuscope log --interval 0.2`` in the background for the whole run (telemetry.jsonl);
3. ``gpuscope probe --device cuda --suite quick`` (quick.json, quick.log);
4. ``gpuscope probe --device cuda --suite transformer`` (transformer.json, transformer.log);
5. checks: each results file loads, has no failed measurement, has the expected ceilings and
   workloads; the telemetry log has GPU records; then a table of the ceilings against the H200
   targets (summary.txt, summary.json).

Needs only gpuscope, torch, numpy, psutil and nvidia-ml-py (no Textual, no plotext). Stops at the
first missing piece with ``gpu_acceptance: FAILED: ...`` and exit code 1; an H200 target missed
is reported and also makes the exit code 1. Budget: under 8 minutes on an H200.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: name -> (minimum value, unit) on an H200 (issue 3 targets).
H200_TARGETS = {
    "bf16": (790e12, "FLOP/s"),
    "fp8": (1400e12, "FLOP/s"),
    "dram.copy": (4.3e12, "B/s"),
    "h2d.pinned": (50e9, "B/s"),
    "d2h.pinned": (50e9, "B/s"),
}
QUICK_REQUIRED = ("fp64", "fp32", "tf32", "bf16", "fp16", "dram.copy", "dram.triad", "dram.read", "l2.copy", "h2d.pinned", "d2h.pinned", "h2d.pageable", "d2h.pageable")
TRANSFORMER_REQUIRED = ("bf16", "dram.copy")


def fail(message: str) -> None:
    print(f"gpu_acceptance: FAILED: {message}", file=sys.stderr, flush=True)
    raise SystemExit(1)


def step(message: str) -> None:
    print(f"gpu_acceptance: {time.strftime('%H:%M:%S')} {message}", flush=True)


def gpuscope(python: str, args: list[str], out: Path, name: str, timeout_s: float) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log = out / f"{name}.log"
    with open(log, "w") as handle:
        try:
            done = subprocess.run([python, "-m", "gpuscope", *args], stdout=handle, stderr=subprocess.STDOUT, env=env, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            fail(f"gpuscope {' '.join(args)} took longer than {timeout_s:.0f} s (see {log})")
    if done.returncode != 0:
        tail = log.read_text().strip().splitlines()[-5:]
        fail(f"gpuscope {' '.join(args)} exited {done.returncode} (see {log}): {' | '.join(tail)}")


def check_results(path: Path, required: tuple[str, ...], need_workloads: bool) -> dict:
    sys.path.insert(0, str(ROOT))
    from gpuscope.results import load_results

    try:
        results = load_results(path)
    except Exception as exc:  # noqa: BLE001 - any problem is a failure to report
        fail(f"{path}: {exc}")
    if results.get("partial"):
        fail(f"{path}: partial results ({results.get('partial_reason')})")
    failed = [m for m in results["measurements"] if m["status"] == "failed"]
    if failed:
        fail(f"{path}: {len(failed)} failed measurement(s), first: {failed[0]['name']}: {failed[0]['error']}")
    names = {c["name"] for c in results["ceilings"]}
    missing = [name for name in required if name not in names]
    if missing:
        skipped = {m["name"]: m["error"] for m in results["measurements"] if m["status"] == "skipped"}
        fail(f"{path}: missing ceilings {missing}; skipped measurements: {json.dumps(skipped)[:800]}")
    if need_workloads and not results["workloads"]:
        fail(f"{path}: no workloads")
    if not results.get("telemetry", {}).get("available"):
        fail(f"{path}: no telemetry next to the measurements ({results.get('telemetry')})")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description="gpuscope GPU acceptance run")
    parser.add_argument("output", help="folder to write everything into (created)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--python", default=sys.executable, help="the Python that has gpuscope's dependencies")
    args = parser.parse_args()
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    python = args.python

    step("checking the machine")
    smi = shutil.which("nvidia-smi")
    if smi is None:
        fail("nvidia-smi not found: no NVIDIA driver on this machine")
    done = subprocess.run([smi], capture_output=True, text=True)
    (out / "nvidia-smi.txt").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        fail(f"nvidia-smi exited {done.returncode}: {done.stderr.strip()[:300]}")
    check = subprocess.run(
        [python, "-c", "import torch, numpy, psutil, pynvml; assert torch.cuda.is_available(), 'torch sees no CUDA GPU'; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))"],
        capture_output=True, text=True,
    )  # fmt: skip
    if check.returncode != 0:
        fail(f"the Python environment is not ready: {check.stderr.strip().splitlines()[-1] if check.stderr.strip() else check.returncode}")
    step(f"torch {check.stdout.strip()}")

    step("gpuscope doctor")
    gpuscope(python, ["doctor"], out, "doctor", 120)
    gpuscope(python, ["doctor", "--json"], out, "doctor-json", 120)
    os.replace(out / "doctor-json.log", out / "doctor.json")

    step("telemetry log every 0.2 s in the background")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    logger = subprocess.Popen(
        [python, "-m", "gpuscope", "log", "--interval", "0.2", "--output", str(out / "telemetry.jsonl")],
        stdout=subprocess.DEVNULL, stderr=open(out / "telemetry.stderr", "w"), env=env,
    )  # fmt: skip
    try:
        time.sleep(1.0)
        if logger.poll() is not None:
            fail(f"gpuscope log exited {logger.returncode} at once (see {out / 'telemetry.stderr'})")
        step("quick suite")
        gpuscope(python, ["probe", "--device", args.device, "--suite", "quick", "--output", str(out / "quick.json")], out, "quick", 300)
        step("transformer suite")
        gpuscope(python, ["probe", "--device", args.device, "--suite", "transformer", "--output", str(out / "transformer.json")], out, "transformer", 240)
    finally:
        if logger.poll() is None:
            logger.send_signal(signal.SIGINT)
            try:
                logger.wait(timeout=10)
            except subprocess.TimeoutExpired:
                logger.kill()
                logger.wait()

    step("checking the results")
    quick = check_results(out / "quick.json", QUICK_REQUIRED, need_workloads=False)
    transformer = check_results(out / "transformer.json", TRANSFORMER_REQUIRED, need_workloads=True)
    lines = [line for line in (out / "telemetry.jsonl").read_text().splitlines() if line.strip()] if (out / "telemetry.jsonl").exists() else []
    if len(lines) < 10:
        fail(f"telemetry.jsonl has {len(lines)} records; expected one every 0.2 s")
    if not json.loads(lines[-1]).get("gpus"):
        fail("telemetry.jsonl records have no GPU")

    rows, missed = [], []
    ceilings = {c["name"]: c for c in quick["ceilings"]}
    for name, (target, unit) in H200_TARGETS.items():
        value = ceilings.get(name, {}).get("value")
        met = value is not None and value >= target
        if not met:
            missed.append(name)
        rows.append({"name": name, "value": value, "target": target, "unit": unit, "met": met})
    elapsed = time.monotonic() - started
    summary = [f"device {quick['devices'][0].get('name')} ({args.device}), {elapsed:.0f} s in all (budget 480 s on an H200)", ""]
    summary.append(f"{'ceiling':<14}{'measured':>16}{'H200 target':>16}  met")
    for row in rows:
        scale = 1e12 if row["unit"] == "FLOP/s" and row["target"] >= 1e12 else 1e9
        suffix = "T" if scale == 1e12 else "G"
        shown = f"{row['value'] / scale:,.1f} {suffix}{row['unit']}" if row["value"] else "missing"
        summary.append(f"{row['name']:<14}{shown:>16}{row['target'] / scale:>12,.1f} {suffix}{row['unit'][:1]}  {'yes' if row['met'] else 'NO'}")
    summary.append("")
    summary.append("all ceilings (quick):")
    for c in quick["ceilings"]:
        summary.append(f"  {c['name']:<18} {c['value']:.4g} {c['unit']}")
    summary.append(f"transformer workloads: {len(transformer['workloads'])}")
    text = "\n".join(summary)
    (out / "summary.txt").write_text(text + "\n")
    (out / "summary.json").write_text(json.dumps({"elapsed_s": elapsed, "targets": rows}, indent=2))
    print(text)
    if elapsed > 480:
        print(f"gpu_acceptance: WARNING: took {elapsed:.0f} s, over the 8-minute budget", file=sys.stderr)
    if missed:
        print(f"gpu_acceptance: H200 targets missed: {', '.join(missed)}", file=sys.stderr)
        return 1
    step("done")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
