"""The interconnect tables: collectives as nccl-tests prints them and the device-pair matrix with
the small-copy latencies, in the terminal (``probe``'s summary) and in the report (HTML and
Markdown), built from measurements as the probes write them (no processes, no GPU)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import msgspec
import pytest

from gpuscope.commands.probe import print_summary
from gpuscope.probing import transfer
from gpuscope.probing.collective import CollectiveTiming, collective_record
from gpuscope.probing.collective_table import (
    COLLECTIVE_HEADERS,
    collective_rows,
    host_rows_of,
    interconnect_text,
    matrices_of,
)
from gpuscope.probing.context import ProbeContext
from gpuscope.probing.environment import MemoryBudget, parse_device
from gpuscope.probing.runner import checked_measurement
from gpuscope.probing.transfer_matrix import HostTransfer, PairCell, PairMatrix, flag_cells
from gpuscope.report import write_report
from gpuscope.results import empty_results
from gpuscope.schema.core import encode_json
from gpuscope.schema.results import Measurement, Results

#: rank 3 arrives late in every iteration: it spends ~1 ms in the call, the others ~5 ms
RAW = [[5.0e-3, 5.2e-3, 5.1e-3, 5.0e-3]] * 3 + [[1.0e-3, 1.1e-3, 0.9e-3, 1.0e-3]]


def _collective(op: str, raw: list[list[float]], size: int = 1 << 20) -> Measurement:
    n = len(raw)
    item = CollectiveTiming(
        op=op, group_size=n, ranks=list(range(n)), size_bytes=size, iters=2,
        samples_s=[max(sum(r[:2]) / 2 for r in raw), max(sum(r[2:]) / 2 for r in raw)],
        validation_error=0.0, rank_iteration_s=raw, rank_input_bytes=size, rank_output_bytes=size,
    )  # fmt: skip
    return collective_record(
        item, f"collective {op} {size} B x{n}", "cpu", {}, {"op": op, "backend": "gloo", "world_size": n}
    )


def _fake_host(device: int, size: int, repeats: int, expected: float | None) -> list[HostTransfer]:
    return [
        HostTransfer(name="h2d.ce.pinned", direction="h2d", engine="ce", memory="pinned", bidirectional=False,
                     size_bytes=size, bytes_per_s=53.1e9, expected_bytes_per_s=expected),
        HostTransfer(name="d2h.sm.pinned", direction="d2h", engine="sm", memory="pinned", bidirectional=False,
                     size_bytes=size, error="triton not installed"),
    ]  # fmt: skip


def _matrix_and_latency(monkeypatch: pytest.MonkeyPatch) -> list[Measurement]:
    """The transfer probe's matrix and latency measurements, CUDA replaced by fixed numbers."""
    import gpuscope.probing.transfer_cuda as cuda
    import gpuscope.telemetry.topology_read as topology_read

    rates = {(0, 1): 380e9, (1, 0): 385e9, (0, 2): 40e9, (2, 0): 52e9, (1, 2): 51e9, (2, 1): 50e9}

    def fake_matrix(
        devices: list[int], size: int, repeats: int, *, bidirectional: bool, topology: object
    ) -> PairMatrix:
        cells = [
            PairCell(src=a, dst=b, bytes_per_s=rate, expected_bytes_per_s=450e9 if {a, b} == {0, 1} else 63e9,
                     connection="NV18" if {a, b} == {0, 1} else "SYS")
            for (a, b), rate in rates.items()
        ]  # fmt: skip
        return PairMatrix(
            mode="unidirectional", engine="copy engine", size_bytes=size, repeats=repeats, devices=devices,
            cells=flag_cells(cells), seconds=1.5,
        )  # fmt: skip

    monkeypatch.setattr(cuda, "pair_matrix", fake_matrix)
    monkeypatch.setattr(cuda, "latencies", lambda devices: {"h2d": 9.5e-6, "d2h": 10.2e-6, "d2d 0->1": 12.0e-6})
    monkeypatch.setattr(topology_read, "read_topology", lambda *a, **k: None)
    monkeypatch.setattr(cuda, "host_transfers", _fake_host)
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    device = parse_device("cpu")
    ctx = ProbeContext(device=device, budget=MemoryBudget(device))
    return [*transfer.matrix_measurements(ctx, 64 * 2**20, 5), transfer.host_measurement(ctx, 64 * 2**20, 5)]


def test_collective_rows_carry_nccl_tests_columns() -> None:
    record = _collective("allreduce", RAW)
    rows = collective_rows([record])
    cells, straggler = rows[0]
    assert straggler and len(cells) == len(COLLECTIVE_HEADERS)
    row = dict(zip(COLLECTIVE_HEADERS, cells, strict=True))
    assert row["op"] == "allreduce" and row["size"] == "1MiB" and row["ranks"] == "4"
    assert record.time_s is not None and row["time us"] == f"{record.time_s * 1e6:,.0f}"
    assert row["busbw GB/s"] == f"{(1 << 20) / record.time_s * 1.5 / 1e9:.3f}"  # 2(n-1)/n = 1.5 at n = 4
    assert row["rank min-max us"] == "1,000-5,075" and row["straggler"].startswith("rank 3 (")
    failed = msgspec.structs.replace(record, status="failed", error="validation failed")
    assert collective_rows([failed])[0][0][3] == "failed: validation failed"


