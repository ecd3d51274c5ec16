"""Issue 34.3: ``generate()`` profiled as people run it. A tiny Llama-style ``transformers`` model
(random weights from a config, nothing downloaded) generates 32 new tokens greedily with a KV
cache: the prefill and the 31 decode forward calls are told apart, decode's bytes hold the cache's
reads and writes (checked against the cache size of the config), decode lands memory-bound and the
prefill compute-bound on the test roofs, the cache ``cat``s meet their counted twins and the loop's
own ops (``isin``, ``argmax``, comparisons) are counted."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from gpuscope.profiling.generation import profile_generation  # noqa: E402
from gpuscope.profiling.generation_examples import llama  # noqa: E402
from gpuscope.profiling.render import summary_lines  # noqa: E402
from gpuscope.profiling.stored import read_profile  # noqa: E402

TINY = {"hidden": 128, "layers": 2, "heads": 4, "kv_heads": 2, "intermediate": 344, "vocab": 1000, "device": "cpu"}
PROMPT, NEW = 32, 32
HEAD_DIM = TINY["hidden"] // TINY["heads"]
#: bytes of one position of one layer's keys (or values): kv_heads x head_dim x fp32
TOKEN_BYTES = TINY["kv_heads"] * HEAD_DIM * 4


@pytest.fixture(scope="module")
def roofs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This host's CPU as the other profile tests see it: fp32 40 GFLOP/s, DRAM 20 GB/s (ridge at 2
    FLOP/byte)."""
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


def _rapl_tree(root: Path) -> Path:
    package = root / "intel-rapl:0"
    package.mkdir(parents=True)
    (package / "name").write_text("package-0")
    (package / "max_energy_range_uj").write_text("1000000000000")
    (package / "energy_uj").write_text("0")
    return package


