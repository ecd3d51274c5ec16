"""Loading and validating gpuscope files through the declared types vs bare ``json.loads``
(issue 13's target: at least as fast as ``json.loads`` of the same lines).

Two inputs, built in a temporary folder, at the issue's sizes by default:

- a telemetry log of ``--records`` records with 8 GPUs and 16 cores (36,000 = one hour at 0.1 s;
  ~20 KB a line, ~0.7 GB);
- a results file with ``--measurements`` measurements (default 10,000) and as many workloads.

Timed in one process, in CPU seconds of this process (``time.process_time``: the machine may be
shared), as ratios against the baseline measured in the same run; no absolute claims. Each parsed
value is dropped at once, baseline and typed alike, so the ratios do not depend on how much the
machine can hold. The log is timed once (``--repeat-log``; each pass takes seconds), the results
file best of ``--repeat``.

- log, baseline: ``json.loads`` of every line of the file (read, split, parse; no checks);
- log, ``read_log``: what ``replay`` and ``report --log`` run: every line decoded, every rule
  checked, each record built as the ``Sample`` the consumers use;
- log, typed decode only: the same lines decoded into the wire types with every rule checked;
- results, baseline: ``json.loads`` of the file; ``read_results``: what every reader of a
  results file runs (``roofline``, ``profile --roofs``, ``measure``, ``tui``/``replay --probes``
  and the probes screen through ``read_results_file``): decode + every rule, the typed view.

Usage: .venv/bin/python benchmarks/bench_typed_load.py [--records 36000] [--measurements 10000]
       [--repeat 3] [--repeat-log 1]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the shared fixtures (tests/support)


def _best(repeat: int, work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def _each(items: Iterable[Any], parse: Callable[[Any], object]) -> None:
    """Parse every item and drop the value."""
    for item in items:
        parse(item)


def _write_log(path: Path, records: int) -> None:
    from support.samples import make_sample

    from gpuscope.telemetry.logfile import sample_to_json_dict

    templates = [
        json.dumps(sample_to_json_dict(make_sample(tick, gpus=8, cores=16)), separators=(",", ":"))
        for tick in range(10)
    ]
    with path.open("wb") as handle:
        for index in range(records):
            stamp = f'"timestamp":{1_700_000_000.0 + index * 0.1!r},"_t":'
            handle.write(templates[index % len(templates)].replace('"timestamp":', stamp, 1).encode() + b"\n")


def _results_document(measurements: int) -> dict[str, object]:
    from support.reports import make_results

    document = make_results()
    base = document["measurements"][0]
    workload = document["workloads"][0]
    document["measurements"] = [
        {**base, "id": f"m{index:05d}", "samples_s": [1.0 + index * 1e-6] * 15} for index in range(measurements)
    ]
    document["workloads"] = [
        {**workload, "name": f"w{index}", "measurement_id": f"m{index:05d}"} for index in range(measurements)
    ]
    return document


def _row(label: str, seconds: float, base: float) -> None:
    print(f"  {label:<40} {seconds:8.3f} s   {seconds / base:.2f} x json.loads")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=36_000)
    parser.add_argument("--measurements", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--repeat-log", type=int, default=1)
    args = parser.parse_args()

    import msgspec

    from gpuscope.results import read_results
    from gpuscope.telemetry.logfile import read_log
    from gpuscope.telemetry.wire import WireSample

    decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(WireSample)
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "run.jsonl"
        _write_log(log, args.records)
        print(f"telemetry log: {args.records} records, 8 GPUs, {log.stat().st_size / 1e6:.0f} MB")
        base = _best(args.repeat_log, lambda: _each(log.read_bytes().splitlines(), json.loads))
        print(f"  {'json.loads of every line (parse only)':<40} {base:8.3f} s   1.00")
        _row("read_log: decode, every rule, Samples", _best(args.repeat_log, lambda: _each(read_log(log), id)), base)
        lines = log.read_bytes().splitlines()
        base_lines = _best(args.repeat_log, lambda: _each(lines, json.loads))
        typed = _best(args.repeat_log, lambda: _each(lines, decoder.decode))
        _row("typed decode + every rule (no Samples)", typed, base_lines)
        lines.clear()

        results = Path(folder) / "results.json"
        results.write_text(json.dumps(_results_document(args.measurements)))
        print(f"results file: {args.measurements} measurements + {args.measurements} workloads, "
              f"{results.stat().st_size / 1e6:.1f} MB")  # fmt: skip
        base = _best(args.repeat, lambda: json.loads(results.read_bytes()))
        print(f"  {'json.loads of the file (parse only)':<40} {base:8.3f} s   1.00")
        _row("read_results: typed, every rule", _best(args.repeat, lambda: read_results(results)), base)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
