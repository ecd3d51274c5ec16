"""Issue 27.3: ``gpuscope measure`` counts FLOPs and bytes on a warm call (call 2; call 1 is
discarded, as the timing discards it) and records which call it counted. A first call that builds
its model and input (a cached builder) must not hide the weights and the input it reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from gpuscope.cli import main  # noqa: E402
from gpuscope.measuring.measure import COUNTED_CALL, measure  # noqa: E402
from gpuscope.profiling.examples import build_convnet, convnet_step  # noqa: E402

FAST = {"samples": 3, "target_sample_s": 0.001, "max_time_s": 0.5, "warmup_max_s": 0.05, "energy": False}


def _nbytes(tensors: object) -> int:
    return sum(tensor.numel() * tensor.element_size() for tensor in tensors)  # type: ignore[attr-defined]


def test_convnet_step_bytes_are_its_weights_input_and_output() -> None:
    """The issue's case: a cold first call built the net and its input, so it read "nothing" (688
    bytes); a warm call reads the input, every weight and the batch-norm statistics, and writes the
    output and the statistics it updates (the net runs in training mode): 317,528 bytes."""
    build_convnet.cache_clear()
    result = measure(convnet_step, name="convnet", **FAST)
    net, x = build_convnet()
    buffers = _nbytes(net.buffers())  # running mean/var and num_batches_tracked: read, then updated in place
    expected_read = _nbytes([x]) + _nbytes(net.parameters()) + buffers
    expected_written = 16 * 10 * 4 + buffers
    assert result.counts.read_bytes == expected_read
    assert result.counts.written_bytes == expected_written
    assert result.bytes == 317_528 == expected_read + expected_written
    assert result.counted_call == COUNTED_CALL == 2
    assert result.intensity_flop_per_byte is not None and result.intensity_flop_per_byte < 2000


def test_each_call_is_seen_once_before_counting_and_the_count_is_recorded(tmp_path: Path) -> None:
    calls: list[bool] = []
    weight = torch.randn(32, 32)

    def step(x: torch.Tensor) -> torch.Tensor:
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        calls.append(_get_current_dispatch_mode() is not None)  # True: under the counters
        return x @ weight

    result = measure(step, torch.randn(8, 32), name="step", results=tmp_path / "r.json", **FAST)
    assert calls[:2] == [False, True]  # call 1 plain (discarded), call 2 counted
    assert calls.count(True) == 1
    workload = json.loads((tmp_path / "r.json").read_text())["workloads"][0]
    assert workload["counted_call"] == 2
    assert any("counted   on call 2" in line for line in result.summary_lines())


def test_measure_command_reports_warm_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_convnet.cache_clear()
    out = tmp_path / "r.json"
    code = main(
        ["measure", "gpuscope.profiling.examples:convnet_step", "--device", "cpu", "--output", str(out), "--json",
         "--samples", "3", "--max-time", "0.5", "--warmup-max", "0.05", "--target-sample", "0.001"]
    )  # fmt: skip
    assert code == 0
    workload = json.loads(out.read_text())["workloads"][0]
    assert workload["bytes"] == 317_528 and workload["counted_call"] == 2
    assert json.loads(capsys.readouterr().out)["counted_call"] == 2