@pytest.fixture(scope="module")
def generated(roofs: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    """One profile of a 32-token greedy generate(); each forward call adds exactly 1 J to a fake RAPL
    package counter, so joules per token are known."""
    folder = tmp_path_factory.mktemp("generation")
    package = _rapl_tree(folder / "powercap")
    model, ids, options = llama(prompt=PROMPT, **TINY)
    used = {"uj": 0}

    def one_joule(module: object, args: object, output: object) -> None:
        used["uj"] += 1_000_000
        (package / "energy_uj").write_text(str(used["uj"]))

    handle = model.register_forward_hook(one_joule)
    state = torch.get_rng_state()
    try:
        result = profile_generation(model, ids, max_new_tokens=NEW, generate_kwargs=options, device="cpu",
                                    roofs=[roofs], results=folder / "results.json",
                                    powercap_root=folder / "powercap")  # fmt: skip
    finally:
        handle.remove()
    assert torch.equal(torch.get_rng_state(), state)  # the caller's RNG state is restored
    assert not model._forward_hooks and not model._forward_pre_hooks  # only the test's own hook was left, removed
    return result, folder / "results.json"


def test_prefill_and_31_decode_steps_are_told_apart(generated: tuple[object, Path]) -> None:
    result, _ = generated
    generation = result.generation  # type: ignore[attr-defined]
    assert generation is not None
    assert (generation.batch, generation.prompt_tokens, generation.new_tokens) == (1, PROMPT, NEW)
    steps = generation.steps
    assert len(steps) == NEW  # the 32nd token comes from the 32nd forward call
    assert [step.kind for step in steps] == ["prefill"] + ["decode"] * (NEW - 1)
    assert steps[0].tokens == PROMPT and all(step.tokens == 1 for step in steps[1:])
    assert [step.context for step in steps] == list(range(PROMPT, PROMPT + NEW))
    prefill, decode, loop = (generation.phase(kind) for kind in ("prefill", "decode", "loop"))
    assert prefill.calls == 1 and decode.calls == NEW - 1 and decode.tokens == NEW - 1
    assert all(step.time_s > 0 and step.ops_s > 0 and step.flops > 0 for step in steps)
    assert prefill.tokens_per_s and decode.tokens_per_s and generation.tokens_per_s
    # the phases and the loop add up to the whole call's count
    counted = prefill.flops + decode.flops + loop.flops
    assert counted == result.flops  # type: ignore[attr-defined]
    assert prefill.bytes + decode.bytes + loop.bytes == result.bytes_total  # type: ignore[attr-defined]
    assert loop.calls > 0 and loop.flops > 0  # generate's own argmax, isin, comparisons


def test_decode_bytes_hold_the_cache_reads_and_writes(generated: tuple[object, Path]) -> None:
    """Each decode step at context L appends one position to each layer's keys and values with
    ``torch.cat`` (reads L - 1 + 1 positions, writes L) and attention reads the L positions: one
    more step of context costs layers x 2 (K, V) x 3 x one position's bytes, exactly."""
    result, _ = generated
    steps = result.generation.steps  # type: ignore[attr-defined]
    growth = TINY["layers"] * 2 * 3 * TOKEN_BYTES
    assert [b.bytes - a.bytes for a, b in zip(steps[1:], steps[2:])] == [growth] * (NEW - 2)
    # and the whole cache traffic is in decode's bytes: cat in + out, attention in, every step
    cache = sum(TINY["layers"] * 2 * 3 * step.context * TOKEN_BYTES for step in steps[1:])
    model, _, _ = llama(prompt=PROMPT, **TINY)
    weights = sum(p.numel() * 4 for name, p in model.named_parameters() if "embed_tokens" not in name)
    decode = result.generation.phase("decode")  # type: ignore[attr-defined]
    assert decode.bytes >= cache + (NEW - 1) * weights


def test_decode_is_memory_bound_and_prefill_compute_bound(generated: tuple[object, Path]) -> None:
    result, path = generated
    generation = result.generation  # type: ignore[attr-defined]
    prefill, decode = generation.phase("prefill"), generation.phase("decode")
    assert decode.placement is not None and decode.placement.bound == "memory"
    assert decode.placement.bounding_roof.name == "dram.triad"
    assert decode.intensity_flop_per_byte < 1
    assert prefill.placement is not None and prefill.placement.bound == "compute"
    assert prefill.intensity_flop_per_byte > 2
    lines = summary_lines(result, width=200)  # type: ignore[arg-type]
    text = "\n".join(lines)
    assert "1 prefill + 31 decode forward calls" in text
    assert any(line.startswith("  decode") and "memory-bound" in line and "dram.triad" in line for line in lines)
    assert any(line.startswith("  prefill") and "compute-bound" in line for line in lines)
    stored = read_profile(json.loads(path.read_text())["workloads"][0]["profile"])
    assert stored is not None and stored.generation is not None
    phases = {phase["kind"]: phase for phase in stored.generation["phases"]}  # type: ignore[union-attr]
    assert phases["decode"]["bound"] == "memory" and phases["prefill"]["bound"] == "compute"
    assert len(stored.generation["steps"]) == NEW  # type: ignore[arg-type]
    # the two phases as points on the roofline
    from gpuscope.profiling.generation_result import generation_chart_model, render_generation_chart

    model = generation_chart_model(generation, result.device_key, result.device_roofs)  # type: ignore[attr-defined]
    assert model is not None and [point.name.split()[-1] for point in model.points] == ["prefill", "decode"]
    chart = render_generation_chart(generation, result.device_key, result.device_roofs)  # type: ignore[attr-defined]
    assert "point 1 = prefill, point 2 = decode" in chart and "DRAM triad" in chart


def test_joules_per_token_from_the_energy_counter(generated: tuple[object, Path]) -> None:
    """1 J per forward call: prefill's window holds 1 J for 32 prompt tokens, decode's 31 J for 31
    tokens, the whole call 32 J for 32 new tokens."""
    generation = generated[0].generation  # type: ignore[attr-defined]
    assert generation.phase("prefill").j_per_token == pytest.approx(1 / PROMPT)
    assert generation.phase("decode").j_per_token == pytest.approx(1.0)
    assert generation.j_per_token == pytest.approx(1.0)
    assert generation.to_json()["j_per_token"] == pytest.approx(1.0)


def test_cache_cats_meet_their_twins_and_loop_ops_are_counted(generated: tuple[object, Path]) -> None:
    result, _ = generated
    assert result.coverage is not None and result.coverage >= 0.99  # type: ignore[attr-defined]
    assert not result.uncounted_ops  # type: ignore[attr-defined]
    cats = [group for group in result.groups if group.op == "aten::cat"]  # type: ignore[attr-defined]
    assert cats and all(group.counted and group.bytes > 0 for group in cats)
    # the list's shapes are kept: each decode step's cache cats (old cache + the new position) are a
    # group of their own, layers x (K, V) calls, reading L positions and writing L
    kv = (1, TINY["kv_heads"])
    for context in range(PROMPT + 1, PROMPT + NEW):
        key = ((*kv, context - 1, HEAD_DIM), (*kv, 1, HEAD_DIM))
        group = next(group for group in cats if group.shapes == key and group.dtype == "fp32")
        assert group.calls_per_step == TINY["layers"] * 2
        assert group.bytes == group.calls_per_step * 2 * context * TOKEN_BYTES
        assert f"cat fp32 1x2x{context - 1}x{HEAD_DIM}, 1x2x1x{HEAD_DIM}" == group.label
    by_op = {group.op: group for group in result.groups}  # type: ignore[attr-defined]
    for op in ("aten::isin", "aten::argmax", "aten::eq", "aten::any"):
        assert op in by_op and by_op[op].counted and by_op[op].flops_known, op
    assert by_op["aten::isin"].flops > 0 and not by_op["aten::isin"].no_formula


def test_energy_unavailable_says_why(roofs: Path, tmp_path: Path) -> None:
    model, ids, options = llama(prompt=8, **TINY)
    result = profile_generation(model, ids, max_new_tokens=4, generate_kwargs=options, device="cpu", roofs=[roofs],
                                powercap_root=tmp_path / "none")  # fmt: skip
    generation = result.generation
    assert generation is not None and len(generation.steps) == 4
    text = "\n".join(summary_lines(result, width=200))
    assert "J/token   unavailable, because" in text and "powercap" in text
    assert "j_per_token" not in generation.to_json() and "j_per_token_unavailable" in generation.to_json()


def test_static_cache_writes_only_the_new_rows(roofs: Path, tmp_path: Path) -> None:
    """A static cache is written in place with ``index_copy_``: its bytes are the index and the
    rows written (read + written), not the whole preallocated cache twice."""
    model, ids, options = llama(prompt=8, cache="static", **TINY)
    result = profile_generation(model, ids, max_new_tokens=4, generate_kwargs=options, device="cpu", roofs=[roofs],
                                powercap_root=tmp_path / "none")  # fmt: skip
    copies = [group for group in result.groups if group.op == "aten::index_copy_"]
    assert copies
    for group in copies:
        cache, index, source = group.shapes
        per_call = index[0] * 8 + 2 * source[0] * source[1] * source[2] * source[3] * 4
        assert group.bytes == round(per_call * group.calls_per_step)
        whole = cache[0] * cache[1] * cache[2] * cache[3] * 4
        assert group.bytes < group.calls_per_step * 2 * whole  # the extent rule: the whole cache read + written
    assert len(result.generation.steps) == 4


def test_bad_calls_are_refused() -> None:
    from gpuscope.errors import UsageError

    model, ids, options = llama(prompt=8, **TINY)
    with pytest.raises(UsageError):
        profile_generation(model, ids, max_new_tokens=1)
    with pytest.raises(UsageError):
        profile_generation(torch.nn.Linear(2, 2), ids)


def test_report_and_json_carry_the_split(generated: tuple[object, Path], tmp_path: Path) -> None:
    from gpuscope.report import write_report

    _, path = generated
    out = tmp_path / "report.md"
    write_report(out, [path])
    text = out.read_text(encoding="utf-8")
    assert f"generate(): {NEW} new tokens x batch 1 after a {PROMPT}-token prompt" in text
    assert "prefill compute-bound" in text and "decode memory-bound" in text and "dram.triad roof" in text
    assert "J/token" in text


def test_tui_roofline_draws_prefill_and_decode_after_the_groups(generated: tuple[object, Path], roofs: Path) -> None:
    """The TUI's roofline model of the results file: the op groups keep their numbers, then the
    prefill and decode come as two points, placed as the profile placed them (one placement)."""
    from gpuscope.profiling.stored import profiled_workloads
    from gpuscope.profiling.view import PHASE_NOTE_PREFIX, profile_rows
    from gpuscope.results import to_results
    from gpuscope.tui.roofline_data import build_screen_model

    result, path = generated
    document = to_results(json.loads(path.read_text()), str(path))
    (profiled,) = profiled_workloads(document)
    ceilings = to_results(json.loads(roofs.read_text()), str(roofs))  # the roofs it was profiled against
    model = build_screen_model([ceilings, document], None)
    profile_points = [p for p in model.placements if p.point.source == "profile" and p.point.note]
    names = [placement.point.name for placement in profile_points]
    groups = [row[1] for row in profile_rows(profiled.profile)]
    assert names == [*groups, "prefill", "decode"]
    generation = result.generation  # type: ignore[attr-defined]
    for placement in profile_points[-2:]:
        phase = generation.phase(placement.point.name)
        assert placement.bound == phase.placement.bound
        assert placement.efficiency == pytest.approx(phase.placement.efficiency, rel=1e-9)
        assert placement.point.flops == phase.flops and placement.point.bytes == phase.bytes
        assert placement.point.note.startswith(PHASE_NOTE_PREFIX) and "tokens/s" in placement.point.note
    assert profile_points[-1].point.note.startswith(f"{PHASE_NOTE_PREFIX}{NEW - 1} steps")
    assert profile_points[-2].point.note.startswith(f"{PHASE_NOTE_PREFIX}{PROMPT} tokens")


def test_report_tables_and_charts_the_phases(generated: tuple[object, Path], roofs: Path, tmp_path: Path) -> None:
    """The report: a table of the prefill, decode and loop with the profile's verdicts, in HTML and
    Markdown, and the two phases as points on the profile's roofline chart."""
    import re

    from gpuscope.report import write_report

    result, path = generated
    generation = result.generation  # type: ignore[attr-defined]
    html_path, md_path = tmp_path / "report.html", tmp_path / "report.md"
    write_report(html_path, [roofs, path])  # the roofs it was profiled against, and the profile
    write_report(md_path, [roofs, path])
    html = html_path.read_text(encoding="utf-8")
    table = re.search(r'<table[^>]*id="table-profile-1-generation".*?</table>', html, re.S)
    assert table is not None
    rows = re.findall(r"<tr>(.*?)</tr>", table.group(0), re.S)
    cells = [re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row) for row in rows]
    body = [row for row in cells if row and row[0] in ("prefill", "decode", "loop")]
    assert [row[0] for row in body] == ["prefill", "decode", "loop"]
    prefill, decode = body[0], body[1]
    assert prefill[1] == str(PROMPT) and prefill[7] == "compute"
    assert decode[7] == "memory" and decode[9] == "dram.triad"
    assert decode[8] == f"{generation.phase('decode').placement.efficiency * 100:.0f}%"
    chart = re.search(r'<svg[^>]*aria-label="Roofline of profile 1[^"]*prefill and decode[^"]*".*?</svg>', html, re.S)
    assert chart is not None
    texts = [text for text in re.findall(r">([^<>]+)<", chart.group(0)) if text.strip()]
    for row in (prefill, decode):  # the chart's own table places each phase as the phase table does
        at = texts.index(row[0])
        assert texts[at + 2 : at + 4] == [row[7], row[8]]
    markdown = md_path.read_text(encoding="utf-8")
    assert "| phase | tokens | ms | tokens/s |" in markdown
    assert re.search(r"^\| decode \|.*\| memory \|.*\| dram\.triad \|", markdown, re.M)


def test_cli_generate_flag(roofs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpuscope.cli import main

    kwargs = {"kwargs": {"prompt": 8, **{key: value for key, value in TINY.items() if key != "device"}}}
    code = main(["profile", "gpuscope.profiling.generation_examples:llama", "--generate", "4", "--device", "cpu",
                 "--steps", "1", "--roofs", str(roofs), "--args-json", json.dumps(kwargs), "--json"])  # fmt: skip
    assert code == 0
    document = json.loads(capsys.readouterr().out)
    generation = document["profile"]["generation"]
    assert generation["new_tokens"] == 4 and generation["forward_calls"] == 4
    assert [phase["kind"] for phase in generation["phases"]] == ["prefill", "decode", "loop"]
    code = main(["profile", "gpuscope.profiling.examples:build_convnet", "--generate", "4", "--device", "cpu",
                 "--args-json", '{"kwargs": {"batch": 1}}'])  # fmt: skip
    assert code != 0
    assert "has no generate() method" in capsys.readouterr().err