def test_matrix_and_latency_measurements_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    records = _matrix_and_latency(monkeypatch)
    assert [r.status for r in records] == ["ok", "ok", "ok"]
    decoded = msgspec.json.decode(encode_json(records), type=list[Measurement])
    (matrix,) = matrices_of(decoded)
    assert matrix.devices == [0, 1, 2] and matrix.size_bytes == 64 * 2**20
    flagged = [(c.src, c.dst) for c in matrix.cells if c.flagged]
    assert flagged == [(0, 2)]  # 40 of the best SYS 52
    host = host_rows_of(decoded)
    assert [(h.name, h.bytes_per_s, h.error) for h in host] == [
        ("h2d.ce.pinned", 53.1e9, None),
        ("d2h.sm.pinned", None, "triton not installed"),
    ]


def test_matrix_failure_is_one_failed_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpuscope.probing.transfer_cuda as cuda

    def broken(*args: object, **kwargs: object) -> PairMatrix:
        raise RuntimeError("peer access refused\nmore")

    records = _matrix_and_latency(monkeypatch)
    monkeypatch.setattr(cuda, "pair_matrix", broken)
    device = parse_device("cpu")
    again = transfer.matrix_measurements(ProbeContext(device=device, budget=MemoryBudget(device)), 1 << 20, 5)
    assert again[0].status == "failed" and again[0].error == "peer access refused" and again[1].status == "ok"
    assert records[0].status == "ok"


def test_without_cuda_each_direction_is_one_skipped_line() -> None:
    device = parse_device("cpu")
    records: list[Measurement] = []
    transfer.transfer_probe(
        ["h2d", "d2d"], ["pinned"], [1 << 20], ProbeContext(device=device, budget=MemoryBudget(device)), records.append
    )
    assert [(r.status, r.error) for r in records] == [("skipped", transfer.NEEDS_CUDA)] * 2


def row_busbw(record: Measurement) -> str:
    return f"{(record.busbw_bytes_per_s or 0) / 1e9:.3f}"


def _results(monkeypatch: pytest.MonkeyPatch) -> Results:
    measurements = [
        _collective("allreduce", RAW),
        _collective("broadcast", RAW[:2], 65536),
        *_matrix_and_latency(monkeypatch),
    ]
    return empty_results(device="cpu", measurements=measurements)


def test_probe_summary_prints_the_tables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    stream = io.StringIO()
    print_summary(_results(monkeypatch), tmp_path / "r.json", stream)
    text = stream.getvalue()
    assert "collectives (gloo), as nccl-tests" in text
    header = next(line for line in text.splitlines() if line.startswith("op "))
    assert header.split()[:4] == ["op", "size", "ranks", "time"]
    assert "GPU0 -> GPU2: 40 GB/s (77% of the best SYS)" in text
    assert "small-copy latency" in text and "d2d 0->1" in text
    assert "host transfers, as nvbandwidth" in text and "triton not installed" in text
    assert interconnect_text([]) is None
    for width in (60, 80):  # whole columns go, numbers are never cut
        narrow = interconnect_text(_results(monkeypatch).measurements, width) or ""
        table = narrow.split("\n\n")[0].splitlines()[1:]
        assert max(map(len, table)) <= width and table[0].split()[:2] == ["op", "size"]
        assert "busbw" in table[0] and "straggler" in table[0] and "rank min-max" not in table[0]
        assert row_busbw(_results(monkeypatch).measurements[0]) in table[1].split()


def test_report_has_the_interconnect_section(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import jsonschema

    results = _results(monkeypatch)
    numbered = [checked_measurement(m, f"m{i:04d}") for i, m in enumerate(results.measurements, 1)]
    assert all(m.status == "ok" for m in numbered)  # every record holds to the schema's ranges
    source = tmp_path / "results.json"
    source.write_bytes(encode_json(msgspec.structs.replace(results, measurements=numbered)))
    schema = json.loads((Path(__file__).resolve().parents[1] / "docs/schemas/results.schema.json").read_text())
    assert not list(jsonschema.Draft202012Validator(schema).iter_errors(json.loads(source.read_bytes())))
    html = write_report(tmp_path / "r.html", [source]).read_text(encoding="utf-8")
    assert 'id="interconnect"' in html and "<h3>Collectives (gloo)</h3>" in html
    assert 'id="table-collectives-0"' in html and "busbw GB/s" in html and "rank 3 (" in html
    assert 'id="table-pair-matrix-0"' in html and "40* / 63 SYS" in html and "380 / 450 NV18" in html
    assert "Flagged: GPU0 -&gt; GPU2 40 GB/s (77% of the best SYS)." in html
    assert 'id="table-latency-0"' in html and "9.5" in html
    assert 'id="table-host-transfers-0"' in html and "<td>h2d.ce.pinned</td>" in html
    markdown = write_report(tmp_path / "r.md", [source]).read_text(encoding="utf-8")
    assert "\n## Interconnect\n" in markdown and "### Collectives (gloo)" in markdown and "40\\* / 63 SYS" in markdown
    data = json.loads(write_report(tmp_path / "r.json", [source]).read_text(encoding="utf-8"))
    assert data["schema"] == "gpuscope.report"
