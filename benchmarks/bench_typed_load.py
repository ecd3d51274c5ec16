"""Loading and validating gpuscope files through the declared types vs bare ``json.loads``.

Two inputs, built in a temporary folder:

- a telemetry log of ``--records`` records with 8 GPUs (36,000 = one hour at 0.1 s; each line
  ~20 KB, so the default reads ~0.7 GB: use ``--records 3600`` for a quick run, the ratios are
  per record and do not depend on the count);
- a results file with ``--measurements`` measurements (default 10,000) and as many workloads.

Timed, each the best of ``--repeat`` rounds, in one process (ratios against the baseline measured
in the same run; no absolute claims):

- log, baseline: ``json.loads`` of every line (parsing only, no checks);
- log, typed: ``msgspec`` decode of every line into the wire types with every rule checked
  (``gpuscope.schema.telemetry.WireSample``): this is "loading and validating";
- log, samples: the same plus building the ``Sample`` dataclasses the consumers use
  (``decode_record``), and the whole ``read_log`` from the file (I/O, line handling);
- log, before: ``json.loads`` + the old field walker + ``record_from_dict`` is not in the tree any
  more; its cost measured on the same machine before the change is quoted in the typed-core note;
- results, baseline: ``json.loads`` of the file; typed: ``read_results`` (decode + every rule);
  dict view: ``load_results`` (typed check plus the plain-dict view with the depth check).

Usage: .venv/bin/python benchmarks/bench_typed_load.py [--records 36000] [--measurements 10000]
       [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _best(repeat: int, work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def _log_lines(records: int) -> list[bytes]:
    from gpuscope.telemetry.logfile import sample_to_json_dict
    from gpuscope.testing.samples import make_sample

    templates = [
        json.dumps(sample_to_json_dict(make_sample(tick, gpus=8, cores=16)), separators=(",", ":"))
        for tick in range(10)
    ]
    lines = []
    for index in range(records):
        text = templates[index % len(templates)]
        lines.append(text.replace('"timestamp":', f'"timestamp":{1_700_000_000.0 + index * 0.1!r},"_t":', 1).encode())
    return lines


def _results_document(measurements: int) -> dict[str, object]:
    from gpuscope.testing.reports import make_results

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=36_000)
    parser.add_argument("--measurements", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import msgspec

    from gpuscope.results import load_results, read_results
    from gpuscope.schema.telemetry import WireSample, decode_record
    from gpuscope.telemetry.logfile import read_log

    lines = _log_lines(args.records)
    decoder = msgspec.json.Decoder(WireSample)
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "run.jsonl"
        log.write_bytes(b"\n".join(lines) + b"\n")
        size_mb = log.stat().st_size / 1e6
        base = _best(args.repeat, lambda: [json.loads(line) for line in lines])
        typed = _best(args.repeat, lambda: [decoder.decode(line) for line in lines])
        samples = _best(args.repeat, lambda: [decode_record(line) for line in lines])
        whole = _best(args.repeat, lambda: sum(1 for _ in read_log(log)))
        base_file = _best(args.repeat, lambda: [json.loads(line) for line in log.read_bytes().splitlines()])
        print(f"telemetry log: {args.records} records, 8 GPUs, {size_mb:.0f} MB")
        print(f"  json.loads (parse only)           {base:8.3f} s   1.00")
        print(f"  typed decode + every rule         {typed:8.3f} s   {typed / base:.2f} x json.loads")
        print(f"  + Sample dataclasses              {samples:8.3f} s   {samples / base:.2f} x json.loads")
        print(
            f"  read_log(file), all of it         {whole:8.3f} s   "
            f"{whole / base_file:.2f} x json.loads of the file's lines"
        )

        results = Path(folder) / "results.json"
        results.write_text(json.dumps(_results_document(args.measurements)))
        raw_mb = results.stat().st_size / 1e6
        base = _best(args.repeat, lambda: json.loads(results.read_bytes()))
        typed = _best(args.repeat, lambda: read_results(results))
        view = _best(args.repeat, lambda: load_results(results))
        print(f"results file: {args.measurements} measurements + {args.measurements} workloads, {raw_mb:.1f} MB")
        print(f"  json.loads (parse only)           {base:8.3f} s   1.00")
        print(f"  read_results (typed, every rule)  {typed:8.3f} s   {typed / base:.2f} x json.loads")
        print(f"  load_results (typed + dict view)  {view:8.3f} s   {view / base:.2f} x json.loads")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
