"""Issue 27.5: inference the way people run it. A Llama-style ``transformers`` model built from a
config (random weights, nothing downloaded): the prefill step is compute-bound and the KV-cache
decode step memory-bound, and the profile says which and by how much (the whole step as a point).
Tiny sizes here; docs/profile.md runs the defaults."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from gpuscope.profiling.api import profile  # noqa: E402
from gpuscope.profiling.examples import build_llama, build_llama_decode, llama_decode_step, llama_prefill_step  # noqa: E402
from gpuscope.profiling.render import step_verdict_line, summary_lines  # noqa: E402

TINY = {"hidden": 128, "layers": 2, "heads": 4, "kv_heads": 2, "intermediate": 344, "vocab": 1000, "device": "cpu"}


@pytest.fixture(scope="module")
def roofs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This host's CPU: fp32 40 GFLOP/s, DRAM 20 GB/s (ridge at 2 FLOP/byte)."""
    document = {
        "schema": "gpuscope.results",
        "schema_version": 1,
        "system": {"hostname": socket.gethostname()},
        "devices": [{"device": "cpu", "type": "cpu"}],
        "ceilings": [
            {"device": "cpu", "kind": "compute", "name": "fp32", "value": 40e9, "unit": "FLOP/s"},
            {"device": "cpu", "kind": "memory", "name": "dram.triad", "value": 20e9, "unit": "B/s"},
        ],
    }
    path = tmp_path_factory.mktemp("roofs") / "probe.json"
    path.write_text(json.dumps(document))
    return path


def test_decode_repeats_the_same_work_every_call() -> None:
    prefill = llama_prefill_step(prompt=16, **TINY)
    assert prefill.shape == (1, 1, 1000)
    first = llama_decode_step(context=16, **TINY)
    again = llama_decode_step(context=16, **TINY)
    _, cache, _ = build_llama_decode(16, 1, *(TINY[key] for key in TINY), "float32")  # the step's cached one
    assert cache.get_seq_length() == 17  # the context + the decoded token, every call
    assert torch.equal(first, again)
    params = sum(p.numel() for p in build_llama(**TINY).parameters())
    assert params == 2 * 1000 * 128 + 2 * (2 * 128 * 128 + 2 * 128 * 64 + 3 * 128 * 344 + 2 * 128) + 128


@pytest.mark.parametrize(
    ("step", "kwargs", "bound", "roof"),
    [
        (llama_prefill_step, {"prompt": 128}, "compute", "fp32"),
        (llama_decode_step, {"context": 128}, "memory", "dram.triad"),
    ],
    ids=["prefill", "decode"],
)
def test_prefill_is_compute_bound_and_decode_memory_bound(
    step: object, kwargs: dict[str, int], bound: str, roof: str, roofs: Path, tmp_path: Path
) -> None:
    results = tmp_path / "r.json"
    result = profile(step, kwargs={**TINY, **kwargs}, steps=1, roofs=[roofs], results=results,  # type: ignore[call-overload]
                     powercap_root=tmp_path / "none")  # fmt: skip
    placement = result.step_placement()
    assert placement is not None and placement.bound == bound
    assert placement.bounding_roof is not None and placement.bounding_roof.name == roof
    line = step_verdict_line(result)
    assert f"whole step {bound}-bound" in line and f"% of the {roof} roof" in line
    assert line in summary_lines(result, width=200)
    # every weight is read in a step (of the embedding table only the rows gathered)
    model = build_llama(*(TINY[k] for k in TINY))
    weights = sum(p.numel() * 4 for name, p in model.named_parameters() if "embed_tokens" not in name)
    assert result.bytes_total >= weights
    stored = json.loads(results.read_text())["workloads"][0]["profile"]
    assert stored["step_bound"] == bound and stored["step_roof"] == roof
    assert stored["step_efficiency"] == pytest.approx(placement.efficiency)
    intensity = stored["step_intensity_flop_per_byte"]
    assert intensity > 2 if bound == "compute" else intensity < 1
